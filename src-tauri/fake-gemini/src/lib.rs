//! A local server that behaves like the Gemini REST API (see `gemini-api.md`), for tests, the
//! benchmarks and the app's demo mode. It is its own crate so that the production core
//! (`pe_core`) carries no server: the core's tests and benches dev-depend on it, and the app
//! depends on it because demo mode starts it in-process.
//!
//! It does not depend on the core: it speaks the wire format (JSON values), and the product it
//! answers with is shaped by the `responseJsonSchema` the client sends, not by the core's types.
//!
//! - Bound to `127.0.0.1:0` (never anything else); [`FakeGemini::base_url`] gives the address.
//! - Validates like the real API: the path and method, the key (`x-goog-api-key` header, or the
//!   legacy `?key=` query, which is accepted but recorded), the model, the JSON body (unknown
//!   fields anywhere are a 400 naming the field, in lowerCamelCase or snake_case), the inline
//!   data's MIME type and base64, and the 20 MB request limit. Errors use the real envelopes.
//! - Checks `thinkingConfig` against the model's family (never both fields; no level on 2.5; no
//!   budget 0 where thinking cannot be turned off) and `mediaResolution`; serves `models.get`
//!   with `baseModelId`, `version` and `thinking`, resolving the alias `gemini-flash-latest` to
//!   [`FLASH_LATEST_TARGET`].
//! - Answers `generateContent` according to a [`Behavior`]: scripted ones ([`FakeGemini::push`])
//!   are used in order, then the default. The product answer fits the `responseJsonSchema` the
//!   client sent, filled with what the photo shows for the demo's own photos (recognized by the
//!   SHA-256 of the prepared image, [`demo_photos`]), else with one of six built-in products chosen
//!   by hashing the image bytes, whose name and description say it was invented ([`products`]).
//!   `usageMetadata` counts the prompt by Google's published rules: each image by the answering
//!   model's family and the request's `mediaResolution` ([`products::image_tokens`]), text at
//!   four characters a token.
//! - Records every request (at most [`MAX_RECORDED`], oldest dropped) with the key redacted, and
//!   tracks how many `generateContent` calls ran at once.
//! - Logs nothing that includes a key. Dropping it or [`FakeGemini::shutdown`] stops it; hanging
//!   and stalled answers end at shutdown.

pub mod batches;
pub mod demo_photos;
pub mod photos;
pub mod products;
pub mod validate;

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use axum::Router;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use batches::{BatchFate, BatchTiming, Batches};
use validate::{ApiError, Checked};

/// How many requests [`FakeGemini::requests`] keeps (the oldest are dropped), so a long demo
/// session does not keep every uploaded image in memory.
pub const MAX_RECORDED: usize = 256;

/// How the fake answers a `generateContent` request that passed validation.
#[derive(Debug, Clone, PartialEq)]
pub enum Behavior {
    /// A realistic product for the image, fitting the client's schema, with usage metadata.
    Product,
    /// This JSON, verbatim, as the model's text.
    Fixed(Value),
    /// The product JSON inside a ```json fence.
    Fenced,
    /// The product JSON with prose before and after it.
    Prose,
    /// A thought part (with braces in it) before the product JSON part.
    ThoughtParts,
    /// A candidate whose content has a role but no parts.
    NoParts,
    /// No candidates; `promptFeedback.blockReason` is this.
    NoCandidatesBlocked(String),
    /// A candidate with `finishReason: SAFETY` and no content.
    FinishSafety,
    /// The product JSON cut in the middle, `finishReason: MAX_TOKENS`.
    MaxTokensTruncated,
    /// Thinking used up `maxOutputTokens`: `finishReason: MAX_TOKENS`, no answer text, and usage
    /// whose thoughts fill the whole cap (billed).
    ThinkingExhausted,
    /// A candidate with this `finishReason`, no content, and usage (e.g. `MODEL_ARMOR`, `SPII`, or
    /// a value newer than any client).
    FinishReason(String),
    /// Prose without any JSON.
    Garbage,
    /// 429 RESOURCE_EXHAUSTED with `RetryInfo.retryDelay` and "Please retry in …s." in the message.
    Quota { retry_delay: Duration },
    /// 429 RESOURCE_EXHAUSTED for a per-day quota (`quotaId` …PerDay…, a short `RetryInfo` too).
    DailyQuota,
    /// 400 FAILED_PRECONDITION "User location is not supported for the API use."
    FailedPrecondition,
    /// 408 "Request Timeout".
    RequestTimeout,
    /// 503 UNAVAILABLE "The model is overloaded. Please try again later."
    Unavailable,
    /// 500 INTERNAL.
    Internal,
    /// 504 DEADLINE_EXCEEDED.
    DeadlineExceeded,
    /// 400 INVALID_ARGUMENT "Provided image is not valid."
    InvalidImage,
    /// Any error status with the standard envelope (e.g. 401, 403, 409, 502).
    HttpError { code: u16, status: String, message: String },
    /// Never answers (until shutdown).
    Hang,
    /// Sends the status line, headers and part of the body, then stalls (until shutdown).
    StallBody,
    /// Closes the TCP connection without answering.
    CloseConnection,
    /// Waits this long, then answers like [`Behavior::Product`].
    Slow(Duration),
}

