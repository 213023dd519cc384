//! The SQL, as synchronous functions over a connection. They run on the catalog thread only;
//! every function that writes does so in one short `BEGIN IMMEDIATE` transaction.

use rusqlite::types::Type;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::columns::{conversion_error, get_u64, json_column, to_i64};
// `import::store` reads the thumbnail helper from here.
pub(crate) use super::columns::thumbnail_url;
use super::records::*;
use super::CatalogError;
use crate::barcode::{self, Barcode};
use crate::error::ErrorCode;
use crate::pricing::Usd;
use crate::product::{FlagKind, Product};

pub(super) fn record_photo(conn: &mut Connection, photo: &NewPhoto) -> Result<PhotoId, CatalogError> {
    let sha256 = photo.sha256.to_ascii_lowercase();
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CatalogError::invalid("sha256", "must be 64 hexadecimal digits"));
    }
    let file_bytes = to_i64("file_bytes", photo.file_bytes)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let id = tx.query_row(
        "INSERT INTO photos (sha256, original_path, file_bytes, width, height, format, thumbnail_jpeg,
                             first_seen_at, last_seen_at, original_path_bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9)
         ON CONFLICT (sha256) DO UPDATE SET
             original_path = excluded.original_path,
             original_path_bytes = excluded.original_path_bytes,
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
            photo.seen_at,
            photo.original_path_bytes
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
pub(super) fn record_attempt_in(tx: &Connection, attempt: &NewAttempt) -> Result<AttemptId, CatalogError> {
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
                               error_message, raw_response, cached_tokens, model_version, cost_nanos, batch,
                               barcodes_json, sources_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)
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
            usage.map(|u| u.cached_tokens),
            attempt.model_version,
            attempt.cost.map(Usd::nanos),
            attempt.batch,
            attempt.barcodes.as_ref().map(serde_json::to_string).transpose()?,
            matches!(attempt.outcome, AttemptOutcome::Proposed { .. })
                .then(|| serde_json::to_string(&attempt.sources))
                .transpose()?,
        ],
        |row| row.get(0),
    )?;
    for (position, photo) in (1i64..).zip(&attempt.more_photos) {
        require_photo(tx, *photo)?;
        tx.execute(
            "INSERT INTO attempt_photos (attempt_id, position, photo_id) VALUES (?1, ?2, ?3)",
            params![id, position, photo],
        )?;
    }
    Ok(id)
}

pub(super) fn product_photos(conn: &Connection, product: ProductId) -> Result<Vec<PhotoRef>, CatalogError> {
    let mut stmt = conn.prepare_cached(
        "SELECT ph.id, ph.original_path, ph.original_path_bytes FROM (
             SELECT photo_id, 0 AS position FROM products WHERE id = ?1
             UNION ALL
             SELECT photo_id, position FROM product_photos WHERE product_id = ?1
         ) x JOIN photos ph ON ph.id = x.photo_id
         ORDER BY x.position",
    )?;
    let rows = stmt.query_map([product], |r| {
        let path = crate::stored_path::StoredPath::from_stored(r.get(1)?, r.get(2)?);
        Ok(PhotoRef { photo_id: r.get(0)?, path: path.text().to_owned(), path_bytes: path.bytes_hex() })
    })?;
    let photos: Vec<PhotoRef> = rows.collect::<Result<_, _>>()?;
    if photos.is_empty() {
        return Err(CatalogError::NotFound { what: "product", id: product });
    }
    Ok(photos)
}

pub(super) fn photo_thumbnail(conn: &Connection, photo: PhotoId) -> Result<Option<String>, CatalogError> {
    Ok(conn
        .query_row("SELECT thumbnail_jpeg FROM photos WHERE id = ?1", [photo], |r| {
            Ok(thumbnail_url(r.get_ref(0)?.as_blob()?))
        })
        .optional()?)
}

