//! The managed object store end to end: streaming uploads, verified reads, refusal of
//! foreign locations, tamper detection and garbage collection.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use oxidelake_objects::{DataLocation, ManagedObjectStore, ObjectError, Sha256Digest};

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
    assert_eq!(location.uri(), format!("file://{}", published.display()));
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
    let report = store.gc(&referenced, Duration::from_secs(3600)).unwrap();
    assert_eq!(
        (report.deleted, report.too_young, report.referenced),
        (0, 2, 1)
    );
    assert!(locations.iter().all(|l| store.verify(l).is_ok()));

    // With the window passed, only the orphans go.
    let report = store.gc(&referenced, Duration::ZERO).unwrap();
    assert_eq!((report.deleted, report.deleted_uploads), (2, 1));
    assert!(store.verify(&locations[0]).is_ok());
    assert!(store.verify(&locations[1]).is_err());
    assert!(store.verify(&locations[2]).is_err());
    assert!(files_in(&store.root().join(".tmp")).is_empty());
}
