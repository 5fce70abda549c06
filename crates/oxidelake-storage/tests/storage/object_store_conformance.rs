//! One `ObjectStore` conformance suite, run against `object_store`'s `LocalFileSystem`
//! and (with the `io-uring` feature, on Linux) `UringLocalFileSystem`, so the io_uring
//! store is held to exactly the behaviour of the store it stands in for.

use std::collections::BTreeSet;
use std::path::Path as FsPath;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    Error, GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    PutPayload, UpdateVersion,
};

/// Seeded pseudo-random bytes (splitmix64), so a failure reproduces.
fn seeded_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

async fn get_bytes(store: &dyn ObjectStore, location: &Path) -> Bytes {
    store.get(location).await.unwrap().bytes().await.unwrap()
}

async fn get_range_opts(store: &dyn ObjectStore, location: &Path, range: GetRange) -> Bytes {
    let result = store
        .get_opts(location, GetOptions::new().with_range(Some(range.clone())))
        .await
        .unwrap_or_else(|e| panic!("{store}: get_opts {range}: {e}"));
    let returned = result.range.clone();
    let bytes = result.bytes().await.unwrap();
    assert_eq!(
        bytes.len() as u64,
        returned.end - returned.start,
        "{store}: GetResult.range {returned:?} must describe the bytes returned"
    );
    bytes
}

async fn sorted_list(store: &dyn ObjectStore, prefix: Option<&Path>) -> Vec<Path> {
    let mut locations: Vec<Path> = store
        .list(prefix)
        .map_ok(|meta| meta.location)
        .try_collect()
        .await
        .unwrap();
    locations.sort();
    locations
}

fn assert_not_found<T: std::fmt::Debug>(
    store: &dyn ObjectStore,
    what: &str,
    result: Result<T, Error>,
) {
    match result {
        Err(Error::NotFound { .. }) => {}
        other => panic!("{store}: {what} must be NotFound, got {other:?}"),
    }
}

/// The whole suite, against a store rooted at the empty directory `root`.
pub async fn conformance(store: &dyn ObjectStore, root: &FsPath) {
    round_trips_objects(store, root).await;
    serves_byte_ranges(store).await;
    reports_missing_objects_as_not_found(store).await;
    lists_objects(store, root).await;
    deletes_objects(store).await;
    honours_put_modes(store).await;
    evaluates_conditional_gets(store).await;
    copies_and_renames_objects(store).await;
    completes_multipart_uploads(store).await;
    round_trips_a_large_object(store).await;
    leaves_no_staging_files(store, root);
}

async fn round_trips_objects(store: &dyn ObjectStore, root: &FsPath) {
    // Parent directories do not exist yet: put creates them.
    let location = Path::from("round_trip/a/b/hello.txt");
    let put = store.put(&location, "hello world".into()).await.unwrap();
    assert!(put.e_tag.is_some(), "{store}: put reports an e-tag");

    let got = store.get(&location).await.unwrap();
    assert_eq!(got.meta.location, location);
    assert_eq!(got.meta.size, 11);
    assert_eq!(got.range, 0..11);
    assert_eq!(&got.bytes().await.unwrap()[..], b"hello world");
    assert_eq!(
        std::fs::read(root.join("round_trip/a/b/hello.txt")).unwrap(),
        b"hello world",
        "{store}: the object is a plain file under the root"
    );

    let head = store.head(&location).await.unwrap();
    assert_eq!(head.location, location);
    assert_eq!(head.size, 11);
    assert_eq!(
        head.e_tag, put.e_tag,
        "{store}: put and head agree on the e-tag"
    );

    store.put(&location, "goodbye".into()).await.unwrap();
    assert_eq!(&get_bytes(store, &location).await[..], b"goodbye");
    assert_eq!(store.head(&location).await.unwrap().size, 7);

    let empty = Path::from("round_trip/empty");
    store.put(&empty, PutPayload::new()).await.unwrap();
    assert!(get_bytes(store, &empty).await.is_empty());
    assert_eq!(store.head(&empty).await.unwrap().size, 0);
    assert!(
        get_range_opts(store, &empty, GetRange::Suffix(4))
            .await
            .is_empty()
    );

    let chunked = Path::from("round_trip/chunked");
    let payload: PutPayload = [
        Bytes::from_static(b"abc"),
        Bytes::from_static(b"def"),
        Bytes::from_static(b"ghij"),
    ]
    .into_iter()
    .collect();
    store.put(&chunked, payload).await.unwrap();
    assert_eq!(&get_bytes(store, &chunked).await[..], b"abcdefghij");
}

