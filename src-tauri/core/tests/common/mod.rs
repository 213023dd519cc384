//! Fixtures shared by the catalog's search, export and backend tests: a fresh catalog file in a
//! temporary directory, photo rows to hang products on, and a catalog where one word matches more
//! products than relevance ranks.
// Each test crate compiles this module and uses part of it.
#![allow(dead_code)]

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

/// Products 1..=`n`, each with its photo, all matching "gran": product `n` (and product 1 when
/// `best_first_too`) named "Granola" alone, the best matches; the others "Granola with oats and
/// honey {k}". Brand "Even" or "Odd" by number; ids, photos and times are the product's number.
pub async fn granola_products(catalog: &Catalog, n: i64, best_first_too: bool) {
    granola_products_spread(catalog, n, best_first_too, 1).await
}

/// [`granola_products`] with product k's id (and its photo's, and its times) k × `stride`: the
/// ids spread over more bands of the server's search index (4,096 ids each, pg/0011).
pub async fn granola_products_spread(catalog: &Catalog, n: i64, best_first_too: bool, stride: i64) {
    catalog
        .with_connection(move |conn| {
            let tx = conn.transaction()?;
            for k in 1..=n {
                let id = k * stride;
                let best = k == n || (best_first_too && k == 1);
                let name = if best { "Granola".to_string() } else { format!("Granola with oats and honey {k}") };
                let brand = if k % 2 == 0 { "Even" } else { "Odd" };
                tx.execute(
                    "INSERT INTO photos (id, sha256, original_path, file_bytes, width, height, format, thumbnail_jpeg,
                                         first_seen_at, last_seen_at)
                     VALUES (?1, printf('%064x', ?1), 'x.jpg', 1, 1, 1, 'jpeg', x'FFD8', 0, 0)",
                    [id],
                )?;
                let saved = serde_json::json!({"name": name, "brand": brand}).to_string();
                tx.execute(
                    "INSERT INTO products (id, photo_id, saved_json, revision, name, brand, created_at, updated_at)
                     VALUES (?1, ?1, ?2, 1, ?3, ?4, ?1, ?1)",
                    rusqlite::params![id, saved, name, brand],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
        .unwrap();
}
