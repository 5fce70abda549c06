//! Property test of the Delta log reader against damaged commit files: whatever the
//! bytes of `_delta_log/…1.json` become (truncated, bit-flipped, replaced), opening the
//! table, its version and its snapshot give a value or a typed error — never a panic.
//! `PROPTEST_CASES` scales the run.

use proptest::prelude::*;

use super::support::{batch, catalog_with_episodes, episodes};

/// Cases in CI: each one creates a table and commits to it.
const CASES: u32 = 200;

#[derive(Debug, Clone)]
enum Damage {
    Truncate(usize),
    Flip(Vec<(usize, u8)>),
    Replace(Vec<u8>),
    Splice(usize, Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<usize>().prop_map(Damage::Truncate),
        prop::collection::vec((any::<usize>(), 1u8..=255), 1..8).prop_map(Damage::Flip),
        prop::collection::vec(any::<u8>(), 0..512).prop_map(Damage::Replace),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..32))
            .prop_map(|(at, bytes)| Damage::Splice(at, bytes)),
    ]
}

fn apply(mut bytes: Vec<u8>, damage: &Damage) -> Vec<u8> {
    match damage {
        Damage::Truncate(at) => bytes.truncate(at % (bytes.len() + 1)),
        Damage::Flip(flips) => {
            for (at, mask) in flips {
                if !bytes.is_empty() {
                    let i = at % bytes.len();
                    bytes[i] ^= mask;
                }
            }
        }
        Damage::Replace(new) => bytes = new.clone(),
        Damage::Splice(at, new) => {
            let i = at % (bytes.len() + 1);
            bytes.splice(i..i, new.iter().copied());
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_damaged_commit_file_reads_as_a_value_or_a_typed_error(damage in damage()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (_dir, catalog) = catalog_with_episodes().await;
            catalog.append(&episodes(), batch(0..3), 0).await.unwrap();
            let commit = catalog
                .table_dir(&episodes())
                .join("_delta_log/00000000000000000001.json");
            let damaged = apply(std::fs::read(&commit).unwrap(), &damage);
            std::fs::write(&commit, damaged).unwrap();
            let _ = catalog.version(&episodes()).await;
            if let Ok(snapshot) = catalog.snapshot(&episodes(), None).await {
                let _ = oxidelake_catalog::read_batches(&snapshot).await;
            }
            let _ = catalog.snapshot(&episodes(), Some(1)).await;
        });
    }
}
