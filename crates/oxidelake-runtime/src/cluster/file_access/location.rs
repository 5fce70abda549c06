//! Where a statement's location text points, read as DataFusion's `ListingTableUrl::parse`
//! reads it, but without asking the file system anything.
//!
//! `ListingTableUrl::parse` looks at a local path before it returns (whether it exists,
//! whether it is a directory: that decides a trailing `/`), so calling it on a location
//! outside the roots would already touch the file system there. This module repeats its
//! reading of the text — an absolute path or a scheme-less string is a local path, cut
//! before the first segment holding a glob character, made absolute against the working
//! directory, its `.` and `..` resolved by re-parsing it as a URL — which gives the
//! same object-store path (a directory's trailing `/` is not part of the path).

use datafusion::datasource::listing::ListingTableUrl;
use datafusion::datasource::object_store::ObjectStoreUrl;
use object_store::path::Path;
use url::Url;

/// Characters that start a glob in a local path, as in DataFusion's `ListingTableUrl`.
const GLOB_START_CHARS: [char; 3] = ['?', '*', '['];

/// The object store and path `text` names (a glob's directory for a glob), or why the
/// text names none.
pub(super) fn location_of(text: &str) -> Result<(ObjectStoreUrl, Path), String> {
    if !std::path::Path::new(text).is_absolute() {
        match Url::parse(text) {
            // A URL: `ListingTableUrl::parse` only parses it.
            Ok(_) => {
                let url = ListingTableUrl::parse(text).map_err(|e| e.to_string())?;
                return Ok((url.object_store(), url.prefix().clone()));
            }
            Err(url::ParseError::RelativeUrlWithoutBase) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    local_location(text)
}

/// A local path's object-store path, as `ListingTableUrl::parse_path` builds it.
fn local_location(text: &str) -> Result<(ObjectStoreUrl, Path), String> {
    let path = std::path::Path::new(before_glob(text));
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| format!("the scheduler's working directory: {e}"))?
            .join(path)
    };
    let url = Url::from_file_path(&absolute)
        .map_err(|()| format!("{} is not a file path", absolute.display()))?;
    // `from_file_path` keeps `.` and `..` segments; parsing the URL again resolves them.
    let url = Url::parse(url.as_str()).map_err(|e| e.to_string())?;
    let path = Path::from_url_path(url.path()).map_err(|e| e.to_string())?;
    Ok((ObjectStoreUrl::local_filesystem(), path))
}

/// `text` up to (and with) the separator before the first segment holding a glob
/// character; `.` when that is the first segment; all of `text` without a glob.
fn before_glob(text: &str) -> &str {
    let Some(glob_at) = text.find(|c: char| GLOB_START_CHARS.contains(&c)) else {
        return text;
    };
    match text[..glob_at].rfind(std::path::is_separator) {
        // Separators are ASCII: the byte after one is a character boundary.
        Some(separator_at) => &text[..=separator_at],
        None => ".",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_read_as_datafusion_reads_it_without_looking_at_the_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let existing_dir = dir.path().join("d");
        std::fs::create_dir(&existing_dir).unwrap();
        let existing_file = dir.path().join("f.csv");
        std::fs::write(&existing_file, b"a\n1\n").unwrap();
        let base = dir.path().display().to_string();
        let texts = [
            existing_file.display().to_string(),
            existing_dir.display().to_string(),
            format!("{base}/d/"),
            format!("{base}/missing.csv"),
            format!("{base}/missing/"),
            format!("{base}/d/../f.csv"),
            format!("{base}/./d/./x.csv"),
            format!("{base}/d/*.csv"),
            format!("{base}/d/sub[12]/x.csv"),
            format!("file://{base}/f.csv"),
            format!("file://{base}/d/../f.csv"),
            "relative/part.csv".to_string(),
            "*.csv".to_string(),
            "s3://bucket/a/b.parquet".to_string(),
            "s3://bucket/a/../b/".to_string(),
        ];
        for text in texts {
            let expected = ListingTableUrl::parse(&text).unwrap();
            let (store, path) = location_of(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(store, expected.object_store(), "{text}");
            assert_eq!(&path, expected.prefix(), "{text}");
        }
    }

    #[test]
    fn a_glob_is_cut_before_its_first_segment_with_a_glob_character() {
        assert_eq!(before_glob("/a/b/*.csv"), "/a/b/");
        assert_eq!(before_glob("/a/b?/c.csv"), "/a/");
        assert_eq!(before_glob("*.csv"), ".");
        assert_eq!(before_glob("/a/b/c.csv"), "/a/b/c.csv");
    }
}
