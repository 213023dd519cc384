//! The API's handlers. Each only translates: a request into the queue's or the catalog's call, and
//! its result or error into HTTP ([`super::problem`]). No rule of the app lives here: which bytes
//! were answered already, what a save checks, what a call costs and when the breaker lets a call
//! through are the engine's.

use std::path::{Path, PathBuf};

use axum::extract::multipart::{Multipart, MultipartError, MultipartRejection};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use pe_core::barcode::Barcode;
use pe_core::files::{Access, StagedFile};
use pe_core::gemini::Usage;
use pe_core::import::{EnqueueOptions, ImportItemDetail, ImportStatus, ItemId, ItemState};
use pe_core::product::{FieldFlag, FieldSource, Product};
use pe_core::stored_path::StoredPath;
use pe_core::{Coded, ErrorCode, ErrorReport};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::problem::Problem;
use super::{too_large, Api};
use crate::extraction::{outcome_of, Answer};

/// Where the photos received over HTTP are kept (`<data dir>/received/<sha256>/<the client's file
/// name>`, 0600 in 0700 folders): the queue works from files, and a photo's file is what review and
/// a later re-extract read. The same bytes are one folder, whoever sent them.
pub(crate) fn received_dir(api: &Api) -> PathBuf {
    api.state.paths().data_dir.join("received")
}

/// `POST /api/products/extract`'s query.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExtractQuery {
    /// Save the product at once (as the seed did) and answer 201 with it; by default the proposal
    /// waits for review in the window.
    #[serde(default)]
    pub save: bool,
    /// Wait for the answer (default); `false` answers 202 with the item at once.
    #[serde(default = "yes")]
    pub wait: bool,
}

fn yes() -> bool {
    true
}

/// A product's answer: Gemini's proposal, or the one saved for the same bytes before.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Extraction {
    /// The queue item that stands for the photos (`GET /api/items/{id}`).
    pub item: ItemId,
    pub state: ItemState,
    /// What Gemini proposed (the barcode read on the photo applied to the GTIN).
    pub product: Product,
    /// The fields a person should look at, and why.
    pub flags: Vec<FieldFlag>,
    /// The barcodes read on the photos, on this machine.
    pub barcodes: Vec<Barcode>,
    /// Where each field was read: which photo (0 = the first part) and where on it.
    pub sources: Vec<FieldSource>,
    /// The tokens Gemini counted for the call that answered.
    pub usage: Usage,
    /// What that call cost in US dollars; `null` when its model has no price.
    pub cost_usd: Option<f64>,
    /// Whether Gemini was called for this request (false: the same bytes were answered before,
    /// and nothing was paid again).
    pub billed_now: bool,
    /// The model that answered.
    pub model: String,
    pub latency_ms: u64,
    /// The saved product, with `save=true`.
    pub product_id: Option<i64>,
}

/// `?wait=false`: the item is queued.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Accepted {
    pub item: ItemId,
    pub state: ItemState,
    /// Where its state and result are (`GET /api/items/{id}`).
    pub location: String,
}

/// `POST /api/products/extract`: the photos (each `image` part, front first) as one product,
/// through the queue like every photo.
pub async fn extract(
    State(api): State<Api>,
    Query(query): Query<ExtractQuery>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, Problem> {
    let multipart = multipart.map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("{e} Send multipart/form-data with the photo in a part named `image`."),
        )
    })?;
    let photos = match tokio::time::timeout(api.body_timeout, receive(&api, multipart)).await {
        Ok(photos) => photos?,
        Err(_) => {
            return Err(Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                format!(
                    "The photos did not arrive within {} ([server] body_timeout).",
                    humantime::format_duration(api.body_timeout)
                ),
            ))
        }
    };
    let photos: Vec<(StoredPath, String)> =
        photos.into_iter().map(|(path, sha)| (StoredPath::new(&path), sha)).collect();
    let enqueued = api
        .queue
        .enqueue_product(photos, EnqueueOptions::interactive())
        .await
        .map_err(|e| report(&ErrorReport::from(e)))?;
    let Some(first) = enqueued.files.first() else {
        return Err(Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "The photos were not queued."));
    };
    let id = first.result_of;
    let queued = api.queue.item(id).await.map_err(|e| report(&ErrorReport::from(e)))?.row.state;
    if !query.wait {
        let location = format!("/api/items/{id}");
        let body = Accepted { item: id, state: queued, location: location.clone() };
        return Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(body)).into_response());
    }
    let detail = wait_for(&api, id).await?;
    let (barcodes, sources) = (detail.barcodes.clone().unwrap_or_default(), detail.sources.clone());
    let state = detail.row.state;
    match outcome_of(&api.queue, &api.state, detail, query.save).await {
        Ok((mut answer, saved)) => {
            // Answered before this request (the same bytes): nothing was paid for it now.
            answer.billed_now &= queued.is_active();
            let body = extraction(id, state, answer, saved, barcodes, sources);
            Ok(match saved {
                Some(product) if query.save => {
                    let location = format!("/api/products/{product}");
                    (StatusCode::CREATED, [(header::LOCATION, location)], Json(body)).into_response()
                }
                _ => Json(body).into_response(),
            })
        }
        Err(error) => Err(report(&error).with_retry_after(&api)),
    }
}

