//! The Gemini HTTP client: `generateContent` with an image, structured JSON output, tolerant
//! parsing, and a typed [`GeminiError`] for every failure.
//!
//! - `POST {base_url}/v1beta/models/{model}:generateContent`, the key in the `x-goog-api-key`
//!   header (never in the URL; the header value is marked sensitive).
//! - The image goes inline (`inlineData`, base64); `generationConfig.responseMimeType` is
//!   `application/json` with `responseJsonSchema` = [`product::response_json_schema`].
//! - Three timeouts: `connect_timeout` and `read_timeout` on the reqwest client, and `timeout`
//!   around the whole call including reading the body. [`GeminiError::Timeout`] says which fired
//!   and whether the headers or the body were late ([`AnswerStage`]).
//! - The body is read as a stream with a running count: past `max_response_bytes` (or with a
//!   Content-Length over it) the call ends at once with [`GeminiError::ResponseTooLarge`], so an
//!   endless or huge answer never grows memory.
//! - Parsing ([`parse`]) accepts every shape the API is known to produce; see its docs.
//! - `generationConfig` follows `[gemini]` (thinking, max output tokens, temperature, media
//!   resolution) as the model's family allows ([`models`]). An alias such as
//!   `gemini-flash-latest` is resolved once per client with `GET /v1beta/models/{model}`; when
//!   that fails or names no known family, no thinking field is sent (logged once).
//!
//! No third-party Gemini crate: the wire types are in [`wire`].

pub mod batch;
pub mod config;
mod error;
pub mod models;
mod parse;
pub mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::header::{HeaderValue, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::product::{self, Product};
pub use config::{ApiKey, GeminiConfig, KeyStorage, MediaResolution, Thinking};

pub use error::{next_pacific_midnight, AnswerStage, Detail, GeminiError, ServerDetail, TimeoutKind};
pub use models::Family;
pub use parse::response_model_version;

/// The header that carries the key.
pub const API_KEY_HEADER: &str = "x-goog-api-key";

/// What the model is told, once per request (`systemInstruction`): written from the field table.
pub use crate::product::system_instruction;

/// The user turn's text, after the image.
pub const USER_PROMPT: &str = "Extract the product shown in this photo.";

/// The user turn's text after several photos of one product (a shoot's front, back, sides).
pub fn user_prompt(photos: usize) -> std::borrow::Cow<'static, str> {
    if photos <= 1 {
        USER_PROMPT.into()
    } else {
        format!(
            "These {photos} photos show one product from different sides (front, back, label, ...). \
             Extract that one product, combining what each photo shows; where photos disagree, prefer the \
             most legible one."
        )
        .into()
    }
}

/// Tokens counted by Gemini for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, TS, schemars::JsonSchema)]
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
    /// `cachedContentTokenCount`: the part of `prompt_tokens` served from the cache, billed at the
    /// cached-input price.
    pub cached_tokens: u32,
}

impl Usage {
    /// What the call is billed for (see `pricing`).
    pub fn billed(&self) -> crate::pricing::BilledTokens {
        crate::pricing::BilledTokens {
            input: u64::from(self.prompt_tokens),
            cached_input: u64::from(self.cached_tokens),
            output: u64::from(self.output_tokens),
        }
    }
}

/// A successful extraction.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiExtraction {
    /// Parsed and cleaned ([`Product::cleaned`]: normalized, no control characters, no field over
    /// its maximum); not validated (flags are the pipeline's job).
    pub product: Product,
    /// What the cleaning changed, a flag per field ([`crate::product::FlagKind::ControlCharactersRemoved`],
    /// [`crate::product::FlagKind::TooLong`]): the proposal's flags include them.
    pub cleaning: Vec<crate::product::FieldFlag>,
    /// The answer's `sources` entry as sent (where each field was read), unchecked; the pipeline
    /// keeps the usable ones ([`crate::product::field_sources`]).
    pub sources: Option<serde_json::Value>,
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
    /// The wall clock (unix ms) a per-day quota's reset is computed from: the caller's
    /// ([`GeminiClient::with_clock`]), so tests control it; the system's by default.
    clock: WallClock,
}

