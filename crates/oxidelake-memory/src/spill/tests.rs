use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use oxidelake_core::{EngineError, MemoryTier, TelemetryHub};

use super::*;

/// A batch of `rows` rows (~24 bytes a row plus strings) whose values depend on `seed`.
fn batch(seed: i64, rows: usize) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
    ]));
    let k = Int64Array::from_iter_values((0..rows as i64).map(|i| i * 31 + seed));
    let v = Float64Array::from_iter(
        (0..rows).map(|i| (i % 7 != 0).then_some(i as f64 * 0.5 + seed as f64)),
    );
    let s =
        StringArray::from_iter((0..rows).map(|i| (i % 5 != 0).then(|| format!("row-{seed}-{i}"))));
    RecordBatch::try_new(schema, vec![Arc::new(k), Arc::new(v), Arc::new(s)]).unwrap()
}

fn ipc_bytes(batch: &RecordBatch) -> Vec<u8> {
    ipc_file::encode(batch, "test").unwrap().0
}

fn manager(dir: &std::path::Path, host_budget_bytes: u64) -> (SpillManager, Arc<TelemetryHub>) {
    let hub = Arc::new(TelemetryHub::new());
    let config = SpillConfig::new(0, host_budget_bytes, 64 * 1024 * 1024);
    (
        SpillManager::local(config, dir, Arc::clone(&hub)).unwrap(),
        hub,
    )
}

#[tokio::test]
async fn demotes_cold_batches_to_disk_at_the_high_watermark_and_promotes_them_back_byte_identical()
{
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 64).get_array_memory_size() as u64;
    // Room for about four batches: registering eight must spill the oldest.
    let (mgr, hub) = manager(dir.path(), 4 * one + one / 2);

    let originals: Vec<RecordBatch> = (0..8).map(|i| batch(i, 64)).collect();
    let mut ids = Vec::new();
    for b in &originals {
        ids.push(mgr.register(b.clone(), MemoryTier::Host).await.unwrap());
    }

    // The coldest (first registered) went to disk, the newest stayed in memory.
    assert_eq!(mgr.tier_of(ids[0]).await, Some(MemoryTier::Disk));
    assert_eq!(mgr.tier_of(ids[7]).await, Some(MemoryTier::Host));
    let budget = mgr.config().host_budget_bytes as f64;
    assert!(mgr.used_bytes(MemoryTier::Host).await as f64 <= budget * mgr.config().high_watermark);
    let spilled = mgr.spill_file(ids[0]).await.unwrap();
    assert!(
        dir.path().join(spilled.as_ref()).is_file(),
        "spill file exists on disk"
    );

    let after_spill = hub.snapshot();
    assert!(after_spill.spill.demotions >= 4, "{:?}", after_spill.spill);
    assert!(after_spill.spill.written_bytes > 0);
    assert_eq!(after_spill.spill.promotions, 0);
    assert!(after_spill.memory.disk_bytes > 0);

    // Promotion on access returns exactly the bytes that were registered.
    let back = mgr.get(ids[0]).await.unwrap();
    assert_eq!(back, originals[0]);
    assert_eq!(ipc_bytes(&back), ipc_bytes(&originals[0]));
    assert!(
        crate::ipc::buffers_are_64_byte_aligned(&back),
        "promoted buffers are slices of the 64-byte-aligned file"
    );
    assert_eq!(mgr.tier_of(ids[0]).await, Some(MemoryTier::Host));
    assert!(
        !dir.path().join(spilled.as_ref()).exists(),
        "promoted batch's spill file is deleted"
    );

    for (id, original) in ids.iter().zip(&originals) {
        assert_eq!(&mgr.get(*id).await.unwrap(), original);
    }
    let after_promotion = hub.snapshot();
    assert!(after_promotion.spill.promotions >= 1);
    assert!(after_promotion.spill.read_bytes > 0);
    assert!(
        after_promotion.spill.demotions > after_spill.spill.demotions,
        "promotions pushed others out"
    );
}

