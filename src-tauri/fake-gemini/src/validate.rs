//! Request checks the real API does, and its error envelopes.
//!
//! The body is proto3 JSON: lowerCamelCase and snake_case names are both accepted, and an unknown
//! name anywhere is a 400 naming the field and where it was found.

use base64::Engine as _;
use serde_json::{json, Value};

/// The request size limit: the whole request must stay under 20 MB.
pub const MAX_REQUEST_BYTES: usize = 20 * 1024 * 1024;

/// MIME types accepted in `inlineData` (images per the spec, plus the documents Gemini reads).
pub const SUPPORTED_MIME_TYPES: &[&str] =
    &["image/png", "image/jpeg", "image/webp", "image/heic", "image/heif", "application/pdf", "text/plain"];

/// An error answer in the API's envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub status: String,
    pub message: String,
    pub details: Vec<Value>,
}

impl ApiError {
    pub fn new(code: u16, status: impl Into<String>, message: impl Into<String>) -> Self {
        Self { code, status: status.into(), message: message.into(), details: Vec::new() }
    }

    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(400, "INVALID_ARGUMENT", message)
    }

    /// A 400 for a bad field, with the `BadRequest.fieldViolations` detail the API adds.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let mut e = Self::invalid_argument(message.clone());
        e.details.push(json!({"@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": field, "description": message}]}));
        e
    }

    pub fn api_key_invalid() -> Self {
        let message = "API key not valid. Please pass a valid API key.";
        let mut e = Self::invalid_argument(message);
        e.details = vec![
            json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                   "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}),
            json!({"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": message}),
        ];
        e
    }

    pub fn unregistered_caller() -> Self {
        Self::new(
            403,
            "PERMISSION_DENIED",
            "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
        )
    }

    pub fn model_not_found(model: &str) -> Self {
        Self::new(
            404,
            "NOT_FOUND",
            format!(
                "models/{model} is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."
            ),
        )
    }

    /// A per-day quota used up: the `QuotaFailure` names the per-day window. Like the real API,
    /// it still carries a short `RetryInfo`, which must not make a client retry.
    pub fn daily_quota(model: &str) -> Self {
        let mut e = Self::new(
            429,
            "RESOURCE_EXHAUSTED",
            format!(
                "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 250, model: {model}\nPlease retry in 14.87s."
            ),
        );
        e.details = vec![
            json!({"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                "quotaDimensions": {"location": "global", "model": model},
                "quotaValue": "250"}]}),
            json!({"@type": "type.googleapis.com/google.rpc.Help", "links": [{"description":
                "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]}),
            json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "14s"}),
        ];
        e
    }

    /// 400 FAILED_PRECONDITION: the API is not offered where the caller is.
    pub fn failed_precondition() -> Self {
        Self::new(400, "FAILED_PRECONDITION", "User location is not supported for the API use.")
    }

    pub fn quota(model: &str, retry_delay: std::time::Duration) -> Self {
        let secs = retry_delay.as_secs_f64();
        let delay = if retry_delay.subsec_nanos() == 0 {
            format!("{}s", retry_delay.as_secs())
        } else {
            format!("{secs:.3}s").replace(".000s", "s")
        };
        let mut e = Self::new(
            429,
            "RESOURCE_EXHAUSTED",
            format!(
                "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_input_token_count, limit: 250000, model: {model}\nPlease retry in {secs:.2}s."
            ),
        );
        e.details = vec![
            json!({"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
                "quotaId": "GenerateContentInputTokensPerModelPerMinute-FreeTier",
                "quotaDimensions": {"location": "global", "model": model},
                "quotaValue": "250000"}]}),
            json!({"@type": "type.googleapis.com/google.rpc.Help", "links": [{"description":
                "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]}),
            json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}),
        ];
        e
    }

    /// `{"error": {"code", "message", "status", "details"?}}`.
    pub fn body(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message, "status": self.status});
        if !self.details.is_empty() {
            error["details"] = Value::Array(self.details.clone());
        }
        json!({ "error": error })
    }
}