fn extraction(
    item: ItemId,
    state: ItemState,
    answer: Answer,
    saved: Option<i64>,
    barcodes: Vec<Barcode>,
    sources: Vec<FieldSource>,
) -> Extraction {
    Extraction {
        item,
        state: if saved.is_some() { ItemState::Saved } else { state },
        product: answer.product,
        flags: answer.flags,
        barcodes,
        sources,
        usage: answer.usage,
        cost_usd: answer.cost.map(|c| c.dollars()),
        billed_now: answer.billed_now,
        model: answer.model,
        latency_ms: answer.latency_ms,
        product_id: saved,
    }
}

/// Reads the `image` parts into files kept by their SHA-256, each streamed to disk as it arrives
/// (memory holds a chunk, whatever the photo's size) and refused past `max_file_bytes` without
/// reading the rest. Other parts are skipped. A part whose first bytes are not a photo's is
/// refused (415) as intake would.
async fn receive(api: &Api, mut multipart: Multipart) -> Result<Vec<(PathBuf, String)>, Problem> {
    let dir = received_dir(api);
    let created = dir.clone();
    tokio::task::spawn_blocking(move || pe_core::files::create_private_dir(&created))
        .await
        .map_err(|e| internal(&e.to_string()))?
        .map_err(|e| io_problem(&dir, &e))?;
    let (max_photos, max_bytes) = (api.max_photos(), api.max_file_bytes());
    let mut photos = Vec::new();
    while let Some(mut field) = multipart.next_field().await.map_err(|e| multipart_problem(api, &e))? {
        if field.name() != Some("image") {
            continue;
        }
        if photos.len() == max_photos {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "too_many_photos",
                format!("A product may have {max_photos} photos at most ([import] max_photos_per_product)."),
            ));
        }
        let name = file_name(field.file_name());
        let target = dir.join("incoming");
        let (staged, file) = StagedFile::create(&target, Access::Private).map_err(|e| io_problem(&dir, &e))?;
        let mut file = tokio::fs::File::from_std(file);
        let (mut hash, mut head, mut size) = (Sha256::new(), Vec::with_capacity(64), 0u64);
        while let Some(chunk) = field.chunk().await.map_err(|e| multipart_problem(api, &e))? {
            size += chunk.len() as u64;
            if size > max_bytes {
                return Err(too_large(api));
            }
            if head.len() < 64 {
                head.extend_from_slice(&chunk[..chunk.len().min(64 - head.len())]);
            }
            hash.update(&chunk);
            file.write_all(&chunk).await.map_err(|e| io_problem(&dir, &e))?;
        }
        file.flush().await.map_err(|e| io_problem(&dir, &e))?;
        drop(file);
        // Not a photo by its bytes, whatever intake would call it: 415.
        let format = pe_core::intake::detect_format(&head).map_err(|e| {
            Problem::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", e.to_string())
                .with_kind(e.code())
        })?;
        let sha = hex::encode(hash.finalize());
        let folder = dir.join(&sha);
        let path = folder.join(name.unwrap_or_else(|| format!("photo.{}", extension(format))));
        let target = path.clone();
        tokio::task::spawn_blocking(move || {
            pe_core::files::create_private_dir(&folder)?;
            staged.commit_to(&target)
        })
        .await
        .map_err(|e| internal(&e.to_string()))?
        .map_err(|e| io_problem(&dir, &e))?;
        photos.push((path, sha));
    }
    if photos.is_empty() {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "missing_image",
            "No photo: send multipart/form-data with the photo in a part named `image` (several `image` parts: one product's photos, front first).",
        ));
    }
    Ok(photos)
}

