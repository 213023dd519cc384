//! [`GeminiError`]: every way a Gemini call can fail, each with a message staff can act on.
//!
//! `Display` is the message for a person (what happened, what to do). The technical part (HTTP
//! status, Gemini's own message, the underlying I/O error, an excerpt of an unreadable answer) is
//! the error's `source()`, which [`crate::ErrorReport`] puts in `detail`. No message, detail or
//! `Debug` output ever contains the API key: the key only travels in a header, and every text
//! that comes back from the server is scrubbed of it anyway.

use std::time::Duration;

use crate::error::{Coded, ErrorCode};
use crate::resilience::Verdict;

use super::wire::{ErrorBody, ErrorEnvelope};
use super::Usage;

/// Which timeout fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// Establishing the connection (TCP, TLS) took longer than `connect_timeout`.
    Connect,
    /// Connected, but the headers were not complete within `read_timeout` of the request, or no
    /// body bytes arrived for `read_timeout`.
    Read,
    /// The whole call took longer than `timeout`.
    Overall,
}

/// How far the answer had come when a timeout fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerStage {
    /// No complete status line and headers yet (nothing, or headers trickling in).
    Headers,
    /// The headers arrived; the body was still coming (stalled or trickling).
    Body,
}

impl TimeoutKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Read => "read",
            Self::Overall => "overall",
        }
    }
}

/// What the server said, as technical detail (the `source()` of HTTP errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HTTP {status}{}{}", .canonical.as_deref().map(|s| format!(" {s}")).unwrap_or_default(), .message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
pub struct ServerDetail {
    pub status: u16,
    /// The canonical status, e.g. `INVALID_ARGUMENT`.
    pub canonical: Option<String>,
    /// Gemini's `error.message`.
    pub message: Option<String>,
}

/// Technical detail that is just text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Detail(pub String);

/// A failed Gemini call.
#[derive(Debug, thiserror::Error)]
pub enum GeminiError {
    /// No API key is configured; nothing was sent.
    #[error("No Gemini API key is configured — open Settings and enter your key.")]
    MissingKey,

    /// 400 API_KEY_INVALID, 401, 403.
    #[error("{}", auth_message(.source))]
    Auth { source: ServerDetail, raw: String },

    /// Any other 400.
    #[error("Gemini rejected the request ({}) — try another photo; if it keeps happening, report it.", short_server(.source))]
    BadRequest { source: ServerDetail, raw: String },

    /// 404: the model does not exist (any more).
    #[error("Gemini does not offer the model \"{model}\" — open Settings and choose another model, e.g. gemini-flash-latest.")]
    NotFound { model: String, source: ServerDetail, raw: String },

    /// 429: quota or rate limit. `resets_at` (unix ms) is set for a per-day quota (a
    /// `QuotaFailure` naming a per-day window, or a limit of 0): retrying cannot help before the
    /// next midnight Pacific time.
    #[error("{}", quota_message(*.retry_after, *.resets_at))]
    Quota { retry_after: Option<Duration>, resets_at: Option<i64>, source: ServerDetail, raw: String },

    /// 400 FAILED_PRECONDITION: the API is not available for this project or location (e.g.
    /// "User location is not supported for the API use."); every call fails the same way.
    #[error("Gemini is not available for this project or location ({}) — check the API key's project and billing, or use Gemini from a supported region.", short_server(.source))]
    NotAvailable { source: ServerDetail, raw: String },

    /// 408, 500, 502, 503, 504.
    #[error("{}", unavailable_message(.source.status))]
    Unavailable { retry_after: Option<Duration>, source: ServerDetail, raw: String },

    /// Any other error status.
    #[error("Gemini answered with an unexpected error (HTTP {}); try again, and report it if it keeps happening.", .source.status)]
    Api { source: ServerDetail, raw: String },

    /// A timeout fired; `kind` says which, `stage` how far the answer had come.
    #[error("{}", timeout_message(*.kind, *.stage, *.after))]
    Timeout { kind: TimeoutKind, stage: AnswerStage, after: Duration, source: Detail },

