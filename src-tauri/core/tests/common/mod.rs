//! Fixtures shared by the catalog's search and export tests: a fresh catalog file in a temporary
//! directory, and photo rows to hang products on.

use pe_core::catalog::{Catalog, NewPhoto};
use tempfile::TempDir;

/// The tests' "now", unix milliseconds.
pub const T0: i64 = 1_760_000_000_000;

/// A new catalog in its own temporary directory (keep the directory alive while you use it).
pub fn open() -> (TempDir, Catalog) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(&Catalog::path_in(dir.path())).unwrap();
    (dir, catalog)
}

/// Photo number `n`: distinct bytes (sha256), path and thumbnail per `n`.
pub fn photo(n: u32) -> NewPhoto {
    NewPhoto {
        sha256: format!("{n:064x}"),
        original_path: format!("/photos/IMG_{n:04}.jpg"),
        original_path_bytes: None,
        file_bytes: 1_000,
        width: 640,
        height: 480,
        format: "jpeg".into(),
        thumbnail_jpeg: vec![0xFF, 0xD8, 0xFF, n as u8],
        seen_at: T0,
    }
}
