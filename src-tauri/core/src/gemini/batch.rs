//! The Batch API (half price, answers within 24 hours): create a batch of inline requests, look
//! at it, cancel it, find it again by its display name.
//!
//! - `POST {base}/v1beta/models/{model}:batchGenerateContent` with
//!   `{"batch": {"displayName", "inputConfig": {"requests": {"requests": [{"request", "metadata"}]}}}}`;
//!   each request is the body [`GeminiClient::request_body`] sends directly, and its metadata
//!   `key` names the import item it answers.
//! - `GET {base}/v1beta/batches/{id}`, `POST {base}/v1beta/batches/{id}:cancel`,
//!   `GET {base}/v1beta/batches` (paged).
//!
//! Same key header, timeouts and error mapping as `generateContent`; every response field is
//! optional. An inlined response is read by the same code as a direct answer
//! ([`BatchResponse::into_result`]), so a batch item ends exactly like a direct call would.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{error, extraction, wire, GeminiClient, GeminiError, GeminiExtraction};

/// The inline-request limit of one batch (the whole `batchGenerateContent` body).
pub const MAX_INLINE_BATCH_BYTES: usize = 20 * 1024 * 1024;

/// One request of a batch: the `generateContent` body and its key.
#[derive(Debug, Clone, Serialize)]
pub struct InlinedRequest {
    pub request: wire::GenerateContentRequest,
    pub metadata: RequestMetadata,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RequestMetadata {
    pub key: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody<'a> {
    batch: CreateBatch<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreateBatch<'a> {
    display_name: &'a str,
    input_config: InputConfig<'a>,
}

#[derive(Serialize)]
struct InputConfig<'a> {
    requests: Requests<'a>,
}

#[derive(Serialize)]
struct Requests<'a> {
    requests: &'a [InlinedRequest],
}

/// Where a batch is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchState {
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Expired,
    /// A state this build does not know (kept, and looked at again later).
    Other(String),
}

impl BatchState {
    fn parse(text: &str) -> Self {
        match text {
            "BATCH_STATE_PENDING" | "JOB_STATE_PENDING" | "JOB_STATE_QUEUED" => Self::Pending,
            "BATCH_STATE_RUNNING" | "JOB_STATE_RUNNING" => Self::Running,
            "BATCH_STATE_SUCCEEDED" | "JOB_STATE_SUCCEEDED" => Self::Succeeded,
            "BATCH_STATE_FAILED" | "JOB_STATE_FAILED" => Self::Failed,
            "BATCH_STATE_CANCELLED" | "JOB_STATE_CANCELLED" => Self::Cancelled,
            "BATCH_STATE_EXPIRED" | "JOB_STATE_EXPIRED" => Self::Expired,
            other => Self::Other(other.to_string()),
        }
    }

    /// Nothing more will happen to the batch.
    pub fn is_done(&self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled | Self::Expired)
    }
}

/// A batch as `batches.get` (or create, or list) describes it.
#[derive(Debug, Clone)]
pub struct BatchStatus {
    /// `batches/{id}`.
    pub name: String,
    pub display_name: Option<String>,
    pub state: BatchState,
    /// The batch's own error (a failed batch).
    pub error: Option<String>,
    /// Once succeeded: one per request, in request order.
    pub responses: Vec<BatchResponse>,
}

/// One inlined response: its request's key, and Gemini's answer or the item's error.
#[derive(Debug, Clone)]
pub struct BatchResponse {
    pub key: Option<String>,
    /// The `GenerateContentResponse`, as JSON text (the audit trail keeps it).
    pub response: Option<String>,
    /// The item's own error (`google.rpc.Status`).
    pub error: Option<ItemStatus>,
}