    /// The answer's body is longer than `max_response_bytes` (declared by its Content-Length, or
    /// counted while reading): the call ends at once without reading the rest.
    #[error("Gemini's answer was larger than {} (the limit in [gemini] max_response_bytes), so it was not read — a proxy or the service is misbehaving; try again later.", human_bytes(*.limit))]
    ResponseTooLarge { limit: u64, status: u16, source: Detail },

    /// The connection failed: refused, reset, closed early, DNS, TLS.
    #[error("Could not reach Gemini ({cause}) — check the internet connection and the Gemini address in Settings, then try again.")]
    Network { cause: String, source: Detail },

    /// The prompt or the answer was blocked (`promptFeedback.blockReason`, or a blocking
    /// `finishReason` without usable text). `reason` is Gemini's value; billed all the same.
    #[error("Gemini blocked this photo ({}: {reason}) and gave no product data — enter the product by hand or try another photo.", super::parse::reason_in_words(.reason))]
    Blocked { reason: String, usage: Option<Usage>, raw: String },

    /// `finishReason: MAX_TOKENS` with no usable answer: thinking and answer used up
    /// `maxOutputTokens`. Billed all the same.
    #[error("Gemini's answer was cut off at {max_output_tokens} output tokens; raise gemini.max_output_tokens or lower gemini.thinking.")]
    OutputTruncated { max_output_tokens: u32, usage: Option<Usage>, source: Detail, raw: String },

    /// Gemini stopped for another reason (`finishReason` OTHER, LANGUAGE, MALFORMED_RESPONSE,
    /// or a value newer than this code) without a usable answer. Billed all the same.
    #[error("Gemini stopped: {reason} ({}) and gave no product data; try again, or enter the product by hand.", super::parse::reason_in_words(.reason))]
    Stopped { reason: String, usage: Option<Usage>, raw: String },

    /// Gemini answered 200, but not with product JSON we can read. `usage` when it was billed.
    #[error("Gemini's answer could not be read as product data ({reason}); try again.")]
    UnparsableOutput { reason: String, usage: Option<Usage>, source: Detail, raw: String },

    /// The client could not be built from the settings (bad base URL, TLS setup).
    #[error("The Gemini settings are invalid: {message}")]
    InvalidConfig { message: String },
}

fn auth_message(d: &ServerDetail) -> String {
    let msg = d.message.as_deref().unwrap_or_default().to_ascii_lowercase();
    if msg.contains("leaked") {
        "Gemini blocked the API key because it was reported as leaked — create a new key and enter it in Settings."
            .into()
    } else if d.status == 403 && !msg.contains("unregistered callers") && !msg.is_empty() {
        format!(
            "Gemini refused the API key (403: {}) — open Settings and check the key and its permissions.",
            short(d.message.as_deref().unwrap_or_default(), 160)
        )
    } else {
        "Gemini rejected the API key — open Settings and enter a valid key.".into()
    }
}

fn short_server(d: &ServerDetail) -> String {
    match d.message.as_deref() {
        Some(m) if !m.trim().is_empty() => format!("{}: {}", d.status, short(m.trim().trim_end_matches('.'), 200)),
        _ => d.status.to_string(),
    }
}

