//! Errors as RFC 9457 problem details (`application/problem+json`): the HTTP status, the seed's
//! `code` (`gemini_api_error`, `gemini_circuit_open`, `bulkhead_full`, …), the app's precise
//! `kind` (its [`ErrorCode`]), and what to do in `detail`. The one table from an error's code to
//! its status is [`status_of`].

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use pe_core::{ErrorCode, ErrorReport};
use schemars::JsonSchema;
use serde::Serialize;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An error answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Problem {
    /// `urn:product-extractor:problem:<code>`.
    #[serde(rename = "type")]
    pub kind_uri: String,
    /// The status's reason phrase.
    pub title: String,
    pub status: u16,
    /// What went wrong and what to do, for a person.
    pub detail: String,
    /// The seed's code: one of a few a client branches on (`gemini_api_error` for every failure
    /// of Gemini's, whatever `kind` says).
    pub code: String,
    /// The app's precise error code (`gemini_auth`, `invalid_image`, …), when the app gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<ErrorCode>,
    /// When to try again, in seconds (also the `Retry-After` header).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
    /// A save refused for validation: the fields and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flags: Option<Vec<pe_core::product::FieldFlag>>,
}

impl Problem {
    pub fn new(status: StatusCode, code: &str, detail: impl Into<String>) -> Self {
        Self {
            kind_uri: format!("urn:product-extractor:problem:{code}"),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail: detail.into(),
            code: code.to_string(),
            kind: None,
            retry_after_seconds: None,
            flags: None,
        }
    }

    /// An error of the app's, with its status from [`status_of`].
    pub fn from_report(report: &ErrorReport) -> Self {
        let (status, code) = status_of(report.code);
        let mut problem = Self::new(status, code, report.message.clone()).with_kind(report.code);
        problem.flags = report.validation_flags().map(<[_]>::to_vec);
        problem
    }

    /// The app's precise error code beside the seed's.
    pub fn with_kind(mut self, kind: ErrorCode) -> Self {
        self.kind = Some(kind);
        self
    }

    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_seconds = Some(seconds.max(1));
        self
    }

    /// Retry after the instant `at` (unix ms), `now` being now: whole seconds, rounded up.
    pub fn retry_at(self, at: i64, now: i64) -> Self {
        self.retry_after(u64::try_from((at.saturating_sub(now)).saturating_add(999) / 1000).unwrap_or(1))
    }

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(seconds) = self.retry_after_seconds {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The HTTP status and the seed's code of each of the app's errors: Gemini's failures are `502
/// gemini_api_error` as in the seed (the precise one in `kind`), an open breaker `503`, a full
/// bulkhead, a rate limit, a quota or a spent budget `429`, the time limiter `504`; a photo that
/// is not one `415`, too large `413`, unusable `422`.
pub fn status_of(code: ErrorCode) -> (StatusCode, &'static str) {
    use ErrorCode as E;
    match code {
        E::GeminiAuth
        | E::GeminiBadRequest
        | E::GeminiNotFound
        | E::GeminiUnavailable
        | E::GeminiNotAvailable
        | E::GeminiApiError
        | E::Network
        | E::ResponseTooLarge
        | E::Blocked
        | E::UnparsableOutput
        | E::OutputTruncated
        | E::BatchEnded => (StatusCode::BAD_GATEWAY, "gemini_api_error"),
        E::CircuitOpen => (StatusCode::SERVICE_UNAVAILABLE, "gemini_circuit_open"),
        E::BulkheadFull => (StatusCode::TOO_MANY_REQUESTS, "bulkhead_full"),
        E::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
        E::GeminiQuota => (StatusCode::TOO_MANY_REQUESTS, "gemini_quota"),
        E::BudgetSpent => (StatusCode::TOO_MANY_REQUESTS, "budget_spent"),
        E::Timeout => (StatusCode::GATEWAY_TIMEOUT, "gemini_timeout"),
        E::UnsupportedFormat => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
        E::ImageTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "image_too_large"),
        E::InvalidImage => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_image"),
        E::Validation => (StatusCode::UNPROCESSABLE_ENTITY, "validation"),
        E::NotFound => (StatusCode::NOT_FOUND, "not_found"),
        E::RevisionConflict | E::Conflict | E::Regrouped | E::NotQueuedHere | E::Restored => {
            (StatusCode::CONFLICT, "conflict")
        }
        E::DiskFull => (StatusCode::INSUFFICIENT_STORAGE, "disk_full"),
        E::Config | E::Catalog | E::Io => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gemini_failure_is_the_seeds_502_with_its_precise_kind() {
        let report = ErrorReport::new(ErrorCode::GeminiAuth, "The API key was rejected.");
        let problem = Problem::from_report(&report);
        assert_eq!((problem.status, problem.code.as_str()), (502, "gemini_api_error"));
        let json = serde_json::to_value(&problem).unwrap();
        assert_eq!(json["kind"], "gemini_auth");
        assert_eq!(json["type"], "urn:product-extractor:problem:gemini_api_error");
        assert_eq!(json["title"], "Bad Gateway");
    }

    #[test]
    fn the_stacks_own_refusals_have_their_seed_statuses() {
        assert_eq!(status_of(ErrorCode::CircuitOpen), (StatusCode::SERVICE_UNAVAILABLE, "gemini_circuit_open"));
        assert_eq!(status_of(ErrorCode::BulkheadFull), (StatusCode::TOO_MANY_REQUESTS, "bulkhead_full"));
        assert_eq!(status_of(ErrorCode::Timeout).0, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(status_of(ErrorCode::UnsupportedFormat).0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(status_of(ErrorCode::InvalidImage).0, StatusCode::UNPROCESSABLE_ENTITY);
    }

    #[test]
    fn retry_after_is_a_header_too() {
        let response =
            Problem::new(StatusCode::TOO_MANY_REQUESTS, "bulkhead_full", "busy").retry_after(0).into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
    }
}
