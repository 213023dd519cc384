//! The SQL, as synchronous functions over a connection. They run on the catalog thread only;
//! every function that writes does so in one short `BEGIN IMMEDIATE` transaction.

use rusqlite::params;
use rusqlite::types::Type;

use super::columns::{conversion_error, get_u64, json_column, to_i64};
use super::db::{Db, Dialect, OptionalRow};
use super::records::*;
use super::CatalogError;
use crate::barcode::{self, Barcode};
use crate::error::ErrorCode;
use crate::pricing::Usd;
use crate::product::{FlagKind, Product};

pub(super) fn record_photo(conn: &Db<'_>, photo: &NewPhoto) -> Result<PhotoId, CatalogError> {
    let tx = conn.transaction()?;
    let id = insert_photo(&tx, photo)?;
    tx.commit()?;
    Ok(id)
}

/// Inserts (or refreshes) the photo's row inside the caller's transaction.
fn insert_photo(conn: &Db<'_>, photo: &NewPhoto) -> Result<PhotoId, CatalogError> {
    let sha256 = photo.sha256.to_ascii_lowercase();
    if !super::is_photo_hash(&sha256) {
        return Err(CatalogError::invalid("sha256", "must be 64 hexadecimal digits"));
    }
    let file_bytes = to_i64("file_bytes", photo.file_bytes)?;
    Ok(conn.query_row(
        "INSERT INTO photos (sha256, original_path, file_bytes, width, height, format, thumbnail_jpeg,
                             first_seen_at, last_seen_at, original_path_bytes, original_host)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10)
         ON CONFLICT (sha256) DO UPDATE SET
             original_path = excluded.original_path,
             original_path_bytes = excluded.original_path_bytes,
             original_host = excluded.original_host,
             last_seen_at = CASE WHEN photos.last_seen_at > excluded.last_seen_at THEN photos.last_seen_at
                                 ELSE excluded.last_seen_at END
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
            photo.original_path_bytes,
            super::local_host(),
        ],
        |row| row.get(0),
    )?)
}

/// [`record_photo`] and, on a server, its prepared image (`photo_images`, pg/0009) in the same
/// transaction; on SQLite the photo alone (the files are on this computer).
pub(super) fn record_prepared_photo(
    conn: &Db<'_>,
    photo: &NewPhoto,
    prepared: &PreparedCopy,
) -> Result<PhotoId, CatalogError> {
    if conn.dialect() == Dialect::Sqlite {
        return record_photo(conn, photo);
    }
    let tx = conn.transaction()?;
    let id = insert_photo(&tx, photo)?;
    tx.execute(
        "INSERT INTO photo_images (photo_id, jpeg, width, height, barcodes_json, stored_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (photo_id) DO UPDATE SET jpeg = excluded.jpeg, width = excluded.width,
             height = excluded.height, barcodes_json = excluded.barcodes_json, stored_at = excluded.stored_at",
        params![
            id,
            prepared.jpeg,
            prepared.width,
            prepared.height,
            serde_json::to_string(&prepared.barcodes)?,
            photo.seen_at
        ],
    )?;
    tx.commit()?;
    Ok(id)
}

/// The prepared image a server catalog keeps of the photo with `sha256`, with what the photo's
/// row says of its original; `None` on SQLite, or when none was kept.
pub(super) fn stored_prepared(conn: &Db<'_>, sha256: &str) -> Result<Option<StoredPrepared>, CatalogError> {
    if conn.dialect() == Dialect::Sqlite {
        return Ok(None);
    }
    let row = conn
        .query_row(
            "SELECT p.id, i.jpeg, i.width, i.height, i.barcodes_json, p.width, p.height, p.format, p.file_bytes,
                    p.thumbnail_jpeg
             FROM photos p JOIN photo_images i ON i.photo_id = p.id
             WHERE p.sha256 = ?1",
            params![sha256.to_ascii_lowercase()],
            |r| {
                Ok(StoredPrepared {
                    photo_id: r.get(0)?,
                    sha256: sha256.to_ascii_lowercase(),
                    jpeg: r.get(1)?,
                    width: r.get(2)?,
                    height: r.get(3)?,
                    barcodes: json_column(r, 4)?.unwrap_or_default(),
                    original_width: r.get(5)?,
                    original_height: r.get(6)?,
                    format: r.get(7)?,
                    file_bytes: get_u64(r, 8)?,
                    thumbnail_jpeg: r.get(9)?,
                })
            },
        )
        .optional()?;
    Ok(row)
}

