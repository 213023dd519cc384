//! Products on a server catalog (issue 13): showing, editing with revision conflicts, the
//! history, soft delete and undo, duplicates, a product's photos. The rules are SQLite's and live
//! once ([`super::revisions::Current`], [`super::revisions::history_of`],
//! [`super::queries::StoredProduct`]); only the SQL differs.
//!
//! Every write is one transaction that first locks the product's row (`SELECT … FOR UPDATE`), so
//! two desktops saving the same product at once are serialized and the second one meets the
//! revision conflict, as on SQLite (where `BEGIN IMMEDIATE` serializes writers). Then
//! `NOTIFY catalog_changes` tells the other desktops (see [`super::server_changes`]).

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::queries::{refuse_invalid, ListingColumns, StoredProduct, PRODUCT_RECORD_COLUMNS, PRODUCT_RECORD_FROM};
use super::records::*;
use super::revisions::{history_of, Current, StoredRevision};
use super::server::ServerCatalog;
use super::server_listing::snapshot;
use super::CatalogError;
use crate::product::Product;

/// A product, deleted or not.
pub(super) async fn get_product(server: &ServerCatalog, id: ProductId) -> Result<ProductRecord, CatalogError> {
    let client = server.client().await?;
    get_in(server, &client, id).await
}

async fn get_in<C: GenericClient + Sync>(
    server: &ServerCatalog,
    client: &C,
    id: ProductId,
) -> Result<ProductRecord, CatalogError> {
    let sql = format!("SELECT {PRODUCT_RECORD_COLUMNS} FROM {PRODUCT_RECORD_FROM} WHERE p.id = $1");
    let row = client.query_opt(&sql, &[&id]).await.map_err(|e| server.driver_error(&e))?;
    let row = row.ok_or(CatalogError::NotFound { what: "product", id })?;
    stored_product(server, &row)?.into_record()
}

fn stored_product(server: &ServerCatalog, row: &Row) -> Result<StoredProduct, CatalogError> {
    let read = || -> Result<StoredProduct, tokio_postgres::Error> {
        Ok(StoredProduct {
            id: row.try_get(0)?,
            photo_id: row.try_get(1)?,
            attempt_id: row.try_get(2)?,
            proposed_json: row.try_get(3)?,
            saved_json: row.try_get(4)?,
            revision: row.try_get(5)?,
            created_at: row.try_get(6)?,
            updated_at: row.try_get(7)?,
            sha256: row.try_get(8)?,
            original_path: row.try_get(9)?,
            updated_by: row.try_get(11)?,
            duplicate_of: row.try_get(12)?,
            deleted_at: row.try_get(13)?,
            deleted_by: row.try_get(14)?,
            original_path_bytes: row.try_get(15)?,
            barcodes_json: row.try_get(16)?,
            original_host: row.try_get(10)?,
        })
    };
    read().map_err(|e| CatalogError::Server(server.driver_error(&e)))
}

/// The photo's extracted product (not a duplicate), deleted or not.
pub(super) async fn product_for_photo(
    server: &ServerCatalog,
    photo: PhotoId,
) -> Result<Option<ProductId>, CatalogError> {
    let client = server.client().await?;
    let row = client
        .query_opt("SELECT id FROM products WHERE photo_id = $1 AND duplicate_of IS NULL", &[&photo])
        .await
        .map_err(|e| server.driver_error(&e))?;
    Ok(row.map(|r| r.get(0)))
}

/// The history, newest first (see [`super::Catalog::history`]).
pub(super) async fn history(server: &ServerCatalog, id: ProductId) -> Result<Vec<RevisionRecord>, CatalogError> {
    let mut client = server.client().await?;
    let tx = snapshot(server, &mut client).await?;
    current(server, &tx, id, false).await?;
    let rows = tx
        .query(
            "SELECT revision, source, saved_by, saved_at, saved_json::text, proposed_json::text
             FROM product_revisions WHERE product_id = $1 ORDER BY revision",
            &[&id],
        )
        .await
        .map_err(|e| server.driver_error(&e))?;
    tx.commit().await.map_err(|e| server.driver_error(&e))?;
    let stored = rows
        .iter()
        .map(|r| StoredRevision {
            revision: revision(r.get(0)),
            source: r.get(1),
            saved_by: r.get(2),
            saved_at: r.get(3),
            saved_json: r.get(4),
            proposed_json: r.get(5),
        })
        .collect();
    history_of(stored)
}