/// A wall clock in unix milliseconds.
pub type WallClock = Arc<dyn Fn() -> i64 + Send + Sync>;

struct Inner {
    base_url: String,
    model: String,
    api_key: Option<ApiKey>,
    timeout: Duration,
    connect_timeout: Duration,
    read_timeout: Duration,
    max_response_bytes: u64,
    schema: serde_json::Value,
    thinking: Thinking,
    max_output_tokens: u32,
    temperature: Option<f64>,
    media_resolution: MediaResolution,
    /// The model's family: known from the id at once, or resolved by `models.get` on the first
    /// call (`None`: unknown, or the lookup failed — no thinking field is sent).
    family: tokio::sync::OnceCell<Option<&'static Family>>,
    /// When a lookup last failed: the next is tried only [`LOOKUP_RETRY`] later (a failure is
    /// not kept for good: an app started offline learns the family once it is online).
    lookup_failed_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// The model an alias stands for (`models.get`'s `baseModelId`), once looked up: what its
    /// calls are priced as before the first answer names it.
    base_model_id: std::sync::OnceLock<String>,
}

/// How long after a failed `models.get` the next call goes without a thinking field instead of
/// looking the model up again.
const LOOKUP_RETRY: Duration = Duration::from_secs(60);

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

/// How far the current call's answer has come, so a timeout can say what was late.
#[derive(Default)]
struct Progress {
    headers_arrived: AtomicBool,
}

impl Progress {
    fn stage(&self) -> AnswerStage {
        if self.headers_arrived.load(Ordering::Relaxed) {
            AnswerStage::Body
        } else {
            AnswerStage::Headers
        }
    }
}

/// What the transport returns: status, `Retry-After`, body (scrubbed of the key).
struct RawAnswer {
    status: u16,
    retry_after: Option<Duration>,
    body: String,
}

impl RawAnswer {
    /// The answer when its status is 2xx, else the error the status and body make for `model`.
    fn success(self, model: &str, now_ms: i64) -> Result<Self, GeminiError> {
        if (200..300).contains(&self.status) {
            Ok(self)
        } else {
            Err(error::from_status(self.status, self.body, model, self.retry_after, now_ms))
        }
    }
}

