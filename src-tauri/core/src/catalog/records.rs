//! What goes into the catalog and what comes out: plain inputs, and the DTOs the UI sees
//! (serde + ts-rs; every `i64`/`u64` is a TypeScript `number`).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::error::ErrorCode;
use crate::product::{Price, Product};

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
    pub original_path: String,
    pub file_bytes: u64,
    pub width: u32,
    pub height: u32,
    /// The detected format, e.g. "jpeg".
    pub format: String,
    pub thumbnail_jpeg: Vec<u8>,
    /// When the file was seen, unix ms.
    pub seen_at: i64,
}

/// One call to Gemini, for the audit trail.
#[derive(Debug, Clone, PartialEq)]
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
}

/// Token counts from Gemini's `usageMetadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AttemptUsage {
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    pub thoughts_tokens: u32,
    pub total_tokens: u32,
}

/// How an attempt ended.
// A short-lived input built once per Gemini call; boxing the product would only make it clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
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
    /// Unix ms.
    pub saved_at: i64,
}

/// A product with everything the review screen shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
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
    /// 1 on creation, +1 on every save.
    pub revision: u32,
    #[ts(type = "number")]
    pub created_at: i64,
    #[ts(type = "number")]
    pub updated_at: i64,
    pub sha256: String,
    pub original_path: String,
    /// `data:image/jpeg;base64,…`
    pub thumbnail: String,
}

/// A row of the catalog list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
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
    /// `data:image/jpeg;base64,…`
    pub thumbnail: String,
    #[ts(type = "number")]
    pub updated_at: i64,
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
    pub outcome: AttemptOutcomeKind,
    pub error_code: Option<ErrorCode>,
    pub error_message: Option<String>,
    pub proposal: Option<Product>,
    pub raw_response: Option<String>,
}