pub(super) fn attempts(conn: &Connection, photo: PhotoId) -> Result<Vec<AttemptRecord>, CatalogError> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, photo_id, model, started_at, latency_ms, prompt_tokens, output_tokens, thoughts_tokens,
                total_tokens, outcome, error_code, error_message, proposal_json, raw_response,
                cached_tokens, model_version, cost_nanos, batch
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
            cached_tokens: row.get(14)?,
            model_version: row.get(15)?,
            cost_usd: row.get::<_, Option<i64>>(16)?.map(Usd::from_nanos),
            batch: row.get(17)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn save_product(conn: &mut Connection, save: &SaveProduct) -> Result<ProductRecord, CatalogError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let record = save_product_in(&tx, save, RevisionSource::Review)?;
    tx.commit()?;
    Ok(record)
}

/// [`save_product`] inside the caller's transaction, recording `source` in the history (the
/// import queue saves a product together with its item's `saved`, as [`RevisionSource::Import`]).
pub(super) fn save_product_in(
    tx: &Connection,
    save: &SaveProduct,
    source: RevisionSource,
) -> Result<ProductRecord, CatalogError> {
    refuse_invalid(&save.saved)?;
    let saved_json = serde_json::to_string(&save.saved)?;
    let columns = ListingColumns::of(&save.saved);
    require_photo(tx, save.photo_id)?;
    let proposed_json: Option<String> = match save.attempt_id {
        None => None,
        Some(attempt) => {
            let (photo, proposal) = attempt_of(tx, attempt)?;
            if photo != save.photo_id {
                return Err(CatalogError::invalid(
                    "attempt_id",
                    format!("attempt {attempt} belongs to photo {photo}, not to photo {}", save.photo_id),
                ));
            }
            proposal
        }
    };
    // The conflict target is the partial unique index products_one_per_photo: the photo's
    // extracted product (never a duplicate). Saving over a deleted one brings it back.
    let id: ProductId = tx.query_row(
        "INSERT INTO products (photo_id, attempt_id, proposed_json, saved_json, revision, name, brand, category,
                               price_amount, price_currency, gtin, flagged, created_at, updated_at, updated_by)
         VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13)
         ON CONFLICT (photo_id) WHERE duplicate_of IS NULL DO UPDATE SET
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
             flagged = excluded.flagged,
             updated_at = excluded.updated_at,
             updated_by = excluded.updated_by,
             deleted_at = NULL,
             deleted_by = NULL
         RETURNING id",
        params![
            save.photo_id,
            save.attempt_id,
            proposed_json,
            saved_json,
            columns.name,
            columns.brand,
            columns.category,
            columns.price_amount,
            columns.price_currency,
            columns.gtin,
            columns.flagged,
            save.saved_at,
            save.saved_by,
        ],
        |row| row.get(0),
    )?;
    insert_revision(tx, id, source)?;
    get_product(tx, id)
}

/// Refuses a product with invalid fields, naming them (uncertain fields are fine).
pub(super) fn refuse_invalid(product: &Product) -> Result<(), CatalogError> {
    let flags = product.validate();
    let invalid: Vec<_> = flags.iter().filter(|f| f.kind == FlagKind::Invalid).collect();
    if invalid.is_empty() {
        return Ok(());
    }
    let message = invalid.iter().map(|f| format!("{}: {}", f.field, f.message)).collect::<Vec<_>>().join("; ");
    let fields = invalid.into_iter().map(|f| f.field.clone()).collect();
    Err(CatalogError::Invalid { fields, message, flags })
}

/// The columns of `products` denormalized from the saved product.
pub(super) struct ListingColumns<'a> {
    pub name: &'a str,
    pub brand: Option<&'a str>,
    pub category: Option<&'a str>,
    pub price_amount: Option<f64>,
    pub price_currency: Option<&'a str>,
    pub gtin: Option<&'a str>,
    /// `validate().len()`: a saved product has no invalid fields, so these are its uncertain ones.
    pub flagged: u32,
}

impl<'a> ListingColumns<'a> {
    pub(super) fn of(product: &'a Product) -> Self {
        Self {
            name: &product.name,
            brand: product.brand.as_deref(),
            category: product.category.as_deref(),
            price_amount: product.price.as_ref().map(|p| p.amount),
            price_currency: product.price.as_ref().map(|p| p.currency.as_str()),
            gtin: product.gtin.as_deref(),
            flagged: u32::try_from(product.validate().len()).unwrap_or(u32::MAX),
        }
    }
}