fn quota_message(retry_after: Option<Duration>, resets_at: Option<i64>) -> String {
    if let Some(at) = resets_at {
        let local = chrono::DateTime::from_timestamp_millis(at)
            .map(|t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default();
        return format!(
            "Gemini's daily quota for this model is used up; it resets at midnight Pacific time ({local} local time). Imports wait until then; or use another model or a key with a paid plan."
        );
    }
    match retry_after {
        Some(d) => format!("Gemini's quota is used up; try again in {}.", human_delay(d)),
        None => "Gemini's quota is used up; try again later, or check the plan and billing of the API key.".into(),
    }
}

fn unavailable_message(status: u16) -> String {
    match status {
        500 => "Gemini had an internal error (500); try again in a minute.".into(),
        502 => "Gemini could not be reached through Google's gateway (502); try again in a minute.".into(),
        504 => "Gemini ran out of time on its side (504); try again in a minute.".into(),
        408 => "Gemini timed out waiting for the request (408); try again in a minute.".into(),
        s => format!("Gemini is overloaded ({s}); try again in a minute."),
    }
}

fn timeout_message(kind: TimeoutKind, stage: AnswerStage, after: Duration) -> String {
    let after = human_delay(after);
    match (kind, stage) {
        (TimeoutKind::Connect, _) => format!(
            "Could not connect to Gemini within {after} (connect timeout) — check the internet connection and the Gemini address in Settings."
        ),
        // reqwest's read timeout runs from the request to the complete headers (it is not reset by
        // header bytes trickling in), and from one body read to the next.
        (TimeoutKind::Read, AnswerStage::Headers) => format!(
            "Gemini's answer did not begin within {after} (read timeout, slow headers: the status and headers had not all arrived); try again, or raise the read timeout in Settings."
        ),
        (TimeoutKind::Read, AnswerStage::Body) => format!(
            "Gemini's answer stalled halfway: no data for {after} (read timeout, the body stopped); try again, or raise the read timeout in Settings."
        ),
        (TimeoutKind::Overall, AnswerStage::Headers) => format!(
            "Gemini's answer did not begin within {after} (overall timeout, slow headers: the status and headers had not all arrived); try again, or raise the timeout in Settings."
        ),
        (TimeoutKind::Overall, AnswerStage::Body) => format!(
            "Gemini did not finish answering within {after} (overall timeout, the body was still arriving); try again, or raise the timeout in Settings."
        ),
    }
}

/// `10 MB`, `1.5 MB`, `900 KB`, `512 bytes` (decimal units, as the config's byte counts).
pub(crate) fn human_bytes(n: u64) -> String {
    if n >= 1_000_000 {
        let mb = n as f64 / 1e6;
        if n.is_multiple_of(1_000_000) {
            format!("{} MB", n / 1_000_000)
        } else {
            format!("{mb:.1} MB")
        }
    } else if n >= 1000 {
        format!("{} KB", n / 1000)
    } else {
        format!("{n} bytes")
    }
}

/// `26 s`, `1.5 s`, `2 min 5 s`, `250 ms`.
pub(crate) fn human_delay(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{} ms", d.as_millis());
    }
    let secs = d.as_secs_f64().ceil() as u64;
    if secs < 120 {
        format!("{secs} s")
    } else if secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else {
        format!("{} min {} s", secs / 60, secs % 60)
    }
}

/// The first `max` characters, with an ellipsis when cut.
pub(crate) fn short(s: &str, max: usize) -> String {
    let mut out: String = s.chars().take(max).collect();
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

impl GeminiError {
    /// The whole HTTP body of the answer, when there was one (for the audit trail).
    pub fn raw_response(&self) -> Option<&str> {
        match self {
            Self::Auth { raw, .. }
            | Self::BadRequest { raw, .. }
            | Self::NotFound { raw, .. }
            | Self::Quota { raw, .. }
            | Self::NotAvailable { raw, .. }
            | Self::Unavailable { raw, .. }
            | Self::Api { raw, .. }
            | Self::Blocked { raw, .. }
            | Self::OutputTruncated { raw, .. }
            | Self::Stopped { raw, .. }
            | Self::UnparsableOutput { raw, .. } => Some(raw),
            Self::MissingKey
            | Self::Timeout { .. }
            | Self::Network { .. }
            | Self::ResponseTooLarge { .. }
            | Self::InvalidConfig { .. } => None,
        }
    }

    /// The tokens Gemini billed for an answer that failed (blocked, cut off, stopped, unreadable):
    /// its `usageMetadata`, whole.
    pub fn billed_usage(&self) -> Option<&Usage> {
        match self {
            Self::Blocked { usage, .. }
            | Self::OutputTruncated { usage, .. }
            | Self::Stopped { usage, .. }
            | Self::UnparsableOutput { usage, .. } => usage.as_ref(),
            _ => None,
        }
    }

    /// When a per-day quota resets (unix ms, the next midnight Pacific time), for a per-day quota.
    pub fn quota_resets_at(&self) -> Option<i64> {
        match self {
            Self::Quota { resets_at, .. } => *resets_at,
            _ => None,
        }
    }

    /// How long the server asked us to wait before retrying (429 `RetryInfo`, or the
    /// "Please retry in 47.17s." fallback; `Retry-After` on 503).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Quota { retry_after, .. } | Self::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status of the answer, when one arrived (200 for blocked and unreadable answers).
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::Auth { source, .. }
            | Self::BadRequest { source, .. }
            | Self::NotFound { source, .. }
            | Self::Quota { source, .. }
            | Self::NotAvailable { source, .. }
            | Self::Unavailable { source, .. }
            | Self::Api { source, .. } => Some(source.status),
            Self::Blocked { .. }
            | Self::OutputTruncated { .. }
            | Self::Stopped { .. }
            | Self::UnparsableOutput { .. } => Some(200),
            Self::ResponseTooLarge { status, .. } => Some(*status),
            Self::MissingKey | Self::Timeout { .. } | Self::Network { .. } | Self::InvalidConfig { .. } => None,
        }
    }

    /// Whether trying again soon may succeed (a per-minute quota, overload, timeouts, network).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Quota { resets_at: None, .. }
                | Self::Unavailable { .. }
                | Self::Timeout { .. }
                | Self::Network { .. }
        )
    }

    /// How this error counts for the resilience stack (the outcome-class table in
    /// ARCHITECTURE.md): the service's state is a failure, the photo's own fault is ignored.
    /// A missing key or a bad setting never reached Gemini, so it says nothing about it.
    pub fn verdict(&self) -> Verdict {
        match self {
            Self::Auth { .. }
            | Self::NotFound { .. }
            | Self::Api { .. }
            | Self::ResponseTooLarge { .. }
            | Self::NotAvailable { .. }
            | Self::Quota { resets_at: Some(_), .. } => Verdict::Failure { retry: false, min_delay: None },
            Self::Quota { .. } | Self::Unavailable { .. } | Self::Timeout { .. } | Self::Network { .. } => {
                Verdict::Failure { retry: true, min_delay: self.retry_after() }
            }
            Self::BadRequest { .. }
            | Self::Blocked { .. }
            | Self::OutputTruncated { .. }
            | Self::Stopped { .. }
            | Self::UnparsableOutput { .. }
            | Self::MissingKey
            | Self::InvalidConfig { .. } => Verdict::Ignored,
        }
    }
}

