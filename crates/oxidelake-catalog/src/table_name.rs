//! `namespace.table` names.

use std::fmt;
use std::str::FromStr;

use crate::CatalogError;

/// A table name with exactly one namespace, e.g. `robots.episodes`.
///
/// Both parts are ASCII identifiers (`[A-Za-z_][A-Za-z0-9_]*`) and are folded to lower
/// case, matching how SQL treats unquoted identifiers; that also keeps them safe to use
/// as directory names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableName {
    namespace: String,
    table: String,
}

impl TableName {
    /// The namespace part.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The table part.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The name whose directories are `<namespace>/<table>`, if both are names the
    /// catalog could have created them under (lower-case identifiers).
    pub(crate) fn from_dir_names(namespace: &str, table: &str) -> Option<Self> {
        (is_dir_name(namespace) && is_dir_name(table)).then(|| Self {
            namespace: namespace.to_owned(),
            table: table.to_owned(),
        })
    }
}

/// Whether `part` is a namespace or table directory name the catalog creates: an
/// identifier already folded to lower case.
pub(crate) fn is_dir_name(part: &str) -> bool {
    is_identifier(part) && !part.bytes().any(|b| b.is_ascii_uppercase())
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl FromStr for TableName {
    type Err = CatalogError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| CatalogError::InvalidTableName {
            name: name.to_string(),
            reason,
        };
        let (namespace, table) = name
            .split_once('.')
            .ok_or_else(|| invalid("expected namespace.table"))?;
        if !is_identifier(namespace) || !is_identifier(table) {
            return Err(invalid(
                "each part must be an identifier [A-Za-z_][A-Za-z0-9_]*",
            ));
        }
        Ok(Self {
            namespace: namespace.to_ascii_lowercase(),
            table: table.to_ascii_lowercase(),
        })
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.namespace, self.table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_have_one_namespace_and_fold_to_lower_case() {
        let name: TableName = "Robots.Episodes".parse().unwrap();
        assert_eq!((name.namespace(), name.table()), ("robots", "episodes"));
        assert_eq!(name.to_string(), "robots.episodes");
    }

    #[test]
    fn only_lower_case_identifier_directories_name_tables() {
        let name = TableName::from_dir_names("robots", "episodes").unwrap();
        assert_eq!(name, "robots.episodes".parse::<TableName>().unwrap());
        for (ns, table) in [("Robots", "episodes"), ("robots", "lost+found"), ("", "t")] {
            assert!(
                TableName::from_dir_names(ns, table).is_none(),
                "{ns}/{table}"
            );
        }
    }

    #[test]
    fn names_that_could_escape_the_table_directory_are_rejected() {
        for bad in ["episodes", "a.b.c", "../x.y", "a.", ".b", "a b.c", "1a.b"] {
            assert!(bad.parse::<TableName>().is_err(), "{bad}");
        }
    }
}
