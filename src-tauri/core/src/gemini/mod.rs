//! The Gemini HTTP client: `generateContent` with an image, structured JSON output, tolerant
//! parsing, and a typed [`GeminiError`] for every failure.
//!
//! - `POST {base_url}/v1beta/models/{model}:generateContent`, the key in the `x-goog-api-key`
//!   header (never in the URL; the header value is marked sensitive).
//! - The image goes inline (`inlineData`, base64); `generationConfig.responseMimeType` is
//!   `application/json` with `responseJsonSchema` = [`product::response_json_schema`].
//! - Three timeouts: `connect_timeout` and `read_timeout` on the reqwest client, and `timeout`
//!   around the whole call including reading the body. [`GeminiError::Timeout`] says which fired.
//! - Parsing ([`parse`]) accepts every shape the API is known to produce; see its docs.
//!
//! No third-party Gemini crate: the wire types are in [`wire`].

pub mod batch;
mod error;
mod parse;
pub mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::header::{HeaderValue, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::config::{ApiKey, GeminiConfig};
use crate::product::{self, Product};

pub use error::{Detail, GeminiError, ServerDetail, TimeoutKind};

/// The header that carries the key.
pub const API_KEY_HEADER: &str = "x-goog-api-key";

/// What the model is told, once per request (`systemInstruction`).
pub const SYSTEM_INSTRUCTION: &str = "\
You extract product data from a photo for a product catalog.
Rules:
- Describe the one product the photo is about (the most prominent one). Ignore the background, \
other items, and people.
- Use only what is visible in the photo: printed text, labels, tags, the product itself. Never \
guess or use outside knowledge to fill a field; if a value is not visible, use null (or an empty \
list).
- name: the product name as printed, without the brand when the brand is a separate word group. \
It is required; if nothing is printed, give a short plain description such as \"White ceramic mug\".
- brand: the brand or manufacturer as printed.
- price: only from a visible price tag or printed price. amount is a number without currency \
symbols; currency is the ISO 4217 code in upper case (EUR, USD, GBP, CHF, ...), inferred from the \
symbol only when unambiguous.
- gtin: the barcode digits (EAN-8, UPC-A, EAN-13, GTIN-14) only when every digit is legible; \
digits only, no spaces or dashes.
- net_content: the quantity printed on the pack (e.g. 500 g, 1.5 l, 12 pcs), value as a number \
and unit as printed in lower case.
- attributes: other useful printed facts (flavor, variety, scent, origin, ...) as name/value pairs.
- Keep the text in the language printed on the product; write description and category in English.
- uncertain_fields: list the names of the fields whose values you are not sure of (partly hidden, \
blurry, inferred), e.g. [\"price\", \"gtin\"].
Answer with the JSON object only.";

/// The user turn's text, after the image.
pub const USER_PROMPT: &str = "Extract the product shown in this photo.";

/// Tokens counted by Gemini for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct Usage {
    /// `promptTokenCount`: the input (image, instructions, schema).
    pub prompt_tokens: u32,
    /// `candidatesTokenCount + thoughtsTokenCount`: what is billed as output.
    pub output_tokens: u32,
    /// `thoughtsTokenCount`: the part of the output spent thinking.
    pub thoughts_tokens: u32,
    /// `totalTokenCount` (or the sum when Gemini leaves it out).
    pub total_tokens: u32,
}

/// A successful extraction.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiExtraction {
    /// Parsed and normalized; not validated (flags are the pipeline's job).
    pub product: Product,
    pub usage: Usage,
    /// The whole HTTP body, for the audit trail.
    pub raw_response: String,
    pub model_version: Option<String>,
    pub finish_reason: Option<String>,
    /// From sending the request to the last byte of the answer.
    pub latency: Duration,
}

/// The client. Cheap to clone: everything is shared.
#[derive(Clone)]
pub struct GeminiClient {
    http: reqwest::Client,
    inner: Arc<Inner>,
}

struct Inner {
    base_url: String,
    model: String,
    api_key: Option<ApiKey>,
    timeout: Duration,
    connect_timeout: Duration,
    read_timeout: Duration,
    schema: serde_json::Value,
}

impl std::fmt::Debug for GeminiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeminiClient")
            .field("base_url", &self.inner.base_url)
            .field("model", &self.inner.model)
            .field("api_key", &self.inner.api_key)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// What the transport returns: status, `Retry-After`, body (scrubbed of the key).
struct RawAnswer {
    status: u16,
    retry_after: Option<Duration>,
    body: String,
}