async fn serves_byte_ranges(store: &dyn ObjectStore) {
    let location = Path::from("ranges/digits");
    let data = b"0123456789abcdef";
    store
        .put(&location, Bytes::from_static(data).into())
        .await
        .unwrap();

    let bounded = store
        .get_opts(&location, GetOptions::new().with_range(Some(2..5)))
        .await
        .unwrap();
    assert_eq!(bounded.range, 2..5);
    assert_eq!(bounded.meta.size, 16);
    assert_eq!(&bounded.bytes().await.unwrap()[..], b"234");
    assert_eq!(
        &get_range_opts(store, &location, GetRange::Offset(10)).await[..],
        b"abcdef"
    );
    assert_eq!(
        &get_range_opts(store, &location, GetRange::Suffix(3)).await[..],
        b"def"
    );
    assert_eq!(
        &get_range_opts(store, &location, GetRange::Suffix(100)).await[..],
        data
    );
    assert_eq!(
        &get_range_opts(store, &location, GetRange::Bounded(12..100)).await[..],
        b"cdef",
        "{store}: a range ending past the object is clamped"
    );
    assert!(
        store
            .get_opts(&location, GetOptions::new().with_range(Some(16..20)))
            .await
            .is_err(),
        "{store}: a range starting at the end is invalid"
    );
    assert_eq!(
        &store.get_range(&location, 3..7).await.unwrap()[..],
        b"3456"
    );

    let ranges = [0..4, 2..6, 6..16, 5..5, 15..16, 0..16];
    let got = store.get_ranges(&location, &ranges).await.unwrap();
    let want: Vec<&[u8]> = ranges
        .iter()
        .map(|r| &data[r.start as usize..r.end as usize])
        .collect();
    let got: Vec<&[u8]> = got.iter().map(|b| &b[..]).collect();
    assert_eq!(got, want, "{store}: overlapping and empty ranges");
    assert!(
        store
            .get_ranges(&location, std::slice::from_ref(&(10..20)))
            .await
            .is_err(),
        "{store}: get_ranges past the end fails"
    );
}

async fn reports_missing_objects_as_not_found(store: &dyn ObjectStore) {
    let missing = Path::from("missing/nothing.bin");
    assert_not_found(store, "get", store.get(&missing).await);
    assert_not_found(store, "head", store.head(&missing).await);
    assert_not_found(
        store,
        "ranged get",
        store
            .get_opts(&missing, GetOptions::new().with_range(Some(0..4)))
            .await,
    );
    assert_not_found(
        store,
        "get_ranges",
        store
            .get_ranges(&missing, std::slice::from_ref(&(0..4)))
            .await,
    );
}

