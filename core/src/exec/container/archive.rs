//! The file tools on a remote engine, through the engine API's archive endpoints: a path's
//! stat (`HEAD …/archive`), a file downloaded as a tar archive and uploaded as one. The
//! engine and what it sends are not trusted: every path is checked component by component
//! beneath the workspace and refused at a symbolic link (the engine would follow one
//! anywhere in the container), a download is read up to [`MAX_READ_BYTES`] and a little
//! more for the tar headers, and the archive must hold one regular file of the name asked
//! for, nothing else (no `..`, no links).

use super::super::{Error, MAX_READ_BYTES};
use super::engine::Engine;
use bollard::query_parameters::{
    ContainerArchiveInfoOptionsBuilder, DownloadFromContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures::StreamExt;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Go's `os.FileMode` type bits the engine reports: directory, symlink, named pipe, socket,
/// device, char device, irregular.
const MODE_DIR: u32 = 1 << 31;
const MODE_SYMLINK: u32 = 1 << 27;
const MODE_TYPE: u32 =
    MODE_DIR | MODE_SYMLINK | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19);
/// Room for the tar headers (and a long name's extension record) around a file's bytes.
const TAR_SLACK: u64 = 64 * 1024;

/// What the engine says a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Missing,
    Regular { size: u64, mode: u32 },
    Directory,
    Link,
    Other,
}

