//! Error codes shared by every layer.
//!
//! Each core module has its own `thiserror` enum (`IntakeError`, `GeminiError`, `CatalogError`,
//! `ConfigError`). Every one of them maps to exactly one [`ErrorCode`], the stable, machine-readable
//! identifier that crosses to the UI (`{code, message}`) and to the CLI's `--json` output
//! (`{"kind": …, "message": …}`). The UI switches on the code, never on English text.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::product::FieldFlag;

/// The stable identifier of an error, as the UI and the CLI see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum ErrorCode {
    /// The file is empty, truncated, corrupt or not an image at all.
    InvalidImage,
    /// An image, but in a format we cannot prepare (e.g. HEIC).
    UnsupportedFormat,
    /// Over `max_file_bytes` or `max_pixels`.
    ImageTooLarge,
    /// Gemini refused the key: missing, invalid, leaked or blocked (400 API_KEY_INVALID, 401, 403).
    GeminiAuth,
    /// Gemini refused this request (400), e.g. the image is not valid for it.
    GeminiBadRequest,
    /// The configured model does not exist (404).
    GeminiNotFound,
    /// Quota or rate limit exceeded (429); carries the server's retry delay when it gave one.
    GeminiQuota,
    /// Gemini is overloaded or failing (408, 500, 502, 503, 504).
    GeminiUnavailable,
    /// Gemini is not available for this project or location (400 FAILED_PRECONDITION).
    GeminiNotAvailable,
    /// Any other error status from Gemini.
    GeminiApiError,
    /// Connect, read or overall timeout.
    Timeout,
    /// The connection failed (DNS, refused, reset, TLS).
    Network,
    /// Gemini's answer was longer than `max_response_bytes`; it was not read.
    ResponseTooLarge,
    /// Gemini blocked the prompt or the answer for safety reasons.
    Blocked,
    /// Gemini answered, but not with product JSON we can read.
    UnparsableOutput,
    /// Gemini's answer was cut off at `maxOutputTokens` (thinking included) before any usable
    /// product data.
    OutputTruncated,
    /// The circuit breaker is open: Gemini has been failing, calls are paused until a probe.
    CircuitOpen,
    /// Every Gemini call slot (the bulkhead) is taken.
    BulkheadFull,
    /// The configured rate limit would make the call wait too long.
    RateLimited,
    /// The configuration is invalid.
    Config,
    /// The local catalog (SQLite) failed.
    Catalog,
    /// A product failed validation and was not saved.
    Validation,
    /// The thing asked for does not exist (a product id, a job), or was deleted.
    NotFound,
    /// Someone else saved the product since it was opened; the edit was not saved. Reload it.
    RevisionConflict,
    /// The thing changed since it was read, or is in use: an import item is no longer in the state
    /// the action needs, or another product-extractor holds the import queue.
    Conflict,
    /// Reading or writing a local file failed.
    Io,
    /// The next Gemini call would pass today's budget (`pricing.daily_budget_usd`).
    BudgetSpent,
    /// A Gemini batch (batch mode) failed, expired, was cancelled or could not be submitted; its
    /// photos are queued again (the message says why).
    BatchEnded,
    /// A product's photos were changed in review (a photo moved in or out): its proposal was for
    /// other photos. Extract it again (only when asked: it costs a call).
    Regrouped,
    /// The disk holding the catalog is full, or below the free space the queue keeps
    /// (`[import] min_free_disk_bytes` / `min_free_disk_percent`): free some space.
    DiskFull,
    /// A team catalog's queue row names a file on this computer that this desktop did not queue
    /// (no tag of its own): the file was not opened. Whoever can write to the shared database
    /// could have added it; drop the photo again if it is yours.
    NotQueuedHere,
    /// The photo was waiting in the queue of a restored backup: a restore queues nothing by
    /// itself. Retry it to send it.
    Restored,
}

impl ErrorCode {
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidImage => "invalid_image",
            Self::UnsupportedFormat => "unsupported_format",
            Self::ImageTooLarge => "image_too_large",
            Self::GeminiAuth => "gemini_auth",
            Self::GeminiBadRequest => "gemini_bad_request",
            Self::GeminiNotFound => "gemini_not_found",
            Self::GeminiQuota => "gemini_quota",
            Self::GeminiUnavailable => "gemini_unavailable",
            Self::GeminiNotAvailable => "gemini_not_available",
            Self::GeminiApiError => "gemini_api_error",
            Self::Timeout => "timeout",
            Self::Network => "network",
            Self::ResponseTooLarge => "response_too_large",
            Self::Blocked => "blocked",
            Self::UnparsableOutput => "unparsable_output",
            Self::OutputTruncated => "output_truncated",
            Self::CircuitOpen => "circuit_open",
            Self::BulkheadFull => "bulkhead_full",
            Self::RateLimited => "rate_limited",
            Self::Config => "config",
            Self::Catalog => "catalog",
            Self::Validation => "validation",
            Self::NotFound => "not_found",
            Self::RevisionConflict => "revision_conflict",
            Self::Conflict => "conflict",
            Self::Io => "io",
            Self::BudgetSpent => "budget_spent",
            Self::BatchEnded => "batch_ended",
            Self::Regrouped => "regrouped",
            Self::DiskFull => "disk_full",
            Self::NotQueuedHere => "not_queued_here",
            Self::Restored => "restored",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Implemented by every core error type: which stable code it maps to.
pub trait Coded: std::error::Error {
    fn code(&self) -> ErrorCode;

