//! This desktop's own mark on what it queued in a team catalog.
//!
//! A team catalog is written by everyone with the team's credentials, so a row of its queue says
//! nothing a desktop may act on by itself: anyone could add an item whose path names a private
//! file on a colleague's computer, and that computer would read it, send it to Gemini and store
//! its prepared copy where everyone can read it back. A desktop therefore opens a path only when
//! the row carries its own tag for that path: an HMAC-SHA-256, under a secret that never leaves
//! this computer (`desktop.key` in the data dir, 0600), of the path's exact bytes and the SHA-256
//! the file had when it was queued. Whoever can write to the database cannot make one without the
//! key; a tag copied from one row to another names the same file with the same content, which the
//! desktop had queued anyway (and the content is checked against the hash when it is read).
//!
//! Work another desktop takes over travels as bytes (the prepared photo in `photo_images`),
//! never as a path: see `import::item::prepare_photos`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use ring::hmac;

use crate::stored_path::StoredPath;

/// The file in the data dir that holds the key.
pub const KEY_FILE: &str = "desktop.key";

const KEY_LEN: usize = 32;

/// The secret this desktop tags the paths it queues with (see the module's docs), and its public
/// id: a tag is `<id>.<hmac>`, so a desktop tells its own rows from another desktop's (which it
/// leaves to that desktop) and from rows nobody's key made (which it refuses).
pub struct DesktopKey {
    key: hmac::Key,
    id: String,
}

impl std::fmt::Debug for DesktopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DesktopKey(••••)")
    }
}

impl DesktopKey {
    /// A key from `secret` (tests that play several desktops, or one restarted, give each its
    /// own).
    pub fn from_secret(secret: &[u8]) -> Self {
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let id = hex::encode(&hmac::sign(&key, b"pe-desktop-id").as_ref()[..8]);
        Self { key, id }
    }

    /// The key's public id: what its tags start with.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A key for this process only: what a connection uses unless given the data dir's
    /// ([`Self::load_or_create`]); its rows are then trusted by this process alone.
    pub fn random() -> Self {
        let mut secret = [0u8; KEY_LEN];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
            .expect("the operating system's random source");
        Self::from_secret(&secret)
    }

    /// The data dir's key (`desktop.key`), made on first use: 32 random bytes in a file created
    /// exclusively with mode 0600. A file of another size is an error, not replaced: the items
    /// this desktop queued with it would be refused.
    pub fn load_or_create(data_dir: &Path) -> Result<Self, KeyError> {
        let path = data_dir.join(KEY_FILE);
        let failed = |source: std::io::Error| KeyError { path: path.clone(), source };
        match std::fs::File::open(&path) {
            Ok(file) => {
                let mut secret = Vec::with_capacity(KEY_LEN);
                file.take(KEY_LEN as u64 + 1).read_to_end(&mut secret).map_err(failed)?;
                if secret.len() != KEY_LEN {
                    return Err(failed(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("holds {} bytes, not {KEY_LEN}", secret.len()),
                    )));
                }
                Ok(Self::from_secret(&secret))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(data_dir).map_err(failed)?;
                let mut secret = [0u8; KEY_LEN];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
                    .map_err(|_| failed(std::io::Error::other("no random source")))?;
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                match options.open(&path) {
                    Ok(mut file) => {
                        file.write_all(&secret).and_then(|()| file.sync_all()).map_err(failed)?;
                        Ok(Self::from_secret(&secret))
                    }
                    // Another process of this desktop made it meanwhile: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Self::load_or_create(data_dir),
                    Err(e) => Err(failed(e)),
                }
            }
            Err(e) => Err(failed(e)),
        }
    }

    /// The tag of a queued photo: its path's exact bytes and the hash it had (hex).
    pub(crate) fn tag(&self, path: &StoredPath, sha256: Option<&str>) -> String {
        format!("{}.{}", self.id, hex::encode(hmac::sign(&self.key, &message(path, sha256)).as_ref()))
    }

    /// Whose a row's tag says it is: this desktop's (and the tag holds for that path and hash,
    /// compared in constant time), another desktop's, or nobody's (none, or a forgery of ours).
    ///
    /// A row may carry several tags, space-separated: each desktop that listed the same file
    /// with the same bytes adds its own ([`crate::import`]'s enqueue), so any of them may open it.
    pub(crate) fn judge(&self, path: &StoredPath, sha256: Option<&str>, tags: Option<&str>) -> Tagged {
        let mut whose = Tagged::Nobodys;
        for (id, mac) in tags.unwrap_or("").split(' ').filter_map(|t| t.split_once('.')) {
            if id == self.id {
                return match hex::decode(mac) {
                    Ok(mac) if hmac::verify(&self.key, &message(path, sha256), &mac).is_ok() => Tagged::Mine,
                    _ => Tagged::Nobodys,
                };
            }
            if id.len() == self.id.len() && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                whose = Tagged::Anothers;
            }
        }
        whose
    }
}