impl Coded for GeminiError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::MissingKey | Self::Auth { .. } => ErrorCode::GeminiAuth,
            Self::BadRequest { .. } => ErrorCode::GeminiBadRequest,
            Self::NotFound { .. } => ErrorCode::GeminiNotFound,
            Self::Quota { .. } => ErrorCode::GeminiQuota,
            Self::NotAvailable { .. } => ErrorCode::GeminiNotAvailable,
            Self::Unavailable { .. } => ErrorCode::GeminiUnavailable,
            Self::Api { .. } => ErrorCode::GeminiApiError,
            Self::Timeout { .. } => ErrorCode::Timeout,
            Self::Network { .. } => ErrorCode::Network,
            Self::ResponseTooLarge { .. } => ErrorCode::ResponseTooLarge,
            Self::Blocked { .. } => ErrorCode::Blocked,
            Self::OutputTruncated { .. } => ErrorCode::OutputTruncated,
            Self::Stopped { .. } | Self::UnparsableOutput { .. } => ErrorCode::UnparsableOutput,
            Self::InvalidConfig { .. } => ErrorCode::Config,
        }
    }
}

/// Maps an error status and its body to a [`GeminiError`]. `body` is already scrubbed of the key;
/// `now_ms` (unix ms) dates a per-day quota's reset.
pub(crate) fn from_status(
    status: u16,
    body: String,
    model: &str,
    retry_after_header: Option<Duration>,
    now_ms: i64,
) -> GeminiError {
    let envelope: Option<ErrorBody> = serde_json::from_str::<ErrorEnvelope>(&body).ok().and_then(|e| e.error);
    let envelope = envelope.unwrap_or_default();
    let message = envelope.message.clone().filter(|m| !m.trim().is_empty()).or_else(|| {
        // Not the JSON envelope (a proxy's HTML page, plain text): keep a short excerpt.
        let t = body.trim();
        (!t.is_empty() && !t.starts_with('{')).then(|| short(t, 200))
    });
    let source = ServerDetail { status, canonical: envelope.status.clone(), message: message.clone() };
    let raw = body;
    let reason = envelope.reason().unwrap_or_default();
    let msg_lower = message.as_deref().unwrap_or_default().to_ascii_lowercase();
    match status {
        400 if reason.starts_with("API_KEY") || msg_lower.contains("api key not valid") => {
            GeminiError::Auth { source, raw }
        }
        401 | 403 => GeminiError::Auth { source, raw },
        400 if envelope.status.as_deref() == Some("FAILED_PRECONDITION") => GeminiError::NotAvailable { source, raw },
        400 => GeminiError::BadRequest { source, raw },
        404 => GeminiError::NotFound { model: model.to_string(), source, raw },
        429 => {
            let retry_after =
                envelope.retry_delay().or_else(|| message.as_deref().and_then(retry_in_message)).or(retry_after_header);
            let resets_at = is_per_day_quota(&envelope, &msg_lower).then(|| next_pacific_midnight(now_ms));
            GeminiError::Quota { retry_after, resets_at, source, raw }
        }
        408 | 500 | 502 | 503 | 504 => GeminiError::Unavailable { retry_after: retry_after_header, source, raw },
        _ => GeminiError::Api { source, raw },
    }
}

