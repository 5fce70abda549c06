//! The managed object store end to end: streaming uploads, verified reads, refusal of
//! foreign locations, tamper detection and garbage collection.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use std::time::SystemTime;

use oxidelake_objects::{
    DataLocation, GcPolicy, GcReport, ManagedObjectStore, ObjectError, Sha256Digest,
};

/// A full collection with `retention` (below the floor allowed, as tests need).
fn gc(
    store: &ManagedObjectStore,
    referenced: &HashSet<Sha256Digest>,
    retention: Duration,
) -> GcReport {
    store
        .begin_gc(GcPolicy::new(retention).allow_below_floor())
        .unwrap()
        .collect(referenced)
        .unwrap()
}

/// Makes `path` look last written `age` ago.
fn age(path: &Path, age: Duration) {
    std::fs::File::open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

#[path = "objects/not_regular.rs"]
mod not_regular;
#[path = "objects/properties.rs"]
mod properties;

/// `len` seeded pseudo-random bytes (xorshift), so chunk boundaries see varied data.
fn fixture(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn files_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_in(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn put_file_streams_bytes_and_returns_verified_location() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path())
        .unwrap()
        .with_chunk_bytes(64 * 1024);
    let bytes = fixture(3 * 1024 * 1024 + 12_345, 7); // ~49 chunks, the last one partial
    let source = data.path().join("episode-42.mcap");
    std::fs::write(&source, &bytes).unwrap();

    let location = store.put_file(&source, None).unwrap();
    assert_eq!(location.size(), bytes.len() as u64);
    assert_eq!(location.sha256(), Sha256Digest::of(&bytes));
    assert_eq!(location.mime(), "application/x-mcap");
    // Content-addressed, inside the store, read-only.
    let published = store.path_of(&location.sha256());
    let hex = location.sha256().to_string();
    assert_eq!(
        location.uri(),
        format!("objects/sha256/{}/{}", &hex[..2], &hex[2..])
    );
    assert!(published.starts_with(store.root()));
    assert!(
        std::fs::metadata(&published)
            .unwrap()
            .permissions()
            .readonly()
    );
    // Read back, verified, byte for byte; nothing left in the upload area.
    assert_eq!(store.read_verified(&location).unwrap(), bytes);
    assert!(files_in(&store.root().join(".tmp")).is_empty());
    // The same bytes again: the same location, stored once.
    let again = store
        .put_file(&source, Some("application/octet-stream"))
        .unwrap();
    assert_eq!(again.uri(), location.uri());
    assert_eq!(files_in(&store.root().join("sha256")).len(), 1);
}

/// A reader that fails after `ok_bytes`, like a disk error or a vanished network mount.
struct FailingReader {
    data: Vec<u8>,
    at: usize,
    ok_bytes: usize,
}

impl Read for FailingReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at >= self.ok_bytes {
            return Err(std::io::Error::other("read failed half way"));
        }
        let n = buf
            .len()
            .min(self.ok_bytes - self.at)
            .min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[test]
fn an_upload_that_fails_half_way_publishes_nothing() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path())
        .unwrap()
        .with_chunk_bytes(4096);
    let reader = FailingReader {
        data: fixture(1 << 20, 3),
        at: 0,
        ok_bytes: 300_000,
    };
    let err = store
        .put_reader(reader, Path::new("x.bin"), None)
        .unwrap_err();
    assert!(matches!(err, ObjectError::Io { .. }), "{err}");
    assert!(files_in(&store.root().join("sha256")).is_empty());
    assert!(files_in(&store.root().join(".tmp")).is_empty());
}

fn tamper(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(path, perms).unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    edit(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_tampered_object_is_a_digest_error_on_read() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    let source = data.path().join("cloud.pcd");
    std::fs::write(&source, fixture(200_000, 11)).unwrap();
    let location = store.put_file(&source, None).unwrap();
    let path = store.path_of(&location.sha256());

    tamper(&path, |b| b[100_000] ^= 0x40);
    assert!(matches!(
        store.read_verified(&location),
        Err(ObjectError::DigestMismatch { .. })
    ));
    assert!(matches!(
        store.verify(&location),
        Err(ObjectError::DigestMismatch { .. })
    ));
    tamper(&path, |b| b.truncate(1_000));
    assert!(matches!(
        store.read_verified(&location),
        Err(ObjectError::SizeMismatch { .. })
    ));
}

#[test]
fn locations_outside_the_store_are_refused() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    let source = data.path().join("a.bin");
    std::fs::write(&source, b"hello").unwrap();
    let good = store.put_file(&source, None).unwrap();
    let digest = good.sha256();
    let escape = format!("file://{}/sha256/../../a.bin", store.root().display());
    for uri in [
        "file:///etc/passwd".to_string(),
        escape,
        format!("file://{}", source.display()),
        "file://relative/path".to_string(),
        "s3://bucket/object".to_string(),
        "objects/sha256/../../a.bin".to_string(),
        "a.bin".to_string(),
        ManagedObjectStore::relative_uri(&Sha256Digest::of(b"other")),
    ] {
        let location = DataLocation::new(uri.clone(), "x/y", 5, digest);
        assert!(
            matches!(
                store.read_verified(&location),
                Err(ObjectError::OutsideStore { .. })
            ),
            "{uri} was not refused"
        );
    }
    assert_eq!(store.read_verified(&good).unwrap(), b"hello");
}