#[tokio::test]
async fn releasing_batches_returns_their_bytes_and_deletes_spill_files() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 32).get_array_memory_size() as u64;
    let (mgr, hub) = manager(dir.path(), 2 * one);
    let a = mgr.register(batch(1, 32), MemoryTier::Host).await.unwrap();
    let b = mgr.register(batch(2, 32), MemoryTier::Host).await.unwrap();
    let c = mgr.register(batch(3, 32), MemoryTier::Host).await.unwrap();
    assert_eq!(mgr.tier_of(a).await, Some(MemoryTier::Disk));
    let file = mgr.spill_file(a).await.unwrap();
    for id in [a, b, c] {
        mgr.release(id).await.unwrap();
    }
    assert!(!dir.path().join(file.as_ref()).exists());
    for tier in [MemoryTier::Device, MemoryTier::Host, MemoryTier::Disk] {
        assert_eq!(mgr.used_bytes(tier).await, 0, "{tier}");
    }
    let snap = hub.snapshot();
    assert_eq!((snap.memory.host_bytes, snap.memory.disk_bytes), (0, 0));
    assert!(matches!(
        mgr.get(a).await,
        Err(MemoryError::UnknownBatch(_))
    ));
}

#[tokio::test]
async fn taking_a_spilled_batch_reads_it_back_without_demoting_others_and_counts_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 32).get_array_memory_size() as u64;
    let (mgr, hub) = manager(dir.path(), 2 * one);
    let originals: Vec<RecordBatch> = (1..=3).map(|i| batch(i, 32)).collect();
    let mut ids = Vec::new();
    for b in &originals {
        ids.push(mgr.register(b.clone(), MemoryTier::Host).await.unwrap());
    }
    assert_eq!(mgr.tier_of(ids[0]).await, Some(MemoryTier::Disk));
    // Each registration past the first pushed the one before it out.
    assert_eq!(mgr.tier_of(ids[1]).await, Some(MemoryTier::Disk));
    let writes = mgr.disk_writes();
    assert_eq!((writes.files, writes.rows), (2, 64));
    assert!(writes.bytes > 0);
    let file = mgr.spill_file(ids[0]).await.unwrap();
    let host_before = mgr.used_bytes(MemoryTier::Host).await;
    let demotions_before = hub.snapshot().spill.demotions;

    assert_eq!(mgr.take(ids[0]).await.unwrap(), originals[0]);
    assert!(!dir.path().join(file.as_ref()).exists());
    assert_eq!(mgr.tier_of(ids[0]).await, None);
    // Only the second batch is left on disk.
    assert_eq!(mgr.used_bytes(MemoryTier::Disk).await, one);
    // Not promoted: the host tier holds what it held, and nothing was pushed out.
    assert_eq!(mgr.used_bytes(MemoryTier::Host).await, host_before);
    assert_eq!(hub.snapshot().spill.demotions, demotions_before);
    assert_eq!(mgr.tier_of(ids[2]).await, Some(MemoryTier::Host));
    // A batch in memory is handed over and forgotten.
    assert_eq!(mgr.take(ids[2]).await.unwrap(), originals[2]);
    assert_eq!(mgr.used_bytes(MemoryTier::Host).await, host_before - one);
    assert!(matches!(
        mgr.take(ids[2]).await,
        Err(MemoryError::UnknownBatch(_))
    ));
    assert_eq!(mgr.disk_writes(), writes);
}

#[tokio::test]
async fn a_manager_dropped_with_batches_held_takes_them_out_of_the_hubs_gauges() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 32).get_array_memory_size() as u64;
    let (mgr, hub) = manager(dir.path(), 2 * one);
    for i in 1..=3 {
        mgr.register(batch(i, 32), MemoryTier::Host).await.unwrap();
    }
    let held = hub.snapshot().memory;
    assert!(held.host_bytes > 0 && held.disk_bytes > 0, "{held:?}");
    drop(mgr);
    let after = hub.snapshot().memory;
    assert_eq!((after.host_bytes, after.disk_bytes), (0, 0));
}

