//! The crash campaign: `oxide insert` and `oxide objects gc` run concurrently as child
//! processes on one lake and are killed with SIGKILL at random points; after every round
//! the lake must hold these invariants:
//!
//! 1. every table reads completely (no version was published without its data file);
//! 2. every object a committed row references exists and verifies;
//! 3. every file under `objects/sha256` hashes to its name (no partial object visible);
//! 4. every INSERT that reported success is visible with its object;
//!
//! and at the end, after the killers stop: a collection reclaims every temporary upload
//! and pin the killed processes left, and a new INSERT and a collection succeed.
//!
//! Payloads come from a small pool (0 B to 64 MiB) so uploads deduplicate onto objects
//! that earlier, killed INSERTs left as orphans — the race GC must not lose. Every GC
//! runs with a zero retention (`--force`), the most aggressive setting.
//!
//! `OXIDE_CRASH_KILLS` (default 50) sets how many processes are killed, and
//! `OXIDE_CRASH_SEED` the seed. What this does not simulate: power loss (dropping writes
//! that were not fsynced); see docs/objects.md.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use oxidelake_objects::Sha256Digest;
use oxidelake_sdk::LakeClient;

use crate::lake::INSERT;

/// xorshift64*: seeded, so a failing campaign can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The payload pool: sizes from empty to 64 MiB, written once.
fn payloads(dir: &Path) -> Vec<PathBuf> {
    let sizes: [usize; 7] = [0, 1, 4096, 65_537, 1 << 20, 9 << 20, 64 << 20];
    sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let path = dir.join(format!("payload-{i}.bin"));
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (i as u64 + 1);
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect()
}

enum Job {
    Insert { id: i64, child: Child },
    Gc { child: Child },
}