    /// What the UI can act on beyond the code, as data (never parsed from the message).
    fn data(&self) -> Option<ErrorData> {
        None
    }
}

/// Typed details of an error, for the UI to act on without parsing the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[ts(export)]
pub enum ErrorData {
    /// A save refused for validation: the product's flags as the check found them (the invalid
    /// ones are why it was refused; uncertain ones ride along so the form can show every flag).
    /// Attribute flags name the product's attribute indices, `attributes[2].name`.
    Validation { flags: Vec<FieldFlag> },
}

/// An error as it crosses a boundary (Tauri command result, CLI JSON line): the code, a message a
/// person can act on, and optional technical detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ErrorReport {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub detail: Option<String>,
    /// Set for errors the UI acts on as data, e.g. the flags of a save refused for validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub data: Option<ErrorData>,
}

impl ErrorReport {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), detail: None, data: None }
    }

    pub fn from_error<E: Coded + ?Sized>(err: &E) -> Self {
        let detail = std::error::Error::source(err).map(|s| s.to_string());
        Self { code: err.code(), message: err.to_string(), detail, data: err.data() }
    }

    /// The flags of a save refused for validation, if this is one.
    pub fn validation_flags(&self) -> Option<&[FieldFlag]> {
        match &self.data {
            Some(ErrorData::Validation { flags }) => Some(flags),
            None => None,
        }
    }
}

impl std::fmt::Display for ErrorReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ErrorReport {}

/// Any coded error converts into a report, so `?` works at the boundary. `ErrorReport` itself
/// does not implement [`Coded`], which keeps this impl coherent with `From<T> for T`.
impl<E: Coded> From<E> for ErrorReport {
    fn from(err: E) -> Self {
        Self::from_error(&err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_str_matches_serde() {
        for code in [
            ErrorCode::InvalidImage,
            ErrorCode::UnsupportedFormat,
            ErrorCode::ImageTooLarge,
            ErrorCode::GeminiAuth,
            ErrorCode::GeminiBadRequest,
            ErrorCode::GeminiNotFound,
            ErrorCode::GeminiQuota,
            ErrorCode::GeminiUnavailable,
            ErrorCode::GeminiNotAvailable,
            ErrorCode::GeminiApiError,
            ErrorCode::Timeout,
            ErrorCode::Network,
            ErrorCode::ResponseTooLarge,
            ErrorCode::Blocked,
            ErrorCode::UnparsableOutput,
            ErrorCode::OutputTruncated,
            ErrorCode::CircuitOpen,
            ErrorCode::BulkheadFull,
            ErrorCode::RateLimited,
            ErrorCode::Config,
            ErrorCode::Catalog,
            ErrorCode::Validation,
            ErrorCode::NotFound,
            ErrorCode::RevisionConflict,
            ErrorCode::Conflict,
            ErrorCode::Io,
            ErrorCode::DiskFull,
            ErrorCode::NotQueuedHere,
            ErrorCode::Restored,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), serde_json::json!(code.as_str()));
        }
    }

    #[test]
    fn data_is_additive_on_the_wire() {
        let plain = ErrorReport::new(ErrorCode::Io, "disk full");
        assert_eq!(serde_json::to_value(&plain).unwrap(), serde_json::json!({"code": "io", "message": "disk full"}));
        // A report stored before `data` existed still reads.
        let old: ErrorReport = serde_json::from_str(r#"{"code":"validation","message":"m"}"#).unwrap();
        assert_eq!(old.data, None);

        let flag = FieldFlag { field: "gtin".into(), kind: crate::product::FlagKind::Invalid, message: "bad".into() };
        let refused = ErrorReport {
            data: Some(ErrorData::Validation { flags: vec![flag.clone()] }),
            ..ErrorReport::new(ErrorCode::Validation, "Not saved")
        };
        assert_eq!(
            serde_json::to_value(&refused).unwrap(),
            serde_json::json!({"code": "validation", "message": "Not saved", "data": {"kind": "validation", "flags": [
                {"field": "gtin", "kind": "invalid", "message": "bad"}
            ]}})
        );
        assert_eq!(refused.validation_flags(), Some(&[flag][..]));
    }
}
