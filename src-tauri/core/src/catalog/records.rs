//! What goes into the catalog and what comes out: plain inputs, and the DTOs the UI sees
//! (serde + ts-rs; every `i64`/`u64` is a TypeScript `number`).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::barcode::{Barcode, GtinSource};
use crate::error::ErrorCode;
use crate::pricing::{BilledTokens, Usd};
use crate::product::{FieldChange, FieldFlag, Price, Product};

/// A row of `photos`.
pub type PhotoId = i64;
/// A row of `attempts`.
pub type AttemptId = i64;
/// A row of `products`.
pub type ProductId = i64;

/// A prepared photo, as intake describes it. The same bytes (SHA-256) are the same photo.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPhoto {
    /// Lower- or upper-case hex SHA-256 of the original file (stored lower-case).
    pub sha256: String,
    /// For display (lossy when the path is not valid UTF-8).
    pub original_path: String,
    /// The exact bytes when the path is not valid UTF-8 ([`crate::stored_path`]).
    pub original_path_bytes: Option<Vec<u8>>,
    pub file_bytes: u64,
    pub width: u32,
    pub height: u32,
    /// The detected format, e.g. "jpeg".
    pub format: String,
    pub thumbnail_jpeg: Vec<u8>,
    /// When the file was seen, unix ms.
    pub seen_at: i64,
}

/// A photo's prepared image, as a server catalog keeps it (`photo_images`, pg/0009).
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedCopy {
    /// The upload: a metadata-free JPEG.
    pub jpeg: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// What intake read from its pixels.
    pub barcodes: Vec<crate::barcode::Barcode>,
}

/// A kept prepared image with its photo's row: enough to send the photo again without its file.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPrepared {
    pub photo_id: PhotoId,
    pub sha256: String,
    pub jpeg: Vec<u8>,
    pub width: u32,
    pub height: u32,
    pub barcodes: Vec<crate::barcode::Barcode>,
    pub original_width: u32,
    pub original_height: u32,
    /// The original's format, e.g. "jpeg".
    pub format: String,
    pub file_bytes: u64,
    pub thumbnail_jpeg: Vec<u8>,
}

/// One call to Gemini, for the audit trail. (Serialized only into a desktop's spool of answers
/// waiting to be written: `import::spool`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewAttempt {
    pub photo_id: PhotoId,
    pub model: String,
    /// When the request was sent, unix ms.
    pub started_at: i64,
    pub latency_ms: u64,
    /// Token usage, when the response carried it.
    pub usage: Option<AttemptUsage>,
    /// The response body as received, when there was one.
    pub raw_response: Option<String>,
    pub outcome: AttemptOutcome,
    /// The model that answered, as the response named it (`modelVersion`).
    pub model_version: Option<String>,
    /// What the call cost (`pricing`); `None` when its model has no price or it has no usage.
    pub cost: Option<Usd>,
    /// Billed at the Batch API's discount.
    pub batch: bool,
    /// The barcodes read on the photo before the call; `None`: not read (an attempt recorded
    /// without the import's intake, or from before schema version 9).
    pub barcodes: Option<Vec<Barcode>>,
    /// The photos sent besides `photo_id`, in order (a product of several photos); `attempt_photos`.
    pub more_photos: Vec<PhotoId>,
    /// Where Gemini read each field (an answered attempt's); empty otherwise.
    pub sources: Vec<crate::product::FieldSource>,
}

/// One photo of a product: which, and the file it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct PhotoRef {
    #[ts(type = "number")]
    pub photo_id: PhotoId,
    /// For display: lossy (U+FFFD) when the path is not valid UTF-8.
    pub path: String,
    /// The path's exact bytes in lowercase hex, only when it is not valid UTF-8.
    pub path_bytes: Option<String>,
    /// Lowercase hex SHA-256 of the photo's bytes: what it is known by.
    pub sha256: String,
}

/// Token counts from Gemini's `usageMetadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AttemptUsage {
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    pub thoughts_tokens: u32,
    pub total_tokens: u32,
    /// The part of `prompt_tokens` served from the cache.
    pub cached_tokens: u32,
}

