//! A table's Delta log as files on disk: which versions have a commit or a checkpoint,
//! and a check that the commit files a read replays are whole.
//!
//! ```text
//!  <table>/_delta_log/
//!      00000000000000000000.json                commit of version 0 (create_table)
//!      00000000000000000001.json                commit of version 1
//!      00000000000000000100.checkpoint.parquet  checkpoint: versions 0..=100 folded
//!      _commit_<uuid>.json.tmp, _last_checkpoint, *.crc, …   not versions
//! ```
//!
//! A table exists once its log holds a commit or a checkpoint: version 0's commit is the
//! first such file `create_table` lands, so a `_delta_log` without any is a create that
//! was interrupted before it committed, and holds no rows.
//!
//! delta-rs rejects a commit file that is not JSON, but its JSON reader yields no actions
//! for an empty file, so a commit whose bytes were lost would read as a version without
//! its rows. [`LogListing::check_replay`] therefore reads every commit file a load will
//! replay (those after the newest checkpoint at or below the version) before delta-rs
//! does, and fails with [`CatalogError::CorruptLogEntry`] on one that is missing, empty,
//! not UTF-8, or has a line that is not a complete JSON object. A commit cut off exactly
//! at a line boundary is not detectable: delta-rs writes neither a trailing newline nor a
//! checksum. Commits land whole (a put-if-absent link of a fully written file), so a
//! damaged commit means damaged storage, not a writer in progress.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::{CatalogError, TableName};

/// Delta Lake's commit-log directory inside a table directory.
pub(crate) const DELTA_LOG_DIR: &str = "_delta_log";

/// Digits of the zero-padded version that starts every commit and checkpoint file name.
const VERSION_DIGITS: usize = 20;

/// The commit file of `version` of the table in `table_dir`.
pub(crate) fn commit_path(table_dir: &Path, version: u64) -> PathBuf {
    table_dir
        .join(DELTA_LOG_DIR)
        .join(format!("{version:0width$}.json", width = VERSION_DIGITS))
}

/// The versions that a table's `_delta_log` directory holds commits and checkpoints of.
#[derive(Debug, Default)]
pub(crate) struct LogListing {
    commits: BTreeSet<u64>,
    checkpoints: BTreeSet<u64>,
}

impl LogListing {
    /// Lists the Delta log of the table directory `table_dir`: `None` when there is no
    /// `_delta_log` directory (not a table). A `_delta_log` that exists but cannot be
    /// read, a dangling symbolic link included, is an error.
    pub(crate) fn read(table_dir: &Path) -> Result<Option<Self>, CatalogError> {
        let log_dir = table_dir.join(DELTA_LOG_DIR);
        let entries = match std::fs::read_dir(&log_dir) {
            Ok(entries) => entries,
            // Nothing of that name (as opposed to a link to nothing, an error below). A
            // concurrent create may make the directory right after the failed read: it
            // was absent when read, so that is still no table.
            Err(e)
                if e.kind() == ErrorKind::NotFound
                    && !std::fs::symlink_metadata(&log_dir)
                        .is_ok_and(|m| m.file_type().is_symlink()) =>
            {
                return Ok(None);
            }
            // A regular file named `_delta_log` does not make a Delta table.
            Err(e) if e.kind() == ErrorKind::NotADirectory => return Ok(None),
            Err(e) => return Err(CatalogError::io(&log_dir, e)),
        };
        let mut listing = Self::default();
        for entry in entries {
            let entry = entry.map_err(|e| CatalogError::io(&log_dir, e))?;
            match entry.file_name().to_str().and_then(parse_log_file_name) {
                Some(LogFile::Commit(version)) => {
                    listing.commits.insert(version);
                }
                Some(LogFile::Checkpoint(version)) => {
                    listing.checkpoints.insert(version);
                }
                None => {}
            }
        }
        Ok(Some(listing))
    }

    /// Whether the log holds any version, i.e. whether the table exists.
    pub(crate) fn has_versions(&self) -> bool {
        !self.commits.is_empty() || !self.checkpoints.is_empty()
    }

    /// The newest version with a commit file.
    pub(crate) fn latest_commit(&self) -> Option<u64> {
        self.commits.last().copied()
    }