async fn lists_objects(store: &dyn ObjectStore, root: &FsPath) {
    let names = ["listing/a/1", "listing/a/2", "listing/b/3", "listing/top"];
    for (i, name) in names.iter().enumerate() {
        store
            .put(&Path::from(*name), vec![b'x'; i + 1].into())
            .await
            .unwrap();
    }
    let paths = |v: &[&str]| v.iter().map(|s| Path::from(*s)).collect::<Vec<_>>();

    assert_eq!(
        sorted_list(store, Some(&Path::from("listing"))).await,
        paths(&names)
    );
    assert_eq!(
        sorted_list(store, Some(&Path::from("listing/a"))).await,
        paths(&["listing/a/1", "listing/a/2"])
    );
    let everything = sorted_list(store, None).await;
    assert_eq!(
        everything,
        files_under(root),
        "{store}: list(None) lists every object"
    );

    let metas: Vec<ObjectMeta> = store
        .list(Some(&Path::from("listing/b")))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(metas.len(), 1);
    assert_eq!(
        metas[0],
        store.head(&Path::from("listing/b/3")).await.unwrap()
    );

    let mut after: Vec<Path> = store
        .list_with_offset(Some(&Path::from("listing")), &Path::from("listing/a/2"))
        .map_ok(|meta| meta.location)
        .try_collect()
        .await
        .unwrap();
    after.sort();
    assert_eq!(after, paths(&["listing/b/3", "listing/top"]));

    let top = store
        .list_with_delimiter(Some(&Path::from("listing")))
        .await
        .unwrap();
    let mut prefixes = top.common_prefixes.clone();
    prefixes.sort();
    assert_eq!(prefixes, paths(&["listing/a", "listing/b"]));
    let objects: Vec<Path> = top.objects.iter().map(|m| m.location.clone()).collect();
    assert_eq!(objects, paths(&["listing/top"]));

    let leaf = store
        .list_with_delimiter(Some(&Path::from("listing/a")))
        .await
        .unwrap();
    assert!(leaf.common_prefixes.is_empty());
    let mut objects: Vec<Path> = leaf.objects.iter().map(|m| m.location.clone()).collect();
    objects.sort();
    assert_eq!(objects, paths(&["listing/a/1", "listing/a/2"]));

    let at_root = store.list_with_delimiter(None).await.unwrap();
    assert!(
        at_root.common_prefixes.contains(&Path::from("listing")),
        "{store}: {:?}",
        at_root.common_prefixes
    );
}

/// Object locations under `root` found by walking the directory (staging files, named
/// `…#<digits>`, are not objects).
fn files_under(root: &FsPath) -> Vec<Path> {
    let mut found = BTreeSet::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(path);
            } else {
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned();
                found.insert(Path::from(relative));
            }
        }
    }
    found.into_iter().collect()
}

async fn deletes_objects(store: &dyn ObjectStore) {
    let location = Path::from("deleting/x");
    store.put(&location, "doomed".into()).await.unwrap();
    store.delete(&location).await.unwrap();
    assert_not_found(store, "get after delete", store.get(&location).await);
    assert_not_found(store, "head after delete", store.head(&location).await);
    assert_not_found(store, "a second delete", store.delete(&location).await);
    assert!(
        sorted_list(store, Some(&Path::from("deleting")))
            .await
            .is_empty()
    );
}

async fn honours_put_modes(store: &dyn ObjectStore) {
    let existing = Path::from("modes/existing");
    store.put(&existing, "first".into()).await.unwrap();
    match store
        .put_opts(&existing, "second".into(), PutMode::Create.into())
        .await
    {
        Err(Error::AlreadyExists { .. }) => {}
        other => panic!("{store}: PutMode::Create on an existing object: {other:?}"),
    }
    assert_eq!(&get_bytes(store, &existing).await[..], b"first");

    let fresh = Path::from("modes/fresh");
    store
        .put_opts(&fresh, "created".into(), PutMode::Create.into())
        .await
        .unwrap();
    assert_eq!(&get_bytes(store, &fresh).await[..], b"created");

    let update = PutOptions::from(PutMode::Update(UpdateVersion {
        e_tag: None,
        version: None,
    }));
    assert!(
        matches!(
            store.put_opts(&fresh, "updated".into(), update).await,
            Err(Error::NotImplemented { .. })
        ),
        "{store}: local stores do not implement PutMode::Update"
    );
}

async fn evaluates_conditional_gets(store: &dyn ObjectStore) {
    let location = Path::from("conditional/x");
    store.put(&location, "versioned".into()).await.unwrap();
    let meta = store.head(&location).await.unwrap();
    let e_tag = meta.e_tag.clone().unwrap();
    let get = |options: GetOptions| store.get_opts(&location, options);

    assert!(
        get(GetOptions::new().with_if_match(Some(e_tag.clone())))
            .await
            .is_ok()
    );
    assert!(matches!(
        get(GetOptions::new().with_if_match(Some("other"))).await,
        Err(Error::Precondition { .. })
    ));
    assert!(matches!(
        get(GetOptions::new().with_if_none_match(Some(e_tag.clone()))).await,
        Err(Error::NotModified { .. })
    ));
    assert!(
        get(GetOptions::new().with_if_none_match(Some("other")))
            .await
            .is_ok()
    );
    assert!(matches!(
        get(GetOptions::new().with_if_modified_since(Some(meta.last_modified))).await,
        Err(Error::NotModified { .. })
    ));
    assert!(
        get(GetOptions::new().with_if_unmodified_since(Some(meta.last_modified)))
            .await
            .is_ok()
    );
}

