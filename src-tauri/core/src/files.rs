//! The app's own files in folders other users may write to as well (a shared data dir, the folder
//! of an export or a backup), each rule in one place:
//! - **A file is written as a new file and moved into place when complete** ([`StagedFile`]): it
//!   is created exclusively (never an existing file, never through a link) in a private folder
//!   (0700, a new random name) made inside the destination's folder, then renamed over the
//!   destination. Nothing made beforehand (a `config.toml.tmp` link, a 0666 file another user owns)
//!   is opened, and a program that writes side files next to its file (SQLite's `-journal`,
//!   `-wal`) writes them in that private folder too.
//! - **A file holding a secret is 0600** ([`Access::Private`]): the config (it may hold the API key),
//!   the catalog (its `-wal`/`-shm` take the catalog's mode) and its backups, the logs.
//! - **The config is refused when another user owns it or others may change it**
//!   ([`exposure`]), as ssh does with its own: its `base_url` would receive the key.
//! - **The data dir is 0700**: created so ([`create_private_dir`]), and tightened at start when an
//!   older install left it looser ([`ensure_private_dir`]).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Who may read a new file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only its owner (0600): the file holds a secret.
    Private,
    /// As any new file the user makes (0666 less the umask): an export.
    Default,
}

impl Access {
    #[cfg(unix)]
    fn mode(self) -> u32 {
        match self {
            Self::Private => 0o600,
            Self::Default => 0o666,
        }
    }
}

/// A new file for `target`, written in a private folder beside it and renamed over `target` by
/// [`StagedFile::commit`]. Dropped without a commit, the file and its folder are removed and
/// `target` stays as it was.
#[derive(Debug)]
pub struct StagedFile {
    /// The private folder (0700, a new name) the file is written in; removed when dropped.
    dir: tempfile::TempDir,
    /// The new file, in `dir`, under `target`'s name.
    path: PathBuf,
    target: PathBuf,
}

impl StagedFile {
    /// Creates the new, empty file for `target` (whose folder must exist) and opens it for
    /// writing and reading.
    pub fn create(target: &Path, access: Access) -> io::Result<(Self, File)> {
        let Some(name) = target.file_name() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a file name", target.display()),
            ));
        };
        let prefix = format!(".{}.", name.to_string_lossy());
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".partial");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o700));
        }
        let dir = builder.tempdir_in(folder_of(target))?;
        let path = dir.path().join(name);
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(access.mode());
        }
        #[cfg(not(unix))]
        let _ = access;
        let file = options.open(&path)?;
        Ok((Self { dir, path, target: target.to_path_buf() }, file))
    }

    /// The new file (for a writer that opens it by name, such as SQLite).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Puts what was written on disk and renames the file over the target (a link at the
    /// target is replaced, not followed).
    pub fn commit(self) -> io::Result<()> {
        File::open(&self.path)?.sync_all()?;
        std::fs::rename(&self.path, &self.target)?;
        // The rename itself on disk: best effort (not every file system syncs a folder).
        if let Ok(folder) = File::open(folder_of(&self.target)) {
            let _ = folder.sync_all();
        }
        drop(self.dir);
        Ok(())
    }

    /// [`StagedFile::commit`] to another target on the same file system: for a name known only
    /// once the content is written (a photo received over HTTP is kept by its SHA-256).
    pub fn commit_to(mut self, target: &Path) -> io::Result<()> {
        self.target = target.to_path_buf();
        self.commit()
    }
}

/// The folder `path` is in (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Why a file that decides where a secret goes (the config) is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Another user owns it (and may write it).
    OwnedByAnother { owner: u32 },
    /// Its group or everyone may write it.
    WritableByOthers { mode: u32 },
}

impl Exposure {
    /// What to run to make `path` safe again.
    pub fn fix(self, path: &Path) -> String {
        let path = path.display();
        match self {
            Self::OwnedByAnother { .. } => {
                format!("check its content, then make it yours (`sudo chown $USER {path}` and `chmod 600 {path}`), or remove it")
            }
            Self::WritableByOthers { .. } => format!("run `chmod 600 {path}`"),
        }
    }
}

impl std::fmt::Display for Exposure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OwnedByAnother { owner } => write!(f, "belongs to another user (uid {owner})"),
            Self::WritableByOthers { mode } => write!(f, "can be changed by other users (mode {mode:04o})"),
        }
    }
}