/// The prepared image a server catalog keeps of a photo (`None` on SQLite, or none kept).
pub(super) fn prepared_image(conn: &Db<'_>, photo: PhotoId) -> Result<Option<Vec<u8>>, CatalogError> {
    if conn.dialect() == Dialect::Sqlite {
        return Ok(None);
    }
    Ok(conn.query_row("SELECT jpeg FROM photo_images WHERE photo_id = ?1", params![photo], |r| r.get(0)).optional()?)
}

pub(super) fn record_attempt(conn: &Db<'_>, attempt: &NewAttempt) -> Result<AttemptId, CatalogError> {
    let tx = conn.transaction()?;
    let id = record_attempt_in(&tx, attempt)?;
    tx.commit()?;
    Ok(id)
}

/// [`record_attempt`] inside the caller's transaction (the import queue records an attempt
/// together with its item's new state).
pub(super) fn record_attempt_in(tx: &Db<'_>, attempt: &NewAttempt) -> Result<AttemptId, CatalogError> {
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

pub(super) fn product_photos(conn: &Db<'_>, product: ProductId) -> Result<Vec<PhotoRef>, CatalogError> {
    let photos = conn.query_map(
        "SELECT ph.id, ph.original_path, ph.original_path_bytes, ph.sha256 FROM (
             SELECT photo_id, 0 AS position FROM products WHERE id = ?1
             UNION ALL
             SELECT photo_id, position FROM product_photos WHERE product_id = ?1
         ) x JOIN photos ph ON ph.id = x.photo_id
         ORDER BY x.position",
        params![product],
        |r| {
            let path = crate::stored_path::StoredPath::from_stored(r.get(1)?, r.get(2)?);
            Ok(PhotoRef {
                photo_id: r.get(0)?,
                path: path.text().to_owned(),
                path_bytes: path.bytes_hex(),
                sha256: r.get(3)?,
            })
        },
    )?;
    if photos.is_empty() {
        return Err(CatalogError::NotFound { what: "product", id: product });
    }
    Ok(photos)
}

/// The thumbnail of the photo with `sha256` (lowercase hex); `None` when the catalog has no such
/// photo, or `sha256` is not a hash (never a query then).
pub(super) fn thumbnail_jpeg(conn: &Db<'_>, sha256: &str) -> Result<Option<Vec<u8>>, CatalogError> {
    if !super::is_photo_hash(sha256) {
        return Ok(None);
    }
    Ok(conn
        .query_row("SELECT thumbnail_jpeg FROM photos WHERE sha256 = ?1", params![sha256], |r| r.get(0))
        .optional()?)
}

pub(super) fn attempts(conn: &Db<'_>, photo: PhotoId) -> Result<Vec<AttemptRecord>, CatalogError> {
    let rows = conn.query_map(
        "SELECT id, photo_id, model, started_at, latency_ms, prompt_tokens, output_tokens, thoughts_tokens,
                total_tokens, outcome, error_code, error_message, CAST(proposal_json AS TEXT), raw_response,
                cached_tokens, model_version, cost_nanos, batch
         FROM attempts WHERE photo_id = ?1 ORDER BY id",
        params![photo],
        |row| {
            let outcome = match row.get_ref(9)?.as_str()? {
                "proposed" => AttemptOutcomeKind::Proposed,
                "failed" => AttemptOutcomeKind::Failed,
                other => return Err(conversion_error(9, format!("unknown outcome {other:?}"))),
            };
            let error_code = match row.get::<Option<String>>(10)? {
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
                cost_usd: row.get::<Option<i64>>(16)?.map(Usd::from_nanos),
                batch: row.get(17)?,
            })
        },
    )?;
    Ok(rows)
}