async fn copies_and_renames_objects(store: &dyn ObjectStore) {
    let source = Path::from("moves/source");
    let copy = Path::from("moves/copy");
    let moved = Path::from("moves/deeper/moved");
    store.put(&source, "payload".into()).await.unwrap();

    store.copy(&source, &copy).await.unwrap();
    assert_eq!(&get_bytes(store, &copy).await[..], b"payload");
    assert!(matches!(
        store.copy_if_not_exists(&source, &copy).await,
        Err(Error::AlreadyExists { .. })
    ));

    store.rename(&copy, &moved).await.unwrap();
    assert_not_found(store, "a renamed-away object", store.get(&copy).await);
    assert_eq!(&get_bytes(store, &moved).await[..], b"payload");
    assert_eq!(&get_bytes(store, &source).await[..], b"payload");
}

async fn completes_multipart_uploads(store: &dyn ObjectStore) {
    let location = Path::from("multipart/object");
    let first = seeded_bytes(5 << 10, 1);
    let second = seeded_bytes(3 << 10, 2);
    let mut upload = store.put_multipart(&location).await.unwrap();
    upload.put_part(first.clone().into()).await.unwrap();
    upload.put_part(second.clone().into()).await.unwrap();
    upload.complete().await.unwrap();

    let mut want = first;
    want.extend_from_slice(&second);
    assert_eq!(&get_bytes(store, &location).await[..], &want[..]);
}

async fn round_trips_a_large_object(store: &dyn ObjectStore) {
    let location = Path::from("large/object.bin");
    let data = seeded_bytes((3 << 20) + 123, 42);
    let payload: PutPayload = data.chunks(1 << 20).map(Bytes::copy_from_slice).collect();
    store.put(&location, payload).await.unwrap();

    assert_eq!(store.head(&location).await.unwrap().size, data.len() as u64);
    assert!(
        get_bytes(store, &location).await == data,
        "{store}: whole large object"
    );
    let streamed: Vec<Bytes> = store
        .get(&location)
        .await
        .unwrap()
        .into_stream()
        .try_collect()
        .await
        .unwrap();
    assert!(streamed.concat() == data, "{store}: streamed large object");

    let ranges = [
        0..(1 << 20),
        ((1 << 20) - 7)..((2 << 20) + 9),
        (3 << 20)..data.len() as u64,
        12_345..12_346,
    ];
    let got = store.get_ranges(&location, &ranges).await.unwrap();
    for (range, bytes) in ranges.iter().zip(&got) {
        assert!(
            bytes[..] == data[range.start as usize..range.end as usize],
            "{store}: range {range:?} of the large object"
        );
    }
    let suffix = get_range_opts(store, &location, GetRange::Suffix(1000)).await;
    assert!(suffix[..] == data[data.len() - 1000..]);
    let offset = get_range_opts(store, &location, GetRange::Offset(2 << 20)).await;
    assert!(offset[..] == data[2 << 20..]);
}

fn leaves_no_staging_files(store: &dyn ObjectStore, root: &FsPath) {
    let staged: Vec<Path> = files_under(root)
        .into_iter()
        .filter(|p| p.filename().is_some_and(|name| name.contains('#')))
        .collect();
    assert!(
        staged.is_empty(),
        "{store}: staging files left behind: {staged:?}"
    );
}

#[tokio::test]
async fn local_file_system_passes_the_object_store_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    conformance(&store, dir.path()).await;
}

#[cfg(all(target_os = "linux", feature = "io-uring"))]
mod uring {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use datafusion::prelude::{ParquetReadOptions, SessionContext};
    use futures::TryStreamExt;
    use object_store::local::LocalFileSystem;
    use object_store::path::Path;
    use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
    use oxidelake_storage::{UringLocalFileSystem, probe_io_uring, register_uring_file_store};