impl GeminiClient {
    /// Builds the client. No network traffic; a missing key is only reported when calling.
    pub fn new(cfg: &GeminiConfig) -> Result<Self, GeminiError> {
        let base_url = cfg.base_url.trim().trim_end_matches('/').to_string();
        let parsed = reqwest::Url::parse(&base_url).map_err(|e| GeminiError::InvalidConfig {
            message: format!("the base URL \"{base_url}\" is not valid ({e})"),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.query().is_some() {
            return Err(GeminiError::InvalidConfig {
                message: format!("the base URL \"{base_url}\" must be http(s)://host[:port] without a query"),
            });
        }
        let model = cfg.model.trim().to_string();
        if model.is_empty() || model.contains(['/', '?', '#', ' ', ':']) {
            return Err(GeminiError::InvalidConfig {
                message: format!("\"{model}\" is not a model id such as gemini-flash-latest"),
            });
        }
        for (name, d) in
            [("timeout", cfg.timeout), ("connect_timeout", cfg.connect_timeout), ("read_timeout", cfg.read_timeout)]
        {
            if d.is_zero() {
                return Err(GeminiError::InvalidConfig { message: format!("{name} must be longer than zero") });
            }
        }
        if let Some(key) = &cfg.api_key {
            if HeaderValue::from_str(key.expose()).is_err() {
                return Err(GeminiError::InvalidConfig {
                    message: "the API key contains characters that cannot be sent; paste it again".into(),
                });
            }
        }
        let http = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            .read_timeout(cfg.read_timeout)
            .https_only(false)
            .user_agent(concat!("product-extractor/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| GeminiError::InvalidConfig { message: format!("cannot set up HTTPS ({e})") })?;
        Ok(Self {
            http,
            inner: Arc::new(Inner {
                base_url,
                model,
                api_key: cfg.api_key.clone(),
                timeout: cfg.timeout,
                connect_timeout: cfg.connect_timeout,
                read_timeout: cfg.read_timeout,
                schema: product::response_json_schema(),
            }),
        })
    }

    /// The model id requests go to.
    pub fn model(&self) -> &str {
        &self.inner.model
    }

    /// The request body for one photo (exposed for tests and the audit trail).
    pub fn request_body(&self, mime_type: &str, image: &[u8]) -> wire::GenerateContentRequest {
        wire::GenerateContentRequest {
            system_instruction: wire::Content { role: None, parts: vec![wire::Part::text(SYSTEM_INSTRUCTION)] },
            contents: vec![wire::Content {
                role: Some("user".into()),
                parts: vec![
                    wire::Part::inline_data(mime_type, base64::engine::general_purpose::STANDARD.encode(image)),
                    wire::Part::text(USER_PROMPT),
                ],
            }],
            generation_config: wire::GenerationConfig {
                temperature: 0.2,
                max_output_tokens: 2048,
                response_mime_type: "application/json".into(),
                response_json_schema: self.inner.schema.clone(),
            },
        }
    }

    /// Sends one photo and returns the product Gemini read from it.
    pub async fn extract_product(&self, mime_type: &str, image: &[u8]) -> Result<GeminiExtraction, GeminiError> {
        let key = self.inner.api_key.as_ref().ok_or(GeminiError::MissingKey)?;
        let url = format!("{}/v1beta/models/{}:generateContent", self.inner.base_url, self.inner.model);
        let body = self.request_body(mime_type, image);
        let started = Instant::now();
        let answer = self.with_overall_timeout(self.call(self.http.post(&url).json(&body), key)).await?;
        let latency = started.elapsed();
        tracing::debug!(model = %self.inner.model, status = answer.status, ?latency, "gemini generateContent");
        if !(200..300).contains(&answer.status) {
            return Err(error::from_status(answer.status, answer.body, &self.inner.model, answer.retry_after));
        }
        extraction(answer.body, latency)
    }

    /// Lists the model ids the key may use (`GET /v1beta/models`), e.g. for "Test connection".
    pub async fn list_models(&self) -> Result<Vec<String>, GeminiError> {
        let key = self.inner.api_key.as_ref().ok_or(GeminiError::MissingKey)?;
        let url = format!("{}/v1beta/models", self.inner.base_url);
        self.with_overall_timeout(async {
            let mut models = Vec::new();
            let mut page_token: Option<String> = None;
            for _ in 0..20 {
                let mut query = vec![("pageSize", "1000".to_string())];
                if let Some(token) = page_token.take() {
                    query.push(("pageToken", token));
                }
                let answer = self.call(self.http.get(&url).query(&query), key).await?;
                if !(200..300).contains(&answer.status) {
                    return Err(error::from_status(answer.status, answer.body, &self.inner.model, answer.retry_after));
                }
                let page: wire::ListModelsResponse =
                    serde_json::from_str(&answer.body).map_err(|e| GeminiError::UnparsableOutput {
                        reason: "the model list was not valid JSON".into(),
                        truncated: false,
                        source: Detail(e.to_string()),
                        raw: answer.body.clone(),
                    })?;
                models.extend(
                    page.models
                        .into_iter()
                        .filter_map(|m| m.name)
                        .map(|n| n.strip_prefix("models/").map(str::to_string).unwrap_or(n)),
                );
                match page.next_page_token.filter(|t| !t.is_empty()) {
                    Some(t) => page_token = Some(t),
                    None => break,
                }
            }
            Ok(models)
        })
        .await
    }

    async fn with_overall_timeout<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, GeminiError>>,
    ) -> Result<T, GeminiError> {
        let limit = self.inner.timeout;
        tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| {
            Err(GeminiError::Timeout {
                kind: TimeoutKind::Overall,
                after: limit,
                source: Detail(format!("no complete answer within the overall timeout of {limit:?}")),
            })
        })
    }

    /// Sends with the key header and reads the whole body.
    async fn call(&self, request: reqwest::RequestBuilder, key: &ApiKey) -> Result<RawAnswer, GeminiError> {
        let mut key_value = HeaderValue::from_str(key.expose()).map_err(|_| GeminiError::InvalidConfig {
            message: "the API key contains characters that cannot be sent; paste it again".into(),
        })?;
        key_value.set_sensitive(true);
        let response =
            request.header(API_KEY_HEADER, key_value).send().await.map_err(|e| self.transport_error(e, key))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = response.bytes().await.map_err(|e| self.transport_error(e, key))?;
        let body = scrub(&String::from_utf8_lossy(&bytes), key);
        Ok(RawAnswer { status, retry_after, body })
    }

    /// Maps a reqwest failure to a timeout (which one) or a network error (what happened).
    fn transport_error(&self, e: reqwest::Error, key: &ApiKey) -> GeminiError {
        let chain = scrub(&error_chain(&e), key);
        if e.is_timeout() {
            let (kind, after) = if e.is_connect() {
                (TimeoutKind::Connect, self.inner.connect_timeout)
            } else {
                (TimeoutKind::Read, self.inner.read_timeout)
            };
            return GeminiError::Timeout { kind, after, source: Detail(chain) };
        }
        GeminiError::Network { cause: network_cause(&e, &chain), source: Detail(chain) }
    }
}

/// A 200 answer's body (a `GenerateContentResponse`, from a direct call or a batch) read into the
/// product; `latency` is how long it took to come.
fn extraction(body: String, latency: Duration) -> Result<GeminiExtraction, GeminiError> {
    let parsed = parse::parse_generate_response(&body)?;
    Ok(GeminiExtraction {
        product: parsed.product,
        usage: parsed.usage,
        raw_response: body,
        model_version: parsed.model_version,
        finish_reason: parsed.finish_reason,
        latency,
    })
}

/// Replaces the key wherever it appears (defence in depth: servers should never echo it).
fn scrub(text: &str, key: &ApiKey) -> String {
    let k = key.expose();
    if k.len() >= 4 && text.contains(k) {
        text.replace(k, "[redacted]")
    } else {
        text.to_string()
    }
}

/// `error: source: source ...`.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// A short, plain description of a network failure.
fn network_cause(e: &reqwest::Error, chain: &str) -> String {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            match io.kind() {
                ConnectionRefused => return "the connection was refused".into(),
                ConnectionReset => return "the connection was reset".into(),
                ConnectionAborted => return "the connection was aborted".into(),
                UnexpectedEof => return "the connection closed before the answer was complete".into(),
                NetworkUnreachable | HostUnreachable => return "the network is unreachable".into(),
                _ => {}
            }
        }
        source = s.source();
    }
    let lower = chain.to_ascii_lowercase();
    if lower.contains("dns error") || lower.contains("failed to lookup address") || lower.contains("name or service") {
        "the server name could not be resolved".into()
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
        "the secure connection (TLS) failed".into()
    } else if lower.contains("connection closed before message completed") || lower.contains("incomplete message") {
        "the connection was closed before an answer arrived".into()
    } else if lower.contains("connection reset") {
        "the connection was reset".into()
    } else if lower.contains("refused") {
        "the connection was refused".into()
    } else if e.is_connect() {
        "could not connect".into()
    } else if e.is_body() || e.is_decode() {
        "the connection broke while the answer was arriving".into()
    } else {
        "network error".into()
    }
}