#[test]
fn gc_deletes_orphans_only() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    let mut locations = Vec::new();
    for i in 0..3u64 {
        let source = data.path().join(format!("f{i}"));
        std::fs::write(&source, fixture(10_000 + i as usize, i + 1)).unwrap();
        locations.push(store.put_file(&source, None).unwrap());
    }
    // An abandoned upload, as a crash would leave it.
    std::fs::write(store.root().join(".tmp").join("dead.part"), b"partial").unwrap();
    let referenced: HashSet<Sha256Digest> = [locations[0].sha256()].into_iter().collect();

    // Within the retention window nothing goes, referenced or not.
    let report = gc(&store, &referenced, Duration::from_secs(3600));
    assert_eq!(
        (report.deleted, report.too_young, report.referenced),
        (0, 2, 1)
    );
    assert!(locations.iter().all(|l| store.verify(l).is_ok()));

    // With the window passed, only the orphans go.
    let report = gc(&store, &referenced, Duration::ZERO);
    assert_eq!((report.deleted, report.deleted_uploads), (2, 1));
    assert!(store.verify(&locations[0]).is_ok());
    assert!(store.verify(&locations[1]).is_err());
    assert!(store.verify(&locations[2]).is_err());
    assert!(files_in(&store.root().join(".tmp")).is_empty());
}

// ---- Regression tests of issue #12: nothing a committed row or an in-flight INSERT
// uses is ever deleted; damaged or foreign bytes are never served or kept.

fn old_orphan(
    store: &ManagedObjectStore,
    dir: &Path,
    bytes: &[u8],
) -> (std::path::PathBuf, DataLocation) {
    let source = dir.join("take.bin");
    std::fs::write(&source, bytes).unwrap();
    let location = store.put_file(&source, None).unwrap();
    age(
        &store.path_of(&location.sha256()),
        Duration::from_secs(48 * 3600),
    );
    (source, location)
}

#[test]
fn an_insert_deduplicating_onto_an_old_orphan_keeps_it_while_gc_runs() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    let (source, orphan) = old_orphan(&store, data.path(), &fixture(50_000, 5));
    // GC starts and reads the tables (no row references the bytes yet) ...
    let run = store
        .begin_gc(GcPolicy::new(Duration::from_secs(3600)))
        .unwrap();
    // ... while an INSERT uploads the same bytes and has not committed yet.
    let (location, pin) = store.put_file_pinned(&source, None).unwrap();
    assert_eq!(location.sha256(), orphan.sha256());
    let report = run.collect(&HashSet::new()).unwrap();
    assert_eq!((report.deleted, report.pinned), (0, 1));
    store.verify(&location).unwrap();
    drop(pin);
}

#[test]
fn an_insert_that_commits_while_gc_runs_keeps_its_deduplicated_object() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    let (source, _) = old_orphan(&store, data.path(), &fixture(50_000, 6));
    let run = store
        .begin_gc(GcPolicy::new(Duration::from_secs(3600)))
        .unwrap();
    // The INSERT uploads, commits and drops its pin before GC deletes; GC's table read
    // happened before the commit, so the reference set lacks it.
    let (location, pin) = store.put_file_pinned(&source, None).unwrap();
    drop(pin);
    let report = run.collect(&HashSet::new()).unwrap();
    assert_eq!((report.deleted, report.too_young), (0, 1));
    store.verify(&location).unwrap();
}

#[test]
fn a_pin_left_by_a_killed_insert_is_removed_and_no_longer_protects() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    let (_, orphan) = old_orphan(&store, data.path(), &fixture(1_000, 9));
    // What a process killed between upload and commit leaves: a pin file, unlocked.
    let pin = store
        .root()
        .join(".pins")
        .join(format!("{}.4242-0-0-0.pin", orphan.sha256()));
    std::fs::write(&pin, b"").unwrap();
    // A collection that began while the pin existed keeps the object ...
    let report = gc(&store, &HashSet::new(), Duration::from_secs(3600));
    assert_eq!((report.deleted, report.stale_pins), (0, 1));
    assert!(!pin.exists());
    // ... and the next one collects it.
    let report = gc(&store, &HashSet::new(), Duration::from_secs(3600));
    assert_eq!(report.deleted, 1);
}

#[test]
fn a_leftover_upload_file_does_not_block_later_uploads_and_gc_reclaims_it() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    // Files named as every earlier naming scheme would name this process's uploads.
    let tmp = store.root().join(".tmp");
    for seq in 0..4 {
        std::fs::write(tmp.join(format!("{}-{seq}.part", std::process::id())), b"x").unwrap();
    }
    let source = data.path().join("a.bin");
    std::fs::write(&source, b"after a crash").unwrap();
    store.put_file(&source, None).unwrap();
    let report = gc(&store, &HashSet::new(), Duration::ZERO);
    assert_eq!(report.deleted_uploads, 4);
    assert!(files_in(&tmp).is_empty());
}

