//! The one photo-file walker. What was dropped or chosen, as queue entries: folders walked recursively, each photo hashed
//! (SHA-256 of its bytes, streamed, so a file is never held in memory), everything else listed as
//! skipped with the reason. Blocking file I/O: runs on the blocking pool, handing over batches.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::records::SkipReason;
use crate::intake::{self, has_photo_extension, IntakeError};
use crate::stored_path::StoredPath;

/// One file, ready to be queued.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scanned {
    /// A photo to extract. `sha256` is `None` when the file is larger than intake accepts: it is
    /// not read here, and preparing it fails with `image_too_large`.
    Photo { path: StoredPath, sha256: Option<String> },
    /// Listed, never extracted.
    Skipped { path: StoredPath, reason: SkipReason, message: String },
}

/// Walks `paths` and hands the entries to `emit` in batches of `first` entries, each batch twice
/// the last up to `batch` (the first photos reach the queue at once, and the slots fill while the
/// larger batches are written); stops early when `emit` returns false. Files named explicitly are always tried (intake decides by their bytes); in
/// folders, files are picked by extension ([`intake::PHOTO_EXTENSIONS`]) and hidden entries are ignored.
/// Paths are made absolute, so a later run from another directory recognizes them. A link inside
/// a folder that leads outside it is listed as skipped unless `links_outside` (a shared folder
/// must not make the app read files elsewhere on this computer); links within it are followed.
pub(crate) fn scan(
    paths: &[PathBuf],
    max_file_bytes: u64,
    links_outside: bool,
    first: usize,
    batch: usize,
    mut emit: impl FnMut(Vec<Scanned>) -> bool,
) {
    let mut pending = Vec::with_capacity(first);
    let mut limit = first;
    let mut push = |entry: Scanned, pending: &mut Vec<Scanned>| {
        pending.push(entry);
        if pending.len() >= limit {
            limit = (limit * 2).min(batch).max(1);
            return emit(std::mem::replace(pending, Vec::with_capacity(limit)));
        }
        true
    };
    for path in paths {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) => {
                let message = format!("Cannot read {}: {e}", path.display());
                if !push(skipped(&path, SkipReason::Unreadable, message), &mut pending) {
                    return;
                }
                continue;
            }
        };
        if !meta.is_dir() {
            if !push(photo(&path, max_file_bytes), &mut pending) {
                return;
            }
            continue;
        }
        // A folder's files before its subfolders, so each folder's photos come together (an
        // import groups a folder's photos into products as soon as the folder is listed).
        let root = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let mut walk = walkdir::WalkDir::new(&path)
            .follow_links(true)
            .sort_by(|a, b| (a.file_type().is_dir(), a.file_name()).cmp(&(b.file_type().is_dir(), b.file_name())))
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
        while let Some(entry) = walk.next() {
            if let Some(link) = entry.as_ref().ok().filter(|e| e.depth() > 0 && e.path_is_symlink() && !links_outside) {
                let inside = std::fs::canonicalize(link.path()).is_ok_and(|target| target.starts_with(&root));
                if !inside {
                    if link.file_type().is_dir() {
                        walk.skip_current_dir();
                    }
                    let message =
                        "Not imported: a link to somewhere outside the dropped folder (drop what it leads to \
                                   instead, or set [import] follow_links_outside)."
                            .to_string();
                    if !push(skipped(link.path(), SkipReason::Unreadable, message), &mut pending) {
                        return;
                    }
                    continue;
                }
            }
            let scanned = match entry {
                Ok(entry) if entry.file_type().is_dir() => continue,
                Ok(entry) if has_photo_extension(entry.path()) => photo(entry.path(), max_file_bytes),
                Ok(entry) => {
                    let what = entry.path().extension().map_or_else(
                        || "it has no photo extension".to_string(),
                        |ext| format!("a .{} file is not a photo", ext.to_string_lossy()),
                    );
                    skipped(entry.path(), SkipReason::NotAPhoto, format!("Not imported: {what}."))
                }
                Err(e) => {
                    let Some(at) = e.path().map(Path::to_path_buf) else { continue };
                    skipped(&at, SkipReason::Unreadable, format!("Cannot read {}: {e}", at.display()))
                }
            };
            if !push(scanned, &mut pending) {
                return;
            }
        }
    }
    if !pending.is_empty() {
        emit(pending);
    }
}

fn skipped(path: &Path, reason: SkipReason, message: String) -> Scanned {
    Scanned::Skipped { path: StoredPath::new(path), reason, message }
}

