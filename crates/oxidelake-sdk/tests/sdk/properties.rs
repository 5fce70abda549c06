//! Property tests of the text the SDK takes from users: the INSERT grammar and the
//! typed command-line parameters (`@path` included). Arbitrary input never panics; it
//! parses or is a typed error. `PROPTEST_CASES` scales the run (default below).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use oxidelake_objects::data_location_field;
use oxidelake_sdk::cli::{apply_mime_overrides, typed_params};
use oxidelake_sdk::{FileUpload, InsertValue, SdkError, parse_insert};
use proptest::prelude::*;

/// Cases per property in CI (`PROPTEST_CASES` overrides it for longer runs).
const CASES: u32 = 2_000;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CASES),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A name that needs no quotes: not one of sqlparser's keywords (`order`, `values`…,
/// which DataFusion too only takes quoted).
fn identifier() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,12}".prop_filter("a keyword", |s| {
        !datafusion::sql::sqlparser::keywords::ALL_KEYWORDS
            .contains(&s.to_ascii_uppercase().as_str())
    })
}

/// SQL-ish text: the grammar's own tokens mixed with anything.
fn sqlish() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("INSERT".to_string()),
            Just("INTO".to_string()),
            Just("VALUES".to_string()),
            Just("(".to_string()),
            Just(")".to_string()),
            Just(",".to_string()),
            Just("?".to_string()),
            Just(".".to_string()),
            Just(";".to_string()),
            Just(" ".to_string()),
            identifier(),
            any::<String>(),
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_parses_or_is_a_typed_refusal(sql in sqlish()) {
        match parse_insert(&sql) {
            Ok(statement) => {
                prop_assert!(!statement.columns.is_empty());
                prop_assert!(statement.table.contains('.'));
            }
            Err(SdkError::UnsupportedSyntax(_) | SdkError::PlaceholderCount { .. }) => {}
            Err(other) => prop_assert!(false, "unexpected error kind {other:?}"),
        }
    }

    #[test]
    fn a_well_formed_insert_parses_to_its_table_and_columns(
        ns in identifier(),
        table in identifier(),
        columns in prop::collection::hash_set(identifier(), 1..8),
        lower in any::<bool>(),
    ) {
        let columns: Vec<String> = {
            // Column names are compared case-insensitively for duplicates.
            let mut seen = std::collections::HashSet::new();
            columns.into_iter().filter(|c| seen.insert(c.to_ascii_lowercase())).collect()
        };
        let marks = vec!["?"; columns.len()].join(", ");
        let mut sql = format!("INSERT INTO {ns}.{table} ({}) VALUES ({marks})", columns.join(", "));
        if lower {
            sql = sql.replace("INSERT INTO", "insert into").replace("VALUES", "values");
        }
        let statement = parse_insert(&sql).unwrap();
        // Unquoted names fold to lower case, as DataFusion folds them.
        prop_assert_eq!(statement.table, format!("{ns}.{table}").to_ascii_lowercase());
        let lowered: Vec<String> = columns.iter().map(|c| c.to_ascii_lowercase()).collect();
        prop_assert_eq!(statement.columns, lowered);
    }

    #[test]
    fn command_line_values_type_by_column_or_are_refused_and_at_paths_are_kept_whole(
        values in prop::collection::vec(any::<String>(), 5),
        path in any::<String>(),
        mime in any::<String>(),
    ) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::Boolean, true),
            data_location_field("e"),
        ]));
        let sql = "INSERT INTO r.t (i, f, s, b, e) VALUES (?, ?, ?, ?, ?)";
        // Arbitrary text: typed or refused, never a panic.
        let _ = typed_params(sql, &schema, &values);
        // Everything after `@` is the path, whatever it holds (`#`, `;`, spaces ...).
        let mut texts = vec!["1".to_string(), "0.5".into(), "x".into(), "true".into()];
        texts.push(format!("@{path}"));
        match typed_params(sql, &schema, &texts) {
            Ok(mut params) => {
                prop_assert_eq!(&params[4], &InsertValue::File(FileUpload::from_path(&path)));
                let overrides = vec![format!("e={mime}")];
                if apply_mime_overrides(sql, &mut params, &overrides).is_ok() {
                    prop_assert_eq!(
                        &params[4],
                        &InsertValue::File(FileUpload::from_path(&path).with_mime(&mime))
                    );
                }
            }
            Err(_) => prop_assert!(path.is_empty()),
        }
    }
}