/// What a valid `generateContent` request carries, for the answer.
#[derive(Debug, Default)]
pub struct Checked {
    /// Decoded `inlineData` bytes, in order.
    pub images: Vec<Vec<u8>>,
    /// Characters of text in the prompt (system instruction, text parts, schema).
    pub text_chars: usize,
    /// `generationConfig.responseJsonSchema` (or `responseSchema`), when JSON mode is on.
    pub schema: Option<Value>,
    /// `generationConfig.maxOutputTokens`, when set.
    pub max_output_tokens: Option<u32>,
    /// `generationConfig.mediaResolution` (`MEDIA_RESOLUTION_LOW`, ...), when set.
    pub media_resolution: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Request,
    Content,
    Part,
    Blob,
    FileData,
    SafetySetting,
    GenerationConfig,
    ThinkingConfig,
    /// A message we do not model in detail (tools, schemas, function calls): anything goes.
    Any,
    Str,
    Float,
    Int,
    Bool,
}

/// `(lowerCamelCase name, kind, repeated)` of each message's fields.
fn fields(kind: Kind) -> &'static [(&'static str, Kind, bool)] {
    use Kind::*;
    match kind {
        Request => &[
            ("model", Str, false),
            ("contents", Content, true),
            ("tools", Any, true),
            ("toolConfig", Any, false),
            ("safetySettings", SafetySetting, true),
            ("systemInstruction", Content, false),
            ("generationConfig", GenerationConfig, false),
            ("cachedContent", Str, false),
        ],
        Content => &[("role", Str, false), ("parts", Part, true)],
        Part => &[
            ("text", Str, false),
            ("inlineData", Blob, false),
            ("fileData", FileData, false),
            ("functionCall", Any, false),
            ("functionResponse", Any, false),
            ("executableCode", Any, false),
            ("codeExecutionResult", Any, false),
            ("videoMetadata", Any, false),
            ("thought", Bool, false),
            ("thoughtSignature", Str, false),
            ("partMetadata", Any, false),
            ("mediaResolution", Any, false),
        ],
        Blob => &[("mimeType", Str, false), ("data", Str, false)],
        FileData => &[("mimeType", Str, false), ("fileUri", Str, false)],
        SafetySetting => &[("category", Str, false), ("threshold", Str, false)],
        GenerationConfig => &[
            ("stopSequences", Str, true),
            ("responseMimeType", Str, false),
            ("responseSchema", Any, false),
            ("responseJsonSchema", Any, false),
            ("responseModalities", Str, true),
            ("candidateCount", Int, false),
            ("maxOutputTokens", Int, false),
            ("temperature", Float, false),
            ("topP", Float, false),
            ("topK", Int, false),
            ("seed", Int, false),
            ("presencePenalty", Float, false),
            ("frequencyPenalty", Float, false),
            ("responseLogprobs", Bool, false),
            ("logprobs", Int, false),
            ("enableEnhancedCivicAnswers", Bool, false),
            ("speechConfig", Any, false),
            ("thinkingConfig", ThinkingConfig, false),
            ("imageConfig", Any, false),
            ("mediaResolution", Str, false),
        ],
        ThinkingConfig => {
            &[("includeThoughts", Bool, false), ("thinkingBudget", Int, false), ("thinkingLevel", Str, false)]
        }
        Any | Str | Float | Int | Bool => &[],
    }
}

