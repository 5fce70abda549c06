//! Where the `.slt` files come from and where they run.
//!
//! The files ship inside the `datafusion-sqllogictest` crate, so they are found through
//! `cargo metadata` (the version in Cargo.lock) and copied into a temporary directory
//! that becomes the working directory: records write to `test_files/scratch/…` relative
//! to it, and the registry's copy stays untouched. Records that read DataFusion's
//! repository data (`../core/tests/data`, `../../testing`) find nothing there and fail
//! in both runs, so they never count as regressions; docs/sqllogictest.md has the counts.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use super::args::Args;

/// The CI subset: the files about filters, joins, aggregates, ordering and the plan
/// properties the placement rule must keep, sized to fit the CI budget. `--all` runs
/// every file (docs/sqllogictest.md records that run).
const CI_SUBSET: &[&str] = &[
    "aggregate.slt",
    "decimal.slt",
    "filter_without_sort_exec.slt",
    "group_by.slt",
    "in_list.slt",
    "join_only.slt",
    "joins.slt",
    "null_aware_anti_join.slt",
    "order.slt",
    "parquet_cdc.slt",
    "predicates.slt",
    "projection_pushdown.slt",
    "select.slt",
    "subquery.slt",
];

/// The copied files and the directory they run in.
pub struct Suite {
    /// Holds the copy alive; removed when the run ends.
    _workdir: TempDir,
    /// `<workdir>/test_files`.
    pub test_files: PathBuf,
}

impl Suite {
    /// Finds the crate's files, copies them and makes the copy the working directory.
    pub fn prepare() -> Result<Self, String> {
        let crate_dir = crate_dir()?;
        let workdir = tempfile::Builder::new()
            .prefix("oxide-slt-")
            .tempdir()
            .map_err(|e| format!("cannot create a working directory: {e}"))?;
        for dir in ["test_files", "data"] {
            let from = crate_dir.join(dir);
            if from.is_dir() {
                copy_dir(&from, &workdir.path().join(dir))?;
            }
        }
        std::env::set_current_dir(workdir.path())
            .map_err(|e| format!("cannot enter {}: {e}", workdir.path().display()))?;
        let test_files = workdir.path().join("test_files");
        Ok(Suite {
            _workdir: workdir,
            test_files,
        })
    }

    /// The `.slt` files to run, relative to `test_files/`, in a stable order.
    pub fn select(&self, args: &Args) -> Vec<PathBuf> {
        let mut files = Vec::new();
        collect_slt(&self.test_files, &self.test_files, &mut files);
        files.sort();
        files.retain(|relative| {
            let name = relative.to_string_lossy();
            if !args.names.is_empty() {
                args.names.iter().any(|n| name.contains(n.as_str()))
            } else {
                args.all || CI_SUBSET.contains(&name.as_ref())
            }
        });
        files
    }
}

/// The host's target triple, from `rustc -vV`.
fn host_triple() -> Result<String, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let output = Command::new(rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run rustc -vV: {e}"))?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV names no host".to_string())
}

/// The directory of the `datafusion-sqllogictest` package Cargo.lock resolves.
///
/// Offline and for the host only: a build downloads only the packages of its own
/// platform, so on a fresh machine an unfiltered `cargo metadata --offline` fails on a
/// package of another one (`android_system_properties`, say) that was never fetched.
fn crate_dir() -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let host = host_triple()?;
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .args(["--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cargo metadata printed something else than JSON: {e}"))?;
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "datafusion-sqllogictest")
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or("datafusion-sqllogictest is not in Cargo.lock")?;
    Path::new(manifest)
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{manifest} has no parent directory"))
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .map_err(|e| format!("cannot copy {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

fn collect_slt(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_slt(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "slt")
            && let Ok(relative) = path.strip_prefix(root)
        {
            out.push(relative.to_path_buf());
        }
    }
}
