//! Generated lakes the tests share: what `oxide gen-data` writes (the same library
//! functions, the same default options), generated once per build of the test binary.
//! Included with `#[path]` by the runtime tests and by the command-line tests of
//! `oxidelake-cli`, so both crates read their data the same way.

use std::path::{Path, PathBuf};

use oxidelake_runtime::cli::gen_data::{generate_synthetic, generate_tpch};
use oxidelake_storage::LakeWriterOptions;

/// A folder of generated Parquet, shared by the tests of this binary. Read-only: a test
/// that writes files makes a folder of its own.
#[derive(Debug, Clone)]
pub struct GeneratedData(PathBuf);

impl GeneratedData {
    /// The folder (one subfolder per table).
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// Serialises generation among this binary's tests, which run in parallel.
static GENERATING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The lake `generate` writes, generated once per build of this test binary into the
/// target's scratch folder (`CARGO_TARGET_TMPDIR`) as `<crate>-<name>`, so the tests
/// that need the same data share one copy and a warm rerun generates nothing. The copy
/// is complete or absent: it is generated beside its place and renamed in, with a stamp
/// of the binary that wrote it (a rebuilt generator writes afresh).
fn generated(name: &str, generate: impl FnOnce(&Path)) -> GeneratedData {
    let _one_at_a_time = GENERATING.lock().unwrap_or_else(|e| e.into_inner());
    let exe = std::env::current_exe().unwrap();
    let meta = std::fs::metadata(&exe).unwrap();
    let stamp = format!("{} {:?} {name}", meta.len(), meta.modified().unwrap());
    let root =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{}-{name}", env!("CARGO_CRATE_NAME")));
    let stamp_file = root.join("GENERATED_BY");
    if std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
        return GeneratedData(root);
    }
    let partial = PathBuf::from(format!("{}.partial", root.display()));
    for stale in [&root, &partial] {
        if stale.exists() {
            std::fs::remove_dir_all(stale).unwrap();
        }
    }
    generate(&partial);
    std::fs::write(partial.join("GENERATED_BY"), &stamp).unwrap();
    std::fs::rename(&partial, &root).unwrap();
    GeneratedData(root)
}

/// TPC-H at `scale_factor`, as `oxide gen-data --tpch --scale-factor SF` writes it.
pub fn tpch_data(scale_factor: f64) -> GeneratedData {
    generated(&format!("tpch-sf{scale_factor}"), |out| {
        generate_tpch(out, scale_factor, &LakeWriterOptions::default()).unwrap();
    })
}

/// The synthetic table `t` with `rows` rows, as `oxide gen-data --rows N` writes it.
#[allow(dead_code, reason = "the runtime tests use TPC-H only")]
pub fn synthetic_data(rows: u64) -> GeneratedData {
    generated(&format!("synthetic-{rows}"), |out| {
        generate_synthetic(out, rows, &LakeWriterOptions::default()).unwrap();
    })
}