pub(super) fn save_product(conn: &Db<'_>, save: &SaveProduct) -> Result<ProductRecord, CatalogError> {
    let tx = conn.transaction()?;
    let record = save_product_in(&tx, save, RevisionSource::Review)?;
    tx.commit()?;
    Ok(record)
}

/// [`save_product`] inside the caller's transaction, recording `source` in the history (the
/// import queue saves a product together with its item's `saved`, as [`RevisionSource::Import`]).
pub(super) fn save_product_in(
    tx: &Db<'_>,
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
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let (columns, values) = listed_columns_sql(7);
        let updates: Vec<String> = listed_column_names().iter().map(|c| format!("{c} = excluded.{c}")).collect();
        format!(
            "INSERT INTO products (photo_id, attempt_id, proposed_json, saved_json, revision, created_at, updated_at,
                                   updated_by, {columns})
             VALUES (?1, ?2, ?3, ?4, 1, ?5, ?5, ?6, {values})
             ON CONFLICT (photo_id) WHERE duplicate_of IS NULL DO UPDATE SET
                 attempt_id = coalesce(excluded.attempt_id, products.attempt_id),
                 proposed_json = CASE WHEN excluded.attempt_id IS NULL THEN products.proposed_json
                                      ELSE excluded.proposed_json END,
                 saved_json = excluded.saved_json,
                 revision = products.revision + 1,
                 updated_at = excluded.updated_at,
                 updated_by = excluded.updated_by,
                 deleted_at = NULL,
                 deleted_by = NULL,
                 {}
             RETURNING id",
            updates.join(", ")
        )
    });
    let id: ProductId = tx.query_row(
        sql,
        &columns.after(params![
            save.photo_id,
            save.attempt_id,
            proposed_json,
            saved_json,
            save.saved_at,
            save.saved_by
        ]),
        |row| row.get(0),
    )?;
    insert_revision(tx, id, source)?;
    notify_changed(tx, id)?;
    get_product(tx, id)
}

/// On a server, tells the other desktops that product `id` changed: `NOTIFY` inside the write's
/// transaction, so only a committed write is heard (see [`super::server_changes`]). Nothing on
/// SQLite, whose file one desktop has to itself.
pub(super) fn notify_changed(tx: &Db<'_>, id: ProductId) -> Result<(), CatalogError> {
    if tx.dialect() == Dialect::Postgres {
        tx.execute("SELECT pg_notify(?1, ?2)", params![super::server_changes::CHANNEL, id.to_string()])?;
    }
    Ok(())
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

/// The columns of `products` denormalized from the saved product, driven by the field table:
/// one per listed field ([`crate::product::ProductField::listed`]), two for a two-part field
/// (`price_amount`, `price_currency`), as [`listed_column_names`] names them, then `flagged`
/// (`validate().len()`: a saved product has no invalid fields, so these are its uncertain ones).
/// The statements that write them ([`save_product_in`], `revisions::update_product`,
/// `revisions::duplicate_product`) take their column lists from here.
pub(super) struct ListingColumns {
    values: Vec<rusqlite::types::Value>,
}

impl ListingColumns {
    pub(super) fn of(product: &Product) -> Self {
        use crate::product::{Value, PRODUCT_FIELDS};
        use rusqlite::types::Value as Sql;
        let text = |t: Option<&str>| t.map_or(Sql::Null, |t| Sql::Text(t.to_owned()));
        let number = |n: Option<f64>| n.map_or(Sql::Null, Sql::Real);
        let mut values = Vec::new();
        for field in PRODUCT_FIELDS.iter().filter(|f| f.listed) {
            match product.value(field.key) {
                Value::Text(t) => values.push(text(t)),
                Value::Price(p) => values.extend([number(p.map(|p| p.amount)), text(p.map(|p| p.currency.as_str()))]),
                Value::NetContent(c) => values.extend([number(c.map(|c| c.value)), text(c.map(|c| c.unit.as_str()))]),
                // A list has no column (`listed_column_names` leaves it out too).
                Value::Attributes(_) | Value::FieldNames(_) => {}
            }
        }
        values.push(Sql::Integer(i64::try_from(product.validate().len()).unwrap_or(i64::MAX)));
        Self { values }
    }

    /// The values, in [`listed_column_names`]' order, after `fixed` (the statement's own
    /// parameters, `?1` to `?N`).
    pub(super) fn after<'p>(&'p self, fixed: &[&'p dyn rusqlite::ToSql]) -> Vec<&'p dyn rusqlite::ToSql> {
        fixed.iter().copied().chain(self.values.iter().map(|v| v as &dyn rusqlite::ToSql)).collect()
    }
}

/// The `products` columns [`ListingColumns`] writes, in its order (`flagged` last).
pub(super) fn listed_column_names() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        use crate::product::{FieldKind, PRODUCT_FIELDS};
        // A list has no column (`ListingColumns::of` writes none for it).
        let columns = |f: &crate::product::ProductField| match f.kind {
            FieldKind::Attributes | FieldKind::FieldNames => Vec::new(),
            _ => f.column_names(),
        };
        let mut names: Vec<String> = PRODUCT_FIELDS.iter().filter(|f| f.listed).flat_map(columns).collect();
        names.push("flagged".into());
        names
    })
}