impl AttemptUsage {
    /// What the call is billed for (see `pricing`).
    pub fn billed(&self) -> BilledTokens {
        BilledTokens {
            input: u64::from(self.prompt_tokens),
            cached_input: u64::from(self.cached_tokens),
            output: u64::from(self.output_tokens),
        }
    }
}

/// How an attempt ended.
// A short-lived input built once per Gemini call; boxing the product would only make it clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AttemptOutcome {
    /// Gemini proposed a product (possibly with invalid fields; the reviewer fixes them).
    Proposed { product: Product },
    /// The call failed; `code` is the error's stable code.
    Failed { code: ErrorCode, message: String },
}

/// The reviewer saves a product for a photo.
#[derive(Debug, Clone, PartialEq)]
pub struct SaveProduct {
    pub photo_id: PhotoId,
    /// The attempt whose proposal the reviewer started from; it must belong to `photo_id`. `None`
    /// for a product typed by hand, or, when the product exists already, to keep its proposal.
    pub attempt_id: Option<AttemptId>,
    pub saved: Product,
    /// Who saved it (`local_user` for the person at this computer).
    pub saved_by: String,
    /// Unix ms.
    pub saved_at: i64,
}

/// Why a revision of a product was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum RevisionSource {
    /// A reviewer saved an extraction (`Catalog::save_product`).
    Review,
    /// Someone edited the saved product in the catalog.
    Edit,
    /// A new extraction of the same photo replaced the proposal (and the saved product).
    Reextract,
    /// The product was created as a copy of another (`Catalog::duplicate_product`).
    Duplicate,
    /// The import queue wrote it.
    Import,
    /// An earlier revision was brought back.
    Restore,
}

impl RevisionSource {
    /// The snake_case name, as serialized and as stored in `product_revisions.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Review => "review",
            Self::Edit => "edit",
            Self::Reextract => "reextract",
            Self::Duplicate => "duplicate",
            Self::Import => "import",
            Self::Restore => "restore",
        }
    }

    pub(super) fn parse(s: &str) -> Option<Self> {
        [Self::Review, Self::Edit, Self::Reextract, Self::Duplicate, Self::Import, Self::Restore]
            .into_iter()
            .find(|source| source.as_str() == s)
    }
}

/// An edit of a saved product (`Catalog::update_product`), checked against the revision
/// the editor started from.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateProduct {
    pub id: ProductId,
    /// The revision the editor opened; the update is refused if the product has moved on since.
    pub expected_revision: u32,
    /// The whole product as it should be saved (the caller normalizes it, see
    /// `Product::normalized`).
    pub saved: Product,
    /// `Some` for a re-extraction: that attempt's proposal becomes the product's proposal. It
    /// must belong to the product's photo and have a proposal. `None` keeps the proposal.
    pub attempt_id: Option<AttemptId>,
    pub source: RevisionSource,
    pub saved_by: String,
    /// Unix ms.
    pub saved_at: i64,
}

/// A product with everything the review screen shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[ts(export)]
pub struct ProductRecord {
    #[ts(type = "number")]
    pub id: ProductId,
    #[ts(type = "number")]
    pub photo_id: PhotoId,
    #[ts(type = "number | null")]
    pub attempt_id: Option<AttemptId>,
    /// What Gemini proposed, as it proposed it; `None` when the product was typed by hand or
    /// the attempt failed.
    pub proposed: Option<Product>,
    /// What the reviewer saved.
    pub saved: Product,
    /// Where the saved GTIN came from (`barcode::gtin_source`: a barcode read on the photo by
    /// the attempt in force, Gemini's proposal, or a person); `None` without a GTIN.
    pub gtin_source: Option<GtinSource>,
    /// 1 on creation, +1 on every save.
    pub revision: u32,
    #[ts(type = "number")]
    pub created_at: i64,
    /// When the current revision was saved.
    #[ts(type = "number")]
    pub updated_at: i64,
    /// Who saved the current revision ("" for revisions from before schema version 3).
    pub updated_by: String,
    /// The product this one was copied from; `None` for a product saved from its photo.
    #[ts(type = "number | null")]
    pub duplicate_of: Option<ProductId>,
    /// When it was deleted (soft delete: it is hidden from lists, search and exports and can be
    /// brought back); `None` while it is live.
    #[ts(type = "number | null")]
    pub deleted_at: Option<i64>,
    /// Who deleted it; `None` while it is live.
    pub deleted_by: Option<String>,
    /// [`Product::validate`] of the saved product: the fields to look at again (uncertain ones;
    /// never invalid ones, which cannot be saved).
    pub flags: Vec<FieldFlag>,
    /// The photo's lowercase hex SHA-256: what it is known by, and what its thumbnail is loaded
    /// by (see [`ProductSummary::photo_sha256`]).
    pub sha256: String,
    /// For display (lossy when the path is not valid UTF-8).
    pub original_path: String,
    /// The path's exact bytes in lowercase hex, only when it is not valid UTF-8
    /// ([`crate::stored_path`]); the file is [`ProductRecord::photo_path`].
    pub original_path_bytes: Option<String>,
    /// The computer the original file is on (its host name; a team catalog holds paths from many
    /// desktops); `None` for photos recorded before schema version 12.
    pub original_host: Option<String>,
}