/// The file tools' operations on one container.
pub(super) struct Files<'a> {
    pub(super) engine: &'a Engine,
    pub(super) container: &'a str,
    /// The workspace, a path on the engine's machine.
    pub(super) root: &'a Path,
    /// The container's user as `UID[:GID]` or a name the image knows.
    pub(super) user: &'a str,
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
                        mode: mode & 0o7777,
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

    /// The whole of regular file `path` (resolved), at most [`MAX_READ_BYTES`].
    pub(super) async fn read(
        &self,
        shown: &Path,
        path: &Path,
        kind: Kind,
    ) -> Result<Vec<u8>, Error> {
        match kind {
            Kind::Regular { size, .. } if size > MAX_READ_BYTES => {
                return Err(too_big(shown, size));
            }
            Kind::Regular { .. } => {}
            Kind::Missing => return Err(Error::NotFound(shown.to_owned())),
            _ => return Err(not_regular(shown)),
        }
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(&path.display().to_string())
            .build();
        let mut stream = self
            .engine
            .docker()
            .download_from_container(self.container, Some(options));
        let mut tar = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.failed(path, &e))?;
            tar.extend_from_slice(&chunk);
            if tar.len() as u64 > MAX_READ_BYTES + TAR_SLACK {
                return Err(too_big(shown, tar.len() as u64));
            }
        }
        let name = path.file_name().unwrap_or_default().to_owned();
        let shown = shown.to_owned();
        super::super::local::blocking(move |_| single_file(&tar, Path::new(&name), &shown)).await
    }

    /// Writes `content` to `rest` below directory `dir` (as [`resolve_for_write`] found
    /// them, `kind` what `rest` was), making the directories on its way and keeping an
    /// existing file's mode; all of it is the container user's, as a command's would be.
    ///
    /// [`resolve_for_write`]: Self::resolve_for_write
    pub(super) async fn write(
        &self,
        shown: &Path,
        dir: &Path,
        rest: &Path,
        kind: Kind,
        content: &[u8],
    ) -> Result<(), Error> {
        let mode = match kind {
            Kind::Regular { mode, .. } => mode,
            Kind::Missing => 0o644,
            _ => return Err(not_regular(shown)),
        };
        let numeric = numeric_owner(self.user);
        let mut builder = tar::Builder::new(Vec::with_capacity(content.len() + 4096));
        let mut made = PathBuf::new();
        for part in rest.parent().into_iter().flat_map(Path::components) {
            made.push(part);
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            if let Some((uid, gid)) = numeric {
                header.set_uid(uid);
                header.set_gid(gid);
            }
            builder
                .append_data(&mut header, &made, std::io::empty())
                .map_err(|e| Error::io(shown, e))?;
        }
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(mode);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mtime(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        );
        // A numeric user owns the file through the archive's header; a name only the image
        // can resolve (`copyUIDGID`, which needs it in the image's passwd).
        if let Some((uid, gid)) = numeric {
            header.set_uid(uid);
            header.set_gid(gid);
        }
        builder
            .append_data(&mut header, rest, content)
            .and_then(|()| builder.finish())
            .map_err(|e| Error::io(shown, e))?;
        let tar = builder.into_inner().map_err(|e| Error::io(shown, e))?;
        let options = UploadToContainerOptionsBuilder::default()
            .path(&dir.display().to_string())
            .no_overwrite_dir_non_dir("1")
            .copy_uidgid(if numeric.is_some() { "0" } else { "1" })
            .build();
        self.engine
            .docker()
            .upload_to_container(
                self.container,
                Some(options),
                bollard::body_full(tar.into()),
            )
            .await
            .map_err(|e| self.failed(&dir.join(rest), &e))
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

/// `UID[:GID]` as numbers (the GID the UID's when absent); `None` for a name.
fn numeric_owner(user: &str) -> Option<(u64, u64)> {
    let (uid, gid) = user.split_once(':').unwrap_or((user, user));
    Some((uid.parse().ok()?, gid.parse().ok()?))
}

fn link(shown: &Path, path: &Path) -> Error {
    Error::NotAllowed(format!(
        "{}: {} is a symbolic link; on a remote engine the file tools follow none (use the \
         shell)",
        shown.display(),
        path.display()
    ))
}

fn too_big(shown: &Path, len: u64) -> Error {
    Error::NotAllowed(format!(
        "{} is {len} bytes; file tools read files of at most {} MiB (use the shell, e.g. \
         head, tail or grep, for part of a bigger one)",
        shown.display(),
        MAX_READ_BYTES / (1024 * 1024)
    ))
}

fn not_regular(shown: &Path) -> Error {
    Error::NotAllowed(format!(
        "{} is not a regular file; file tools read and write regular files only",
        shown.display()
    ))
}

/// The content of the one entry of `tar`, which must be a regular file named `name` of at
/// most [`MAX_READ_BYTES`]; anything else in the archive is the engine's lie.
fn single_file(tar: &[u8], name: &Path, shown: &Path) -> Result<Vec<u8>, Error> {
    let hostile = |why: &str| {
        Error::Unavailable(format!(
            "{}: the container engine sent an unexpected archive ({why})",
            shown.display()
        ))
    };
    let mut archive = tar::Archive::new(tar);
    let mut entries = archive.entries().map_err(|e| hostile(&e.to_string()))?;
    let mut entry = match entries.next() {
        Some(Ok(entry)) => entry,
        Some(Err(e)) => return Err(hostile(&e.to_string())),
        None => return Err(hostile("no entry")),
    };
    let path = entry
        .path()
        .map_err(|e| hostile(&e.to_string()))?
        .into_owned();
    if path != name {
        return Err(hostile(&format!("an entry named {}", path.display())));
    }
    if entry.header().entry_type() != tar::EntryType::Regular {
        return Err(not_regular(shown));
    }
    let size = entry.size();
    if size > MAX_READ_BYTES {
        return Err(too_big(shown, size));
    }
    let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    entry
        .by_ref()
        .take(MAX_READ_BYTES)
        .read_to_end(&mut content)
        .map_err(|e| hostile(&e.to_string()))?;
    drop(entry);
    if let Some(next) = entries.next() {
        let what = next
            .ok()
            .and_then(|e| e.path().ok().map(|p| p.display().to_string()))
            .unwrap_or_default();
        return Err(hostile(&format!("a second entry {what}")));
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(entries: &[(&str, tar::EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, data, link) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            // Written raw, so a hostile name (`..`) is kept as the engine would send it.
            let bytes = name.as_bytes();
            header.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            if let Some(link) = link {
                header.set_link_name(link).unwrap();
            }
            header.set_cksum();
            builder.append(&header, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn one_regular_file_of_the_name_asked_for_is_read() {
        let tar = archive(&[("a.txt", tar::EntryType::Regular, b"hello", None)]);
        let shown = Path::new("/w/a.txt");
        assert_eq!(
            single_file(&tar, Path::new("a.txt"), shown).unwrap(),
            b"hello"
        );
    }

    #[test]
    fn a_hostile_archive_is_refused() {
        let shown = Path::new("/w/a.txt");
        let name = Path::new("a.txt");
        for tar in [
            archive(&[("../a.txt", tar::EntryType::Regular, b"x", None)]),
            archive(&[("other", tar::EntryType::Regular, b"x", None)]),
            archive(&[("a.txt", tar::EntryType::Symlink, b"", Some("/etc/shadow"))]),
            archive(&[("a.txt", tar::EntryType::Link, b"", Some("../b"))]),
            archive(&[
                ("a.txt", tar::EntryType::Regular, b"x", None),
                ("../../etc/cron.d/x", tar::EntryType::Regular, b"y", None),
            ]),
            archive(&[]),
            b"garbage that is no tar archive at all".repeat(20),
        ] {
            assert!(single_file(&tar, name, shown).is_err());
        }
    }

    #[test]
    fn a_huge_entry_is_refused_before_it_is_read() {
        let mut header = tar::Header::new_gnu();
        header.set_path("a.txt").unwrap();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(u64::MAX / 2);
        header.set_cksum();
        // The header claims exabytes; the archive holds a few bytes.
        let mut tar = header.as_bytes().to_vec();
        tar.extend_from_slice(&[b'x'; 512]);
        let e = single_file(&tar, Path::new("a.txt"), Path::new("/w/a.txt")).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
    }
}