/// The listed columns for a statement: their names joined (`name, brand, …, flagged`), and their
/// placeholders from `?first` on.
pub(super) fn listed_columns_sql(first: usize) -> (String, String) {
    let names = listed_column_names();
    let placeholders = (first..first + names.len()).map(|n| format!("?{n}")).collect::<Vec<_>>().join(", ");
    (names.join(", "), placeholders)
}

/// The photo an attempt belongs to and its proposal (`None` when it failed); `NotFound` if the
/// attempt does not exist.
pub(super) fn attempt_of(conn: &Db<'_>, attempt: AttemptId) -> Result<(PhotoId, Option<String>), CatalogError> {
    conn.query_row(
        "SELECT photo_id, CAST(proposal_json AS TEXT) FROM attempts WHERE id = ?1",
        params![attempt],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()?
    .ok_or(CatalogError::NotFound { what: "attempt", id: attempt })
}

/// Appends the product's current state to its history, as revision `products.revision`. Every
/// write of `saved_json` calls this in the same transaction.
pub(super) fn insert_revision(conn: &Db<'_>, id: ProductId, source: RevisionSource) -> Result<(), CatalogError> {
    conn.execute(
        "INSERT INTO product_revisions (product_id, revision, saved_json, proposed_json, attempt_id, source,
                                        saved_by, saved_at)
         SELECT id, revision, saved_json, proposed_json, attempt_id, ?2, updated_by, updated_at
         FROM products WHERE id = ?1",
        params![id, source.as_str()],
    )?;
    Ok(())
}

/// The columns [`get_product`] reads, in this order (both backends' SELECT lists).
/// The JSON columns are read as text (`CAST` is the same in both dialects; the server's are `json`).
pub(super) const PRODUCT_RECORD_COLUMNS: &str = "p.id, p.photo_id, p.attempt_id, CAST(p.proposed_json AS TEXT), \
     CAST(p.saved_json AS TEXT), p.revision, p.created_at, p.updated_at, ph.sha256, ph.original_path, \
     ph.original_host, p.updated_by, p.duplicate_of, p.deleted_at, p.deleted_by, ph.original_path_bytes, \
     CAST(a.barcodes_json AS TEXT)";

/// FROM and JOINs of [`PRODUCT_RECORD_COLUMNS`].
pub(super) const PRODUCT_RECORD_FROM: &str =
    "products p JOIN photos ph ON ph.id = p.photo_id LEFT JOIN attempts a ON a.id = p.attempt_id";