/// The URL's host is this machine: `localhost`, 127.0.0.0/8 or `[::1]`.
fn is_loopback(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
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
        // The key travels in a header: in clear text only to this machine (the fake, a local
        // proxy), never across a network.
        if parsed.scheme() == "http" && !is_loopback(&parsed) {
            return Err(GeminiError::InvalidConfig {
                message: format!(
                    "the base URL \"{base_url}\" is plain http to another machine, which would send the API key \
                     unencrypted; use https:// (http:// is accepted only for localhost)"
                ),
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
            clock: Arc::new(unix_now_ms),
            inner: Arc::new(Inner {
                base_url,
                api_key: cfg.api_key.clone(),
                timeout: cfg.timeout,
                connect_timeout: cfg.connect_timeout,
                read_timeout: cfg.read_timeout,
                max_response_bytes: cfg.max_response_bytes,
                schema: product::response_json_schema(),
                thinking: cfg.thinking,
                max_output_tokens: cfg.max_output_tokens,
                temperature: cfg.temperature,
                media_resolution: cfg.media_resolution,
                family: match models::family_of(&model) {
                    Some(family) => tokio::sync::OnceCell::new_with(Some(Some(family))),
                    None => tokio::sync::OnceCell::new(),
                },
                lookup_failed_at: std::sync::Mutex::new(None),
                base_model_id: std::sync::OnceLock::new(),
                model,
            }),
        })
    }

    /// The characters of text a call sends besides the photo (instructions, prompt, schema), for
    /// an estimate of its tokens before it is made.
    pub fn prompt_text_chars(&self) -> usize {
        system_instruction().len() + USER_PROMPT.len() + self.inner.schema.to_string().len()
    }

    /// `maxOutputTokens` as this client sends it.
    pub fn max_output_tokens(&self) -> u32 {
        self.inner.max_output_tokens
    }

    /// The model id requests go to.
    /// Whether `other` calls the same model at the same address with the same key: a client
    /// that differs in any of them may fix what stopped calls (a missing or rejected key, a model
    /// that does not exist for the key).
    pub fn same_target(&self, other: &GeminiClient) -> bool {
        let (a, b) = (&self.inner, &other.inner);
        a.base_url == b.base_url && a.model == b.model && a.api_key == b.api_key
    }

    pub fn model(&self) -> &str {
        &self.inner.model
    }

    /// The input tokens an image of this size is expected to cost with this client's model and
    /// `media_resolution` (the family resolved so far: an alias not looked up yet counts by the
    /// tile rule). Never makes a request.
    pub fn image_tokens(&self, width: u32, height: u32) -> u64 {
        let family = self.inner.family.get().copied().flatten();
        models::image_tokens(family, self.inner.media_resolution, width, height)
    }

    /// The model's family, resolving an alias with `models.get` the first time (once per client;
    /// concurrent callers wait for the one lookup). A failed lookup is logged and leaves the
    /// family unknown for [`LOOKUP_RETRY`]: extraction goes on without a thinking field meanwhile.
    pub async fn model_family(&self) -> Option<&'static Family> {
        if let Some(family) = self.inner.family.get() {
            return *family;
        }
        let failed_lately = || {
            let failed_at = *self.inner.lookup_failed_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            failed_at.is_some_and(|at| at.elapsed() < LOOKUP_RETRY)
        };
        if failed_lately() {
            return None;
        }
        let looked_up = self
            .inner
            .family
            .get_or_try_init(|| async {
                // Callers that waited on a lookup that failed come here one after the other:
                // they go on without it rather than each asking again.
                if failed_lately() {
                    return Err(());
                }
                let info = match self.get_model().await {
                    Ok(info) => info,
                    // Nothing was asked: there is no key yet.
                    Err(GeminiError::MissingKey) => return Err(()),
                    Err(e) => {
                        tracing::warn!(
                            model = %self.inner.model,
                            "could not look the model up ({e}); sending no thinking field for a minute"
                        );
                        // Before the next waiting caller runs this.
                        *self.inner.lookup_failed_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                            Some(std::time::Instant::now());
                        return Err(());
                    }
                };
                let family = models::family_of_model_info(&info);
                if let Some(id) = info.base_model_id.as_deref().filter(|id| !id.is_empty()) {
                    let _ = self.inner.base_model_id.set(id.to_string());
                }
                tracing::info!(
                    model = %self.inner.model,
                    base_model_id = info.base_model_id.as_deref().unwrap_or(""),
                    family = family.map_or("unknown (no thinking field sent)", |f| f.prefix),
                    "gemini model resolved"
                );
                Ok(family)
            })
            .await;
        looked_up.map_or(None, |family| *family)
    }

    /// This client with `clock` as its wall clock (see [`WallClock`]).
    pub fn with_clock(mut self, clock: WallClock) -> Self {
        self.clock = clock;
        self
    }

    /// The model the configured alias stands for, once [`GeminiClient::model_family`] looked it up
    /// (`None` before, and for a model named by its own id).
    pub fn resolved_model(&self) -> Option<&str> {
        self.inner.base_model_id.get().map(String::as_str)
    }

    /// `GET /v1beta/models/{model}`: what Gemini says about the configured model.
    pub async fn get_model(&self) -> Result<wire::ModelInfo, GeminiError> {
        let key = self.inner.api_key.as_ref().ok_or(GeminiError::MissingKey)?;
        let url = format!("{}/v1beta/models/{}", self.inner.base_url, self.inner.model);
        let progress = Progress::default();
        let answer = self.with_overall_timeout(&progress, self.call(self.http.get(&url), key, &progress)).await?;
        let answer = answer.success(&self.inner.model, (self.clock)())?;
        serde_json::from_str(&answer.body).map_err(|e| GeminiError::UnparsableOutput {
            reason: "the model description was not valid JSON".into(),
            usage: None,
            source: Detail(e.to_string()),
            raw: answer.body.clone(),
        })
    }

    /// The request body for one photo, for the family resolved so far (the id's own family
    /// before [`GeminiClient::model_family`] has resolved an alias). Exposed for tests, the
    /// audit trail and batch requests.
    pub fn request_body(&self, mime_type: &str, image: &[u8]) -> wire::GenerateContentRequest {
        self.request_body_photos(mime_type, &[image])
    }

    /// The request body for one product's photos, in the order given (see
    /// [`GeminiClient::request_body`]).
    pub fn request_body_photos(&self, mime_type: &str, images: &[&[u8]]) -> wire::GenerateContentRequest {
        let family = self.inner.family.get().copied().flatten();
        self.request_body_for(family, mime_type, images)
    }

    /// The request body for one product's photos sent to a model of `family` (`None`: unknown):
    /// each photo an `inlineData` part, in order, then the prompt (which says how many photos
    /// of one product there are when there are several).
    pub fn request_body_for(
        &self,
        family: Option<&Family>,
        mime_type: &str,
        images: &[&[u8]],
    ) -> wire::GenerateContentRequest {
        let inner = &self.inner;
        let mut parts: Vec<wire::Part> = images
            .iter()
            .map(|image| wire::Part::inline_data(mime_type, base64::engine::general_purpose::STANDARD.encode(image)))
            .collect();
        parts.push(wire::Part::text(user_prompt(images.len()).into_owned()));
        wire::GenerateContentRequest {
            system_instruction: wire::Content { role: None, parts: vec![wire::Part::text(system_instruction())] },
            contents: vec![wire::Content { role: Some("user".into()), parts }],
            generation_config: wire::GenerationConfig {
                temperature: models::temperature_for(family, inner.temperature),
                max_output_tokens: inner.max_output_tokens,
                response_mime_type: "application/json".into(),
                response_json_schema: inner.schema.clone(),
                thinking_config: family.and_then(|f| f.thinking_config(inner.thinking)),
                media_resolution: models::media_resolution_wire(inner.media_resolution).map(str::to_string),
            },
        }
    }

    /// Sends one photo and returns the product Gemini read from it.
    pub async fn extract_product(&self, mime_type: &str, image: &[u8]) -> Result<GeminiExtraction, GeminiError> {
        self.extract_photos(mime_type, &[image]).await
    }

    /// Sends one product's photos (several sides of it) in one request and returns the one
    /// product Gemini read from them.
    pub async fn extract_photos(&self, mime_type: &str, images: &[&[u8]]) -> Result<GeminiExtraction, GeminiError> {
        let key = self.inner.api_key.as_ref().ok_or(GeminiError::MissingKey)?;
        let url = format!("{}/v1beta/models/{}:generateContent", self.inner.base_url, self.inner.model);
        let family = self.model_family().await;
        let body = self.request_body_for(family, mime_type, images);
        let started = Instant::now();
        let progress = Progress::default();
        let answer =
            self.with_overall_timeout(&progress, self.call(self.http.post(&url).json(&body), key, &progress)).await?;
        let latency = started.elapsed();
        tracing::debug!(model = %self.inner.model, status = answer.status, ?latency, "gemini generateContent");
        let answer = answer.success(&self.inner.model, (self.clock)())?;
        extraction(answer.body, latency, self.inner.max_output_tokens)
    }

    /// Lists the model ids the key may use (`GET /v1beta/models`), e.g. for "Test connection".
    pub async fn list_models(&self) -> Result<Vec<String>, GeminiError> {
        let key = self.inner.api_key.as_ref().ok_or(GeminiError::MissingKey)?;
        let url = format!("{}/v1beta/models", self.inner.base_url);
        let progress = Progress::default();
        self.with_overall_timeout(&progress, async {
            let mut models = Vec::new();
            let mut page_token: Option<String> = None;
            for _ in 0..20 {
                let mut query = vec![("pageSize", "1000".to_string())];
                if let Some(token) = page_token.take() {
                    query.push(("pageToken", token));
                }
                progress.headers_arrived.store(false, Ordering::Relaxed);
                let answer = self.call(self.http.get(&url).query(&query), key, &progress).await?;
                let answer = answer.success(&self.inner.model, (self.clock)())?;
                let page: wire::ListModelsResponse =
                    serde_json::from_str(&answer.body).map_err(|e| GeminiError::UnparsableOutput {
                        reason: "the model list was not valid JSON".into(),
                        usage: None,
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
        progress: &Progress,
        fut: impl std::future::Future<Output = Result<T, GeminiError>>,
    ) -> Result<T, GeminiError> {
        let limit = self.inner.timeout;
        tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| {
            Err(GeminiError::Timeout {
                kind: TimeoutKind::Overall,
                stage: progress.stage(),
                after: limit,
                source: Detail(format!("no complete answer within the overall timeout of {limit:?}")),
            })
        })
    }

    /// Sends with the key header and reads the whole body, at most `max_response_bytes` of it.
    async fn call(
        &self,
        request: reqwest::RequestBuilder,
        key: &ApiKey,
        progress: &Progress,
    ) -> Result<RawAnswer, GeminiError> {
        let mut key_value = HeaderValue::from_str(key.expose()).map_err(|_| GeminiError::InvalidConfig {
            message: "the API key contains characters that cannot be sent; paste it again".into(),
        })?;
        key_value.set_sensitive(true);
        let mut response = request
            .header(API_KEY_HEADER, key_value)
            .send()
            .await
            .map_err(|e| self.transport_error(e, key, AnswerStage::Headers))?;
        progress.headers_arrived.store(true, Ordering::Relaxed);
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // Returning early drops `response`, which closes the connection unread.
        let limit = self.inner.max_response_bytes;
        let too_large = |detail: String| GeminiError::ResponseTooLarge { limit, status, source: Detail(detail) };
        let declared = response.content_length();
        if let Some(length) = declared.filter(|&length| length > limit) {
            return Err(too_large(format!("HTTP {status} declared a body of {length} bytes (Content-Length)")));
        }
        let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(limit) as usize);
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport_error(e, key, AnswerStage::Body))? {
            if (bytes.len() + chunk.len()) as u64 > limit {
                return Err(too_large(format!("HTTP {status}: more than {limit} bytes of body arrived")));
            }
            bytes.extend_from_slice(&chunk);
        }
        let body = scrub(&String::from_utf8_lossy(&bytes), key);
        Ok(RawAnswer { status, retry_after, body })
    }

    /// Maps a reqwest failure to a timeout (which one) or a network error (what happened).
    fn transport_error(&self, e: reqwest::Error, key: &ApiKey, stage: AnswerStage) -> GeminiError {
        let chain = scrub(&error_chain(&e), key);
        if e.is_timeout() {
            let (kind, after) = if e.is_connect() {
                (TimeoutKind::Connect, self.inner.connect_timeout)
            } else {
                (TimeoutKind::Read, self.inner.read_timeout)
            };
            return GeminiError::Timeout { kind, stage, after, source: Detail(chain) };
        }
        GeminiError::Network { cause: network_cause(&e, &chain), source: Detail(chain) }
    }
}

/// The system's wall clock in unix ms: the default [`WallClock`].
fn unix_now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// A 200 answer's body (a `GenerateContentResponse`, from a direct call or a batch) read into the
/// product; `latency` is how long it took to come.
fn extraction(body: String, latency: Duration, max_output_tokens: u32) -> Result<GeminiExtraction, GeminiError> {
    let parsed = parse::parse_generate_response(&body, max_output_tokens)?;
    Ok(GeminiExtraction {
        product: parsed.product,
        sources: parsed.sources,
        usage: parsed.usage,
        raw_response: body,
        model_version: parsed.model_version,
        finish_reason: parsed.finish_reason,
        cleaning: parsed.cleaning,
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