/// Hashes the file while checking its first bytes: an image format intake cannot prepare (HEIC,
/// TIFF, ...) is skipped here; anything else is queued and intake judges it.
fn photo(path: &Path, max_file_bytes: u64) -> Scanned {
    let unreadable = |e: &dyn std::fmt::Display| {
        skipped(path, SkipReason::Unreadable, format!("Cannot read {}: {e}", path.display()))
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) => return unreadable(&e),
    };
    if !meta.is_file() {
        return skipped(path, SkipReason::NotAPhoto, IntakeError::NotAFile { path: path.into() }.to_string());
    }
    let stored = StoredPath::new(path);
    if meta.len() > max_file_bytes {
        return Scanned::Photo { path: stored, sha256: None };
    }
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) => return unreadable(&e),
    };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut first = true;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return unreadable(&e),
        };
        if first {
            first = false;
            if let Err(e @ IntakeError::Unsupported { .. }) = intake::detect_format(&buf[..n]) {
                return skipped(path, SkipReason::UnsupportedFormat, e.to_string());
            }
        }
        hasher.update(&buf[..n]);
    }
    Scanned::Photo { path: stored, sha256: Some(hex::encode(hasher.finalize())) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_expand_recursively_and_other_files_are_listed_as_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("shoot/sub")).unwrap();
        std::fs::create_dir_all(root.join("shoot/.cache")).unwrap();
        std::fs::write(root.join("shoot/a.jpg"), b"\xFF\xD8\xFFjpeg-ish").unwrap();
        std::fs::write(root.join("shoot/notes.txt"), b"x").unwrap();
        std::fs::write(root.join("shoot/sub/b.heic"), b"\0\0\0\x18ftypheic\0\0\0\0mif1heic").unwrap();
        std::fs::write(root.join("shoot/.cache/c.jpg"), b"x").unwrap();
        std::fs::write(root.join("big.jpg"), vec![0xFFu8; 100]).unwrap();
        let mut batches = Vec::new();
        scan(&[root.join("shoot"), root.join("big.jpg"), root.join("missing.jpg")], 50, false, 1, 2, |b| {
            batches.push(b);
            true
        });
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), [1, 2, 2]);
        let all: Vec<Scanned> = batches.into_iter().flatten().collect();
        let name = |p: &str| StoredPath::new(&root.join(p));
        let sha = hex::encode(Sha256::digest(b"\xFF\xD8\xFFjpeg-ish"));
        assert_eq!(all[0], Scanned::Photo { path: name("shoot/a.jpg"), sha256: Some(sha) });
        assert!(
            matches!(&all[1], Scanned::Skipped { reason: SkipReason::NotAPhoto, message, .. } if message.contains(".txt"))
        );
        assert!(
            matches!(&all[2], Scanned::Skipped { reason: SkipReason::UnsupportedFormat, message, .. } if message.contains("HEIC"))
        );
        assert_eq!(all[3], Scanned::Photo { path: name("big.jpg"), sha256: None }, "too large: not read");
        assert!(matches!(&all[4], Scanned::Skipped { reason: SkipReason::Unreadable, .. }));
    }

    /// Issue 32: a dropped (perhaps shared) folder with links to files elsewhere on this computer
    /// does not make the app read them; links within the folder are followed; the option allows
    /// the others.
    #[cfg(unix)]
    #[test]
    fn links_out_of_the_dropped_folder_are_skipped_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("shoot/inner")).unwrap();
        std::fs::create_dir_all(root.join("private")).unwrap();
        std::fs::write(root.join("shoot/inner/a.jpg"), b"\xFF\xD8\xFFa").unwrap();
        std::fs::write(root.join("private/secret.jpg"), b"\xFF\xD8\xFFsecret").unwrap();
        std::os::unix::fs::symlink(root.join("private/secret.jpg"), root.join("shoot/leak.jpg")).unwrap();
        std::os::unix::fs::symlink(root.join("private"), root.join("shoot/leakdir")).unwrap();
        std::os::unix::fs::symlink(root.join("shoot/inner/a.jpg"), root.join("shoot/same.jpg")).unwrap();
        let listed = |outside: bool| {
            let mut all = Vec::new();
            scan(&[root.join("shoot")], 1_000, outside, 100, 100, |b| {
                all.extend(b);
                true
            });
            all
        };
        let all = listed(false);
        let photos: Vec<String> = all
            .iter()
            .filter_map(|s| match s {
                Scanned::Photo { path, .. } => Some(path.text().to_owned()),
                Scanned::Skipped { .. } => None,
            })
            .collect();
        assert_eq!(photos.len(), 2, "the photo and the link within the folder: {all:?}");
        assert!(photos.iter().all(|p| !p.contains("leak")), "{photos:?}");
        let skipped: Vec<&String> = all
            .iter()
            .filter_map(|s| match s {
                Scanned::Skipped { message, .. } => Some(message),
                Scanned::Photo { .. } => None,
            })
            .collect();
        assert_eq!(skipped.len(), 2, "{all:?}");
        assert!(skipped.iter().all(|m| m.contains("outside the dropped folder") && !m.contains("private")));
        // Allowed: the links are followed.
        assert_eq!(listed(true).iter().filter(|s| matches!(s, Scanned::Photo { .. })).count(), 4);
    }
}
