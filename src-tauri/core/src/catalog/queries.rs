//! The SQL, as synchronous functions over a connection. They run on the catalog thread only;
//! every function that writes does so in one short `BEGIN IMMEDIATE` transaction.

use base64::Engine as _;
use rusqlite::types::Type;
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};
use serde::de::DeserializeOwned;

use super::records::*;
use super::CatalogError;
use crate::error::ErrorCode;
use crate::product::{FlagKind, Price, Product};

pub(super) fn record_photo(conn: &mut Connection, photo: &NewPhoto) -> Result<PhotoId, CatalogError> {
    let sha256 = photo.sha256.to_ascii_lowercase();
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CatalogError::invalid("sha256", "must be 64 hexadecimal digits"));
    }
    let file_bytes = to_i64("file_bytes", photo.file_bytes)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let id = tx.query_row(
        "INSERT INTO photos (sha256, original_path, file_bytes, width, height, format, thumbnail_jpeg,
                             first_seen_at, last_seen_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
         ON CONFLICT (sha256) DO UPDATE SET
             original_path = excluded.original_path,
             last_seen_at = max(last_seen_at, excluded.last_seen_at)
         RETURNING id",
        params![
            sha256,
            photo.original_path,
            file_bytes,
            photo.width,
            photo.height,
            photo.format,
            photo.thumbnail_jpeg,
            photo.seen_at
        ],
        |row| row.get(0),
    )?;
    tx.commit()?;
    Ok(id)
}

pub(super) fn record_attempt(conn: &mut Connection, attempt: &NewAttempt) -> Result<AttemptId, CatalogError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let id = record_attempt_in(&tx, attempt)?;
    tx.commit()?;
    Ok(id)
}

/// [`record_attempt`] inside the caller's transaction (the import queue records an attempt
/// together with its item's new state).
pub(crate) fn record_attempt_in(tx: &Connection, attempt: &NewAttempt) -> Result<AttemptId, CatalogError> {
    if attempt.model.trim().is_empty() {
        return Err(CatalogError::invalid("model", "a model id is required"));
    }
    let latency_ms = to_i64("latency_ms", attempt.latency_ms)?;
    let (kind, proposal_json, error_code, error_message) = match &attempt.outcome {
        AttemptOutcome::Proposed { product } => {
            (AttemptOutcomeKind::Proposed, Some(serde_json::to_string(product)?), None, None)
        }
        AttemptOutcome::Failed { code, message } => {
            (AttemptOutcomeKind::Failed, None, Some(code.as_str()), Some(message.as_str()))
        }
    };
    let usage = attempt.usage;
    require_photo(tx, attempt.photo_id)?;
    let id = tx.query_row(
        "INSERT INTO attempts (photo_id, model, started_at, latency_ms, prompt_tokens, output_tokens,
                               thoughts_tokens, total_tokens, outcome, proposal_json, error_code,
                               error_message, raw_response)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         RETURNING id",
        params![
            attempt.photo_id,
            attempt.model,
            attempt.started_at,
            latency_ms,
            usage.map(|u| u.prompt_tokens),
            usage.map(|u| u.output_tokens),
            usage.map(|u| u.thoughts_tokens),
            usage.map(|u| u.total_tokens),
            kind.as_str(),
            proposal_json,
            error_code,
            error_message,
            attempt.raw_response,
        ],
        |row| row.get(0),
    )?;
    Ok(id)
}