    /// Checks every commit file that loading version `from` and then version `to`
    /// (`from <= to`) replays: the commits after the newest checkpoint at or below
    /// `from`, up to `to`. Commits older than the oldest one kept are not needed by any
    /// load delta-rs can do, so they are not asked for.
    pub(crate) fn check_replay(
        &self,
        table: &TableName,
        table_dir: &Path,
        from: u64,
        to: u64,
    ) -> Result<(), CatalogError> {
        let after_checkpoint = self
            .checkpoints
            .range(..=from)
            .next_back()
            .map_or(0, |checkpoint| checkpoint.saturating_add(1));
        let oldest_kept = self.commits.first().copied().unwrap_or(0);
        for version in after_checkpoint.max(oldest_kept)..=to {
            check_commit(table, &commit_path(table_dir, version), version)?;
        }
        Ok(())
    }
}

/// The kinds of `_delta_log` files that make up versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFile {
    /// `<version>.json`
    Commit(u64),
    /// `<version>.checkpoint.parquet`, or a multi-part or V2 checkpoint
    /// (`<version>.checkpoint.<…>.parquet|json`).
    Checkpoint(u64),
}

/// What a file name in `_delta_log` is, if it is part of a version.
fn parse_log_file_name(name: &str) -> Option<LogFile> {
    let (digits, rest) = name.split_at_checked(VERSION_DIGITS)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let version = digits.parse().ok()?;
    if rest == ".json" {
        Some(LogFile::Commit(version))
    } else if rest.starts_with(".checkpoint.")
        && (rest.ends_with(".parquet") || rest.ends_with(".json"))
    {
        Some(LogFile::Checkpoint(version))
    } else {
        None
    }
}

/// Fails unless the commit file of `version` at `path` is present and whole.
fn check_commit(table: &TableName, path: &Path, version: u64) -> Result<(), CatalogError> {
    let corrupt = |reason: &'static str| CatalogError::CorruptLogEntry {
        table: table.to_string(),
        version: i64::try_from(version).unwrap_or(i64::MAX),
        path: path.to_owned(),
        reason,
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(corrupt(
                "the commit file is missing from the middle of the log",
            ));
        }
        Err(e) => return Err(CatalogError::io(path, e)),
    };
    match commit_defect(&bytes) {
        Some(reason) => Err(corrupt(reason)),
        None => Ok(()),
    }
}

/// What is wrong with the bytes of a commit file, if anything: a commit is UTF-8 text
/// of one or more lines, each a JSON object (one action).
fn commit_defect(bytes: &[u8]) -> Option<&'static str> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Some("it is not UTF-8 text");
    };
    let mut actions = 0_usize;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line).is_err() {
            return Some("a line is not a complete JSON object");
        }
        actions += 1;
    }
    (actions == 0).then_some("it holds no actions")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_commit_and_checkpoint_files_are_versions() {
        let cases = [
            ("00000000000000000000.json", Some(LogFile::Commit(0))),
            ("00000000000000000012.json", Some(LogFile::Commit(12))),
            (
                "00000000000000000100.checkpoint.parquet",
                Some(LogFile::Checkpoint(100)),
            ),
            (
                "00000000000000000100.checkpoint.0000000001.0000000002.parquet",
                Some(LogFile::Checkpoint(100)),
            ),
            ("00000000000000000100.checkpoint.parquet#1", None),
            ("00000000000000000003.crc", None),
            ("_commit_0b5e2f7a.json.tmp", None),
            ("_last_checkpoint", None),
            ("0000000000000000001.json", None),
            ("9999999999999999999x.json", None),
        ];
        for (name, expected) in cases {
            assert_eq!(parse_log_file_name(name), expected, "{name}");
        }
        assert_eq!(
            commit_path(Path::new("/t"), 7),
            Path::new("/t/_delta_log/00000000000000000007.json")
        );
    }

    #[test]
    fn empty_cut_off_and_binary_commits_are_defects() {
        let whole =
            b"{\"commitInfo\":{\"operation\":\"WRITE\"}}\n{\"add\":{\"path\":\"a.parquet\"}}";
        assert_eq!(commit_defect(whole), None);
        assert_eq!(commit_defect(b"{\"a\":1}\n\n{\"b\":2}\n"), None);
        let bad: [&[u8]; 6] = [
            b"",
            b"\n\n",
            b"{\"commitInfo\":{\"operation\":\"WR",
            b"{\"a\":1}\n{\"add\":{\"pa",
            b"\x00\xff\xfe garbage",
            b"[1, 2]",
        ];
        for bad in bad {
            assert!(commit_defect(bad).is_some(), "{bad:?}");
        }
    }
}
