//! Something other than a regular file at an object's address (issue 44): a FIFO made
//! `objects verify`, `objects cat` and an upload of the same bytes wait forever (the
//! upload holding the store's shared lock, so garbage collection waited too), and a
//! directory failed without its path. Each is refused at once, naming the path.

use std::collections::HashSet;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use oxidelake_objects::{DataLocation, GcPolicy, ManagedObjectStore, ObjectError};

/// `op`'s result; a failure when it has not returned within 30 s (it blocked, and its
/// thread is left behind).
fn returns<T: Send + 'static>(what: &str, op: impl FnOnce() -> T + Send + 'static) -> T {
    let (sent, received) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sent.send(op());
    });
    received
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what} blocked"))
}

fn assert_refused_naming(err: ObjectError, path: &Path, kind: &str) {
    let text = err.to_string();
    assert!(
        matches!(err, ObjectError::NotRegularFile { .. })
            && text.contains(&path.display().to_string())
            && text.contains(kind),
        "{text}"
    );
}

/// A store holding one object, whose stored file is then removed: (store, its location,
/// the source file of its bytes, the object's path).
fn store_with_object_removed(
    data: &Path,
) -> (
    ManagedObjectStore,
    DataLocation,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let store = ManagedObjectStore::open(data).unwrap();
    let source = data.join("a.bin");
    std::fs::write(&source, b"some bytes").unwrap();
    let location = store.put_file(&source, None).unwrap();
    let stored = store.path_of(&location.sha256());
    std::fs::remove_file(&stored).unwrap();
    (store, location, source, stored)
}

#[test]
fn a_fifo_at_an_objects_address_is_refused_naming_it_by_reads_and_uploads_and_gc_still_runs() {
    let data = tempfile::tempdir().unwrap();
    let (store, location, source, stored) = store_with_object_removed(data.path());
    let made = std::process::Command::new("mkfifo")
        .arg(&stored)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", stored.display());

    let (s, l) = (store.clone(), location.clone());
    assert_refused_naming(
        returns("verify", move || s.verify(&l)).unwrap_err(),
        &stored,
        "FIFO",
    );
    let (s, l) = (store.clone(), location.clone());
    let read = returns("a verified read", move || s.read_verified(&l)).unwrap_err();
    assert_refused_naming(read, &stored, "FIFO");
    let (s, l) = (store.clone(), location.clone());
    let opened = returns("a streaming open", move || s.open_streaming(&l)).unwrap_err();
    assert_refused_naming(opened, &stored, "FIFO");
    let (s, file) = (store.clone(), source.clone());
    let upload = returns("an upload of the same bytes", move || {
        s.put_file(&file, None)
    });
    assert_refused_naming(upload.unwrap_err(), &stored, "FIFO");

    // The refused upload released the shared lock: a collection takes it exclusively.
    let s = store.clone();
    let referenced: HashSet<_> = [location.sha256()].into_iter().collect();
    let report = returns("gc", move || {
        s.begin_gc(GcPolicy::new(Duration::ZERO).allow_below_floor())
            .and_then(|run| run.collect(&referenced))
    });
    assert_eq!(report.unwrap().referenced, 1);
}

#[test]
fn a_directory_at_an_objects_address_is_refused_naming_it() {
    let data = tempfile::tempdir().unwrap();
    let (store, location, source, stored) = store_with_object_removed(data.path());
    std::fs::create_dir(&stored).unwrap();
    assert_refused_naming(store.verify(&location).unwrap_err(), &stored, "directory");
    assert_refused_naming(
        store.put_file(&source, None).unwrap_err(),
        &stored,
        "directory",
    );
}
