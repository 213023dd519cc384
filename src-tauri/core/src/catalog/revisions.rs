//! Editing saved products: optimistic-concurrency updates, the revision history, soft delete and
//! undo, and duplicates, written once for both backends over the [`Db`] seam. Each write is one
//! transaction: SQLite's `BEGIN IMMEDIATE` (one writer at a time) or a server's `SERIALIZABLE`
//! one, which [`super::Catalog::run_db`] runs again when it raced another desktop's, so two
//! desktops saving the same product at once meet the revision conflict, as two windows on one
//! SQLite file do. On a server a write also tells the other desktops (`queries::notify_changed`).
//!
//! Every write of a product's `saved_json` bumps `products.revision` and appends the new state to
//! `product_revisions` (see [`insert_revision`]) in the same transaction; a trigger of migration
//! 0003 refuses a new `saved_json` without a new revision. Deleting and undeleting change neither.

use rusqlite::params;

use super::db::{Db, DbTx, OptionalRow};
use super::queries::{attempt_of, get_product, insert_revision, listed_column_names, listed_columns_sql};
use super::queries::{notify_changed, refuse_invalid, ListingColumns};
use super::records::*;
use super::CatalogError;
use crate::product::{diff, Product};

/// What the write paths need to know about a product before changing it.
struct Current {
    photo_id: PhotoId,
    revision: u32,
    updated_by: String,
    updated_at: i64,
    duplicate_of: Option<ProductId>,
    deleted_at: Option<i64>,
    saved_json: String,
}

impl Current {
    /// The product if it is live, else [`CatalogError::Deleted`].
    fn live(self, id: ProductId) -> Result<Self, CatalogError> {
        if self.deleted_at.is_some() {
            return Err(CatalogError::Deleted { id });
        }
        Ok(self)
    }

    /// Nobody saved the product since the editor opened `expected`, else the conflict that says
    /// who did.
    fn expect_revision(&self, id: ProductId, expected: u32) -> Result<(), CatalogError> {
        if self.revision == expected {
            return Ok(());
        }
        Err(CatalogError::Conflict {
            id,
            expected,
            current: self.revision,
            updated_by: self.updated_by.clone(),
            updated_at: self.updated_at,
        })
    }

    /// The proposal of `attempt` (of `photo`, with `proposal`) for this product (`id`): refused
    /// when the attempt is another photo's or failed.
    fn proposal_of(
        &self,
        id: ProductId,
        attempt: AttemptId,
        photo: PhotoId,
        proposal: Option<String>,
    ) -> Result<String, CatalogError> {
        if photo != self.photo_id {
            return Err(CatalogError::invalid(
                "attempt_id",
                format!("attempt {attempt} belongs to photo {photo}, not to photo {} of product {id}", self.photo_id),
            ));
        }
        proposal.ok_or_else(|| {
            CatalogError::invalid("attempt_id", format!("attempt {attempt} failed; it has no proposal to keep"))
        })
    }
}

/// One stored revision.
struct StoredRevision {
    revision: u32,
    source: String,
    saved_by: String,
    saved_at: i64,
    saved_json: String,
    proposed_json: Option<String>,
}

/// The history from the stored revisions (oldest first), newest first, each with what it
/// changed: against the revision before, and for the first one kept against the proposal in
/// force then.
fn history_of(stored: Vec<StoredRevision>) -> Result<Vec<RevisionRecord>, CatalogError> {
    let mut history: Vec<RevisionRecord> = Vec::with_capacity(stored.len());
    for row in stored {
        let source = RevisionSource::parse(&row.source)
            .ok_or_else(|| CatalogError::invalid("source", format!("unknown revision source {:?}", row.source)))?;
        let saved: Product = serde_json::from_str(&row.saved_json)?;
        let proposed: Option<Product> = row.proposed_json.as_deref().map(serde_json::from_str).transpose()?;
        let changes = match history.last() {
            Some(previous) => diff(Some(&previous.saved), &saved),
            None => diff(proposed.as_ref(), &saved),
        };
        history.push(RevisionRecord {
            revision: row.revision,
            source,
            saved_by: row.saved_by,
            saved_at: row.saved_at,
            saved,
            changes,
        });
    }
    history.reverse();
    Ok(history)
}

fn current(db: &Db<'_>, id: ProductId) -> Result<Current, CatalogError> {
    db.query_row(
        "SELECT photo_id, revision, updated_by, updated_at, duplicate_of, deleted_at, CAST(saved_json AS TEXT)
         FROM products WHERE id = ?1",
        params![id],
        |row| {
            Ok(Current {
                photo_id: row.get(0)?,
                revision: row.get(1)?,
                updated_by: row.get(2)?,
                updated_at: row.get(3)?,
                duplicate_of: row.get(4)?,
                deleted_at: row.get(5)?,
                saved_json: row.get(6)?,
            })
        },
    )
    .optional()?
    .ok_or(CatalogError::NotFound { what: "product", id })
}

/// A live product, or `NotFound` / `Deleted`.
fn live(db: &Db<'_>, id: ProductId) -> Result<Current, CatalogError> {
    current(db, id)?.live(id)
}

/// Ends a write of product `id`: tells the other desktops, reads the product as written, commits.
fn commit_changed(tx: DbTx<'_>, id: ProductId) -> Result<ProductRecord, CatalogError> {
    notify_changed(&tx, id)?;
    let record = get_product(&tx, id)?;
    tx.commit()?;
    Ok(record)
}