/// A product's row as stored (either backend), before it becomes a [`ProductRecord`]: the one
/// place the record's derived parts (flags, where the GTIN came from) are worked out.
pub(super) struct StoredProduct {
    pub id: ProductId,
    pub photo_id: PhotoId,
    pub attempt_id: Option<AttemptId>,
    pub proposed_json: Option<String>,
    pub saved_json: String,
    pub revision: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub sha256: String,
    pub original_path: String,
    pub updated_by: String,
    pub duplicate_of: Option<ProductId>,
    pub deleted_at: Option<i64>,
    pub deleted_by: Option<String>,
    pub original_path_bytes: Option<Vec<u8>>,
    pub barcodes_json: Option<String>,
    pub original_host: Option<String>,
}

impl StoredProduct {
    pub(super) fn into_record(self) -> Result<ProductRecord, CatalogError> {
        let saved: Product = serde_json::from_str(&self.saved_json)?;
        let proposed: Option<Product> = self.proposed_json.as_deref().map(serde_json::from_str).transpose()?;
        let barcodes: Vec<Barcode> =
            self.barcodes_json.as_deref().map(serde_json::from_str).transpose()?.unwrap_or_default();
        let proposed_gtin = proposed.as_ref().and_then(|p| p.gtin.as_deref());
        Ok(ProductRecord {
            id: self.id,
            photo_id: self.photo_id,
            attempt_id: self.attempt_id,
            gtin_source: barcode::gtin_source(saved.gtin.as_deref(), proposed_gtin, &barcodes),
            proposed,
            flags: saved.validate(),
            saved,
            revision: u32::try_from(self.revision).unwrap_or(u32::MAX),
            created_at: self.created_at,
            updated_at: self.updated_at,
            updated_by: self.updated_by,
            duplicate_of: self.duplicate_of,
            deleted_at: self.deleted_at,
            deleted_by: self.deleted_by,
            sha256: self.sha256,
            original_path: self.original_path,
            original_path_bytes: self.original_path_bytes.map(hex::encode),
            original_host: self.original_host,
        })
    }
}

pub(super) fn get_product(conn: &Db<'_>, id: ProductId) -> Result<ProductRecord, CatalogError> {
    let stored = conn
        .query_row(
            &format!("SELECT {PRODUCT_RECORD_COLUMNS} FROM {PRODUCT_RECORD_FROM} WHERE p.id = ?1"),
            params![id],
            |row| {
                Ok(StoredProduct {
                    id: row.get(0)?,
                    photo_id: row.get(1)?,
                    attempt_id: row.get(2)?,
                    proposed_json: row.get(3)?,
                    saved_json: row.get(4)?,
                    revision: row.get(5)?,
                    created_at: row.get(6)?,
                    updated_at: row.get(7)?,
                    sha256: row.get(8)?,
                    original_path: row.get(9)?,
                    updated_by: row.get(11)?,
                    duplicate_of: row.get(12)?,
                    deleted_at: row.get(13)?,
                    deleted_by: row.get(14)?,
                    original_path_bytes: row.get(15)?,
                    barcodes_json: row.get(16)?,
                    original_host: row.get(10)?,
                })
            },
        )
        .optional()?
        .ok_or(CatalogError::NotFound { what: "product", id })?;
    stored.into_record()
}

/// The photo's extracted product (not a duplicate), deleted or not: saving the photo again
/// updates this one.
pub(super) fn product_for_photo(db: &Db<'_>, photo: PhotoId) -> Result<Option<ProductId>, CatalogError> {
    Ok(db
        .query_row("SELECT id FROM products WHERE photo_id = ?1 AND duplicate_of IS NULL", params![photo], |row| {
            row.get(0)
        })
        .optional()?)
}

/// The API checks references itself, so callers get `NotFound` rather than a foreign key error.
pub(super) fn require_photo(conn: &Db<'_>, photo: PhotoId) -> Result<(), CatalogError> {
    let exists: bool =
        conn.query_row("SELECT EXISTS (SELECT 1 FROM photos WHERE id = ?1)", params![photo], |r| r.get(0))?;
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