/// The name a client gave its photo, as the queue and the Extract view show it: the last part of
/// the path only, without control, bidi or zero-width characters, at most 120 characters; `None` for nothing usable
/// (then `photo.<ext>`). It names a file inside the photo's own folder, never a path.
fn file_name(given: Option<&str>) -> Option<String> {
    let base = given?.rsplit(['/', '\\']).next()?;
    let clean: String =
        base.chars().filter(|&c| !pe_core::text::is_control(c) && !pe_core::text::is_invisible(c)).collect();
    let clean = clean.trim().trim_start_matches('.');
    let cut: String = clean.chars().take(120).collect();
    (!cut.is_empty()).then_some(cut)
}

fn extension(format: pe_core::intake::SourceFormat) -> &'static str {
    match format {
        pe_core::intake::SourceFormat::Jpeg => "jpg",
        other => other.as_str(),
    }
}

/// Waits for the item. While the queue it is in is held (the window's queue waits out an open
/// breaker, a quota, a spent budget, a full disk or a rejected key instead of failing its items),
/// the request is answered with that reason now and the item stays queued: the same photos sent
/// again later get its result without another call.
async fn wait_for(api: &Api, id: ItemId) -> Result<ImportItemDetail, Problem> {
    let mut progress = api.queue.progress();
    let now = api.state.now();
    let held = async {
        let problem =
            progress.wait_for(|p| held(&p.status, now).is_some()).await.ok().and_then(|p| held(&p.status, now));
        match problem {
            Some(problem) => problem,
            // The queue is gone: the item's own wait ends too.
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        detail = api.queue.finished(id) => detail.map_err(|e| report(&ErrorReport::from(e))),
        problem = held => Err(problem),
    }
}

/// The answer for a request whose item waits in a held queue; `None` while the queue moves.
fn held(status: &ImportStatus, now: i64) -> Option<Problem> {
    let waits = |code: ErrorCode, message: &str, until: Option<i64>| {
        let problem = Problem::from_report(&ErrorReport::new(code, message));
        match until {
            Some(until) => problem.retry_at(until, now),
            None => problem,
        }
    };
    Some(match status {
        ImportStatus::PausedBreaker { until_unix_ms, message } => {
            waits(ErrorCode::CircuitOpen, message, *until_unix_ms)
        }
        ImportStatus::PausedBudget { until_unix_ms, message } => {
            waits(ErrorCode::BudgetSpent, message, Some(*until_unix_ms))
        }
        ImportStatus::WaitingQuota { until_unix_ms, message } => {
            waits(ErrorCode::GeminiQuota, message, Some(*until_unix_ms))
        }
        ImportStatus::PausedDisk { message, .. } => waits(ErrorCode::DiskFull, message, None),
        ImportStatus::Stopped { code, message } => waits(*code, message, None),
        ImportStatus::WaitingServer { next_try_unix_ms, message, .. } => {
            Problem::new(StatusCode::SERVICE_UNAVAILABLE, "catalog_unavailable", message.clone())
                .retry_at(*next_try_unix_ms, now)
        }
        ImportStatus::PausedByUser => Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "paused",
            "The queue is paused in the window; the photos wait there until it is resumed.",
        ),
        ImportStatus::Idle | ImportStatus::Running | ImportStatus::Finished | ImportStatus::WorkedElsewhere => {
            return None
        }
    })
}

impl Problem {
    /// `Retry-After` where the app knows when trying again helps: the breaker's next probe, the
    /// budget's next day, a moment for a full bulkhead or a rate limit.
    fn with_retry_after(self, api: &Api) -> Self {
        let now = api.state.now();
        match self.kind {
            Some(ErrorCode::CircuitOpen) => {
                let probe = api.state.stack().breaker().snapshot().open.map(|o| o.probe_allowed_at_ms);
                match probe {
                    Some(at) => self.retry_at(i64::try_from(at).unwrap_or(i64::MAX), now),
                    None => self,
                }
            }
            Some(ErrorCode::BulkheadFull | ErrorCode::RateLimited) => self.retry_after(1),
            Some(ErrorCode::BudgetSpent) => self.retry_at(pe_core::pricing::local_day(now).end, now),
            _ => self,
        }
    }
}

fn report(report: &ErrorReport) -> Problem {
    Problem::from_report(report)
}