/// A row of the catalog list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[ts(export)]
pub struct ProductSummary {
    #[ts(type = "number")]
    pub id: ProductId,
    #[ts(type = "number")]
    pub photo_id: PhotoId,
    pub name: String,
    pub brand: Option<String>,
    pub category: Option<String>,
    pub price: Option<Price>,
    pub gtin: Option<String>,
    pub revision: u32,
    /// How many fields of the saved product are flagged (see [`ProductRecord::flags`]).
    pub flagged: u32,
    /// The photo's content hash, which addresses its thumbnail: the window loads it from the
    /// app's thumbnail protocol (`thumb://localhost/<sha256>`, read by `Catalog::thumbnail_jpeg`),
    /// so a page of the list carries no image, and a thumbnail, never changing for its hash, is
    /// read once and cached by the webview.
    pub photo_sha256: String,
    #[ts(type = "number")]
    pub updated_at: i64,
}

/// What the catalog table asks for (`Catalog::query_products`). Every field has a
/// default, so the UI may send only the fields it sets: `{}` is the first 100 live products, most
/// recently updated first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(default)]
#[ts(export)]
pub struct ProductQuery {
    /// Words to search (see `Catalog::search_products`); blank lists everything.
    #[ts(optional = nullable)]
    pub text: String,
    /// Only this category, compared whole and case-insensitively (ASCII letters).
    #[ts(optional = nullable)]
    pub category: Option<String>,
    /// Only this brand, compared whole and case-insensitively (ASCII letters).
    #[ts(optional = nullable)]
    pub brand: Option<String>,
    /// `Some(true)`: only products with flagged fields; `Some(false)`: only those without.
    #[ts(optional = nullable)]
    pub flagged: Option<bool>,
    /// Inclusive bounds on the price amount, whatever the currency. A bound leaves out products
    /// without a price.
    #[ts(optional = nullable)]
    pub price_min: Option<f64>,
    #[ts(optional = nullable)]
    pub price_max: Option<f64>,
    #[ts(optional = nullable)]
    pub sort: SortKey,
    #[ts(optional = nullable)]
    pub direction: SortDirection,
    #[ts(optional = nullable)]
    pub offset: u32,
    /// At most this many rows (default 100).
    #[ts(optional = nullable)]
    pub limit: u32,
}

impl Default for ProductQuery {
    fn default() -> Self {
        Self {
            text: String::new(),
            category: None,
            brand: None,
            flagged: None,
            price_min: None,
            price_max: None,
            sort: SortKey::default(),
            direction: SortDirection::default(),
            offset: 0,
            limit: 100,
        }
    }
}

/// The column the catalog table is sorted by. Ties are broken by id in the same direction;
/// products without the value (no brand, no price) come last in both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum SortKey {
    /// Best match first (`Desc`) when the query has words to search, equal scores newer product
    /// first; otherwise like `Updated`. A search matching more than `RANKED_MATCHES` (1,000)
    /// products ranks the newest that many; the others follow, newest first.
    #[default]
    Relevance,
    /// Case-insensitively (ASCII letters), like brand and category.
    Name,
    Brand,
    Category,
    /// By amount, whatever the currency.
    Price,
    Gtin,
    /// When the current revision was saved.
    Updated,
}

