//! Puts one file into a managed object store and reports the throughput, for the
//! benchmark in docs/benchmarks.md (`scripts/bench_put.sh` runs it next to `cp` +
//! `sha256sum` on the same file).
//!
//! Usage: `put_file <source> <data-dir>`

use std::time::Instant;

use oxidelake_objects::ManagedObjectStore;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(source), Some(data_dir)) = (args.next(), args.next()) else {
        return Err("usage: put_file <source> <data-dir>".into());
    };
    let store = ManagedObjectStore::open(&data_dir)?;
    let started = Instant::now();
    let location = store.put_file(std::path::Path::new(&source), None)?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "put {} bytes in {seconds:.3} s ({:.1} MiB/s), sha256 {}",
        location.size(),
        location.size() as f64 / seconds / (1024.0 * 1024.0),
        location.sha256()
    );
    Ok(())
}