/// A quota that retrying cannot beat today: a `QuotaFailure` violation whose `quotaId` names a
/// per-day window (`GenerateRequestsPerDayPerProjectPerModel-FreeTier`) or whose `quotaValue` is
/// 0, or a message saying `limit: 0` (the model has no free quota at all).
fn is_per_day_quota(envelope: &ErrorBody, message_lower: &str) -> bool {
    let per_day = envelope.quota_violations().any(|v| {
        let id = v.get("quotaId").and_then(|i| i.as_str()).unwrap_or_default().to_ascii_lowercase();
        let value = match v.get("quotaValue") {
            Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().ok(),
            Some(serde_json::Value::Number(n)) => n.as_f64(),
            _ => None,
        };
        id.contains("perday") || id.contains("per_day") || value == Some(0.0)
    });
    per_day
        || message_lower
            .match_indices("limit: 0")
            .any(|(at, m)| !message_lower[at + m.len()..].starts_with(|c: char| c.is_ascii_digit() || c == '.'))
}

/// The next midnight in America/Los_Angeles after `now_ms` (unix ms), when Gemini's per-day
/// quotas reset. Pacific time is UTC−8, or UTC−7 under daylight saving time (US rules since
/// 2007: from the second Sunday of March, 02:00 local, to the first Sunday of November, 02:00
/// local). Midnight is never inside a switch, so its offset is unambiguous.
pub fn next_pacific_midnight(now_ms: i64) -> i64 {
    const HOUR: i64 = 3_600_000;
    let offset_at = |utc_ms: i64| if pacific_dst(utc_ms) { -7 * HOUR } else { -8 * HOUR };
    let local = now_ms + offset_at(now_ms);
    let next_local_midnight = (local.div_euclid(24 * HOUR) + 1) * 24 * HOUR;
    let standard = next_local_midnight + 8 * HOUR;
    if pacific_dst(standard) {
        next_local_midnight + 7 * HOUR
    } else {
        standard
    }
}

/// Whether US Pacific daylight saving time is in effect at `utc_ms`.
fn pacific_dst(utc_ms: i64) -> bool {
    use chrono::{Datelike, NaiveDate, Weekday};
    let Some(t) = chrono::DateTime::from_timestamp_millis(utc_ms) else { return false };
    let year = t.year();
    // The n-th Sunday of a month, at `hour_utc`.
    let sunday = |month: u32, n: u8, hour_utc: u32| {
        NaiveDate::from_weekday_of_month_opt(year, month, Weekday::Sun, n)
            .and_then(|d| d.and_hms_opt(hour_utc, 0, 0))
            .map(|d| d.and_utc().timestamp_millis())
    };
    // 02:00 PST = 10:00 UTC; 02:00 PDT = 09:00 UTC.
    match (sunday(3, 2, 10), sunday(11, 1, 9)) {
        (Some(start), Some(end)) => (start..end).contains(&utc_ms),
        _ => false,
    }
}

