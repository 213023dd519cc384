//! The JSON shapes of the Gemini REST API, as plain serde types.
//!
//! Request types serialize exactly the fields the API defines (lowerCamelCase) and nothing else:
//! the API rejects unknown fields. Response types are the opposite: every field is optional or
//! defaulted, `null` is read as "absent", numbers may arrive as strings, and unknown fields are
//! ignored, so a new field or a dropped one from Google never breaks parsing.

use serde::{Deserialize, Deserializer, Serialize};

// ---------------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------------

/// `POST /v1beta/models/{model}:generateContent` body.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentRequest {
    pub system_instruction: Content,
    pub contents: Vec<Content>,
    pub generation_config: GenerationConfig,
}

/// A message: a role and its parts.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub parts: Vec<Part>,
}

/// One part of a message: text or inline bytes (exactly one of them).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob>,
}

impl Part {
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: Some(text.into()), inline_data: None }
    }

    pub fn inline_data(mime_type: impl Into<String>, data_base64: String) -> Self {
        Self { text: None, inline_data: Some(Blob { mime_type: mime_type.into(), data: data_base64 }) }
    }
}

/// Inline bytes: the MIME type and standard base64 without a `data:` prefix.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob {
    pub mime_type: String,
    pub data: String,
}

/// `generationConfig`: only the fields we use; unset ones are left out (the model's default).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    pub max_output_tokens: u32,
    pub response_mime_type: String,
    pub response_json_schema: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_config: Option<ThinkingConfig>,
    /// `MEDIA_RESOLUTION_LOW` / `_MEDIUM` / `_HIGH`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_resolution: Option<String>,
}

/// `generationConfig.thinkingConfig`: a budget (Gemini 2.5) or a level (Gemini 3), never both
/// (the API answers 400). `gemini::models` decides which.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

