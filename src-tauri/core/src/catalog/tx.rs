//! The catalog's writes that another module's transaction takes part in: the import store marks
//! an item `ready` in the transaction that records its attempt, and `saved` in the one that saves
//! its product. Only `catalog/` writes the catalog's tables (`photos`, `attempts`, `products`,
//! `product_revisions`); the import store reaches them through these functions, each taking the
//! caller's open transaction.

use rusqlite::params;

use super::db::{Db, OptionalRow};

use super::records::{AttemptId, NewAttempt, PhotoId, ProductId, ProductRecord, RevisionSource, SaveProduct};
use super::CatalogError;

/// What the calls for the import queue's items cost (see `usage::queue_cost`).
pub(crate) fn queue_cost(conn: &Db<'_>) -> Result<super::CostTotal, CatalogError> {
    super::usage::queue_cost(conn)
}

/// Records an attempt (the audit trail) inside `tx`.
pub(crate) fn record_attempt(tx: &Db<'_>, attempt: &NewAttempt) -> Result<AttemptId, CatalogError> {
    super::queries::record_attempt_in(tx, attempt)
}

/// Records an attempt inside `tx` unless the same call is recorded already (its photo, model,
/// start and latency): an outcome written again after its first write's answer was lost (a
/// server that went away as it committed) is one call, recorded once. Returns its id.
pub(crate) fn record_attempt_once(tx: &Db<'_>, attempt: &NewAttempt) -> Result<AttemptId, CatalogError> {
    let latency = i64::try_from(attempt.latency_ms).unwrap_or(i64::MAX);
    let known = tx
        .query_row(
            "SELECT id FROM attempts WHERE photo_id = ?1 AND started_at = ?2 AND model = ?3 AND latency_ms = ?4",
            params![attempt.photo_id, attempt.started_at, attempt.model, latency],
            |r| r.get(0),
        )
        .optional()?;
    match known {
        Some(id) => Ok(id),
        None => record_attempt(tx, attempt),
    }
}

/// Marks an attempt as answered through the Batch API batch `batch_name` (priced at the batch rate).
pub(crate) fn mark_batch_attempt(tx: &Db<'_>, attempt: AttemptId, batch_name: &str) -> Result<(), CatalogError> {
    tx.execute("UPDATE attempts SET batch_name = ?2 WHERE id = ?1", params![attempt, batch_name])?;
    Ok(())
}

/// Saves a product (and its revision) inside `tx`.
pub(crate) fn save_product(
    tx: &Db<'_>,
    save: &SaveProduct,
    source: RevisionSource,
) -> Result<ProductRecord, CatalogError> {
    super::queries::save_product_in(tx, save, source)
}

/// A saved product's photos after its first (`product_photos`), replaced by `photos` in order.
pub(crate) fn set_product_photos(tx: &Db<'_>, product: ProductId, photos: &[PhotoId]) -> Result<(), CatalogError> {
    tx.execute("DELETE FROM product_photos WHERE product_id = ?1", params![product])?;
    for (position, photo) in (1i64..).zip(photos) {
        tx.execute(
            "INSERT INTO product_photos (product_id, position, photo_id) VALUES (?1, ?2, ?3)",
            params![product, position, photo],
        )?;
    }
    Ok(())
}

/// Gives a photo its perceptual hash (16 hex digits), unless it has one.
pub(crate) fn set_photo_phash(tx: &Db<'_>, photo: PhotoId, phash_hex: &str) -> Result<(), CatalogError> {
    tx.execute("UPDATE photos SET phash = ?2 WHERE id = ?1 AND phash IS NULL", params![photo, phash_hex])?;
    Ok(())
}

/// Removes a product a save created, only while it is still at `revision`, not deleted, and no
/// product duplicates it (its history goes with it). True when it was removed.
pub(crate) fn remove_unchanged_product(tx: &Db<'_>, product: ProductId, revision: u32) -> Result<bool, CatalogError> {
    Ok(tx.execute(
        "DELETE FROM products WHERE id = ?1 AND revision = ?2 AND deleted_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM products d WHERE d.duplicate_of = ?1)",
        params![product, revision],
    )? == 1)
}