fn internal(message: &str) -> Problem {
    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message.to_string())
}

fn io_problem(dir: &Path, e: &std::io::Error) -> Problem {
    let code = if e.kind() == std::io::ErrorKind::StorageFull { ErrorCode::DiskFull } else { ErrorCode::Io };
    report(&ErrorReport::new(code, format!("Cannot keep the photo in {}: {e}", dir.display())))
}

fn multipart_problem(api: &Api, e: &MultipartError) -> Problem {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large(api);
    }
    Problem::new(
        StatusCode::BAD_REQUEST,
        "bad_request",
        format!("The multipart body cannot be read: {}", e.body_text()),
    )
}

/// A queue item's state and, once it has one, its result or error.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Item {
    pub item: ItemId,
    pub state: ItemState,
    /// Gemini's proposal, once answered.
    pub product: Option<Product>,
    pub flags: Vec<FieldFlag>,
    pub barcodes: Vec<Barcode>,
    pub sources: Vec<FieldSource>,
    /// Why it failed (or waits), when it did.
    pub error: Option<ItemError>,
    /// The product saved from it.
    pub product_id: Option<i64>,
    /// How many photos the product has.
    pub photos: u32,
}

/// An item's error.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ItemError {
    pub kind: ErrorCode,
    pub message: String,
}

/// `GET /api/items/{id}`.
pub async fn item(State(api): State<Api>, UrlPath(id): UrlPath<ItemId>) -> Result<Json<Item>, Problem> {
    let detail = api.queue.item(id).await.map_err(|e| report(&ErrorReport::from(e)))?;
    let row = detail.row;
    Ok(Json(Item {
        item: row.id,
        state: row.state,
        product: detail.proposal,
        flags: detail.flags,
        barcodes: detail.barcodes.unwrap_or_default(),
        sources: detail.sources,
        error: row.last_error.map(|e| ItemError { kind: e.code, message: e.message }),
        product_id: row.product_id,
        photos: row.photo_count,
    }))
}

/// `GET /api/products`'s query.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProductsQuery {
    /// Words to search for (each must start a word of the product; case and accents ignored).
    pub q: Option<String>,
    /// Products per page, 1 to 500 (default 50).
    pub limit: Option<u32>,
    /// Where the previous page ended (its `next_cursor`).
    pub cursor: Option<String>,
}

/// A page of the catalog.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProductsPage {
    pub products: Vec<pe_core::catalog::ProductSummary>,
    /// The next page's cursor; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// `GET /api/products`: the catalog, newest first, or a search's matches.
pub async fn products(
    State(api): State<Api>,
    Query(query): Query<ProductsQuery>,
) -> Result<Json<ProductsPage>, Problem> {
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let offset = match query.cursor.as_deref() {
        None | Some("") => 0,
        Some(cursor) => cursor
            .parse::<u32>()
            .map_err(|_| Problem::new(StatusCode::BAD_REQUEST, "bad_request", "The cursor is not one a page gave."))?,
    };
    let catalog = api.state.catalog();
    let page = match query.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        Some(q) => catalog.search_products(q, offset, limit).await,
        None => catalog.list_products(offset, limit).await,
    }
    .map_err(|e| report(&ErrorReport::from(e)))?;
    let next_cursor = (page.len() == limit as usize).then(|| (offset + limit).to_string());
    Ok(Json(ProductsPage { products: page, next_cursor }))
}

/// `GET /api/products/{id}`.
pub async fn product(
    State(api): State<Api>,
    UrlPath(id): UrlPath<i64>,
) -> Result<Json<pe_core::catalog::ProductRecord>, Problem> {
    api.state.catalog().get_product(id).await.map(Json).map_err(|e| report(&ErrorReport::from(e)))
}

/// `GET /api/usage`'s query.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UsageQuery {
    /// The first local day (YYYY-MM-DD); default 30 days ago.
    pub since: Option<String>,
}

