//! The 22 TPC-H queries, from tpchgen's qgen templates with the specification's
//! validation parameters substituted, in SQL DataFusion accepts.

use oxidelake_core::EngineError;

/// Validation parameters per query (TPC-H specification, clause 2.4.x.4), `:1` first.
fn parameters(query: i32, scale_factor: f64) -> Vec<String> {
    let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect();
    match query {
        1 => s(&["90"]),
        2 => s(&["15", "BRASS", "EUROPE"]),
        3 => s(&["BUILDING", "1995-03-15"]),
        4 => s(&["1993-07-01"]),
        5 => s(&["ASIA", "1994-01-01"]),
        6 => s(&["1994-01-01", "0.06", "24"]),
        7 => s(&["FRANCE", "GERMANY"]),
        8 => s(&["BRAZIL", "AMERICA", "ECONOMY ANODIZED STEEL"]),
        9 => s(&["green"]),
        10 => s(&["1993-10-01"]),
        // FRACTION is 0.0001 / SF.
        11 => vec!["GERMANY".into(), format!("{}", 0.0001 / scale_factor)],
        12 => s(&["MAIL", "SHIP", "1994-01-01"]),
        13 => s(&["special", "requests"]),
        14 => s(&["1995-09-01"]),
        15 => s(&["1996-01-01"]),
        16 => s(&[
            "Brand#45",
            "MEDIUM POLISHED",
            "49",
            "14",
            "23",
            "45",
            "19",
            "3",
            "36",
            "9",
        ]),
        17 => s(&["Brand#23", "MED BOX"]),
        18 => s(&["300"]),
        19 => s(&["Brand#12", "Brand#23", "Brand#34", "1", "10", "20"]),
        20 => s(&["forest", "1994-01-01", "CANADA"]),
        21 => s(&["SAUDI ARABIA"]),
        22 => s(&["13", "31", "23", "29", "30", "18", "17"]),
        _ => Vec::new(),
    }
}

/// Row limits the specification puts on some queries (qgen templates leave them out).
fn limit(query: i32) -> Option<usize> {
    match query {
        2 | 18 | 21 => Some(100),
        3 => Some(10),
        10 => Some(20),
        _ => None,
    }
}

/// The SQL statements of TPC-H query `query` (1–22) at `scale_factor`. Query 15 is three
/// statements (create view, query, drop view); the others one.
pub fn tpch_query(query: i32, scale_factor: f64) -> Result<Vec<String>, EngineError> {
    let template =
        tpchgen::q_and_a::queries::query(query).ok_or_else(|| EngineError::InvalidArgument {
            what: "TPC-H query",
            detail: format!("{query} is not between 1 and 22"),
        })?;
    let mut sql = template
        .replace(" day (3)", " day")
        .replace("revenue:s", "revenue0");
    let params = parameters(query, scale_factor);
    // Highest number first, so `:10` is not read as `:1` followed by `0`.
    for (i, value) in params.iter().enumerate().rev() {
        sql = sql.replace(&format!(":{}", i + 1), value);
    }
    let mut statements: Vec<String> = sql
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if let Some(n) = limit(query) {
        for statement in &mut statements {
            if statement.to_ascii_lowercase().starts_with("select") {
                statement.push_str(&format!("\nlimit {n}"));
            }
        }
    }
    Ok(statements)
}

/// Writes the 22 queries at `scale_factor` into `dir` as `q01.sql` … `q22.sql`, each
/// statement ended by `;` and a new line, so that `oxide sql -f` and other engines
/// (DuckDB, DataFusion) read the same text. Returns the files written.
pub fn write_tpch_queries(
    dir: &std::path::Path,
    scale_factor: f64,
) -> Result<Vec<std::path::PathBuf>, EngineError> {
    let io =
        |path: &std::path::Path, e: std::io::Error| EngineError::io(path.display().to_string(), e);
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut files = Vec::with_capacity(22);
    for query in 1..=22 {
        let path = dir.join(format!("q{query:02}.sql"));
        let mut text = String::new();
        for statement in tpch_query(query, scale_factor)? {
            text.push_str(&statement);
            text.push_str(";\n");
        }
        std::fs::write(&path, text).map_err(|e| io(&path, e))?;
        files.push(path);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_is_fully_substituted() {
        for q in 1..=22 {
            let statements = tpch_query(q, 1.0).unwrap();
            assert!(!statements.is_empty());
            for s in &statements {
                assert!(
                    !s.contains(':') || s.contains("::"),
                    "Q{q} still has a parameter marker: {s}"
                );
            }
        }
        assert_eq!(tpch_query(15, 1.0).unwrap().len(), 3);
        assert!(tpch_query(3, 1.0).unwrap()[0].ends_with("limit 10"));
        assert!(tpch_query(23, 1.0).is_err());
    }

    #[test]
    fn written_query_files_hold_the_statements_each_ended_by_a_semicolon() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_tpch_queries(dir.path(), 0.1).unwrap();
        assert_eq!(files.len(), 22);
        assert_eq!(files[14].file_name().unwrap(), "q15.sql");
        let q15 = std::fs::read_to_string(&files[14]).unwrap();
        let expected: String = tpch_query(15, 0.1)
            .unwrap()
            .iter()
            .map(|s| format!("{s};\n"))
            .collect();
        assert_eq!(q15, expected);
        // Q11's fraction depends on the scale factor.
        let q11 = std::fs::read_to_string(&files[10]).unwrap();
        assert!(q11.contains("0.001"), "{q11}");
    }
}
