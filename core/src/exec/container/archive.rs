//! Where a remote engine's file tools may go: each path's stat through the engine API's
//! archive endpoint (`HEAD …/archive`), checked component by component beneath the
//! workspace and refused at a symbolic link. The engine is not trusted to do more: its
//! archive downloads and uploads run as root and follow a link swapped in after the check,
//! so the reads and writes themselves are the container user's (`remote_files.rs`).

use super::super::{Error, MAX_READ_BYTES};
use super::engine::Engine;
use bollard::query_parameters::ContainerArchiveInfoOptionsBuilder;
use std::path::{Component, Path, PathBuf};

/// Go's `os.FileMode` type bits the engine reports: directory, symlink, named pipe, socket,
/// device, char device, irregular.
const MODE_DIR: u32 = 1 << 31;
const MODE_SYMLINK: u32 = 1 << 27;
const MODE_TYPE: u32 =
    MODE_DIR | MODE_SYMLINK | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19);

/// What the engine says a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Missing,
    Regular { size: u64 },
    Directory,
    Link,
    Other,
}

/// The paths of one container's workspace.
pub(super) struct Files<'a> {
    pub(super) engine: &'a Engine,
    pub(super) container: &'a str,
    /// The workspace, a path on the engine's machine.
    pub(super) root: &'a Path,
}

impl Files<'_> {
    /// What `path` is, its last component not followed.
    pub(super) async fn kind(&self, path: &Path) -> Result<Kind, Error> {
        let options = ContainerArchiveInfoOptionsBuilder::default()
            .path(&path.display().to_string())
            .build();
        match self
            .engine
            .docker()
            .get_container_archive_info(self.container, Some(options))
            .await
        {
            Ok(stat) => {
                let mode = stat.file_mode;
                // Docker names a link's target in `linkTarget`, and nothing for other files;
                // Podman names the path it resolved for every file (a file's own path when
                // no link was on the way), so only a target other than the path is a link.
                let elsewhere =
                    !stat.link_target.is_empty() && Path::new(&stat.link_target) != path;
                Ok(if mode & MODE_SYMLINK != 0 || elsewhere {
                    Kind::Link
                } else if mode & MODE_DIR != 0 {
                    Kind::Directory
                } else if mode & MODE_TYPE == 0 {
                    Kind::Regular {
                        size: u64::try_from(stat.size).unwrap_or(u64::MAX),
                    }
                } else {
                    Kind::Other
                })
            }
            Err(e) if super::engine::status(&e) == Some(404) => Ok(Kind::Missing),
            Err(e) => Err(self.failed(path, &e)),
        }
    }

    /// `rel` (beneath the workspace, `..`-free) as a path, each directory above it checked:
    /// a symbolic link among them is refused, as one the engine would follow out of the
    /// workspace. Returns the path and what its last component is.
    pub(super) async fn resolve(&self, shown: &Path, rel: &Path) -> Result<(PathBuf, Kind), Error> {
        let mut path = self.root.to_owned();
        let mut kind = Kind::Directory;
        for part in rel.components() {
            let Component::Normal(name) = part else {
                return Err(self.outside(shown));
            };
            match kind {
                Kind::Directory => {}
                Kind::Missing => return Err(Error::NotFound(shown.to_owned())),
                _ => return Err(Error::NotFound(shown.to_owned())),
            }
            path.push(name);
            kind = self.kind(&path).await?;
            if kind == Kind::Link {
                return Err(link(shown, &path));
            }
        }
        Ok((path, kind))
    }

    /// `rel` as a write takes it, checked as [`resolve`](Self::resolve) checks: the deepest
    /// directory on its way that exists, what lies below it (to be made), and what that is
    /// (missing when a directory on the way is).
    pub(super) async fn resolve_for_write(
        &self,
        shown: &Path,
        rel: &Path,
    ) -> Result<(PathBuf, PathBuf, Kind), Error> {
        let parts = rel
            .components()
            .map(|part| match part {
                Component::Normal(name) => Ok(name),
                _ => Err(self.outside(shown)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let Some((name, parents)) = parts.split_last() else {
            return Err(not_regular(shown));
        };
        let mut dir = self.root.to_owned();
        for (i, part) in parents.iter().enumerate() {
            let next = dir.join(part);
            match self.kind(&next).await? {
                Kind::Directory => dir = next,
                Kind::Missing => return Ok((dir, parts[i..].iter().collect(), Kind::Missing)),
                Kind::Link => return Err(link(shown, &next)),
                _ => return Err(Error::NotFound(shown.to_owned())),
            }
        }
        let path = dir.join(name);
        match self.kind(&path).await? {
            Kind::Link => Err(link(shown, &path)),
            kind => Ok((dir, PathBuf::from(name), kind)),
        }
    }

    fn outside(&self, shown: &Path) -> Error {
        Error::NotAllowed(format!(
            "{}: the file tools reach the workspace ({}) only",
            shown.display(),
            self.root.display()
        ))
    }

    fn failed(&self, path: &Path, e: &bollard::errors::Error) -> Error {
        match super::engine::status(e) {
            Some(403) => Error::PermissionDenied(path.to_owned()),
            _ => Error::Unavailable(format!(
                "{}: the container engine at {} failed: {e}",
                path.display(),
                self.engine.address()
            )),
        }
    }
}

pub(super) fn link(shown: &Path, path: &Path) -> Error {
    Error::NotAllowed(format!(
        "{}: {} is a symbolic link; on a remote engine the file tools follow none (use the \
         shell)",
        shown.display(),
        path.display()
    ))
}

/// Whether a file of `kind` can be read: a regular file no bigger than a file tool reads.
pub(super) fn readable(shown: &Path, kind: Kind) -> Result<(), Error> {
    match kind {
        Kind::Regular { size, .. } if size > MAX_READ_BYTES => Err(too_big(shown, size)),
        Kind::Regular { .. } => Ok(()),
        Kind::Missing => Err(Error::NotFound(shown.to_owned())),
        _ => Err(not_regular(shown)),
    }
}

/// Whether a file of `kind` can be written: a regular file, or none yet.
pub(super) fn writable(shown: &Path, kind: Kind) -> Result<(), Error> {
    match kind {
        Kind::Regular { .. } | Kind::Missing => Ok(()),
        _ => Err(not_regular(shown)),
    }
}

fn too_big(shown: &Path, len: u64) -> Error {
    Error::NotAllowed(format!(
        "{} is {len} bytes; file tools read files of at most {} MiB (use the shell, e.g. \
         head, tail or grep, for part of a bigger one)",
        shown.display(),
        MAX_READ_BYTES / (1024 * 1024)
    ))
}

pub(super) fn not_regular(shown: &Path) -> Error {
    Error::NotAllowed(format!(
        "{} is not a regular file; file tools read and write regular files only",
        shown.display()
    ))
}