/// Ascending or descending. For [`SortKey::Relevance`], `Desc` is best match first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum SortDirection {
    Asc,
    #[default]
    Desc,
}

/// One page of `Catalog::query_products`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ProductPage {
    /// How many live products match, on every page; with `total_capped`, at least this many.
    #[ts(type = "number")]
    pub total: u64,
    /// A text search stopped counting 1,000 (`TOTAL_CAP`) matches past the
    /// page: more match ("1,000+"), and a page further on counts further.
    #[serde(default)]
    pub total_capped: bool,
    pub rows: Vec<ProductSummary>,
}

/// The values the catalog's filters offer, with how many live products have each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct Facets {
    pub categories: Vec<FacetValue>,
    pub brands: Vec<FacetValue>,
}

/// A category or brand and its product count. Spellings that differ only in ASCII case are one
/// value (shown in the spelling that sorts first, e.g. "Snacks" over "snacks").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct FacetValue {
    pub value: String,
    #[ts(type = "number")]
    pub count: u64,
}

/// One saved version of a product (`Catalog::history`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct RevisionRecord {
    pub revision: u32,
    pub source: RevisionSource,
    pub saved_by: String,
    #[ts(type = "number")]
    pub saved_at: i64,
    pub saved: Product,
    /// What this revision changed: against the previous revision, or, for the first one kept,
    /// against the proposal in force then (Gemini's original proposal; every filled field when
    /// there was none).
    pub changes: Vec<FieldChange>,
}

/// What `Catalog::backup_to` wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct BackupSummary {
    /// The backup file.
    pub path: String,
    /// Its size.
    #[ts(type = "number")]
    pub bytes: u64,
    /// Live products in it.
    #[ts(type = "number")]
    pub products: u64,
    pub schema_version: u32,
}

/// What `Catalog::restore_from` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct RestoreSummary {
    /// Live products in the catalog now.
    #[ts(type = "number")]
    pub products: u64,
    /// The restored file's schema version, before migrating it.
    pub schema_version_before: u32,
    /// The schema version now (`SCHEMA_VERSION`).
    pub migrated_to: u32,
    /// The copy of the catalog as it was before the restore.
    pub safety_backup: String,
    /// Photos that were waiting in the backup's queue: kept, failed as `restored`, and sent
    /// again only when someone asks (Retry).
    #[ts(type = "number")]
    pub held: u64,
}

/// How an attempt ended, as the audit view shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum AttemptOutcomeKind {
    Proposed,
    Failed,
}

impl AttemptOutcomeKind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Proposed => "proposed",
            Self::Failed => "failed",
        }
    }
}

/// One row of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct AttemptRecord {
    #[ts(type = "number")]
    pub id: AttemptId,
    #[ts(type = "number")]
    pub photo_id: PhotoId,
    pub model: String,
    #[ts(type = "number")]
    pub started_at: i64,
    #[ts(type = "number")]
    pub latency_ms: u64,
    pub prompt_tokens: Option<u32>,
    pub output_tokens: Option<u32>,
    pub thoughts_tokens: Option<u32>,
    pub total_tokens: Option<u32>,
    pub cached_tokens: Option<u32>,
    pub model_version: Option<String>,
    /// What the attempt cost; `None`: price unknown (or no usage).
    pub cost_usd: Option<Usd>,
    pub batch: bool,
    pub outcome: AttemptOutcomeKind,
    pub error_code: Option<ErrorCode>,
    pub error_message: Option<String>,
    pub proposal: Option<Product>,
    pub raw_response: Option<String>,
}

impl ProductRecord {
    /// The file the product's photo was read from, exactly (also when its name is not UTF-8).
    pub fn photo_path(&self) -> std::path::PathBuf {
        crate::stored_path::StoredPath::from_text_and_hex(&self.original_path, self.original_path_bytes.as_deref())
            .to_path_buf()
    }
}