#[test]
fn an_upload_in_progress_is_never_collected_whatever_the_retention() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    // An upload whose reader stalls: GC runs in the middle of it.
    struct Stalling<'a> {
        store: &'a ManagedObjectStore,
        calls: u32,
        report: Option<GcReport>,
    }
    impl Read for Stalling<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.calls += 1;
            match self.calls {
                1 => {
                    buf[..4].copy_from_slice(b"abcd");
                    Ok(4)
                }
                2 => {
                    self.report = Some(gc(self.store, &HashSet::new(), Duration::ZERO));
                    Ok(0)
                }
                _ => Ok(0),
            }
        }
    }
    let mut reader = Stalling {
        store: &store,
        calls: 0,
        report: None,
    };
    let location = store
        .put_reader(&mut reader, Path::new("x.bin"), None)
        .unwrap();
    assert_eq!(reader.report.unwrap().deleted_uploads, 0);
    assert_eq!(store.read_verified(&location).unwrap(), b"abcd");
}

#[test]
fn re_uploading_bytes_whose_stored_copy_is_corrupt_repairs_it() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    let bytes = fixture(100_000, 21);
    let source = data.path().join("scan.bin");
    std::fs::write(&source, &bytes).unwrap();
    let location = store.put_file(&source, None).unwrap();
    let stored = store.path_of(&location.sha256());
    tamper(&stored, |b| b[10] ^= 1); // same size, wrong bytes
    assert!(store.verify(&location).is_err());
    let again = store.put_file(&source, None).unwrap();
    assert_eq!(again.sha256(), location.sha256());
    assert_eq!(store.read_verified(&location).unwrap(), bytes);
    tamper(&stored, |b| b.truncate(7)); // wrong size
    store.put_file(&source, None).unwrap();
    assert_eq!(store.read_verified(&location).unwrap(), bytes);
}

#[test]
fn a_verified_open_of_a_tampered_object_fails_before_releasing_any_byte() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    let source = data.path().join("clip.mp4");
    std::fs::write(&source, fixture(300_000, 4)).unwrap();
    let location = store.put_file(&source, None).unwrap();
    tamper(&store.path_of(&location.sha256()), |b| b[299_000] ^= 0x80);
    assert!(matches!(
        store.open_verified(&location),
        Err(ObjectError::DigestMismatch { .. })
    ));
    // The streaming mode says what it is: unverified until the end, where it fails.
    let mut streaming = store.open_streaming(&location).unwrap();
    assert!(!streaming.verified_up_front());
    let mut first = [0u8; 16];
    streaming.read_exact(&mut first).unwrap();
    let err = std::io::copy(&mut streaming, &mut std::io::sink()).unwrap_err();
    assert!(matches!(
        oxidelake_objects::verification_error(err),
        ObjectError::DigestMismatch { .. }
    ));
}

#[test]
fn a_lake_moved_to_another_directory_still_opens_its_objects() {
    let old = tempfile::tempdir().unwrap();
    let lake = old.path().join("lake with spaces%20and[brackets]");
    let store = ManagedObjectStore::open(&lake).unwrap();
    let source = old.path().join("ep.mcap");
    std::fs::write(&source, b"episode").unwrap();
    let location = store.put_file(&source, None).unwrap();
    // An absolute location as earlier versions wrote it.
    let legacy = DataLocation::new(
        format!("file://{}", store.path_of(&location.sha256()).display()),
        location.mime(),
        location.size(),
        location.sha256(),
    );
    let url = store.file_url(&location).unwrap();
    assert!(url.starts_with("file:///") && url.contains("%20"), "{url}");

    let new = tempfile::tempdir().unwrap();
    let moved = new.path().join("moved");
    std::fs::rename(&lake, &moved).unwrap();
    let store = ManagedObjectStore::open(&moved).unwrap();
    assert_eq!(store.read_verified(&location).unwrap(), b"episode");
    assert_eq!(store.read_verified(&legacy).unwrap(), b"episode");
}

#[test]
fn a_forged_huge_size_is_an_error_without_reserving_memory() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    let source = data.path().join("a.bin");
    std::fs::write(&source, b"tiny").unwrap();
    let good = store.put_file(&source, None).unwrap();
    let forged = DataLocation::new(good.uri(), good.mime(), u64::MAX / 2, good.sha256());
    assert!(matches!(
        store.read_verified(&forged),
        Err(ObjectError::SizeMismatch { .. })
    ));
}

#[test]
fn gc_skips_an_object_that_disappears_during_its_scan() {
    let data = tempfile::tempdir().unwrap();
    let store = ManagedObjectStore::open(data.path()).unwrap();
    // A directory entry named like an object whose file is already gone (a dangling
    // link stands in for a file another collector removed after the listing).
    let digest = Sha256Digest::of(b"gone");
    let path = store.path_of(&digest);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(data.path().join("nowhere"), &path).unwrap();
    let report = gc(&store, &HashSet::new(), Duration::ZERO);
    assert_eq!(report.deleted, 0);
}