fn type_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Str => "TYPE_STRING",
        Kind::Float => "TYPE_FLOAT",
        Kind::Int => "TYPE_INT32",
        Kind::Bool => "TYPE_BOOL",
        Kind::Request => "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentRequest",
        Kind::Content => "type.googleapis.com/google.ai.generativelanguage.v1beta.Content",
        Kind::Part => "type.googleapis.com/google.ai.generativelanguage.v1beta.Part",
        Kind::Blob => "type.googleapis.com/google.ai.generativelanguage.v1beta.Blob",
        Kind::FileData => "type.googleapis.com/google.ai.generativelanguage.v1beta.FileData",
        Kind::SafetySetting => "type.googleapis.com/google.ai.generativelanguage.v1beta.SafetySetting",
        Kind::GenerationConfig => "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerationConfig",
        Kind::ThinkingConfig => "type.googleapis.com/google.ai.generativelanguage.v1beta.ThinkingConfig",
        Kind::Any => "google.protobuf.Struct",
    }
}

/// `generation_config` → `generationConfig`; camelCase names pass through.
fn to_camel(name: &str) -> String {
    heck::ToLowerCamelCase::to_lower_camel_case(name)
}

/// `generationConfig` → `generation_config` (paths in error messages use proto names).
fn to_snake(name: &str) -> String {
    heck::ToSnakeCase::to_snake_case(name)
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}…", &s[..s.char_indices().nth(60).map_or(s.len(), |(i, _)| i)])
    } else {
        s
    }
}

/// Checks names and types recursively against the request schema.
fn check_message(value: &Value, kind: Kind, path: &str) -> Result<(), ApiError> {
    match kind {
        Kind::Any => return Ok(()),
        Kind::Str | Kind::Float | Kind::Int | Kind::Bool => {
            let ok = match kind {
                Kind::Str => value.is_string(),
                Kind::Float => value.is_number() || value.as_str().is_some_and(|s| s.parse::<f64>().is_ok()),
                Kind::Int => {
                    value.as_f64().is_some_and(|n| n.fract() == 0.0)
                        || value.as_str().is_some_and(|s| s.parse::<i64>().is_ok())
                }
                _ => value.is_boolean(),
            };
            return if ok || value.is_null() {
                Ok(())
            } else {
                Err(ApiError::field(
                    path,
                    format!("Invalid value at '{path}' ({}), {}", type_name(kind), short_json(value)),
                ))
            };
        }
        _ => {}
    }
    let Some(object) = value.as_object() else {
        if value.is_null() {
            return Ok(());
        }
        return Err(ApiError::field(
            path,
            format!("Invalid value at '{path}' ({}), {}", type_name(kind), short_json(value)),
        ));
    };
    let known = fields(kind);
    for (name, child) in object {
        let camel = to_camel(name);
        let Some((field, child_kind, repeated)) = known.iter().find(|(f, _, _)| *f == camel) else {
            let message = if path.is_empty() {
                format!("Invalid JSON payload received. Unknown name \"{name}\": Cannot find field.")
            } else {
                format!("Invalid JSON payload received. Unknown name \"{name}\" at '{path}': Cannot find field.")
            };
            return Err(ApiError::field(path, message));
        };
        let child_path = join(path, &to_snake(field));
        match (repeated, child) {
            (true, Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    check_message(item, *child_kind, &format!("{child_path}[{i}]"))?;
                }
            }
            _ => check_message(child, *child_kind, &child_path)?,
        }
    }
    Ok(())
}

/// As an array (proto JSON also takes a single value for a repeated field).
fn as_list(v: Option<&Value>) -> Vec<&Value> {
    match v {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(Value::Null) | None => Vec::new(),
        Some(other) => vec![other],
    }
}

/// Looks a field up by its camelCase or snake_case name.
fn get<'a>(v: &'a Value, camel: &str) -> Option<&'a Value> {
    v.get(camel).or_else(|| v.get(to_snake(camel)))
}

/// How a model family takes `thinkingConfig` (the server's side of it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThinkingRule {
    /// Gemini 2.5: `thinkingBudget` in `min..=max`, `-1` (dynamic), or 0 when `can_turn_off`;
    /// `thinkingLevel` is refused.
    Budget { min: i64, max: i64, can_turn_off: bool },
    /// Gemini 3: `thinkingLevel` from `levels` (a budget is still accepted, for compatibility).
    Level { levels: &'static [&'static str] },
}