/// The concrete model the alias `gemini-flash-latest` stands for, as `models.get` tells.
pub const FLASH_LATEST_TARGET: &str = "gemini-3-flash-preview";

/// The concrete model an id stands for (aliases resolved), for `models.get` and the checks.
pub fn concrete_model(model: &str) -> &str {
    match model {
        "gemini-flash-latest" => FLASH_LATEST_TARGET,
        other => other,
    }
}

/// How the fake starts.
#[derive(Debug, Clone)]
pub struct FakeOptions {
    /// Accepted keys. Empty means any non-empty key is accepted (demo mode).
    pub api_keys: Vec<String>,
    /// Known model ids; others answer 404. Empty means every model exists.
    pub models: Vec<String>,
    /// Added before every answer: no answer leaves sooner than this after its request arrived.
    pub latency: Duration,
    pub default_behavior: Behavior,
}

impl Default for FakeOptions {
    fn default() -> Self {
        Self {
            api_keys: vec!["test-key".into()],
            models: vec![
                "gemini-flash-latest".into(),
                "gemini-2.5-flash".into(),
                "gemini-2.5-flash-lite".into(),
                "gemini-2.5-pro".into(),
                FLASH_LATEST_TARGET.into(),
            ],
            latency: Duration::ZERO,
            default_behavior: Behavior::Product,
        }
    }
}

/// A request as the fake received it. The key never appears: only whether one was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// The query string, with a `key=` value replaced by `[redacted]`.
    pub query: Option<String>,
    /// An `x-goog-api-key` header was present.
    pub had_key_header: bool,
    /// A `key=` query parameter was present (the form our client must never use).
    pub had_key_query: bool,
    /// The body as JSON (`Null` when empty or not JSON).
    pub body: Value,
}