fn spawn_insert(lake: &Path, id: i64, file: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_oxide"))
        .arg("insert")
        .arg("--data-dir")
        .arg(lake)
        .arg(INSERT)
        .arg(id.to_string())
        .arg(format!("@{}", file.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn spawn_gc(lake: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_oxide"))
        .arg("objects")
        .arg("--data-dir")
        .arg(lake)
        .args(["gc", "--retention-hours", "0", "--force"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The digest an acknowledged `oxide insert` printed.
fn acknowledged_digest(stdout: &str) -> Option<Sha256Digest> {
    stdout.split("sha256 ").nth(1)?.trim().parse().ok()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Checks invariants 1–4; returns the violations found.
async fn violations(lake: &Path, acknowledged: &HashMap<i64, Sha256Digest>) -> Vec<String> {
    let mut found = Vec::new();
    let client = match LakeClient::open_existing(lake) {
        Ok(c) => c,
        Err(e) => return vec![format!("lake does not open: {e}")],
    };
    match client.referenced_locations().await {
        Ok(locations) => {
            for (table, location) in &locations {
                if let Err(e) = client.objects().verify(location) {
                    found.push(format!("{table}: committed object does not verify: {e}"));
                }
            }
        }
        Err(e) => found.push(format!("tables do not read completely: {e}")),
    }
    for path in files_under(&client.objects().root().join("sha256")) {
        let name: String = path
            .iter()
            .rev()
            .take(2)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let bytes = std::fs::read(&path).unwrap_or_default();
        if Sha256Digest::of(&bytes).to_string() != name {
            found.push(format!("{} does not hash to its name", path.display()));
        }
    }
    match client
        .sql("SELECT id, episode['sha256'] AS sha FROM robots.episodes")
        .await
    {
        Ok(batches) => {
            let mut visible = HashMap::new();
            for batch in &batches {
                let ids = arrow::array::cast::as_primitive_array::<arrow::datatypes::Int64Type>(
                    batch.column(0),
                );
                let shas = arrow::array::cast::as_string_array(batch.column(1));
                for row in 0..batch.num_rows() {
                    visible.insert(ids.value(row), shas.value(row).to_string());
                }
            }
            for (id, digest) in acknowledged {
                if visible.get(id) != Some(&digest.to_string()) {
                    found.push(format!("acknowledged INSERT {id} is not visible"));
                }
            }
        }
        Err(e) => found.push(format!("table does not query: {e}")),
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_inserts_and_collections_never_lose_or_expose_data() {
    let target_kills = env_or("OXIDE_CRASH_KILLS", 50);
    let seed = env_or("OXIDE_CRASH_SEED", 0x0c0f_fee0);
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    crate::lake::client_with_table(&lake).await;
    let pool = payloads(dir.path());

    let mut acknowledged: HashMap<i64, Sha256Digest> = HashMap::new();
    let mut next_id = 0i64;
    let (mut kills, mut rounds, mut gcs_done) = (0u64, 0u64, 0u64);
    let mut all_violations = Vec::new();
    while kills < target_kills {
        rounds += 1;
        let mut jobs = Vec::new();
        for _ in 0..2 {
            // The 64 MiB payload one time in eight; the others evenly.
            let pick = if rng.below(8) == 0 {
                pool.len() - 1
            } else {
                rng.below(pool.len() as u64 - 1) as usize
            };
            next_id += 1;
            jobs.push(Job::Insert {
                id: next_id,
                child: spawn_insert(&lake, next_id, &pool[pick]),
            });
        }
        if rng.below(2) == 0 {
            jobs.push(Job::Gc {
                child: spawn_gc(&lake),
            });
        }
        tokio::time::sleep(Duration::from_millis(rng.below(400))).await;
        for job in jobs {
            let (mut child, id) = match job {
                Job::Insert { id, child } => (child, Some(id)),
                Job::Gc { child } => (child, None),
            };
            if child.try_wait().unwrap().is_none() && rng.below(10) < 7 {
                child.kill().unwrap();
                kills += 1;
            }
            let status = child.wait().unwrap();
            let mut stdout = String::new();
            if let Some(mut out) = child.stdout.take() {
                out.read_to_string(&mut stdout).unwrap();
            }
            match id {
                Some(id) if status.success() => {
                    let digest = acknowledged_digest(&stdout).unwrap();
                    acknowledged.insert(id, digest);
                }
                None if status.success() => gcs_done += 1,
                _ => {}
            }
        }
        let found = violations(&lake, &acknowledged).await;
        all_violations.extend(found.into_iter().map(|v| format!("round {rounds}: {v}")));
    }

    // Whatever the killed processes left is reclaimable, and the lake still works.
    let client = LakeClient::open_existing(&lake).unwrap();
    let report = client
        .gc(oxidelake_objects::GcPolicy::new(Duration::ZERO).allow_below_floor())
        .await
        .unwrap();
    let leftovers = files_under(&client.objects().root().join(".tmp")).len()
        + files_under(&client.objects().root().join(".pins")).len();
    if leftovers != 0 {
        all_violations.push(format!(
            "{leftovers} temporary uploads or pins not reclaimed"
        ));
    }
    next_id += 1;
    let mut last = spawn_insert(&lake, next_id, &pool[2]);
    let mut stdout = String::new();
    assert!(
        last.wait().unwrap().success(),
        "an INSERT after the campaign failed"
    );
    last.stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    acknowledged.insert(next_id, acknowledged_digest(&stdout).unwrap());
    all_violations.extend(violations(&lake, &acknowledged).await);
    println!(
        "crash campaign: seed {seed:#x}, {kills} processes killed in {rounds} rounds, \
         {} INSERTs acknowledged, {gcs_done} collections completed, final collection \
         removed {} objects / {} uploads / {} stale pins, {} invariant violations",
        acknowledged.len(),
        report.deleted,
        report.deleted_uploads,
        report.stale_pins,
        all_violations.len()
    );
    assert!(all_violations.is_empty(), "{all_violations:#?}");
}