/// Whether the file described by `meta` (read from the open file, so it is the file that is then
/// read) may be changed by someone other than this user and root. Always `None` off Unix.
pub fn exposure(meta: &std::fs::Metadata) -> Option<Exposure> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me && meta.uid() != 0 {
            return Some(Exposure::OwnedByAnother { owner: meta.uid() });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Some(Exposure::WritableByOthers { mode });
        }
        None
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Creates `dir` (and its missing parents) readable only by this user (0700); an existing folder
/// is left as it is.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// What [`ensure_private_dir`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrivateDir {
    /// It was missing and is now made, 0700.
    Created,
    /// It was already only this user's.
    AlreadyPrivate,
    /// Others could read or enter it (an older install); it is 0700 now. `was`: the mode before.
    Tightened { was: u32 },
}

/// The data dir at start: created 0700, or made 0700 when others may read or enter it.
pub fn ensure_private_dir(dir: &Path) -> io::Result<PrivateDir> {
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            create_private_dir(dir)?;
            return Ok(PrivateDir::Created);
        }
        Err(e) => return Err(e),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let was = meta.mode() & 0o7777;
        if was & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(was & !0o077))?;
            return Ok(PrivateDir::Tightened { was });
        }
    }
    let _ = meta;
    Ok(PrivateDir::AlreadyPrivate)
}

/// Makes `path` a file only this user may read (0600) before another program opens it by name
/// (SQLite, the log appender): created so when missing; when it exists, this user's and looser
/// (an older install), tightened. A file of another user is left as it is.
pub fn private_file(path: &Path) -> io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::{MetadataExt, PermissionsExt};
                let meta = std::fs::metadata(path)?;
                let mine = meta.uid() == rustix::process::geteuid().as_raw();
                if mine && meta.is_file() && meta.mode() & 0o077 != 0 {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(meta.mode() & 0o700))?;
                }
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_staged_file_appears_complete_and_private_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.txt");
        std::fs::write(&target, "old").unwrap();
        let (staged, mut file) = StagedFile::create(&target, Access::Private).unwrap();
        file.write_all(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old", "the target is untouched until the commit");
        assert_eq!(mode(staged.dir.path()), 0o700);
        drop(file);
        staged.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(mode(&target), 0o600);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("out.txt")]);
    }

    #[test]
    fn a_staged_file_dropped_without_commit_leaves_the_target_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.txt");
        std::fs::write(&target, "old").unwrap();
        let (staged, mut file) = StagedFile::create(&target, Access::Default).unwrap();
        file.write_all(b"half").unwrap();
        drop((staged, file));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn exposure_follows_ssh() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "").unwrap();
        let exposure_of = |m: u32| {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(m)).unwrap();
            exposure(&std::fs::metadata(&file).unwrap())
        };
        assert_eq!(exposure_of(0o600), None);
        assert_eq!(exposure_of(0o644), None, "readable is not writable");
        assert_eq!(exposure_of(0o620), Some(Exposure::WritableByOthers { mode: 0o620 }));
        assert_eq!(exposure_of(0o602), Some(Exposure::WritableByOthers { mode: 0o602 }));
        std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        assert_eq!(exposure_of(0o600), Some(Exposure::OwnedByAnother { owner: 65534 }));
    }

    #[test]
    fn the_data_dir_is_made_private_or_tightened() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/data");
        assert_eq!(ensure_private_dir(&dir).unwrap(), PrivateDir::Created);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(ensure_private_dir(&dir).unwrap(), PrivateDir::AlreadyPrivate);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(ensure_private_dir(&dir).unwrap(), PrivateDir::Tightened { was: 0o755 });
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn the_catalog_its_wal_and_its_folder_are_the_users_only() {
        let root = tempfile::tempdir().unwrap();
        let path = crate::catalog::Catalog::path_in(&root.path().join("data"));
        let catalog = crate::catalog::Catalog::open(&path).unwrap();
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        for suffix in ["", "-wal", "-shm"] {
            let file = PathBuf::from(format!("{}{suffix}", path.display()));
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
        drop(catalog);
    }

    #[test]
    fn a_private_file_is_created_0600_and_an_own_loose_one_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.log");
        private_file(&new).unwrap();
        assert_eq!(mode(&new), 0o600);
        let loose = dir.path().join("old.log");
        std::fs::write(&loose, "kept").unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
        private_file(&loose).unwrap();
        assert_eq!(mode(&loose), 0o600);
        assert_eq!(std::fs::read_to_string(&loose).unwrap(), "kept");
        let theirs = dir.path().join("theirs.log");
        std::fs::write(&theirs, "").unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
        private_file(&theirs).unwrap();
        assert_eq!(mode(&theirs), 0o644, "another user's file is not ours to change");
    }
}
