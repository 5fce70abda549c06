//! Opening the store's files for reading: regular files only.
//!
//! Something else at an object's address — a FIFO, a directory, a socket, a device,
//! put there by mistake or on purpose — must not be read. Opening a FIFO for reading
//! waits for a writer forever: `objects verify` and `objects cat` hung, and so did an
//! upload of the same bytes, while holding the store's shared lock, so every garbage
//! collection waited behind it. A directory opens, and then fails to read with an error
//! that names no path.
//!
//! So a file is opened without blocking (`O_NONBLOCK`: opening a FIFO returns at once)
//! and its type is read from the open descriptor (`fstat`), which leaves no window for
//! the file to be swapped between the check and the open; anything but a regular file
//! is refused with its path ([`ObjectError::NotRegularFile`]). `O_NONBLOCK` changes
//! nothing for a regular file's reads, so the descriptor is used as it is.

use std::fs::{File, FileType, Metadata, OpenOptions};
use std::path::Path;

use crate::ObjectError;
use crate::error::io;

/// Opens `path` for reading, with its metadata, if it is a regular file. Failures to
/// open or stat it are [`ObjectError::Io`] on `uri` (so `NotFound` stays recognisable);
/// anything else there is [`ObjectError::NotRegularFile`], naming `path`.
pub(crate) fn open_regular(path: &Path, uri: &str) -> Result<(File, Metadata), ObjectError> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(io(uri))?;
    let metadata = file.metadata().map_err(io(uri))?;
    if !metadata.is_file() {
        return Err(ObjectError::NotRegularFile {
            path: path.display().to_string(),
            kind: kind_of(metadata.file_type()),
        });
    }
    Ok((file, metadata))
}

/// What a file that is not a regular file is, in a word for messages.
fn kind_of(file_type: FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "FIFO";
        }
        if file_type.is_socket() {
            return "socket";
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return "device";
        }
    }
    if file_type.is_dir() {
        "directory"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_opens_and_a_directory_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"bytes").unwrap();
        let (_, metadata) = open_regular(&file, "f").unwrap();
        assert_eq!(metadata.len(), 5);

        let err = open_regular(dir.path(), "d").unwrap_err();
        assert!(
            matches!(
                err,
                ObjectError::NotRegularFile {
                    kind: "directory",
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains(&dir.path().display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn a_missing_file_is_an_io_error_that_says_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = open_regular(&dir.path().join("gone"), "gone").unwrap_err();
        assert!(
            matches!(&err, ObjectError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
            "{err}"
        );
    }
}