/// `generateContent` answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GenerateContentResponse {
    #[serde(deserialize_with = "nullable")]
    pub candidates: Vec<Candidate>,
    #[serde(deserialize_with = "nullable")]
    pub prompt_feedback: Option<PromptFeedback>,
    #[serde(deserialize_with = "nullable")]
    pub usage_metadata: Option<UsageMetadata>,
    #[serde(deserialize_with = "lenient_string")]
    pub model_version: Option<String>,
    #[serde(deserialize_with = "lenient_string")]
    pub response_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Candidate {
    #[serde(deserialize_with = "nullable")]
    pub content: Option<ResponseContent>,
    /// Kept as text: new values appear over time and must not break parsing.
    #[serde(deserialize_with = "lenient_string")]
    pub finish_reason: Option<String>,
    #[serde(deserialize_with = "lenient_string")]
    pub finish_message: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResponseContent {
    #[serde(deserialize_with = "nullable")]
    pub parts: Vec<ResponsePart>,
    #[serde(deserialize_with = "lenient_string")]
    pub role: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResponsePart {
    #[serde(deserialize_with = "lenient_string")]
    pub text: Option<String>,
    /// `true` for a thought summary, which is not the answer.
    #[serde(deserialize_with = "lenient_bool")]
    pub thought: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PromptFeedback {
    #[serde(deserialize_with = "lenient_string")]
    pub block_reason: Option<String>,
    #[serde(deserialize_with = "lenient_string")]
    pub block_reason_message: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UsageMetadata {
    #[serde(deserialize_with = "lenient_u32")]
    pub prompt_token_count: u32,
    #[serde(deserialize_with = "lenient_u32")]
    pub candidates_token_count: u32,
    #[serde(deserialize_with = "lenient_u32")]
    pub thoughts_token_count: u32,
    #[serde(deserialize_with = "lenient_u32")]
    pub total_token_count: u32,
    /// The part of the prompt served from the cache (billed at the cached-input price).
    #[serde(deserialize_with = "lenient_u32")]
    pub cached_content_token_count: u32,
}

/// `ListModels` answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ListModelsResponse {
    #[serde(deserialize_with = "nullable")]
    pub models: Vec<ModelInfo>,
    #[serde(deserialize_with = "lenient_string")]
    pub next_page_token: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ModelInfo {
    /// `models/gemini-2.5-flash`.
    #[serde(deserialize_with = "lenient_string")]
    pub name: Option<String>,
    /// The concrete model an alias stands for, e.g. `gemini-3-flash-preview`.
    #[serde(deserialize_with = "lenient_string")]
    pub base_model_id: Option<String>,
    #[serde(deserialize_with = "lenient_string")]
    pub version: Option<String>,
    /// Whether the model thinks; absent on older models.
    #[serde(deserialize_with = "lenient_opt_bool")]
    pub thinking: Option<bool>,
}

/// The error envelope: `{"error": {"code", "message", "status", "details": [...]}}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ErrorEnvelope {
    #[serde(deserialize_with = "nullable")]
    pub error: Option<ErrorBody>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ErrorBody {
    #[serde(deserialize_with = "lenient_u32")]
    pub code: u32,
    #[serde(deserialize_with = "lenient_string")]
    pub message: Option<String>,
    #[serde(deserialize_with = "lenient_string")]
    pub status: Option<String>,
    /// `google.rpc` detail messages, each tagged by `@type`; kept loose.
    #[serde(deserialize_with = "nullable")]
    pub details: Vec<serde_json::Value>,
}

impl ErrorBody {
    /// The details whose `@type` ends with `.{name}` (e.g. `ErrorInfo`, `RetryInfo`).
    pub fn details_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a serde_json::Value> + 'a {
        self.details.iter().filter(move |d| {
            d.get("@type").and_then(|t| t.as_str()).is_some_and(|t| t.rsplit(['.', '/']).next() == Some(name))
        })
    }

    /// `ErrorInfo.reason`, e.g. `API_KEY_INVALID`.
    pub fn reason(&self) -> Option<&str> {
        self.details_of("ErrorInfo").find_map(|d| d.get("reason")?.as_str())
    }

    /// The violations of every `QuotaFailure` detail (`quotaId`, `quotaValue`, ...).
    pub fn quota_violations(&self) -> impl Iterator<Item = &serde_json::Value> + '_ {
        self.details_of("QuotaFailure")
            .filter_map(|d| d.get("violations")?.as_array())
            .flat_map(|violations| violations.iter())
    }

    /// `RetryInfo.retryDelay` (`"26s"`, `"0.5s"`, or `{"seconds": 26, "nanos": 0}`).
    pub fn retry_delay(&self) -> Option<std::time::Duration> {
        self.details_of("RetryInfo").find_map(|d| parse_proto_duration(d.get("retryDelay")?))
    }
}

/// A `google.protobuf.Duration` in JSON: `"26s"`, `"1.5s"`, or the object form.
pub fn parse_proto_duration(v: &serde_json::Value) -> Option<std::time::Duration> {
    let secs = match v {
        serde_json::Value::String(s) => s.trim().strip_suffix('s')?.trim().parse::<f64>().ok()?,
        serde_json::Value::Object(o) => {
            let num = |k: &str| match o.get(k) {
                Some(serde_json::Value::Number(n)) => n.as_f64(),
                Some(serde_json::Value::String(s)) => s.parse::<f64>().ok(),
                _ => Some(0.0),
            };
            num("seconds")? + num("nanos")? / 1e9
        }
        _ => return None,
    };
    (0.0..1e9).contains(&secs).then(|| std::time::Duration::from_secs_f64(secs))
}

// ---------------------------------------------------------------------------------------------
// Lenient field readers
// ---------------------------------------------------------------------------------------------

/// `null` reads as the default; any other value must have the expected shape.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A string; numbers and booleans are turned into text, anything else is absent.
fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    })
}

/// A count: a number or a numeric string; anything else is 0.
fn lenient_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    Ok(n.filter(|n| n.is_finite() && *n >= 0.0).map(|n| n.min(f64::from(u32::MAX)) as u32).unwrap_or(0))
}

/// `true`/`false` (or their text); anything else is absent.
fn lenient_opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Bool(b) => Some(b),
        serde_json::Value::String(s) => s.trim().parse::<bool>().ok(),
        _ => None,
    })
}

/// `true` or `"true"`; anything else is false.
fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Bool(b) => b,
        serde_json::Value::String(s) => s.eq_ignore_ascii_case("true"),
        _ => false,
    })
}