/// The running fake server.
pub struct FakeGemini {
    addr: SocketAddr,
    state: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

struct Shared {
    api_keys: Vec<String>,
    models: Vec<String>,
    latency: Mutex<Duration>,
    default_behavior: Mutex<Behavior>,
    script: Mutex<VecDeque<Behavior>>,
    requests: Mutex<VecDeque<RecordedRequest>>,
    generate_count: AtomicUsize,
    /// `generateContent` requests per distinct body (by FNV-1a hash): the same photo sent again
    /// has the same body. 16 bytes per distinct body, so a long demo stays small.
    per_body: Mutex<std::collections::HashMap<u64, usize>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    answers: AtomicU64,
    /// `models.get` answers 503 while set (a lookup failing while generation works).
    fail_models_get: std::sync::atomic::AtomicBool,
    stop: watch::Receiver<bool>,
    /// The Batch API's batches (see [`batches`]).
    batches: Mutex<Batches>,
    batch_timing: Mutex<BatchTiming>,
    /// How the next batches end (then [`BatchFate::Succeed`]).
    batch_fates: Mutex<VecDeque<BatchFate>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FakeGemini {
    /// Starts the server on `127.0.0.1` with a free port.
    pub async fn start(opts: FakeOptions) -> std::io::Result<FakeGemini> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (stop, stop_rx) = watch::channel(false);
        let state = Arc::new(Shared {
            api_keys: opts.api_keys,
            models: opts.models,
            latency: Mutex::new(opts.latency),
            default_behavior: Mutex::new(opts.default_behavior),
            script: Mutex::new(VecDeque::new()),
            requests: Mutex::new(VecDeque::new()),
            generate_count: AtomicUsize::new(0),
            per_body: Mutex::new(std::collections::HashMap::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            answers: AtomicU64::new(0),
            fail_models_get: std::sync::atomic::AtomicBool::new(false),
            stop: stop_rx.clone(),
            batches: Mutex::new(Batches::default()),
            batch_timing: Mutex::new(BatchTiming::default()),
            batch_fates: Mutex::new(VecDeque::new()),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(state.clone())
            // Let bodies a little over the 20 MB limit through so the API's own 400 answers;
            // far larger ones get axum's 413.
            .layer(DefaultBodyLimit::max(validate::MAX_REQUEST_BYTES + 4 * 1024 * 1024));
        let task = tokio::spawn(async move {
            let signal = async move {
                let mut rx = stop_rx;
                let _ = rx.wait_for(|stopped| *stopped).await;
            };
            let served = axum::serve(listener, app.into_make_service_with_connect_info::<Conn>())
                .with_graceful_shutdown(signal)
                .await;
            if let Err(e) = served {
                tracing::warn!("fake Gemini server stopped: {e}");
            }
        });
        tracing::debug!(%addr, "fake Gemini server started");
        Ok(FakeGemini { addr, state, stop, task: Some(task) })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues a behavior for the next `generateContent` request that passes validation.
    pub fn push(&self, b: Behavior) {
        lock(&self.state.script).push_back(b);
    }

    /// The behavior used when the queue is empty.
    pub fn set_default(&self, b: Behavior) {
        *lock(&self.state.default_behavior) = b;
    }

    /// While `fail` is set, `GET /v1beta/models/{model}` answers 503 (generation is unaffected).
    pub fn fail_models_get(&self, fail: bool) {
        self.state.fail_models_get.store(fail, Ordering::SeqCst);
    }

    /// Delay added before every answer.
    pub fn set_latency(&self, d: Duration) {
        *lock(&self.state.latency) = d;
    }

    /// The requests received so far (at most [`MAX_RECORDED`], oldest first).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).iter().cloned().collect()
    }

    /// How many `generateContent` requests arrived (valid or not).
    pub fn generate_count(&self) -> usize {
        self.state.generate_count.load(Ordering::SeqCst)
    }

    /// How many times each distinct `generateContent` body arrived (keyed by a hash of the body).
    /// The client sends the same bytes for the same photo, so this counts sends per photo.
    pub fn generate_counts_per_body(&self) -> std::collections::HashMap<u64, usize> {
        lock(&self.state.per_body).clone()
    }

    /// How the next batch created ends (scripted in order; then every batch succeeds). Each
    /// request of a batch takes the next [`Behavior`] of [`FakeGemini::push`]'s script.
    pub fn push_batch(&self, fate: BatchFate) {
        lock(&self.state.batch_fates).push_back(fate);
    }

    /// How many polls (`GET batches/{id}`) a batch stays pending, then running.
    pub fn set_batch_timing(&self, timing: BatchTiming) {
        *lock(&self.state.batch_timing) = timing;
    }

    /// Batches accepted by `batchGenerateContent`, and the requests in them.
    pub fn batch_submissions(&self) -> (usize, usize) {
        let batches = lock(&self.state.batches);
        (batches.submissions, batches.submitted_requests)
    }

    /// The most `generateContent` requests that were in progress at the same time.
    /// `generateContent` requests being answered right now.
    pub fn in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::SeqCst)
    }

    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Stops the server: hanging and stalled answers end, connections close.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for FakeGemini {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

impl std::fmt::Debug for FakeGemini {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeGemini").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// Per-connection info: a second handle on the socket, for the behaviors that misbehave at the
/// TCP level (stall mid-body, close without answering).
#[derive(Clone)]
struct Conn(Option<Arc<std::net::TcpStream>>);

impl Connected<IncomingStream<'_, TcpListener>> for Conn {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Conn(dup_socket(stream.io()).ok().map(Arc::new))
    }
}

fn dup_socket(s: &tokio::net::TcpStream) -> std::io::Result<std::net::TcpStream> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        Ok(s.as_fd().try_clone_to_owned()?.into())
    }
    #[cfg(windows)]
    {
        use std::os::windows::io::AsSocket;
        Ok(s.as_socket().try_clone_to_owned()?.into())
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = s;
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

impl Conn {
    /// Writes raw bytes to the socket, bypassing the HTTP server.
    fn write_raw(&self, bytes: &[u8]) -> bool {
        use std::io::Write;
        match &self.0 {
            Some(s) => (&**s).write_all(bytes).and_then(|_| (&**s).flush()).is_ok(),
            None => false,
        }
    }

    /// Shuts the connection down both ways (the client sees it close).
    fn close(&self) -> bool {
        match &self.0 {
            Some(s) => s.shutdown(std::net::Shutdown::Both).is_ok(),
            None => false,
        }
    }
}

struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(state: &'a Shared) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(state)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    async fn until_stopped(&self) {
        let mut rx = self.stop.clone();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }

    /// Sleeps, unless the server stops first. Returns false when stopped.
    async fn sleep(&self, d: Duration) -> bool {
        if d.is_zero() {
            return true;
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = self.until_stopped() => false,
        }
    }

    fn next_behavior(&self) -> Behavior {
        lock(&self.script).pop_front().unwrap_or_else(|| lock(&self.default_behavior).clone())
    }

    fn record(&self, r: RecordedRequest) {
        let mut requests = lock(&self.requests);
        if requests.len() >= MAX_RECORDED {
            requests.pop_front();
        }
        requests.push_back(r);
    }

    fn response_id(&self) -> String {
        let n = self.answers.fetch_add(1, Ordering::SeqCst);
        let h = products::fnv1a(&n.to_le_bytes());
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&h.to_le_bytes()[..]) + "fAkE"
    }
}

fn json_response(status: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let text = serde_json::to_string_pretty(body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json; charset=UTF-8")], text).into_response()
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.body())
}

fn not_found_page(path: &str) -> Response {
    let body = format!(
        "<!DOCTYPE html>\n<html lang=en><title>Error 404 (Not Found)!!1</title>\n<p><b>404.</b> <ins>That’s an error.</ins>\n<p>The requested URL <code>{path}</code> was not found on this server. <ins>That’s all we know.</ins>\n"
    );
    (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/html; charset=UTF-8")], body).into_response()
}

/// The `key=` query value, and the query with it redacted.
fn split_key_from_query(query: Option<&str>) -> (Option<String>, Option<String>) {
    let Some(query) = query else { return (None, None) };
    let mut key = None;
    let redacted: Vec<String> = query
        .split('&')
        .map(|pair| match pair.strip_prefix("key=") {
            Some(value) => {
                key = Some(value.to_string());
                "key=[redacted]".to_string()
            }
            None => pair.to_string(),
        })
        .collect();
    (key, Some(redacted.join("&")))
}

async fn handle(
    State(state): State<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // The latency counts from the request's arrival, as a server's own time does: the fake's
    // bookkeeping below (recording the request as JSON) happens within it, not on top of it.
    let arrived = tokio::time::Instant::now();
    let path = uri.path().to_string();
    let header_key = headers.get("x-goog-api-key").map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string());
    let (query_key, query) = split_key_from_query(uri.query());
    state.record(RecordedRequest {
        method: method.to_string(),
        path: path.clone(),
        query,
        had_key_header: header_key.is_some(),
        had_key_query: query_key.is_some(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });

    let generate_model = path.strip_prefix("/v1beta/models/").and_then(|r| r.strip_suffix(":generateContent"));
    let _in_flight = generate_model.map(|_| {
        state.generate_count.fetch_add(1, Ordering::SeqCst);
        *lock(&state.per_body).entry(products::fnv1a(&body)).or_default() += 1;
        InFlight::enter(&state)
    });
    let latency = *lock(&state.latency);
    if !state.sleep((arrived + latency).saturating_duration_since(tokio::time::Instant::now())).await {
        return error_response(&ApiError::new(503, "UNAVAILABLE", "The service is shutting down."));
    }

    let response = route(&state, &conn, &method, &path, header_key.or(query_key), generate_model, &body).await;
    tracing::debug!(%method, %path, status = response.status().as_u16(), "fake Gemini answered");
    response
}

async fn route(
    state: &Shared,
    conn: &Conn,
    method: &Method,
    path: &str,
    key: Option<String>,
    generate_model: Option<&str>,
    body: &[u8],
) -> Response {
    if let Some(response) = batch_route(state, method, path, key.as_deref(), body) {
        return response;
    }
    let list = path == "/v1beta/models" || path == "/v1beta/models/";
    let get_model = path.strip_prefix("/v1beta/models/").filter(|m| !m.is_empty() && !m.contains([':', '/']));
    if !list && generate_model.is_none() && get_model.is_none() {
        return not_found_page(path);
    }
    let method_ok = if generate_model.is_some() { method == Method::POST } else { method == Method::GET };
    if !method_ok {
        return not_found_page(path);
    }
    // The key: missing, or not one we know.
    if let Some(e) = key_error(state, key.as_deref()) {
        return error_response(&e);
    }
    let known_model = |m: &str| state.models.is_empty() || state.models.iter().any(|k| k == m);
    if list {
        let models: Vec<Value> = state.models.iter().map(|m| model_info(m)).collect();
        return json_response(200, &json!({ "models": models }));
    }
    if let Some(model) = get_model {
        if state.fail_models_get.load(Ordering::SeqCst) {
            return error_response(&ApiError::new(503, "UNAVAILABLE", "The service is currently unavailable."));
        }
        if !known_model(model) {
            let mut e = ApiError::model_not_found(model);
            e.message = format!("models/{model} is not found for API version v1beta.");
            return error_response(&e);
        }
        return json_response(200, &model_info(model));
    }
    let model = generate_model.unwrap_or_default();
    if !known_model(model) {
        return error_response(&ApiError::model_not_found(model));
    }
    let checked = match validate::check_generate_request(body)
        .and_then(|(request, checked)| validate::check_for_model(&request, concrete_model(model)).map(|()| checked))
    {
        Ok(checked) => checked,
        Err(e) => return error_response(&e),
    };
    let behavior = state.next_behavior();
    answer(state, conn, model, &checked, behavior).await
}

/// The key's check, as every method answers it.
fn key_error(state: &Shared, key: Option<&str>) -> Option<ApiError> {
    match key {
        None | Some("") => Some(ApiError::unregistered_caller()),
        Some(k) if !state.api_keys.is_empty() && !state.api_keys.iter().any(|known| known == k) => {
            Some(ApiError::api_key_invalid())
        }
        Some(_) => None,
    }
}

/// The Batch API's paths ([`batches`]); `None` for any other path.
fn batch_route(state: &Shared, method: &Method, path: &str, key: Option<&str>, body: &[u8]) -> Option<Response> {
    let create = path.strip_prefix("/v1beta/models/").and_then(|r| r.strip_suffix(":batchGenerateContent"));
    let rest = path.strip_prefix("/v1beta/batches");
    if create.is_none() && rest.is_none() {
        return None;
    }
    let (cancel, get, list) = match rest {
        Some("" | "/") => (None, None, true),
        Some(r) => {
            let id = r.strip_prefix('/').unwrap_or(r);
            match id.strip_suffix(":cancel") {
                Some(id) => (Some(id), None, false),
                None => (None, Some(id), false),
            }
        }
        None => (None, None, false),
    };
    let method_ok = if create.is_some() || cancel.is_some() { method == Method::POST } else { method == Method::GET };
    if !method_ok || [cancel, get].iter().flatten().any(|id| id.is_empty() || id.contains(['/', ':'])) {
        return Some(not_found_page(path));
    }
    if let Some(e) = key_error(state, key) {
        return Some(error_response(&e));
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let missing = |id: &str| {
        error_response(&ApiError::new(404, "NOT_FOUND", format!("Requested entity was not found. (batches/{id})")))
    };
    if let Some(model) = create {
        if !(state.models.is_empty() || state.models.iter().any(|k| k == model)) {
            return Some(error_response(&ApiError::model_not_found(model)));
        }
        let checked = match batches::check_batch_request(body) {
            Ok(checked) => checked,
            Err(e) => return Some(error_response(&e)),
        };
        let results = batches::answers(state, model, &checked.requests);
        let timing = *lock(&state.batch_timing);
        let fate = lock(&state.batch_fates).pop_front().unwrap_or(BatchFate::Succeed);
        let op = lock(&state.batches).create(model, checked.display_name, results, timing, fate, now);
        return Some(json_response(200, &op));
    }
    if let Some(id) = cancel {
        return Some(match lock(&state.batches).cancel(id) {
            Some(()) => json_response(200, &json!({})),
            None => missing(id),
        });
    }
    if let Some(id) = get {
        return Some(match lock(&state.batches).poll(id, now) {
            Some(op) => json_response(200, &op),
            None => missing(id),
        });
    }
    Some(if list { json_response(200, &lock(&state.batches).list(now)) } else { not_found_page(path) })
}

/// The default answer: a product for the image.
fn plain_product(state: &Shared, model: &str, checked: &Checked) -> Value {
    product_answer(state, model, checked, Shape::Plain, None)
}

/// The model resource: an alias names the concrete model in `baseModelId` and `version`; a model
/// whose thinking rules the fake knows says `thinking: true`, others leave `thinking` out.
fn model_info(model: &str) -> Value {
    let concrete = concrete_model(model);
    let mut info = json!({"name": format!("models/{model}"), "baseModelId": concrete,
           "version": if concrete == model { "001".to_string() } else { concrete.to_string() },
           "displayName": model,
           "description": "Fake model served by product-extractor's fake Gemini.",
           "inputTokenLimit": 1_048_576, "outputTokenLimit": 65_536,
           "supportedGenerationMethods": ["generateContent", "countTokens", "batchGenerateContent"],
           "temperature": 1.0, "topP": 0.95, "topK": 64, "maxTemperature": 2.0});
    if validate::thinking_rule(concrete).is_some() {
        info["thinking"] = json!(true);
    }
    info
}

/// How the product text is wrapped.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Plain,
    Fenced,
    Prose,
    Thought,
    Truncated,
}

async fn answer(state: &Shared, conn: &Conn, model: &str, checked: &Checked, behavior: Behavior) -> Response {
    let behavior = match content_answer(state, model, checked, behavior) {
        Ok(Ok(body)) => return json_response(200, &body),
        Ok(Err(e)) => return error_response(&e),
        Err(transport) => transport,
    };
    match behavior {
        Transport::Hang => {
            state.until_stopped().await;
            error_response(&ApiError::new(503, "UNAVAILABLE", "The service is shutting down."))
        }
        Transport::StallBody => {
            let full = serde_json::to_string_pretty(&product_answer(state, model, checked, Shape::Plain, None))
                .unwrap_or_default();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=UTF-8\r\ncontent-length: {}\r\n\r\n",
                full.len()
            );
            let part = &full.as_bytes()[..full.len() / 2];
            if conn.write_raw(&[head.as_bytes(), part].concat()) {
                state.until_stopped().await;
                conn.close();
            } else {
                state.until_stopped().await;
            }
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Transport::CloseConnection => {
            if !conn.close() {
                state.until_stopped().await;
            }
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Transport::Slow(d) => {
            if !state.sleep(d).await {
                return error_response(&ApiError::new(503, "UNAVAILABLE", "The service is shutting down."));
            }
            json_response(200, &product_answer(state, model, checked, Shape::Plain, None))
        }
    }
}

/// The behaviors that act on the connection rather than on the content.
enum Transport {
    Hang,
    StallBody,
    CloseConnection,
    Slow(Duration),
}

/// The answer of a behavior that is about content (a body or an error envelope), shared by
/// `generateContent` and each request of a batch; `Err` gives back the behaviors that act on the
/// connection (hang, stall, close, slow), which only a direct call can show.
fn content_answer(
    state: &Shared,
    model: &str,
    checked: &Checked,
    behavior: Behavior,
) -> Result<Result<Value, ApiError>, Transport> {
    Ok(match behavior {
        Behavior::Product => Ok(product_answer(state, model, checked, Shape::Plain, None)),
        Behavior::Fixed(v) => Ok(product_answer(state, model, checked, Shape::Plain, Some(v))),
        Behavior::Fenced => Ok(product_answer(state, model, checked, Shape::Fenced, None)),
        Behavior::Prose => Ok(product_answer(state, model, checked, Shape::Prose, None)),
        Behavior::ThoughtParts => Ok(product_answer(state, model, checked, Shape::Thought, None)),
        Behavior::MaxTokensTruncated => Ok(product_answer(state, model, checked, Shape::Truncated, None)),
        Behavior::Garbage => {
            let text = "I'm sorry, but I can't make out a product in this image. It seems to show a blurry \
                        surface; could you send a clearer photo of the packaging?";
            Ok(text_answer(state, model, checked, vec![json!({"text": text})], "STOP"))
        }
        Behavior::NoParts => {
            let mut v = text_answer(state, model, checked, Vec::new(), "STOP");
            v["candidates"][0]["content"] = json!({"role": "model"});
            Ok(v)
        }
        Behavior::FinishSafety => {
            let mut v = text_answer(state, model, checked, Vec::new(), "SAFETY");
            let candidate = v["candidates"][0].as_object_mut().expect("candidate");
            candidate.remove("content");
            candidate.insert("safetyRatings".into(), safety_ratings(true));
            Ok(v)
        }
        Behavior::NoCandidatesBlocked(reason) => {
            let prompt = prompt_tokens(model, checked);
            Ok(json!({"promptFeedback": {"blockReason": reason, "safetyRatings": safety_ratings(true)},
                      "usageMetadata": {"promptTokenCount": prompt, "totalTokenCount": prompt},
                      "modelVersion": concrete_model(model), "responseId": state.response_id()}))
        }
        Behavior::ThinkingExhausted => {
            let mut v = text_answer(state, model, checked, Vec::new(), "MAX_TOKENS");
            v["candidates"][0]["content"] = json!({"role": "model"});
            let cap = checked.max_output_tokens.unwrap_or(8192);
            let prompt = v["usageMetadata"]["promptTokenCount"].as_u64().unwrap_or(0);
            v["usageMetadata"]["thoughtsTokenCount"] = json!(cap);
            v["usageMetadata"]["totalTokenCount"] = json!(prompt + u64::from(cap));
            Ok(v)
        }
        Behavior::FinishReason(reason) => {
            let mut v = text_answer(state, model, checked, Vec::new(), &reason);
            let candidate = v["candidates"][0].as_object_mut().expect("candidate");
            candidate.remove("content");
            candidate.insert("safetyRatings".into(), safety_ratings(reason.contains("SAFETY")));
            Ok(v)
        }
        Behavior::Quota { retry_delay } => Err(ApiError::quota(model, retry_delay)),
        Behavior::DailyQuota => Err(ApiError::daily_quota(model)),
        Behavior::FailedPrecondition => Err(ApiError::failed_precondition()),
        Behavior::RequestTimeout => {
            Err(ApiError::new(408, "DEADLINE_EXCEEDED", "Request Timeout: the request took too long to arrive."))
        }
        Behavior::Unavailable => Err(ApiError::new(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")),
        Behavior::Internal => Err(ApiError::new(
            500,
            "INTERNAL",
            "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
        )),
        Behavior::DeadlineExceeded => Err(ApiError::new(
            504,
            "DEADLINE_EXCEEDED",
            "The service could not finish the request within the deadline. Please retry with a shorter input or a longer deadline.",
        )),
        Behavior::InvalidImage => Err(ApiError::invalid_argument("Provided image is not valid.")),
        Behavior::HttpError { code, status, message } => Err(ApiError::new(code, status, message)),
        Behavior::Hang => return Err(Transport::Hang),
        Behavior::StallBody => return Err(Transport::StallBody),
        Behavior::CloseConnection => return Err(Transport::CloseConnection),
        Behavior::Slow(d) => return Err(Transport::Slow(d)),
    })
}

fn safety_ratings(blocked: bool) -> Value {
    json!([
        {"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT", "probability": "NEGLIGIBLE"},
        {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"},
        {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": if blocked { "HIGH" } else { "NEGLIGIBLE" },
         "blocked": blocked}
    ])
}

/// The prompt's tokens: its images, counted for the model that answers and the request's media
/// resolution, and its text at four characters a token.
fn prompt_tokens(model: &str, checked: &Checked) -> u32 {
    image_prompt_tokens(model, checked) + (checked.text_chars / 4) as u32
}

fn image_prompt_tokens(model: &str, checked: &Checked) -> u32 {
    let (model, resolution) = (concrete_model(model), checked.media_resolution.as_deref());
    checked.images.iter().map(|i| products::image_tokens(i, model, resolution)).sum()
}

/// A full answer whose candidate has these parts and finish reason, with usage metadata.
fn text_answer(state: &Shared, model: &str, checked: &Checked, parts: Vec<Value>, finish: &str) -> Value {
    let answer_chars: usize =
        parts.iter().filter(|p| p.get("thought").is_none()).filter_map(|p| p["text"].as_str()).map(str::len).sum();
    let seed = checked.images.first().map(|i| products::fnv1a(i)).unwrap_or(7);
    let prompt = prompt_tokens(model, checked);
    let candidates = (answer_chars / 4).max(usize::from(answer_chars > 0)) as u32;
    let thoughts = if parts.is_empty() { 0 } else { 120 + (seed % 400) as u32 };
    let image_tokens = image_prompt_tokens(model, checked);
    json!({
        "candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": finish, "index": 0}],
        "usageMetadata": {
            "promptTokenCount": prompt, "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates + thoughts, "thoughtsTokenCount": thoughts,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt - image_tokens},
                                    {"modality": "IMAGE", "tokenCount": image_tokens}]
        },
        // An alias answers with the model it stands for, as Gemini does.
        "modelVersion": concrete_model(model),
        "responseId": state.response_id()
    })
}

fn product_answer(state: &Shared, model: &str, checked: &Checked, shape: Shape, fixed: Option<Value>) -> Value {
    let text = match fixed {
        Some(v) => serde_json::to_string_pretty(&v).unwrap_or_default(),
        None => {
            let source = products::product_for_images(&checked.images);
            let value = match &checked.schema {
                Some(Value::Bool(true)) | None => source,
                Some(schema) => products::fit_to_schema(schema, Some(&source)),
            };
            serde_json::to_string_pretty(&value).unwrap_or_default()
        }
    };
    let (parts, finish) = match shape {
        Shape::Plain => (vec![json!({ "text": text })], "STOP"),
        Shape::Fenced => (vec![json!({ "text": format!("```json\n{text}\n```") })], "STOP"),
        Shape::Prose => (
            vec![json!({ "text": format!(
                "Here is the product I found in the photo:\n\n{text}\n\nLet me know if you need anything else."
            ) })],
            "STOP",
        ),
        Shape::Thought => (
            vec![
                json!({"text": "**Reading the label**\n\nThe package shows a brand name at the top; the schema \
                                 wants {name, brand, price}. I will fill only what is visible.",
                       "thought": true}),
                json!({ "text": text }),
            ],
            "STOP",
        ),
        Shape::Truncated => {
            let cut = text.char_indices().nth(text.chars().count() / 2).map_or(text.len(), |(i, _)| i);
            (vec![json!({ "text": &text[..cut] })], "MAX_TOKENS")
        }
    };
    text_answer(state, model, checked, parts, finish)
}
