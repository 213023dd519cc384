//! A file's path as the queue keeps it. Paths are bytes, not text: on Unix a file name may be any
//! bytes but `/` and NUL, and such a file must import like any other. The queue keeps the path's
//! text for display (lossy: an invalid sequence shows as U+FFFD) and, only when the path is not
//! valid UTF-8, its exact bytes (`import_items.path_bytes`, `photos.original_path_bytes`), from
//! which the file is opened again. Scripts get those bytes as lowercase hex (`"file_bytes"` in the
//! CLI's JSON lines; [`StoredPath::bytes_hex`]).

use std::path::{Path, PathBuf};

/// A path with its display text and, when the text is not the path, the exact bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoredPath {
    text: String,
    /// `Some` only when the path is not valid UTF-8 (never empty then).
    bytes: Option<Vec<u8>>,
}

impl StoredPath {
    pub fn new(path: &Path) -> Self {
        match path.to_str() {
            Some(text) => Self { text: text.to_owned(), bytes: None },
            None => Self { text: path.to_string_lossy().into_owned(), bytes: Some(raw_bytes(path)) },
        }
    }

    /// From the columns the queue stores (`path`, `path_bytes`).
    pub fn from_stored(text: String, bytes: Option<Vec<u8>>) -> Self {
        Self { text, bytes: bytes.filter(|b| !b.is_empty()) }
    }

    /// From a DTO's `path` and `path_bytes` (hex): the bytes when they decode, else the text.
    pub fn from_text_and_hex(text: &str, hex: Option<&str>) -> Self {
        Self::from_stored(text.to_owned(), hex.and_then(|h| hex::decode(h).ok()))
    }

    /// For display: lossy when the path is not UTF-8.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The exact bytes, when the path is not valid UTF-8 (else the text is the path).
    pub fn bytes(&self) -> Option<&[u8]> {
        self.bytes.as_deref()
    }

    /// [`Self::bytes`] as lowercase hex, two digits a byte: what `"file_bytes"` carries.
    pub fn bytes_hex(&self) -> Option<String> {
        self.bytes.as_deref().map(hex::encode)
    }

    /// The file itself: from the exact bytes when there are any.
    pub fn to_path_buf(&self) -> PathBuf {
        match &self.bytes {
            Some(bytes) => from_raw_bytes(bytes),
            None => PathBuf::from(&self.text),
        }
    }

    /// The last component, for display.
    pub fn file_name(&self) -> String {
        Path::new(&self.text).file_name().map_or_else(|| self.text.clone(), |n| n.to_string_lossy().into_owned())
    }
}

#[cfg(unix)]
fn raw_bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

#[cfg(unix)]
fn from_raw_bytes(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

// Elsewhere a path that is not Unicode is rare (unpaired UTF-16 surrogates on Windows); the
// platform's own encoding of the OS string is kept and read back the same way.
#[cfg(not(unix))]
fn raw_bytes(path: &Path) -> Vec<u8> {
    path.as_os_str().as_encoded_bytes().to_vec()
}

#[cfg(not(unix))]
fn from_raw_bytes(bytes: &[u8]) -> PathBuf {
    match std::str::from_utf8(bytes) {
        Ok(text) => PathBuf::from(text),
        Err(_) => PathBuf::from(String::from_utf8_lossy(bytes).into_owned()),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_utf8_path_is_its_text_and_other_bytes_are_kept_exactly() {
        let plain = StoredPath::new(Path::new("/photos/Müsli.jpg"));
        assert_eq!((plain.text(), plain.bytes()), ("/photos/Müsli.jpg", None));
        assert_eq!(plain.to_path_buf(), Path::new("/photos/Müsli.jpg"));

        let raw: &[u8] = b"/photos/caf\xe9-\xff.jpg";
        let odd = StoredPath::new(Path::new(std::ffi::OsStr::from_bytes(raw)));
        assert_eq!(odd.text(), "/photos/caf\u{fffd}-\u{fffd}.jpg");
        assert_eq!(odd.bytes(), Some(raw));
        assert_eq!(odd.bytes_hex().as_deref(), Some(hex::encode(raw).as_str()));
        assert_eq!(odd.to_path_buf().as_os_str().as_bytes(), raw);
        assert_eq!(odd.file_name(), "caf\u{fffd}-\u{fffd}.jpg");
        let stored = StoredPath::from_stored(odd.text().to_owned(), odd.bytes().map(<[u8]>::to_vec));
        assert_eq!(stored, odd);
    }
}
