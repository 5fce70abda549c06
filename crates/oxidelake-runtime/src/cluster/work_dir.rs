//! The worker's shuffle directory. Shuffle files hold the rows of every query the
//! worker ran, so the directory is private to the worker's user (0700).
//!
//! Without `--work-dir` Ballista 55 created a temporary directory, deleted it at once
//! and then wrote to that predictable path, re-created with default permissions. Here
//! the temporary directory is created private, held for the worker's life and removed
//! when the worker shuts down (SIGTERM or Ctrl-C; a killed worker leaves it behind). A
//! directory named with `--work-dir` is created private when missing, refused when
//! other users can reach into it, and kept at shutdown (it is the user's).

use std::path::{Path, PathBuf};

use oxidelake_core::EngineError;

/// The worker's shuffle directory, for as long as the worker runs.
#[derive(Debug)]
pub enum WorkDir {
    /// Created under the system's temporary directory; removed on drop.
    Temporary(tempfile::TempDir),
    /// The directory `--work-dir` named; kept.
    Given(PathBuf),
}

impl WorkDir {
    /// A private temporary directory, or `given` after checking it is private.
    pub fn create(given: Option<&Path>) -> Result<Self, EngineError> {
        let Some(dir) = given else {
            let temp = tempfile::Builder::new()
                .prefix("oxide-worker-")
                .tempdir()
                .map_err(|e| EngineError::io("temporary work directory", e))?;
            make_private(temp.path())?;
            return Ok(Self::Temporary(temp));
        };
        if !dir.exists() {
            create_private(dir)?;
        }
        refuse_shared(dir)?;
        Ok(Self::Given(dir.to_path_buf()))
    }

    /// Where the shuffle files go.
    pub fn path(&self) -> &Path {
        match self {
            Self::Temporary(temp) => temp.path(),
            Self::Given(dir) => dir,
        }
    }
}

/// Creates `dir` (and missing parents) with mode 0700 from the start, so there is no
/// moment at which the umask's mode lets others in.
#[cfg(unix)]
fn create_private(dir: &Path) -> Result<(), EngineError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| EngineError::io(dir.display().to_string(), e))
}

#[cfg(not(unix))]
fn create_private(dir: &Path) -> Result<(), EngineError> {
    std::fs::create_dir_all(dir).map_err(|e| EngineError::io(dir.display().to_string(), e))
}

#[cfg(unix)]
fn make_private(dir: &Path) -> Result<(), EngineError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| EngineError::io(dir.display().to_string(), e))
}

#[cfg(not(unix))]
fn make_private(_dir: &Path) -> Result<(), EngineError> {
    Ok(())
}

#[cfg(unix)]
fn refuse_shared(dir: &Path) -> Result<(), EngineError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir)
        .map_err(|e| EngineError::io(dir.display().to_string(), e))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(EngineError::InvalidArgument {
            what: "--work-dir",
            detail: format!(
                "{} is open to other users (mode {:o}) and would hold every query's \
                 shuffle rows; `chmod 700` it or name another directory",
                dir.display(),
                mode & 0o777
            ),
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn refuse_shared(_dir: &Path) -> Result<(), EngineError> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_default_directory_is_private_and_removed_when_dropped() {
        let dir = WorkDir::create(None).unwrap();
        let path = dir.path().to_path_buf();
        assert_eq!(mode(&path), 0o700);
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn a_missing_given_directory_is_created_private_and_kept() {
        let parent = tempfile::tempdir().unwrap();
        let given = parent.path().join("shuffle");
        let dir = WorkDir::create(Some(&given)).unwrap();
        assert_eq!(mode(&given), 0o700);
        drop(dir);
        assert!(given.exists());
    }

    #[test]
    fn a_given_directory_other_users_can_enter_is_refused() {
        let parent = tempfile::tempdir().unwrap();
        let given = parent.path().join("shared");
        std::fs::create_dir(&given).unwrap();
        std::fs::set_permissions(&given, std::fs::Permissions::from_mode(0o755)).unwrap();
        let error = WorkDir::create(Some(&given)).unwrap_err().to_string();
        assert!(
            error.contains("mode 755") && error.contains("chmod 700"),
            "{error}"
        );
    }
}