fn revision(value: i64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// The product's row, locked for this transaction when `lock` (writes), or `NotFound`.
async fn current<C: GenericClient + Sync>(
    server: &ServerCatalog,
    client: &C,
    id: ProductId,
    lock: bool,
) -> Result<Current, CatalogError> {
    let sql = format!(
        "SELECT photo_id, revision, updated_by, updated_at, duplicate_of, deleted_at, saved_json::text
         FROM products WHERE id = $1{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    let row = client.query_opt(&sql, &[&id]).await.map_err(|e| server.driver_error(&e))?;
    let row = row.ok_or(CatalogError::NotFound { what: "product", id })?;
    Ok(Current {
        photo_id: row.get(0),
        revision: revision(row.get(1)),
        updated_by: row.get(2),
        updated_at: row.get(3),
        duplicate_of: row.get(4),
        deleted_at: row.get(5),
        saved_json: row.get(6),
    })
}

/// Appends the product's current state to its history (every write of `saved_json` does, in
/// the same transaction).
async fn insert_revision<C: GenericClient + Sync>(
    server: &ServerCatalog,
    client: &C,
    id: ProductId,
    source: RevisionSource,
) -> Result<(), CatalogError> {
    client
        .execute(
            "INSERT INTO product_revisions (product_id, revision, saved_json, proposed_json, attempt_id, source,
                                            saved_by, saved_at)
             SELECT id, revision, saved_json, proposed_json, attempt_id, $2, updated_by, updated_at
             FROM products WHERE id = $1",
            &[&id, &source.as_str()],
        )
        .await
        .map_err(|e| server.driver_error(&e))?;
    Ok(())
}

/// Ends a write of product `id`: tells the other desktops (`NOTIFY` inside the transaction, so
/// only a committed write is heard), reads the product as written, commits.
async fn commit_notified(
    server: &ServerCatalog,
    tx: deadpool_postgres::Transaction<'_>,
    id: ProductId,
) -> Result<ProductRecord, CatalogError> {
    tx.execute("SELECT pg_notify($1, $2)", &[&super::server_changes::CHANNEL, &id.to_string()])
        .await
        .map_err(|e| server.driver_error(&e))?;
    let record = get_in(server, &tx, id).await?;
    tx.commit().await.map_err(|e| server.driver_error(&e))?;
    Ok(record)
}

/// An edit as a new revision, refused on a stale `expected_revision` (see
/// [`super::Catalog::update_product`]).
pub(super) async fn update_product(
    server: &ServerCatalog,
    update: &UpdateProduct,
) -> Result<ProductRecord, CatalogError> {
    refuse_invalid(&update.saved)?;
    let saved_json = serde_json::to_string(&update.saved)?;
    let columns = ListingColumns::of(&update.saved);
    let id = update.id;
    let mut client = server.client().await?;
    let tx = client.transaction().await.map_err(|e| server.driver_error(&e))?;
    let current = current(server, &tx, id, true).await?.live(id)?;
    current.expect_revision(id, update.expected_revision)?;
    let proposal = match update.attempt_id {
        None => None,
        Some(attempt) => {
            let row = tx
                .query_opt("SELECT photo_id, proposal_json::text FROM attempts WHERE id = $1", &[&attempt])
                .await
                .map_err(|e| server.driver_error(&e))?
                .ok_or(CatalogError::NotFound { what: "attempt", id: attempt })?;
            Some(current.proposal_of(id, attempt, row.get(0), row.get(1))?)
        }
    };
    if proposal.is_none() && same_json(&saved_json, &current.saved_json) {
        return get_in(server, &tx, id).await;
    }
    let flagged = i64::from(columns.flagged);
    let params: [&(dyn ToSql + Sync); 13] = [
        &id,
        &saved_json,
        &update.attempt_id,
        &proposal,
        &columns.name,
        &columns.brand,
        &columns.category,
        &columns.price_amount,
        &columns.price_currency,
        &columns.gtin,
        &flagged,
        &update.saved_at,
        &update.saved_by,
    ];
    tx.execute(
        "UPDATE products SET
             saved_json = $2::text::json,
             revision = revision + 1,
             attempt_id = coalesce($3, attempt_id),
             proposed_json = CASE WHEN $3::bigint IS NULL THEN proposed_json ELSE $4::text::json END,
             name = $5, brand = $6, category = $7, price_amount = $8, price_currency = $9, gtin = $10,
             flagged = $11, updated_at = $12, updated_by = $13
         WHERE id = $1",
        &params,
    )
    .await
    .map_err(|e| server.driver_error(&e))?;
    insert_revision(server, &tx, id, update.source).await?;
    commit_notified(server, tx, id).await
}

/// The server's `json` keeps the text it was given, but compare as values: a product written by
/// another client may differ only in spacing.
fn same_json(a: &str, b: &str) -> bool {
    a == b || serde_json::from_str::<serde_json::Value>(a).ok() == serde_json::from_str::<serde_json::Value>(b).ok()
}

/// A soft delete (see [`super::Catalog::delete_product`]).
pub(super) async fn delete_product(
    server: &ServerCatalog,
    id: ProductId,
    by: &str,
    at: i64,
) -> Result<ProductRecord, CatalogError> {
    let mut client = server.client().await?;
    let tx = client.transaction().await.map_err(|e| server.driver_error(&e))?;
    current(server, &tx, id, true).await?.live(id)?;
    tx.execute("UPDATE products SET deleted_at = $2, deleted_by = $3 WHERE id = $1", &[&id, &at, &by])
        .await
        .map_err(|e| server.driver_error(&e))?;
    commit_notified(server, tx, id).await
}

/// Undoes a delete (see [`super::Catalog::undelete_product`]).
pub(super) async fn undelete_product(
    server: &ServerCatalog,
    id: ProductId,
    by: &str,
    at: i64,
) -> Result<ProductRecord, CatalogError> {
    let mut client = server.client().await?;
    let tx = client.transaction().await.map_err(|e| server.driver_error(&e))?;
    let current = current(server, &tx, id, true).await?;
    if current.deleted_at.is_none() {
        return Err(CatalogError::invalid("id", format!("product {id} is not deleted")));
    }
    if current.duplicate_of.is_none() {
        let other = tx
            .query_opt(
                "SELECT id FROM products WHERE photo_id = $1 AND duplicate_of IS NULL AND id <> $2",
                &[&current.photo_id, &id],
            )
            .await
            .map_err(|e| server.driver_error(&e))?;
        if let Some(other) = other {
            let other: ProductId = other.get(0);
            return Err(CatalogError::invalid(
                "id",
                format!("photo {} has product {other} now; edit that one instead", current.photo_id),
            ));
        }
    }
    tx.execute("UPDATE products SET deleted_at = NULL, deleted_by = NULL WHERE id = $1", &[&id])
        .await
        .map_err(|e| server.driver_error(&e))?;
    let record = commit_notified(server, tx, id).await?;
    tracing::info!(product_id = id, by, at, "product undeleted");
    Ok(record)
}

/// A copy of a live product for the same photo (see [`super::Catalog::duplicate_product`]).
pub(super) async fn duplicate_product(
    server: &ServerCatalog,
    id: ProductId,
    by: &str,
    at: i64,
) -> Result<ProductRecord, CatalogError> {
    let mut client = server.client().await?;
    let tx = client.transaction().await.map_err(|e| server.driver_error(&e))?;
    let original = current(server, &tx, id, true).await?.live(id)?;
    let mut saved: Product = serde_json::from_str(&original.saved_json)?;
    saved.name = format!("{} (copy)", saved.name);
    let saved_json = serde_json::to_string(&saved)?;
    let columns = ListingColumns::of(&saved);
    let flagged = i64::from(columns.flagged);
    let params: [&(dyn ToSql + Sync); 12] = [
        &original.photo_id,
        &id,
        &saved_json,
        &columns.name,
        &columns.brand,
        &columns.category,
        &columns.price_amount,
        &columns.price_currency,
        &columns.gtin,
        &flagged,
        &at,
        &by,
    ];
    let row = tx
        .query_one(
            "INSERT INTO products (photo_id, attempt_id, duplicate_of, proposed_json, saved_json, revision, name,
                                   brand, category, price_amount, price_currency, gtin, flagged, created_at,
                                   updated_at, updated_by)
             VALUES ($1, NULL, $2, NULL, $3::text::json, 1, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12)
             RETURNING id",
            &params,
        )
        .await
        .map_err(|e| server.driver_error(&e))?;
    let copy: ProductId = row.get(0);
    insert_revision(server, &tx, copy, RevisionSource::Duplicate).await?;
    commit_notified(server, tx, copy).await
}
