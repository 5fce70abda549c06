//! The name of a table's IPC copy: the table name for people, plus a hash of the
//! source's identity so that two tables of the same name over different files never
//! share (and overwrite) one copy.
//!
//! The identity is every source URL (a local one canonicalized, so `./lake` and
//! `/abs/lake`, or a symlink and its target, are one source), the file extension and the
//! table schema. The hash is FNV-1a: stable across processes and Rust versions, so a
//! source maps to the same file every time.

use arrow::datatypes::Schema;
use datafusion::datasource::listing::ListingTableUrl;

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// One source URL as text: a `file://` URL as its canonical local path (when it
/// exists), anything else as written; plus its glob, and whether it is a directory.
fn url_identity(url: &ListingTableUrl) -> String {
    let location = if url.scheme() == "file" {
        url.get_url()
            .to_file_path()
            .ok()
            .and_then(|path| std::fs::canonicalize(path).ok())
            .map_or_else(
                || url.as_str().to_string(),
                |path| format!("file://{}", path.display()),
            )
    } else {
        url.as_str().to_string()
    };
    let glob = url.get_glob().as_ref().map_or("", |glob| glob.as_str());
    format!("{location}\u{1f}{glob}\u{1f}{}", url.is_collection())
}

/// The IPC file name of table `name` read from `urls` (files ending in `extension`) with
/// `schema`: `{name}-{16 hex digits}.arrow`.
pub(crate) fn ipc_file_name(
    name: &str,
    urls: &[ListingTableUrl],
    extension: &str,
    schema: &Schema,
) -> String {
    let mut identity = vec![name.to_string(), extension.to_string()];
    identity.extend(urls.iter().map(url_identity));
    identity.extend(
        schema
            .fields()
            .iter()
            .map(|f| format!("{}:{}:{}", f.name(), f.data_type(), f.is_nullable())),
    );
    let hash = fnv1a(identity.join("\u{1e}").as_bytes());
    format!("{name}-{hash:016x}.arrow")
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field};

    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![Field::new("id", DataType::Int64, false)])
    }

    fn url(path: &std::path::Path) -> ListingTableUrl {
        ListingTableUrl::parse(format!("{}/", path.display())).unwrap()
    }

    #[test]
    fn the_same_name_over_different_sources_gets_different_files() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let of = |dir: &std::path::Path| ipc_file_name("t", &[url(dir)], ".parquet", &schema());
        assert_ne!(of(a.path()), of(b.path()));
        assert_eq!(of(a.path()), of(a.path()));
        assert!(of(a.path()).starts_with("t-") && of(a.path()).ends_with(".arrow"));
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_to_a_source_directory_is_the_same_source() {
        let root = tempfile::tempdir().unwrap();
        let lake = root.path().join("lake");
        std::fs::create_dir(&lake).unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&lake, &link).unwrap();
        assert_eq!(
            ipc_file_name("t", &[url(&lake)], ".parquet", &schema()),
            ipc_file_name("t", &[url(&link)], ".parquet", &schema())
        );
    }

    #[test]
    fn fnv1a_matches_its_published_test_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
