//! Damaged Parquet is a `Format` error through the public API, never a panic.

use datafusion::prelude::SessionContext;
use oxidelake_core::EngineError;
use oxidelake_storage::{LakeWriterOptions, lake_session_config};

use super::data::write_dataset;

/// A valid file's bytes.
fn valid_file(dir: &std::path::Path) -> Vec<u8> {
    let path = dir.join("valid.parquet");
    write_dataset(&path, 0, 1, LakeWriterOptions::default());
    std::fs::read(path).unwrap()
}

fn footer_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize
}

type Damage = fn(Vec<u8>) -> Vec<u8>;

const DAMAGES: &[(&str, Damage)] = &[
    ("zero-length file", |_| Vec::new()),
    ("truncated footer", |b| {
        // Cut in the middle of the footer: the file no longer ends in length + magic.
        let cut = b.len() - 8 - footer_len(&b) / 2;
        b[..cut].to_vec()
    }),
    ("wrong magic", |mut b| {
        let n = b.len();
        b[n - 4..].copy_from_slice(b"PAR0");
        b
    }),
    ("wrong footer length", |mut b| {
        let n = b.len();
        let bogus = (n as u32) * 4;
        b[n - 8..n - 4].copy_from_slice(&bogus.to_le_bytes());
        b
    }),
    ("corrupted footer metadata", |mut b| {
        let n = b.len();
        let start = n - 8 - footer_len(&b);
        b[start..start + 32].fill(0xFF);
        b
    }),
    ("corrupted page", |mut b| {
        // The first page header follows the leading magic; overwrite it.
        b[4..68].fill(0xFF);
        b
    }),
];

#[tokio::test]
async fn every_kind_of_damaged_parquet_is_a_format_error_through_the_public_api() {
    let dir = tempfile::tempdir().unwrap();
    let valid = valid_file(dir.path());
    for (name, damage) in DAMAGES {
        let path = dir
            .path()
            .join(format!("{}.parquet", name.replace(' ', "_")));
        std::fs::write(&path, damage(valid.clone())).unwrap();
        let ctx = SessionContext::new_with_config(lake_session_config());
        let result = oxidelake_storage::read_parquet(&ctx, path.to_str().unwrap()).await;
        match result {
            Err(err @ EngineError::Format { .. }) => {
                let EngineError::Format { path: p, .. } = &err else {
                    unreachable!()
                };
                assert!(p.ends_with(".parquet"), "{name}: error names the file: {p}");
                println!("damaged parquet, {name}: {err}");
            }
            other => panic!("{name}: expected EngineError::Format, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_missing_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = SessionContext::new_with_config(lake_session_config());
    let missing = dir.path().join("missing.parquet");
    let err = oxidelake_storage::read_parquet(&ctx, missing.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Io { .. }), "{err:?}");
}