/// The thinking rule of a concrete model id, by its family; `None` for models the fake does not
/// know the rules of (anything goes but both fields at once).
pub fn thinking_rule(model: &str) -> Option<ThinkingRule> {
    let family = |prefix: &str| model == prefix || model.strip_prefix(prefix).is_some_and(|r| r.starts_with('-'));
    if family("gemini-2.5-flash-lite") {
        Some(ThinkingRule::Budget { min: 512, max: 24_576, can_turn_off: true })
    } else if family("gemini-2.5-flash") {
        Some(ThinkingRule::Budget { min: 1, max: 24_576, can_turn_off: true })
    } else if family("gemini-2.5-pro") {
        Some(ThinkingRule::Budget { min: 128, max: 32_768, can_turn_off: false })
    } else if family("gemini-3-flash") || family("gemini-3.1-flash") {
        Some(ThinkingRule::Level { levels: &["MINIMAL", "LOW", "MEDIUM", "HIGH"] })
    } else if family("gemini-3-pro") || family("gemini-3.1-pro") {
        Some(ThinkingRule::Level { levels: &["LOW", "MEDIUM", "HIGH"] })
    } else {
        None
    }
}

const THINKING_LEVELS: &[&str] = &["THINKING_LEVEL_UNSPECIFIED", "MINIMAL", "LOW", "MEDIUM", "HIGH", "XHIGH"];
const MEDIA_RESOLUTIONS: &[&str] = &[
    "MEDIA_RESOLUTION_UNSPECIFIED",
    "MEDIA_RESOLUTION_LOW",
    "MEDIA_RESOLUTION_MEDIUM",
    "MEDIA_RESOLUTION_HIGH",
    "MEDIA_RESOLUTION_ULTRA_HIGH",
];

/// The checks that depend on the model (`concrete`: the model an alias stands for):
/// `thinkingConfig` (never both fields; what the family accepts) and `mediaResolution`.
pub fn check_for_model(request: &Value, concrete: &str) -> Result<(), ApiError> {
    let Some(config) = get(request, "generationConfig") else { return Ok(()) };
    if let Some(resolution) = get(config, "mediaResolution").filter(|v| !v.is_null()) {
        let text = resolution.as_str().unwrap_or_default();
        if !MEDIA_RESOLUTIONS.contains(&text) {
            return Err(ApiError::field(
                "generation_config.media_resolution",
                format!(
                    "Invalid value at 'generation_config.media_resolution' (type.googleapis.com/google.ai.generativelanguage.v1beta.GenerationConfig.MediaResolution), {}",
                    short_json(resolution)
                ),
            ));
        }
    }
    let Some(thinking) = get(config, "thinkingConfig").filter(|v| !v.is_null()) else { return Ok(()) };
    let budget = get(thinking, "thinkingBudget").filter(|v| !v.is_null());
    let level = get(thinking, "thinkingLevel").filter(|v| !v.is_null());
    if budget.is_some() && level.is_some() {
        return Err(ApiError::invalid_argument(
            "Unable to submit request because thinking_budget and thinking_level are both set. Set only one of them.",
        ));
    }
    let level = match level {
        // Enum names are matched without regard to case, as the API does.
        Some(v) => {
            let upper = v.as_str().unwrap_or_default().to_ascii_uppercase();
            if !THINKING_LEVELS.contains(&upper.as_str()) {
                return Err(ApiError::field(
                    "generation_config.thinking_config.thinking_level",
                    format!(
                        "Invalid value at 'generation_config.thinking_config.thinking_level' (type.googleapis.com/google.ai.generativelanguage.v1beta.ThinkingConfig.ThinkingLevel), {}",
                        short_json(v)
                    ),
                ));
            }
            Some(upper)
        }
        None => None,
    };
    let budget = budget.and_then(|b| b.as_i64().or_else(|| b.as_str().and_then(|s| s.parse().ok())));
    match (thinking_rule(concrete), budget, level) {
        (Some(ThinkingRule::Budget { .. }), _, Some(_)) => {
            Err(ApiError::invalid_argument("Thinking level is not supported for this model."))
        }
        (Some(ThinkingRule::Budget { can_turn_off: false, .. }), Some(0), _) => {
            Err(ApiError::invalid_argument("Budget 0 is invalid. This model only works in thinking mode."))
        }
        (Some(ThinkingRule::Budget { min, max, .. }), Some(b), _) if b != 0 && b != -1 && !(min..=max).contains(&b) => {
            Err(ApiError::invalid_argument(format!("The thinking budget ({b}) is invalid.")))
        }
        (Some(ThinkingRule::Level { levels }), _, Some(level))
            if level != "THINKING_LEVEL_UNSPECIFIED" && !levels.contains(&level.as_str()) =>
        {
            Err(ApiError::invalid_argument(format!("Thinking level {level} is not supported for this model.")))
        }
        _ => Ok(()),
    }
}