/// Whether two stored products are the same: a server's `json` keeps the text it was given, so a
/// product written by another client may differ only in spacing.
fn same_json(a: &str, b: &str) -> bool {
    a == b || serde_json::from_str::<serde_json::Value>(a).ok() == serde_json::from_str::<serde_json::Value>(b).ok()
}

pub(super) fn update_product(db: &Db<'_>, update: &UpdateProduct) -> Result<ProductRecord, CatalogError> {
    refuse_invalid(&update.saved)?;
    let saved_json = serde_json::to_string(&update.saved)?;
    let columns = ListingColumns::of(&update.saved);
    let tx = db.transaction()?;
    let id = update.id;
    let current = live(&tx, id)?;
    current.expect_revision(id, update.expected_revision)?;
    let proposal = match update.attempt_id {
        None => None,
        Some(attempt) => {
            let (photo, proposal) = attempt_of(&tx, attempt)?;
            Some(current.proposal_of(id, attempt, photo, proposal)?)
        }
    };
    if proposal.is_none() && same_json(&saved_json, &current.saved_json) {
        // Nothing changes: no new revision.
        return get_product(&tx, id);
    }
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let sets: Vec<String> =
            listed_column_names().iter().enumerate().map(|(i, c)| format!("{c} = ?{}", i + 7)).collect();
        format!(
            "UPDATE products SET
                 saved_json = ?2,
                 revision = revision + 1,
                 attempt_id = coalesce(?3, attempt_id),
                 proposed_json = CASE WHEN ?3 IS NULL THEN proposed_json ELSE ?4 END,
                 updated_at = ?5, updated_by = ?6, {}
             WHERE id = ?1",
            sets.join(", ")
        )
    });
    tx.execute(
        sql,
        &columns.after(params![id, saved_json, update.attempt_id, proposal, update.saved_at, update.saved_by]),
    )?;
    insert_revision(&tx, id, update.source)?;
    commit_changed(tx, id)
}

pub(super) fn history(db: &Db<'_>, id: ProductId) -> Result<Vec<RevisionRecord>, CatalogError> {
    // One snapshot: the product and its revisions as of one moment.
    let tx = db.read_transaction()?;
    current(&tx, id)?;
    let stored = tx.query_map(
        "SELECT revision, source, saved_by, saved_at, CAST(saved_json AS TEXT), CAST(proposed_json AS TEXT)
         FROM product_revisions WHERE product_id = ?1 ORDER BY revision",
        params![id],
        |row| {
            Ok(StoredRevision {
                revision: row.get(0)?,
                source: row.get(1)?,
                saved_by: row.get(2)?,
                saved_at: row.get(3)?,
                saved_json: row.get(4)?,
                proposed_json: row.get(5)?,
            })
        },
    )?;
    tx.commit()?;
    history_of(stored)
}

pub(super) fn delete_product(db: &Db<'_>, id: ProductId, by: &str, at: i64) -> Result<ProductRecord, CatalogError> {
    let tx = db.transaction()?;
    live(&tx, id)?;
    tx.execute("UPDATE products SET deleted_at = ?2, deleted_by = ?3 WHERE id = ?1", params![id, at, by])?;
    commit_changed(tx, id)
}

pub(super) fn undelete_product(db: &Db<'_>, id: ProductId, by: &str, at: i64) -> Result<ProductRecord, CatalogError> {
    let tx = db.transaction()?;
    let current = current(&tx, id)?;
    if current.deleted_at.is_none() {
        return Err(CatalogError::invalid("id", format!("product {id} is not deleted")));
    }
    if current.duplicate_of.is_none() {
        // Belt and braces: products_one_per_photo keeps a deleted extracted product's place, so a
        // save of its photo updates it rather than creating another one.
        let other: Option<ProductId> = tx
            .query_row(
                "SELECT id FROM products WHERE photo_id = ?1 AND duplicate_of IS NULL AND id <> ?2",
                params![current.photo_id, id],
                |row| row.get(0),
            )
            .optional()?;
        if let Some(other) = other {
            return Err(CatalogError::invalid(
                "id",
                format!("photo {} has product {other} now; edit that one instead", current.photo_id),
            ));
        }
    }
    tx.execute("UPDATE products SET deleted_at = NULL, deleted_by = NULL WHERE id = ?1", params![id])?;
    let record = commit_changed(tx, id)?;
    tracing::info!(product_id = id, by, at, "product undeleted");
    Ok(record)
}

pub(super) fn duplicate_product(db: &Db<'_>, id: ProductId, by: &str, at: i64) -> Result<ProductRecord, CatalogError> {
    let tx = db.transaction()?;
    let original = live(&tx, id)?;
    let mut saved: Product = serde_json::from_str(&original.saved_json)?;
    saved.name = format!("{} (copy)", saved.name);
    let saved_json = serde_json::to_string(&saved)?;
    let columns = ListingColumns::of(&saved);
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let (columns, values) = listed_columns_sql(6);
        format!(
            "INSERT INTO products (photo_id, attempt_id, duplicate_of, proposed_json, saved_json, revision, created_at,
                                   updated_at, updated_by, {columns})
             VALUES (?1, NULL, ?2, NULL, ?3, 1, ?4, ?4, ?5, {values})
             RETURNING id"
        )
    });
    let copy: ProductId =
        tx.query_row(sql, &columns.after(params![original.photo_id, id, saved_json, at, by]), |row| row.get(0))?;
    insert_revision(&tx, copy, RevisionSource::Duplicate)?;
    commit_changed(tx, copy)
}