/// `... Please retry in 47.17s.` (also `in 250ms`, `in 2m`) anywhere in the message.
pub(crate) fn retry_in_message(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let at = lower.find("retry in ")? + "retry in ".len();
    let rest = &lower[at..];
    let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let value: f64 = rest[..num_len].trim_end_matches('.').parse().ok()?;
    let unit = rest[num_len..].trim_start();
    let secs = if unit.starts_with("ms") {
        value / 1000.0
    } else if unit.starts_with('s') {
        value
    } else if unit.starts_with('m') {
        value * 60.0
    } else if unit.starts_with('h') {
        value * 3600.0
    } else {
        return None;
    };
    (secs.is_finite() && secs < 1e9).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_read_like_a_person_wrote_them() {
        assert_eq!(human_delay(Duration::from_secs(26)), "26 s");
        assert_eq!(human_delay(Duration::from_secs_f64(47.17)), "48 s");
        assert_eq!(human_delay(Duration::from_millis(300)), "300 ms");
        assert_eq!(human_delay(Duration::from_secs(180)), "3 min");
        assert_eq!(human_delay(Duration::from_secs(125)), "2 min 5 s");
    }

    #[test]
    fn retry_in_message_fallback() {
        let m = "You exceeded your current quota. Please retry in 47.17s.";
        assert_eq!(retry_in_message(m), Some(Duration::from_secs_f64(47.17)));
        assert_eq!(retry_in_message("Please retry in 250ms"), Some(Duration::from_millis(250)));
        assert_eq!(retry_in_message("Please retry later."), None);
        assert_eq!(retry_in_message("nothing"), None);
    }

    #[test]
    fn status_mapping() {
        let key_invalid = r#"{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
          "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
          "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}"#;
        let cases: &[(u16, &str, ErrorCode)] = &[
            (400, key_invalid, ErrorCode::GeminiAuth),
            (
                400,
                r#"{"error":{"code":400,"message":"Provided image is not valid.","status":"INVALID_ARGUMENT"}}"#,
                ErrorCode::GeminiBadRequest,
            ),
            (401, "", ErrorCode::GeminiAuth),
            (
                403,
                r#"{"error":{"code":403,"message":"Your API key was reported as leaked.","status":"PERMISSION_DENIED"}}"#,
                ErrorCode::GeminiAuth,
            ),
            (404, "<html>not found</html>", ErrorCode::GeminiNotFound),
            (
                429,
                r#"{"error":{"code":429,"message":"Please retry in 47.17s.","status":"RESOURCE_EXHAUSTED"}}"#,
                ErrorCode::GeminiQuota,
            ),
            (500, "", ErrorCode::GeminiUnavailable),
            (502, "bad gateway", ErrorCode::GeminiUnavailable),
            (503, "{}", ErrorCode::GeminiUnavailable),
            (504, "null", ErrorCode::GeminiUnavailable),
            (409, "{", ErrorCode::GeminiApiError),
            (408, "", ErrorCode::GeminiUnavailable),
            (
                400,
                r#"{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}"#,
                ErrorCode::GeminiNotAvailable,
            ),
        ];
        for (status, body, code) in cases {
            let e = from_status(*status, body.to_string(), "m", None, 0);
            assert_eq!(e.code(), *code, "{status} {body}");
            assert_eq!(e.http_status(), Some(*status));
            assert_eq!(e.raw_response(), Some(*body));
        }
        let e =
            from_status(403, r#"{"error":{"message":"Your API key was reported as leaked."}}"#.into(), "m", None, 0);
        assert!(e.to_string().contains("leaked"), "{e}");
        let e = from_status(429, r#"{"error":{"message":"Please retry in 47.17s."}}"#.into(), "m", None, 0);
        assert_eq!(e.retry_after(), Some(Duration::from_secs_f64(47.17)));
        assert_eq!(e.to_string(), "Gemini's quota is used up; try again in 48 s.");
    }

    #[test]
    fn retry_info_wins_over_message() {
        let body = r#"{"error":{"code":429,"message":"Please retry in 47.17s.","status":"RESOURCE_EXHAUSTED",
            "details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}"#;
        let e = from_status(429, body.into(), "m", None, 0);
        assert_eq!(e.quota_resets_at(), None, "a per-minute quota");
        assert!(e.is_retryable());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(26)));
        assert_eq!(e.to_string(), "Gemini's quota is used up; try again in 26 s.");
        let report = crate::ErrorReport::from_error(&e);
        assert_eq!(report.code, ErrorCode::GeminiQuota);
        assert_eq!(report.detail.as_deref(), Some("HTTP 429 RESOURCE_EXHAUSTED: Please retry in 47.17s."));
    }

    fn utc(text: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(text).unwrap().timestamp_millis()
    }

    #[test]
    fn pacific_midnight_follows_daylight_saving_time() {
        let cases = [
            // Winter, PST (UTC−8): midnight PT is 08:00 UTC.
            ("2026-12-03T10:11:00Z", "2026-12-04T08:00:00Z"),
            ("2026-12-04T07:59:59Z", "2026-12-04T08:00:00Z"),
            ("2026-12-04T08:00:00Z", "2026-12-05T08:00:00Z"),
            // Summer, PDT (UTC−7): 07:00 UTC.
            ("2026-07-01T06:59:00Z", "2026-07-01T07:00:00Z"),
            ("2026-07-01T07:00:00Z", "2026-07-02T07:00:00Z"),
            // 2026: DST starts Sunday 8 March (02:00 PST = 10:00 UTC), ends Sunday 1 November.
            ("2026-03-07T12:00:00Z", "2026-03-08T08:00:00Z"),
            ("2026-03-08T12:00:00Z", "2026-03-09T07:00:00Z"),
            ("2026-10-31T12:00:00Z", "2026-11-01T07:00:00Z"),
            ("2026-11-01T12:00:00Z", "2026-11-02T08:00:00Z"),
            // New Year's Eve in Los Angeles.
            ("2027-01-01T07:30:00Z", "2027-01-01T08:00:00Z"),
        ];
        for (now, reset) in cases {
            assert_eq!(next_pacific_midnight(utc(now)), utc(reset), "{now}");
        }
    }

    #[test]
    fn per_day_quotas_are_not_retried() {
        let violation = |id: &str, value: &str| {
            format!(
                r#"{{"error":{{"code":429,"status":"RESOURCE_EXHAUSTED","message":"You exceeded your current quota.",
                "details":[{{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{{"quotaId":"{id}","quotaValue":"{value}"}}]}},
                {{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"14s"}}]}}}}"#
            )
        };
        let now = utc("2026-12-03T10:11:00Z");
        let daily = [
            violation("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "250"),
            violation("GenerateContentInputTokensPerModelPerMinute-FreeTier", "0"),
            r#"{"error":{"code":429,"message":"Quota exceeded for metric: x, limit: 0, model: gemini-2.5-pro"}}"#
                .into(),
        ];
        for body in daily {
            let e = from_status(429, body.clone(), "m", None, now);
            assert_eq!(e.code(), ErrorCode::GeminiQuota);
            assert_eq!(e.quota_resets_at(), Some(utc("2026-12-04T08:00:00Z")), "{body}");
            assert!(!e.is_retryable());
            assert_eq!(e.verdict(), Verdict::Failure { retry: false, min_delay: None });
            assert!(e.to_string().contains("daily quota"), "{e}");
            assert!(e.to_string().contains("midnight Pacific time"), "{e}");
        }
        let minute = [
            violation("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "15"),
            r#"{"error":{"code":429,"message":"Quota exceeded for metric: x, limit: 0.5 per second"}}"#.into(),
            r#"{"error":{"code":429,"message":"Quota exceeded for metric: x, limit: 10, model: m"}}"#.into(),
        ];
        for body in minute {
            let e = from_status(429, body.clone(), "m", None, now);
            assert_eq!(e.quota_resets_at(), None, "{body}");
            assert!(matches!(e.verdict(), Verdict::Failure { retry: true, .. }));
        }
    }

    #[test]
    fn failed_precondition_and_408() {
        let body = r#"{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}"#;
        let e = from_status(400, body.into(), "m", None, 0);
        assert_eq!(e.code(), ErrorCode::GeminiNotAvailable);
        assert!(e.to_string().starts_with("Gemini is not available for this project or location"), "{e}");
        assert!(e.to_string().contains("User location is not supported"), "{e}");
        assert_eq!(e.verdict(), Verdict::Failure { retry: false, min_delay: None });
        let e = from_status(408, String::new(), "m", None, 0);
        assert_eq!(e.code(), ErrorCode::GeminiUnavailable);
        assert!(matches!(e.verdict(), Verdict::Failure { retry: true, .. }));
        assert!(e.to_string().contains("408"), "{e}");
    }
}