/// Every check of a `generateContent` body, in the order the API reports them.
pub fn check_generate_request(body: &[u8]) -> Result<(Value, Checked), ApiError> {
    if body.len() > MAX_REQUEST_BYTES {
        return Err(ApiError::invalid_argument(format!(
            "Request payload size exceeds the limit: {MAX_REQUEST_BYTES} bytes."
        )));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid_argument(format!("Invalid JSON payload received. {e}")))?;
    if !value.is_object() {
        return Err(ApiError::invalid_argument(format!(
            "Invalid JSON payload received. Expected an object, got {}.",
            short_json(&value)
        )));
    }
    check_message(&value, Kind::Request, "")?;

    let mut checked = Checked::default();
    let contents = as_list(get(&value, "contents"));
    if contents.is_empty() {
        return Err(ApiError::invalid_argument("* GenerateContentRequest.contents: contents is not specified\n"));
    }
    let mut all_contents: Vec<(String, &Value)> =
        contents.iter().enumerate().map(|(i, c)| (format!("contents[{i}]"), *c)).collect();
    if let Some(system) = get(&value, "systemInstruction") {
        all_contents.push(("system_instruction".into(), system));
    }
    for (path, content) in all_contents {
        let parts = as_list(get(content, "parts"));
        if parts.is_empty() {
            return Err(ApiError::invalid_argument(format!(
                "* GenerateContentRequest.{path}.parts: contents.parts must not be empty.\n"
            )));
        }
        if let Some(role) = get(content, "role").and_then(Value::as_str) {
            if !["user", "model", ""].contains(&role) {
                return Err(ApiError::invalid_argument(format!(
                    "Please use a valid role: user, model. Got \"{role}\"."
                )));
            }
        }
        for (j, part) in parts.iter().enumerate() {
            let part_path = format!("{path}.parts[{j}]");
            let text = get(part, "text").and_then(Value::as_str);
            let blob = get(part, "inlineData").filter(|b| !b.is_null());
            let file = get(part, "fileData").filter(|b| !b.is_null());
            let others = ["functionCall", "functionResponse", "executableCode", "codeExecutionResult"]
                .iter()
                .filter(|f| get(part, f).is_some_and(|v| !v.is_null()))
                .count();
            let data_fields =
                usize::from(text.is_some()) + usize::from(blob.is_some()) + usize::from(file.is_some()) + others;
            if data_fields == 0 {
                return Err(ApiError::invalid_argument(format!(
                    "* GenerateContentRequest.{part_path}.data: required oneof field 'data' must have one initialized field\n"
                )));
            }
            if data_fields > 1 {
                return Err(ApiError::invalid_argument(format!(
                    "Invalid JSON payload received. Oneof field 'data' is already set. Cannot set '{}' at '{part_path}'.",
                    if blob.is_some() { "inlineData" } else { "fileData" }
                )));
            }
            checked.text_chars += text.map_or(0, |t| t.chars().count());
            if let Some(blob) = blob {
                let mime = get(blob, "mimeType").and_then(Value::as_str).unwrap_or_default();
                if mime.is_empty() {
                    return Err(ApiError::invalid_argument(format!(
                        "* GenerateContentRequest.{part_path}.inline_data.mime_type: mime_type must not be empty.\n"
                    )));
                }
                if !SUPPORTED_MIME_TYPES.contains(&mime) {
                    return Err(ApiError::invalid_argument(format!("Unsupported MIME type: {mime}")));
                }
                let data = get(blob, "data").and_then(Value::as_str).unwrap_or_default();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(data))
                    .map_err(|_| {
                        let field = format!("{part_path}.inline_data.data");
                        let excerpt: String = data.chars().take(20).collect();
                        ApiError::field(
                            &field,
                            format!(
                                "Invalid value at '{field}' (TYPE_BYTES), Base64 decoding failed for \"{excerpt}\""
                            ),
                        )
                    })?;
                if bytes.is_empty() {
                    return Err(ApiError::invalid_argument("Provided image is not valid."));
                }
                checked.images.push(bytes);
            }
        }
    }

    if let Some(config) = get(&value, "generationConfig") {
        checked.max_output_tokens =
            get(config, "maxOutputTokens").and_then(Value::as_u64).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        checked.media_resolution = get(config, "mediaResolution").and_then(Value::as_str).map(str::to_string);
        if let Some(t) = get(config, "temperature").and_then(Value::as_f64) {
            if !(0.0..=2.0).contains(&t) {
                return Err(ApiError::invalid_argument(format!(
                    "* GenerateContentRequest.generation_config.temperature: temperature must be between 0 and 2, got {t}\n"
                )));
            }
        }
        let mime = get(config, "responseMimeType").and_then(Value::as_str).unwrap_or("text/plain");
        let json_schema = get(config, "responseJsonSchema").filter(|v| !v.is_null());
        let openapi_schema = get(config, "responseSchema").filter(|v| !v.is_null());
        if json_schema.is_some() && openapi_schema.is_some() {
            return Err(ApiError::invalid_argument("response_schema and response_json_schema cannot both be set."));
        }
        let schema = json_schema.or(openapi_schema);
        if schema.is_some() && mime != "application/json" {
            return Err(ApiError::invalid_argument(format!(
                "Response schema is only supported with response_mime_type application/json, got \"{mime}\"."
            )));
        }
        if !["text/plain", "application/json", "text/x.enum"].contains(&mime) {
            return Err(ApiError::invalid_argument(
                "* GenerateContentRequest.generation_config.response_mime_type: allowed mimetypes are `text/plain`, `application/json`, `application/xml`, `application/yaml` and `text/x.enum`.\n"
            ));
        }
        if let Some(schema) = schema {
            checked.text_chars += schema.to_string().len();
            checked.schema = Some(schema.clone());
        } else if mime == "application/json" {
            checked.schema = Some(Value::Bool(true));
        }
    }
    Ok((value, checked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_request() -> Value {
        json!({"systemInstruction": {"parts": [{"text": "You extract product data."}]},
               "contents": [{"role": "user", "parts": [
                   {"inlineData": {"mimeType": "image/jpeg", "data": "aGVsbG8="}},
                   {"text": "Extract the product in this photo."}]}],
               "generationConfig": {"temperature": 0.2, "maxOutputTokens": 2048,
                   "responseMimeType": "application/json",
                   "responseJsonSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "whatever": 1}}})
    }

    fn check(v: &Value) -> Result<Checked, ApiError> {
        check_generate_request(v.to_string().as_bytes()).map(|(_, c)| c)
    }

    #[test]
    fn accepts_the_spec_request_in_both_spellings() {
        let c = check(&ok_request()).unwrap();
        assert_eq!(c.images, vec![b"hello".to_vec()]);
        assert!(c.schema.is_some());
        let snake = json!({"system_instruction": {"parts": [{"text": "x"}]},
            "contents": [{"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": "aGVsbG8="}}]}],
            "generation_config": {"response_mime_type": "application/json", "max_output_tokens": 10,
                "thinking_config": {"thinking_budget": 0}},
            "safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]});
        check(&snake).unwrap();
    }

    #[test]
    fn rejects_unknown_fields_anywhere() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({"foo": 1}), r#"Unknown name "foo": Cannot find field."#),
            (
                json!({"generationConfig": {"response_format": "json"}}),
                r#"Unknown name "response_format" at 'generation_config'"#,
            ),
            (
                json!({"generationConfig": {"thinkingConfig": {"budget": 1}}}),
                r#"Unknown name "budget" at 'generation_config.thinking_config'"#,
            ),
            (
                json!({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "", "name": "x"}}]}]}),
                r#"Unknown name "name" at 'contents[0].parts[0].inline_data'"#,
            ),
            (json!({"contents": [{"parts": [{"image": "x"}]}]}), r#"Unknown name "image" at 'contents[0].parts[0]'"#),
            (
                json!({"systemInstruction": {"parts": [{"text": "x"}], "type": "system"}}),
                r#"Unknown name "type" at 'system_instruction'"#,
            ),
            (
                json!({"generationConfig": {"temperature": "hot"}}),
                "Invalid value at 'generation_config.temperature' (TYPE_FLOAT)",
            ),
            (json!({"generationConfig": 5}), "Invalid value at 'generation_config'"),
        ];
        for (patch, needle) in cases {
            let mut v = ok_request();
            merge(&mut v, &patch);
            let e = check(&v).unwrap_err();
            assert_eq!((e.code, e.status.as_str()), (400, "INVALID_ARGUMENT"));
            assert!(e.message.contains(needle), "{patch}: {}", e.message);
        }
    }

    fn merge(target: &mut Value, patch: &Value) {
        match (target, patch) {
            (Value::Object(t), Value::Object(p)) => {
                for (k, v) in p {
                    match t.get_mut(k) {
                        Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                        Some(Value::Array(existing)) if v.as_array().is_some_and(|a| !a.is_empty()) => {
                            // Merge the first element of arrays, recursively.
                            if let (Some(e), Some(p)) = (existing.first_mut(), v.as_array().and_then(|a| a.first())) {
                                merge(e, p);
                            }
                        }
                        _ => {
                            t.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            (t, p) => *t = p.clone(),
        }
    }

    #[test]
    fn semantic_checks() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({"contents": []}), "contents is not specified"),
            (
                json!({"contents": [{"parts": [{"inlineData": {"mimeType": "image/jpg"}}]}]}),
                "Unsupported MIME type: image/jpg",
            ),
            (json!({"contents": [{"parts": [{"inlineData": {"data": "***"}}]}]}), "Base64 decoding failed"),
            (json!({"contents": [{"parts": [{"inlineData": {"data": ""}}]}]}), "Provided image is not valid"),
            (json!({"contents": [{"parts": [{"text": null, "inlineData": null}]}]}), "required oneof field 'data'"),
            (
                json!({"generationConfig": {"responseMimeType": "text/plain"}}),
                "only supported with response_mime_type application/json",
            ),
            (json!({"generationConfig": {"temperature": 3}}), "temperature must be between 0 and 2"),
        ];
        for (patch, needle) in cases {
            let mut v = ok_request();
            merge(&mut v, &patch);
            let e = check(&v).unwrap_err();
            assert!(e.message.contains(needle), "{patch}: {}", e.message);
        }
        let e = check_generate_request(b"{not json").unwrap_err();
        assert!(e.message.starts_with("Invalid JSON payload received."), "{}", e.message);
        let big = vec![b' '; MAX_REQUEST_BYTES + 1];
        assert!(check_generate_request(&big).unwrap_err().message.contains("exceeds the limit"));
    }

    #[test]
    fn thinking_and_media_resolution_per_model() {
        let with = |thinking: Value, resolution: Value| {
            let mut v = ok_request();
            v["generationConfig"]["thinkingConfig"] = thinking;
            v["generationConfig"]["mediaResolution"] = resolution;
            v
        };
        let ok = [
            ("gemini-2.5-flash", json!({"thinkingBudget": 0}), json!("MEDIA_RESOLUTION_LOW")),
            ("gemini-2.5-flash-lite", json!({"thinkingBudget": 512}), json!(null)),
            ("gemini-2.5-pro", json!({"thinkingBudget": 128}), json!("MEDIA_RESOLUTION_HIGH")),
            ("gemini-2.5-pro", json!({"thinkingBudget": -1}), json!(null)),
            ("gemini-3-flash-preview", json!({"thinkingLevel": "minimal"}), json!("MEDIA_RESOLUTION_MEDIUM")),
            ("gemini-3-flash-preview", json!({"thinkingBudget": 0}), json!(null)),
            ("gemini-3-pro-preview", json!({"thinkingLevel": "LOW"}), json!(null)),
            ("some-unknown-model", json!({"thinkingLevel": "high"}), json!(null)),
        ];
        for (model, thinking, resolution) in ok {
            let v = with(thinking.clone(), resolution);
            check(&v).unwrap();
            check_for_model(&v, model).unwrap_or_else(|e| panic!("{model} {thinking}: {}", e.message));
        }
        let refused = [
            ("gemini-2.5-flash", json!({"thinkingBudget": 0, "thinkingLevel": "low"}), json!(null), "both set"),
            ("some-unknown-model", json!({"thinkingBudget": 0, "thinkingLevel": "low"}), json!(null), "both set"),
            ("gemini-2.5-flash", json!({"thinkingLevel": "minimal"}), json!(null), "Thinking level is not supported"),
            ("gemini-2.5-pro", json!({"thinkingBudget": 0}), json!(null), "only works in thinking mode"),
            ("gemini-2.5-flash-lite", json!({"thinkingBudget": 100}), json!(null), "thinking budget (100) is invalid"),
            ("gemini-3-pro-preview", json!({"thinkingLevel": "minimal"}), json!(null), "MINIMAL is not supported"),
            ("gemini-3-flash-preview", json!({"thinkingLevel": "lots"}), json!(null), "thinking_level"),
            ("gemini-2.5-flash", json!(null), json!("MEDIA_RESOLUTION_HUGE"), "media_resolution"),
        ];
        for (model, thinking, resolution, needle) in refused {
            let e = check_for_model(&with(thinking.clone(), resolution), model).unwrap_err();
            assert_eq!((e.code, e.status.as_str()), (400, "INVALID_ARGUMENT"));
            assert!(e.message.contains(needle), "{model} {thinking}: {}", e.message);
        }
    }

    #[test]
    fn envelopes_match_the_spec() {
        let e = ApiError::api_key_invalid().body();
        assert_eq!(e["error"]["details"][0]["reason"], "API_KEY_INVALID");
        assert_eq!(e["error"]["status"], "INVALID_ARGUMENT");
        let q = ApiError::quota("gemini-2.5-flash", std::time::Duration::from_secs(26)).body();
        assert_eq!(q["error"]["details"][2]["retryDelay"], "26s");
        assert!(q["error"]["message"].as_str().unwrap().ends_with("Please retry in 26.00s."));
        let q = ApiError::quota("m", std::time::Duration::from_millis(1500)).body();
        assert_eq!(q["error"]["details"][2]["retryDelay"], "1.500s");
    }
}