/// Tokens and cost of the Gemini calls recorded in this catalog.
#[derive(Debug, Serialize, JsonSchema)]
pub struct UsageReport {
    /// Per local day and model (the model that answered), oldest first.
    pub days: Vec<UsageDay>,
    pub total: UsageTotal,
    /// `[pricing] daily_budget_usd`, when set.
    pub daily_budget_usd: Option<f64>,
    /// The date of the list prices.
    pub prices_as_of: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct UsageDay {
    pub day: String,
    pub model: String,
    #[serde(flatten)]
    pub total: UsageTotal,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct UsageTotal {
    pub calls: u32,
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub output_tokens: u64,
    /// The sum of the known costs, in US dollars.
    pub usd: f64,
    /// Calls whose model has no price (left out of `usd`).
    pub unpriced_calls: u32,
}

impl From<&pe_core::catalog::CostTotal> for UsageTotal {
    fn from(t: &pe_core::catalog::CostTotal) -> Self {
        Self {
            calls: t.calls,
            input_tokens: t.input_tokens,
            cached_tokens: t.cached_tokens,
            output_tokens: t.output_tokens,
            usd: t.usd.dollars(),
            unpriced_calls: t.unpriced_calls,
        }
    }
}

/// `GET /api/usage`: what `usage --json` reports.
pub async fn usage(State(api): State<Api>, Query(query): Query<UsageQuery>) -> Result<Json<UsageReport>, Problem> {
    use crate::cli::usage::{report as usage_report, UsageError};
    let (days, total) = usage_report(&api.state, query.since.as_deref()).await.map_err(|e| match e {
        UsageError::BadDate(message) => {
            Problem::new(StatusCode::BAD_REQUEST, "bad_request", format!("since={message}"))
        }
        UsageError::Catalog(e) => report(&e),
    })?;
    Ok(Json(UsageReport {
        days: days
            .iter()
            .map(|d| UsageDay { day: d.day.clone(), model: d.model.clone(), total: UsageTotal::from(&d.total) })
            .collect(),
        total: UsageTotal::from(&total),
        daily_budget_usd: api.state.pipeline().pricing().daily_budget().map(|b| b.dollars()),
        prices_as_of: pe_core::pricing::LIST_PRICES_AS_OF.to_string(),
    }))
}

/// `GET /actuator/circuitbreakers`: what `breaker --json` prints (Spring Boot's shape).
pub async fn circuit_breakers(State(api): State<Api>) -> Json<serde_json::Value> {
    Json(crate::cli::breaker_json(&api.state))
}

/// `GET /actuator/circuitbreakerevents`: Resilience4j's recent events, oldest first.
pub async fn circuit_breaker_events(State(api): State<Api>) -> Json<serde_json::Value> {
    Json(api.state.stack().breaker().actuator_events_json())
}

/// `GET /actuator/health`: UP while the breaker lets calls through, DOWN (503) while it is OPEN
/// or FORCED_OPEN, UNKNOWN in HALF_OPEN, as Spring's circuit breakers health indicator.
pub async fn health(State(api): State<Api>) -> Response {
    use pe_core::resilience::BreakerState as S;
    let stack = api.state.stack();
    let breaker = stack.breaker();
    let state = breaker.snapshot().state;
    let status = match state {
        S::Open | S::ForcedOpen => "DOWN",
        S::HalfOpen => "UNKNOWN",
        _ => "UP",
    };
    let body = serde_json::json!({
        "status": status,
        "components": {
            "circuitBreakers": {
                "status": status,
                "details": { breaker.name(): { "status": status, "details": breaker.actuator_json() } }
            }
        }
    });
    let code = if status == "DOWN" { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
    (code, Json(body)).into_response()
}

/// `GET /api/openapi.json`.
pub async fn openapi_document() -> Json<serde_json::Value> {
    Json(super::openapi::document())
}

#[cfg(test)]
mod tests {
    use super::file_name;

    #[test]
    fn a_clients_file_name_is_a_name_never_a_path() {
        assert_eq!(file_name(Some("front.jpg")).as_deref(), Some("front.jpg"));
        assert_eq!(file_name(Some("../../../../tmp/evil.jpg")).as_deref(), Some("evil.jpg"));
        assert_eq!(file_name(Some("C:\\shoot\\IMG_0001.JPG")).as_deref(), Some("IMG_0001.JPG"));
        assert_eq!(file_name(Some("..")), None);
        assert_eq!(file_name(Some("a/")), None);
        assert_eq!(file_name(Some(".hidden.jpg")).as_deref(), Some("hidden.jpg"));
        assert_eq!(file_name(Some("bad\u{1b}[31mname\u{202e}.jpg")).as_deref(), Some("bad[31mname.jpg"));
        assert_eq!(file_name(Some(&"x".repeat(300))).map(|n| n.chars().count()), Some(120));
        assert_eq!(file_name(None), None);
    }
}