/// Whose a queue row is, by its tag ([`DesktopKey::judge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tagged {
    /// Queued by this desktop, as it is: its path may be opened.
    Mine,
    /// Queued by another desktop (its key's id): its path is never opened here; its prepared
    /// photo may be sent, or it is left to that desktop.
    Anothers,
    /// No desktop's: untagged, or a tag with this desktop's id that does not hold. Refused.
    Nobodys,
}

/// What is signed: a version, the path's bytes (the text when it is UTF-8) and the hash, each
/// length-prefixed so that no two pairs sign the same bytes.
fn message(path: &StoredPath, sha256: Option<&str>) -> Vec<u8> {
    let bytes = path.bytes().unwrap_or(path.text().as_bytes());
    let sha = sha256.unwrap_or("").as_bytes();
    let mut message = Vec::with_capacity(16 + bytes.len() + sha.len());
    message.extend_from_slice(b"pe-queue-1");
    message.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    message.extend_from_slice(bytes);
    message.extend_from_slice(&(sha.len() as u64).to_be_bytes());
    message.extend_from_slice(sha);
    message
}

/// The key file cannot be read or made.
#[derive(Debug, thiserror::Error)]
#[error("cannot use this desktop's key {}: {source}", path.display())]
pub struct KeyError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> StoredPath {
        StoredPath::from_stored(text.to_owned(), None)
    }

    #[test]
    fn a_tag_holds_for_its_path_and_hash_only() {
        let key = DesktopKey::from_secret(b"desk-1");
        let tag = key.tag(&path("/shoot/a.jpg"), Some("aa"));
        assert_eq!(Tagged::Mine, key.judge(&path("/shoot/a.jpg"), Some("aa"), Some(&tag)));
        assert_ne!(Tagged::Mine, key.judge(&path("/shoot/b.jpg"), Some("aa"), Some(&tag)));
        assert_ne!(Tagged::Mine, key.judge(&path("/shoot/a.jpg"), Some("ab"), Some(&tag)));
        assert_ne!(Tagged::Mine, key.judge(&path("/shoot/a.jpg"), None, Some(&tag)));
        assert_ne!(Tagged::Mine, key.judge(&path("/shoot/a.jpg"), Some("aa"), None));
        assert_ne!(Tagged::Mine, key.judge(&path("/shoot/a.jpg"), Some("aa"), Some("not hex")));
        // Another desktop's key makes other tags, and tells them from its own and from nobody's.
        let other = DesktopKey::from_secret(b"desk-2");
        assert_ne!(Tagged::Mine, other.judge(&path("/shoot/a.jpg"), Some("aa"), Some(&tag)));
        assert_eq!(other.judge(&path("/shoot/a.jpg"), Some("aa"), Some(&tag)), Tagged::Anothers);
        assert_eq!(key.judge(&path("/shoot/a.jpg"), Some("aa"), Some(&tag)), Tagged::Mine);
        assert_eq!(key.judge(&path("/shoot/b.jpg"), Some("aa"), Some(&tag)), Tagged::Nobodys);
        assert_eq!(key.judge(&path("/shoot/a.jpg"), Some("aa"), None), Tagged::Nobodys);
        assert!(tag.starts_with(&format!("{}.", key.id())));
        // Two desktops that listed the same file each add their tag: either may open it.
        let both = format!("{} {tag}", other.tag(&path("/shoot/a.jpg"), Some("aa")));
        assert_eq!(key.judge(&path("/shoot/a.jpg"), Some("aa"), Some(&both)), Tagged::Mine);
        assert_eq!(other.judge(&path("/shoot/a.jpg"), Some("aa"), Some(&both)), Tagged::Mine);
        // The length prefixes keep the path and the hash apart.
        let split = key.tag(&path("/shoot/a.jpga"), Some("a"));
        assert_ne!(split, tag);
    }

    #[test]
    fn the_key_file_is_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = DesktopKey::load_or_create(dir.path()).unwrap();
        let tag = first.tag(&path("/p"), None);
        let again = DesktopKey::load_or_create(dir.path()).unwrap();
        assert_eq!(Tagged::Mine, again.judge(&path("/p"), None, Some(&tag)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.path().join(KEY_FILE), b"short").unwrap();
        let error = DesktopKey::load_or_create(dir.path()).unwrap_err();
        assert!(error.to_string().contains("holds 5 bytes"), "{error}");
    }
}