// -- the wire shapes of the answers (every field optional) ------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Operation {
    name: Option<String>,
    metadata: Option<BatchMetadata>,
    done: Option<bool>,
    error: Option<ItemStatus>,
    response: Option<Output>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct BatchMetadata {
    name: Option<String>,
    display_name: Option<String>,
    state: Option<String>,
    output: Option<Output>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Output {
    inlined_responses: Option<InlinedResponses>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct InlinedResponses {
    inlined_responses: Option<Vec<InlinedResponse>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct InlinedResponse {
    response: Option<serde_json::Value>,
    error: Option<ItemStatus>,
    metadata: Option<serde_json::Value>,
}

/// `google.rpc.Status`: a gRPC code, a message, details.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct ItemStatus {
    pub code: Option<i64>,
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ListBatches {
    operations: Option<Vec<Operation>>,
    next_page_token: Option<String>,
}

impl Operation {
    fn into_status(self, raw: &str) -> Result<BatchStatus, GeminiError> {
        let metadata = self.metadata.unwrap_or_default();
        let Some(name) = self.name.or(metadata.name) else {
            return Err(GeminiError::UnparsableOutput {
                reason: "the batch answer named no batch".into(),
                usage: None,
                source: super::Detail(error::short(raw, 200)),
                raw: raw.to_string(),
            });
        };
        let state = match metadata.state.as_deref() {
            Some(state) => BatchState::parse(state),
            None if self.done == Some(true) && self.error.is_some() => BatchState::Failed,
            None if self.done == Some(true) => BatchState::Succeeded,
            None => BatchState::Pending,
        };
        let output = metadata.output.or(self.response).unwrap_or_default();
        let responses = output
            .inlined_responses
            .and_then(|r| r.inlined_responses)
            .unwrap_or_default()
            .into_iter()
            .map(|r| BatchResponse {
                key: r.metadata.as_ref().and_then(|m| m.get("key")).and_then(|k| k.as_str()).map(str::to_owned),
                response: r.response.map(|v| v.to_string()),
                error: r.error,
            })
            .collect();
        let error = self.error.map(|e| e.message.unwrap_or_else(|| format!("error code {}", e.code.unwrap_or(0))));
        Ok(BatchStatus { name, display_name: metadata.display_name, state, error, responses })
    }
}

impl BatchResponse {
    /// Gemini's answer for this item, read by the same code as a direct call's answer: a
    /// product, or the error a direct call would have ended with. `model` names the model in
    /// errors; `latency` is the time from submission to the result; `max_output_tokens` the cap the
    /// request carried (a cut-off answer says it); `now_ms` the wall clock (a per-day quota's reset).
    pub fn into_result(
        self,
        model: &str,
        latency: Duration,
        max_output_tokens: u32,
        now_ms: i64,
    ) -> Result<GeminiExtraction, GeminiError> {
        if let Some(status) = self.error {
            let http = http_status_of(status.code.unwrap_or(2));
            let body = serde_json::json!({ "error": {
                "code": http,
                "message": status.message.clone().unwrap_or_default(),
                "status": canonical_of(status.code.unwrap_or(2)),
                "details": status.details,
            }});
            return Err(error::from_status(http, body.to_string(), model, None, now_ms));
        }
        extraction(self.response.unwrap_or_else(|| "{}".into()), latency, max_output_tokens)
    }
}

/// The HTTP status a direct call answers for a gRPC code.
fn http_status_of(code: i64) -> u16 {
    match code {
        3 | 9 | 11 => 400,
        16 => 401,
        7 => 403,
        5 => 404,
        10 | 6 => 409,
        8 => 429,
        1 => 499,
        12 => 501,
        14 => 503,
        4 => 504,
        // A code that already is an HTTP status (some proxies and older answers).
        100..=599 => code as u16,
        _ => 500,
    }
}

fn canonical_of(code: i64) -> &'static str {
    match code {
        3 => "INVALID_ARGUMENT",
        9 => "FAILED_PRECONDITION",
        11 => "OUT_OF_RANGE",
        16 => "UNAUTHENTICATED",
        7 => "PERMISSION_DENIED",
        5 => "NOT_FOUND",
        8 => "RESOURCE_EXHAUSTED",
        14 => "UNAVAILABLE",
        4 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

impl GeminiClient {
    /// One batch request for a product's photos: the body a direct call sends, keyed by `key`.
    pub fn batch_request(&self, key: String, mime_type: &str, images: &[&[u8]]) -> InlinedRequest {
        InlinedRequest { request: self.request_body_photos(mime_type, images), metadata: RequestMetadata { key } }
    }

    /// The bytes `request` adds to a `batchGenerateContent` body (its JSON, base64 image included).
    pub fn batch_request_bytes(request: &InlinedRequest) -> usize {
        serde_json::to_vec(request).map_or(usize::MAX, |v| v.len() + 1)
    }

    /// Creates a batch of `requests` for the configured model, named `display_name` (so it can
    /// be found again with [`GeminiClient::batch_find`]).
    pub async fn batch_create(
        &self,
        display_name: &str,
        requests: &[InlinedRequest],
    ) -> Result<BatchStatus, GeminiError> {
        let url = format!("{}/v1beta/models/{}:batchGenerateContent", self.inner.base_url, self.inner.model);
        let body = CreateBody {
            batch: CreateBatch { display_name, input_config: InputConfig { requests: Requests { requests } } },
        };
        let body = serde_json::to_vec(&body).map_err(|e| GeminiError::InvalidConfig {
            message: format!("the batch request could not be written ({e})"),
        })?;
        self.batch_call(|http| http.post(&url).header("content-type", "application/json").body(body)).await
    }

    /// The batch's state (and, once it succeeded, its responses).
    pub async fn batch_get(&self, name: &str) -> Result<BatchStatus, GeminiError> {
        let url = format!("{}/v1beta/{}", self.inner.base_url, batch_path(name)?);
        self.batch_call(|http| http.get(&url)).await
    }

    /// Asks Gemini to cancel the batch (it ends `cancelled`, unless already done).
    pub async fn batch_cancel(&self, name: &str) -> Result<(), GeminiError> {
        let key = self.inner.api_key.as_ref().ok_or(GeminiError::MissingKey)?;
        let url = format!("{}/v1beta/{}:cancel", self.inner.base_url, batch_path(name)?);
        let progress = super::Progress::default();
        let answer = self
            .with_overall_timeout(
                &progress,
                self.call(self.http.post(&url).header("content-type", "application/json").body("{}"), key, &progress),
            )
            .await?;
        answer.success(&self.inner.model, (self.clock)())?;
        Ok(())
    }

    /// The batch named `display_name`, if Gemini has one (`GET batches`, every page).
    pub async fn batch_find(&self, display_name: &str) -> Result<Option<BatchStatus>, GeminiError> {
        let key = self.inner.api_key.as_ref().ok_or(GeminiError::MissingKey)?;
        let url = format!("{}/v1beta/batches", self.inner.base_url);
        let progress = super::Progress::default();
        self.with_overall_timeout(&progress, async {
            let mut page_token: Option<String> = None;
            for _ in 0..100 {
                let mut query = vec![("pageSize", "100".to_string())];
                if let Some(token) = page_token.take() {
                    query.push(("pageToken", token));
                }
                let answer = self.call(self.http.get(&url).query(&query), key, &progress).await?;
                let answer = answer.success(&self.inner.model, (self.clock)())?;
                let page: ListBatches = serde_json::from_str(&answer.body).map_err(|e| unparsable(&answer.body, e))?;
                for op in page.operations.unwrap_or_default() {
                    let status = op.into_status(&answer.body)?;
                    if status.display_name.as_deref() == Some(display_name) {
                        return Ok(Some(status));
                    }
                }
                match page.next_page_token.filter(|t| !t.is_empty()) {
                    Some(t) => page_token = Some(t),
                    None => break,
                }
            }
            Ok(None)
        })
        .await
    }

    async fn batch_call(
        &self,
        request: impl FnOnce(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<BatchStatus, GeminiError> {
        let key = self.inner.api_key.as_ref().ok_or(GeminiError::MissingKey)?;
        let progress = super::Progress::default();
        let answer = self.with_overall_timeout(&progress, self.call(request(&self.http), key, &progress)).await?;
        let answer = answer.success(&self.inner.model, (self.clock)())?;
        let op: Operation = serde_json::from_str(&answer.body).map_err(|e| unparsable(&answer.body, e))?;
        op.into_status(&answer.body)
    }
}

/// `batches/{id}`, checked so that a stored name can never reach another path.
fn batch_path(name: &str) -> Result<&str, GeminiError> {
    let id = name.strip_prefix("batches/").unwrap_or_default();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(GeminiError::InvalidConfig { message: format!("\"{name}\" is not a batch name (batches/ID)") });
    }
    Ok(name)
}

fn unparsable(body: &str, e: serde_json::Error) -> GeminiError {
    GeminiError::UnparsableOutput {
        reason: "the batch answer was not valid JSON".into(),
        usage: None,
        source: super::Detail(e.to_string()),
        raw: body.to_string(),
    }
}