/// The photo an attempt belongs to and its proposal (`None` when it failed); `NotFound` if the
/// attempt does not exist.
pub(super) fn attempt_of(conn: &Connection, attempt: AttemptId) -> Result<(PhotoId, Option<String>), CatalogError> {
    conn.query_row("SELECT photo_id, proposal_json FROM attempts WHERE id = ?1", [attempt], |row| {
        Ok((row.get(0)?, row.get(1)?))
    })
    .optional()?
    .ok_or(CatalogError::NotFound { what: "attempt", id: attempt })
}

/// Appends the product's current state to its history, as revision `products.revision`. Every
/// write of `saved_json` calls this in the same transaction.
pub(super) fn insert_revision(conn: &Connection, id: ProductId, source: RevisionSource) -> Result<(), CatalogError> {
    conn.prepare_cached(
        "INSERT INTO product_revisions (product_id, revision, saved_json, proposed_json, attempt_id, source,
                                        saved_by, saved_at)
         SELECT id, revision, saved_json, proposed_json, attempt_id, ?2, updated_by, updated_at
         FROM products WHERE id = ?1",
    )?
    .execute(params![id, source.as_str()])?;
    Ok(())
}

pub(super) fn get_product(conn: &Connection, id: ProductId) -> Result<ProductRecord, CatalogError> {
    let mut stmt = conn.prepare_cached(
        "SELECT p.id, p.photo_id, p.attempt_id, p.proposed_json, p.saved_json, p.revision, p.created_at,
                p.updated_at, ph.sha256, ph.original_path, ph.thumbnail_jpeg, p.updated_by, p.duplicate_of,
                p.deleted_at, p.deleted_by, ph.original_path_bytes, a.barcodes_json
         FROM products p JOIN photos ph ON ph.id = p.photo_id LEFT JOIN attempts a ON a.id = p.attempt_id
         WHERE p.id = ?1",
    )?;
    stmt.query_row([id], |row| {
        let saved = json_column::<Product>(row, 4)?.ok_or_else(|| conversion_error(4, "saved_json is NULL".into()))?;
        let proposed: Option<Product> = json_column(row, 3)?;
        let barcodes: Vec<Barcode> = json_column(row, 16)?.unwrap_or_default();
        let proposed_gtin = proposed.as_ref().and_then(|p| p.gtin.as_deref());
        Ok(ProductRecord {
            id: row.get(0)?,
            photo_id: row.get(1)?,
            attempt_id: row.get(2)?,
            gtin_source: barcode::gtin_source(saved.gtin.as_deref(), proposed_gtin, &barcodes),
            proposed,
            flags: saved.validate(),
            saved,
            revision: row.get(5)?,
            created_at: row.get(6)?,
            updated_at: row.get(7)?,
            updated_by: row.get(11)?,
            duplicate_of: row.get(12)?,
            deleted_at: row.get(13)?,
            deleted_by: row.get(14)?,
            sha256: row.get(8)?,
            original_path: row.get(9)?,
            original_path_bytes: row.get::<_, Option<Vec<u8>>>(15)?.map(hex::encode),
            thumbnail: thumbnail_url(row.get_ref(10)?.as_blob()?),
        })
    })
    .optional()?
    .ok_or(CatalogError::NotFound { what: "product", id })
}

/// The photo's extracted product (not a duplicate), deleted or not: saving the photo again
/// updates this one.
pub(super) fn product_for_photo(conn: &Connection, photo: PhotoId) -> Result<Option<ProductId>, CatalogError> {
    Ok(conn
        .query_row("SELECT id FROM products WHERE photo_id = ?1 AND duplicate_of IS NULL", [photo], |row| row.get(0))
        .optional()?)
}

/// The API checks references itself, so callers get `NotFound` rather than a foreign key error.
pub(super) fn require_photo(conn: &Connection, photo: PhotoId) -> Result<(), CatalogError> {
    let exists: bool = conn.query_row("SELECT EXISTS (SELECT 1 FROM photos WHERE id = ?1)", [photo], |r| r.get(0))?;
    if exists {
        Ok(())
    } else {
        Err(CatalogError::NotFound { what: "photo", id: photo })
    }
}

fn parse_error_code(idx: usize, code: &str) -> rusqlite::Result<ErrorCode> {
    serde_json::from_value(serde_json::Value::String(code.to_string()))
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(e)))
}
