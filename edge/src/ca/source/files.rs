//! Small file operations the sources share: reading a PEM file with its path in the
//! error, and writing a file atomically with the permissions a key needs.

use super::SourceError;
use std::io::Write;
use std::path::{Path, PathBuf};

pub(super) fn read(path: &Path) -> Result<String, SourceError> {
    std::fs::read_to_string(path).map_err(|source| SourceError::Io {
        path: path.to_path_buf(),
        source,
    })
}

pub(super) fn read_optional(path: &Path) -> Result<Option<String>, SourceError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SourceError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `contents` to a new temporary file beside `path` (mode 0600: it may be a key),
/// returning its path; the caller links or renames it into place.
pub(super) fn write_temp(path: &Path, contents: &str) -> Result<PathBuf, SourceError> {
    let io = |source| SourceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(&tmp).map_err(io)?;
    f.write_all(contents.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    Ok(tmp)
}

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SourceError + '_ {
    move |source| SourceError::Io {
        path: path.to_path_buf(),
        source,
    }
}