    use super::{conformance, seeded_bytes};

    /// Whether io_uring works here; if not, says why (tests then skip).
    fn uring_available() -> bool {
        match probe_io_uring() {
            Ok(()) => true,
            Err(reason) => {
                eprintln!("io_uring unavailable: {reason}; skipping");
                false
            }
        }
    }

    #[tokio::test]
    async fn uring_local_file_system_passes_the_object_store_conformance_suite() {
        if !uring_available() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let store = UringLocalFileSystem::new_with_prefix(dir.path()).unwrap();
        conformance(&store, dir.path()).await;
        assert!(
            store.ops_completed() > 0,
            "data reads and writes must go through the ring"
        );
    }

    async fn listed_metas(store: &dyn ObjectStore, prefix: &str) -> Vec<ObjectMeta> {
        let mut metas: Vec<ObjectMeta> = store
            .list(Some(&Path::from(prefix)))
            .try_collect()
            .await
            .unwrap();
        metas.sort_by(|a, b| a.location.cmp(&b.location));
        metas
    }

    async fn metadata_from(store: &dyn ObjectStore, location: &Path) -> [ObjectMeta; 2] {
        let head = store.head(location).await.unwrap();
        let get = store.get(location).await.unwrap().meta;
        [head, get]
    }

    #[tokio::test]
    async fn both_stores_report_identical_object_metadata() {
        if !uring_available() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let uring = UringLocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let by_uring = Path::from("meta/by_uring.bin");
        let by_local = Path::from("meta/by_local.bin");
        let uring_bytes = seeded_bytes(70_000, 7);
        let local_bytes = seeded_bytes(1_234, 8);
        let put = uring
            .put(&by_uring, uring_bytes.clone().into())
            .await
            .unwrap();
        local
            .put(&by_local, local_bytes.clone().into())
            .await
            .unwrap();

        for location in [&by_uring, &by_local] {
            let from_local = metadata_from(&local, location).await;
            let from_uring = metadata_from(&uring, location).await;
            assert!(
                from_local[0]
                    .e_tag
                    .as_deref()
                    .is_some_and(|t| !t.is_empty())
            );
            assert_eq!(from_local, from_uring, "{location}: head and get metadata");
        }
        assert_eq!(
            put.e_tag,
            local.head(&by_uring).await.unwrap().e_tag,
            "the uring put's e-tag is the one LocalFileSystem computes"
        );

        let listed_local = listed_metas(&local, "meta").await;
        assert_eq!(listed_local.len(), 2);
        assert_eq!(listed_local, listed_metas(&uring, "meta").await);

        // Each store reads what the other wrote.
        let read = local.get(&by_uring).await.unwrap().bytes().await.unwrap();
        assert!(read[..] == uring_bytes[..]);
        let read = uring.get(&by_local).await.unwrap().bytes().await.unwrap();
        assert!(read[..] == local_bytes[..]);
    }

    #[tokio::test]
    async fn registered_uring_store_serves_datafusion_parquet_scans() {
        if !uring_available() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("numbers.parquet");
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from_iter_values(0..10_000))],
        )
        .unwrap();
        let mut writer = parquet::arrow::ArrowWriter::try_new(
            std::fs::File::create(&file).unwrap(),
            schema,
            None,
        )
        .unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();

        let ctx = SessionContext::new();
        let store = register_uring_file_store(&ctx.runtime_env()).unwrap();
        let before = store.ops_completed();
        ctx.register_parquet(
            "numbers",
            file.to_str().unwrap(),
            ParquetReadOptions::default(),
        )
        .await
        .unwrap();
        let batches = ctx
            .sql("SELECT count(*) AS n, sum(v) AS total FROM numbers")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();

        let row = &batches[0];
        let n = row.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let total = row.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!((n.value(0), total.value(0)), (10_000, 49_995_000));
        assert!(
            store.ops_completed() > before,
            "the scan's reads must go through the registered io_uring store"
        );
    }
}