#[tokio::test]
async fn device_tier_overflow_cascades_through_host_to_disk() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 32).get_array_memory_size() as u64;
    let hub = Arc::new(TelemetryHub::new());
    let config = SpillConfig::new(2 * one, 2 * one, 1 << 26);
    let mgr = SpillManager::local(config, dir.path(), Arc::clone(&hub)).unwrap();
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(
            mgr.register(batch(i, 32), MemoryTier::Device)
                .await
                .unwrap(),
        );
    }
    assert_eq!(mgr.tier_of(ids[5]).await, Some(MemoryTier::Device));
    assert_eq!(mgr.tier_of(ids[0]).await, Some(MemoryTier::Disk));
    assert!(mgr.used_bytes(MemoryTier::Host).await > 0);
}

#[tokio::test]
async fn a_batch_larger_than_the_host_budget_goes_straight_to_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (mgr, _hub) = manager(dir.path(), 128);
    let big = batch(9, 256);
    let id = mgr.register(big.clone(), MemoryTier::Host).await.unwrap();
    assert_eq!(mgr.tier_of(id).await, Some(MemoryTier::Disk));
    assert_eq!(mgr.get(id).await.unwrap(), big);
    assert_eq!(
        mgr.tier_of(id).await,
        Some(MemoryTier::Disk),
        "never promoted past its budget"
    );
}

async fn spilled_manager() -> (tempfile::TempDir, SpillManager, BatchId, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (mgr, _hub) = manager(dir.path(), 64);
    let id = mgr.register(batch(4, 100), MemoryTier::Host).await.unwrap();
    let file = dir.path().join(mgr.spill_file(id).await.unwrap().as_ref());
    (dir, mgr, id, file)
}

#[tokio::test]
async fn a_truncated_spill_file_is_a_format_error_on_promotion() {
    let (_dir, mgr, id, file) = spilled_manager().await;
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let err = mgr.get(id).await.unwrap_err();
    assert!(matches!(err, MemoryError::SpillFormat { .. }), "{err:?}");
    assert!(matches!(EngineError::from(err), EngineError::Format { .. }));
}

#[tokio::test]
async fn a_corrupted_spill_file_is_a_format_error_on_promotion() {
    let (_dir, mgr, id, file) = spilled_manager().await;
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0xA5;
    }
    std::fs::write(&file, &bytes).unwrap();
    let err = EngineError::from(mgr.get(id).await.unwrap_err());
    match err {
        EngineError::Format { detail, .. } => assert!(detail.contains("checksum"), "{detail}"),
        other => panic!("expected Format, got {other:?}"),
    }
}

#[tokio::test]
async fn a_deleted_spill_file_is_an_io_error_on_promotion() {
    let (_dir, mgr, id, file) = spilled_manager().await;
    std::fs::remove_file(&file).unwrap();
    let err = EngineError::from(mgr.get(id).await.unwrap_err());
    assert!(matches!(err, EngineError::Io { .. }), "{err:?}");
}

#[tokio::test]
async fn spill_files_have_64_byte_aligned_buffers_and_decode_without_the_manager() {
    let b = batch(3, 10);
    let (bytes, info) = ipc_file::encode(&b, "x").unwrap();
    // Footer layout: <footer flatbuffer><i32 footer length>"ARROW1".
    let n = bytes.len();
    let footer_len = i32::from_le_bytes(bytes[n - 10..n - 6].try_into().unwrap()) as usize;
    let footer = arrow::ipc::root_as_footer(&bytes[n - 10 - footer_len..n - 10]).unwrap();
    let blocks = footer.recordBatches().unwrap();
    assert_eq!(blocks.len(), 1);
    for block in blocks {
        assert_eq!(
            block.offset() % 64,
            0,
            "message starts on a 64-byte boundary"
        );
        let body = block.offset() + i64::from(block.metaDataLength());
        assert_eq!(
            body % 64,
            0,
            "body (and so every buffer) starts on a 64-byte boundary"
        );
    }
    let back = ipc_file::decode(bytes.into(), &info, "x").unwrap();
    assert_eq!(back, b);
    assert!(crate::ipc::buffers_are_64_byte_aligned(&back));
}

#[test]
fn watermarks_outside_their_domain_are_rejected() {
    let mut config = SpillConfig::new(0, 1, 1);
    config.low_watermark = 0.95;
    let store = Arc::new(object_store::memory::InMemory::new());
    let err = SpillManager::new(config, store, Arc::new(TelemetryHub::new())).unwrap_err();
    assert!(matches!(err, MemoryError::Config(_)));
}