pub(super) fn attempts(conn: &Connection, photo: PhotoId) -> Result<Vec<AttemptRecord>, CatalogError> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, photo_id, model, started_at, latency_ms, prompt_tokens, output_tokens, thoughts_tokens,
                total_tokens, outcome, error_code, error_message, proposal_json, raw_response
         FROM attempts WHERE photo_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([photo], |row| {
        let outcome = match row.get_ref(9)?.as_str()? {
            "proposed" => AttemptOutcomeKind::Proposed,
            "failed" => AttemptOutcomeKind::Failed,
            other => return Err(conversion_error(9, format!("unknown outcome {other:?}"))),
        };
        let error_code = match row.get::<_, Option<String>>(10)? {
            Some(code) => Some(parse_error_code(10, &code)?),
            None => None,
        };
        Ok(AttemptRecord {
            id: row.get(0)?,
            photo_id: row.get(1)?,
            model: row.get(2)?,
            started_at: row.get(3)?,
            latency_ms: get_u64(row, 4)?,
            prompt_tokens: row.get(5)?,
            output_tokens: row.get(6)?,
            thoughts_tokens: row.get(7)?,
            total_tokens: row.get(8)?,
            outcome,
            error_code,
            error_message: row.get(11)?,
            proposal: json_column(row, 12)?,
            raw_response: row.get(13)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn save_product(conn: &mut Connection, save: &SaveProduct) -> Result<ProductRecord, CatalogError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let record = save_product_in(&tx, save)?;
    tx.commit()?;
    Ok(record)
}

/// [`save_product`] inside the caller's transaction (the import queue saves a product together
/// with its item's `saved`).
pub(crate) fn save_product_in(tx: &Connection, save: &SaveProduct) -> Result<ProductRecord, CatalogError> {
    let invalid: Vec<_> = save.saved.validate().into_iter().filter(|f| f.kind == FlagKind::Invalid).collect();
    if !invalid.is_empty() {
        let message = invalid.iter().map(|f| format!("{}: {}", f.field, f.message)).collect::<Vec<_>>().join("; ");
        return Err(CatalogError::Invalid { fields: invalid.into_iter().map(|f| f.field).collect(), message });
    }
    let saved_json = serde_json::to_string(&save.saved)?;
    require_photo(tx, save.photo_id)?;
    let proposed_json: Option<String> = match save.attempt_id {
        None => None,
        Some(attempt) => {
            let (photo, proposal): (PhotoId, Option<String>) = tx
                .query_row("SELECT photo_id, proposal_json FROM attempts WHERE id = ?1", [attempt], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()?
                .ok_or(CatalogError::NotFound { what: "attempt", id: attempt })?;
            if photo != save.photo_id {
                return Err(CatalogError::invalid(
                    "attempt_id",
                    format!("attempt {attempt} belongs to photo {photo}, not to photo {}", save.photo_id),
                ));
            }
            proposal
        }
    };
    let product = &save.saved;
    let id: ProductId = tx.query_row(
        "INSERT INTO products (photo_id, attempt_id, proposed_json, saved_json, revision, name, brand, category,
                               price_amount, price_currency, gtin, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
         ON CONFLICT (photo_id) DO UPDATE SET
             attempt_id = coalesce(excluded.attempt_id, attempt_id),
             proposed_json = CASE WHEN excluded.attempt_id IS NULL THEN proposed_json
                                  ELSE excluded.proposed_json END,
             saved_json = excluded.saved_json,
             revision = revision + 1,
             name = excluded.name,
             brand = excluded.brand,
             category = excluded.category,
             price_amount = excluded.price_amount,
             price_currency = excluded.price_currency,
             gtin = excluded.gtin,
             updated_at = excluded.updated_at
         RETURNING id",
        params![
            save.photo_id,
            save.attempt_id,
            proposed_json,
            saved_json,
            product.name,
            product.brand,
            product.category,
            product.price.as_ref().map(|p| p.amount),
            product.price.as_ref().map(|p| p.currency.as_str()),
            product.gtin,
            save.saved_at,
        ],
        |row| row.get(0),
    )?;
    get_product(tx, id)
}

pub(super) fn get_product(conn: &Connection, id: ProductId) -> Result<ProductRecord, CatalogError> {
    let mut stmt = conn.prepare_cached(
        "SELECT p.id, p.photo_id, p.attempt_id, p.proposed_json, p.saved_json, p.revision, p.created_at,
                p.updated_at, ph.sha256, ph.original_path, ph.thumbnail_jpeg
         FROM products p JOIN photos ph ON ph.id = p.photo_id
         WHERE p.id = ?1",
    )?;
    stmt.query_row([id], |row| {
        Ok(ProductRecord {
            id: row.get(0)?,
            photo_id: row.get(1)?,
            attempt_id: row.get(2)?,
            proposed: json_column(row, 3)?,
            saved: json_column::<Product>(row, 4)?.ok_or_else(|| conversion_error(4, "saved_json is NULL".into()))?,
            revision: row.get(5)?,
            created_at: row.get(6)?,
            updated_at: row.get(7)?,
            sha256: row.get(8)?,
            original_path: row.get(9)?,
            thumbnail: thumbnail_url(row.get_ref(10)?.as_blob()?),
        })
    })
    .optional()?
    .ok_or(CatalogError::NotFound { what: "product", id })
}

pub(super) fn list_products(conn: &Connection, offset: u32, limit: u32) -> Result<Vec<ProductSummary>, CatalogError> {
    let mut stmt = conn.prepare_cached(
        "SELECT p.id, p.photo_id, p.name, p.brand, p.category, p.price_amount, p.price_currency, p.gtin,
                p.revision, p.updated_at, ph.thumbnail_jpeg
         FROM products p JOIN photos ph ON ph.id = p.photo_id
         ORDER BY p.updated_at DESC, p.id DESC
         LIMIT ?1 OFFSET ?2",
    )?;
    let rows = stmt.query_map([limit, offset], summary_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Full-text search (`products_fts`, migration 0002), best match first: bm25 with the name
/// weighted highest, then brand, category, and description and attributes; ties newest first.
/// A query without searchable terms lists the products like [`list_products`].
pub(super) fn search_products(
    conn: &Connection,
    query: &str,
    offset: u32,
    limit: u32,
) -> Result<Vec<ProductSummary>, CatalogError> {
    let Some(fts_query) = fts_query(query) else {
        return list_products(conn, offset, limit);
    };
    let mut stmt = conn.prepare_cached(
        "SELECT p.id, p.photo_id, p.name, p.brand, p.category, p.price_amount, p.price_currency, p.gtin,
                p.revision, p.updated_at, ph.thumbnail_jpeg
         FROM products_fts
         JOIN products p ON p.id = products_fts.rowid
         JOIN photos ph ON ph.id = p.photo_id
         WHERE products_fts MATCH ?1
         ORDER BY bm25(products_fts, 10.0, 4.0, 2.0, 1.0, 1.0), p.updated_at DESC, p.id DESC
         LIMIT ?2 OFFSET ?3",
    )?;
    let rows = stmt.query_map(params![fts_query, limit, offset], summary_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The user's text as an FTS5 query: every whitespace-separated term becomes a quoted prefix term
/// (`"term"*`, inner quotes doubled), all of which must match. Quoting makes every character
/// literal, so operators (`AND`, `NOT`, `NEAR`), `*`, `(`, `-`, `:` and column filters in the
/// input are searched as text, never parsed. Terms with no letter or digit (which the tokenizer
/// would drop) are skipped; `None` when nothing searchable is left.
fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split_whitespace()
        .filter(|term| term.chars().any(char::is_alphanumeric))
        .map(|term| format!("\"{}\"*", term.replace('"', "\"\"")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// A row of `products p JOIN photos ph` in the column order of [`list_products`].
fn summary_row(row: &Row<'_>) -> rusqlite::Result<ProductSummary> {
    let amount: Option<f64> = row.get(5)?;
    let currency: Option<String> = row.get(6)?;
    Ok(ProductSummary {
        id: row.get(0)?,
        photo_id: row.get(1)?,
        name: row.get(2)?,
        brand: row.get(3)?,
        category: row.get(4)?,
        price: amount.zip(currency).map(|(amount, currency)| Price { amount, currency }),
        gtin: row.get(7)?,
        revision: row.get(8)?,
        updated_at: row.get(9)?,
        thumbnail: thumbnail_url(row.get_ref(10)?.as_blob()?),
    })
}

pub(super) fn product_for_photo(conn: &Connection, photo: PhotoId) -> Result<Option<ProductId>, CatalogError> {
    Ok(conn.query_row("SELECT id FROM products WHERE photo_id = ?1", [photo], |row| row.get(0)).optional()?)
}

pub(super) fn count_products(conn: &Connection) -> Result<u64, CatalogError> {
    Ok(conn.query_row("SELECT count(*) FROM products", [], |row| get_u64(row, 0))?)
}

/// `data:image/jpeg;base64,…` for an `<img src>`.
pub(crate) fn thumbnail_url(jpeg: &[u8]) -> String {
    format!("data:image/jpeg;base64,{}", base64::engine::general_purpose::STANDARD.encode(jpeg))
}

/// The API checks references itself, so callers get `NotFound` rather than a foreign key error.
fn require_photo(conn: &Connection, photo: PhotoId) -> Result<(), CatalogError> {
    let exists: bool = conn.query_row("SELECT EXISTS (SELECT 1 FROM photos WHERE id = ?1)", [photo], |r| r.get(0))?;
    if exists {
        Ok(())
    } else {
        Err(CatalogError::NotFound { what: "photo", id: photo })
    }
}

fn to_i64(field: &str, value: u64) -> Result<i64, CatalogError> {
    i64::try_from(value).map_err(|_| CatalogError::invalid(field, format!("{value} is too large")))
}

/// A non-negative INTEGER column (rusqlite reads `u64` only with a feature we do not need).
fn get_u64(row: &Row<'_>, idx: usize) -> rusqlite::Result<u64> {
    let value: i64 = row.get(idx)?;
    u64::try_from(value).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(idx, value))
}

/// A nullable JSON text column, parsed.
fn json_column<T: DeserializeOwned>(row: &Row<'_>, idx: usize) -> rusqlite::Result<Option<T>> {
    match row.get_ref(idx)?.as_str_or_null()? {
        None => Ok(None),
        Some(text) => serde_json::from_str(text)
            .map(Some)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(e))),
    }
}

fn parse_error_code(idx: usize, code: &str) -> rusqlite::Result<ErrorCode> {
    serde_json::from_value(serde_json::Value::String(code.to_string()))
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(e)))
}

fn conversion_error(idx: usize, message: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_term_is_a_quoted_prefix_term() {
        assert_eq!(fts_query("  "), None);
        assert_eq!(fts_query("( - * :"), None);
        assert_eq!(fts_query("gran"), Some(r#""gran"*"#.into()));
        assert_eq!(fts_query("oat  AND\tmilk"), Some(r#""oat"* "AND"* "milk"*"#.into()));
        assert_eq!(fts_query(r#"12" name:x"#), Some(r#""12"""* "name:x"*"#.into()));
        assert_eq!(fts_query("crème"), Some(r#""crème"*"#.into()));
    }
}
