//! `oxide demo` publishes its dataset atomically: runs killed while generating leave
//! nothing a later run mistakes for data, and a directory that is not a complete dataset
//! is a clear error.

use std::ffi::OsString;
use std::path::Path;

use oxidelake_runtime::EngineError;
use oxidelake_runtime::cli::demo::demo;

const ROWS: u64 = 2_000;

fn names_in(dir: &Path) -> Vec<OsString> {
    let mut names: Vec<OsString> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_partial_directory_of_a_killed_run_is_removed_and_a_complete_dataset_published() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("oxide-demo-data");
    // What a run killed while writing leaves: its temporary directory, whose lock file
    // nobody holds any more, with a truncated Parquet file.
    let leftover = root.path().join(".oxide-demo-data.partial-killed");
    std::fs::create_dir_all(leftover.join("t")).unwrap();
    std::fs::write(leftover.join(".lock"), b"").unwrap();
    std::fs::write(leftover.join("t").join("part-0.parquet"), b"PAR1\x15\x00").unwrap();

    let mut out = Vec::new();
    demo(&dir, ROWS, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(&format!("generating {ROWS} rows")), "{text}");
    assert!(!leftover.exists(), "the killed run's directory is removed");
    assert_eq!(
        names_in(root.path()),
        vec![OsString::from("oxide-demo-data")]
    );
    assert_eq!(
        names_in(&dir),
        vec![OsString::from("COMPLETE"), OsString::from("t")]
    );

    // The next run uses the published dataset as it is.
    let mut again = Vec::new();
    demo(&dir, ROWS, &mut again).await.unwrap();
    let text = String::from_utf8(again).unwrap();
    assert!(!text.contains("generating"), "{text}");
}

#[tokio::test]
async fn a_directory_that_is_not_a_complete_dataset_is_a_one_line_error_saying_to_delete_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("oxide-demo-data");
    // What an older `oxide demo` killed while writing left: the table directory with a
    // truncated Parquet file, and no marker.
    std::fs::create_dir_all(dir.join("t")).unwrap();
    let data = dir.join("t").join("part-0.parquet");
    std::fs::write(&data, b"PAR1\x15\x00\x15").unwrap();
    let no_marker = demo(&dir, ROWS, &mut Vec::new()).await.unwrap_err();
    // A marker that does not match the file: damaged since it was published.
    std::fs::write(dir.join("COMPLETE"), b"123456\n").unwrap();
    let damaged = demo(&dir, ROWS, &mut Vec::new()).await.unwrap_err();

    for err in [no_marker, damaged] {
        let text = err.to_string();
        assert!(matches!(err, EngineError::Format { .. }), "{err:?}");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains("not a complete demo dataset") && text.contains("delete the directory"),
            "{text}"
        );
    }
    assert_eq!(
        std::fs::read(&data).unwrap(),
        b"PAR1\x15\x00\x15",
        "the directory is left as it was"
    );
}
