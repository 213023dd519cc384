//! The pipeline: the steps one photo is made of, which the one engine (the import queue, see
//! [`crate::import`]) runs for every item with its bookkeeping between them.
//!
//! ```text
//! prepare_known(file, sha256) ─ intake (blocking pool)
//! record_photo                ─ catalog thread, own tx
//! call_gemini                 ─ through the resilience stack (no transaction open anywhere)
//! GeminiCall::into_outcome    ─ the attempt to record, with the proposal (the photo's barcode
//!                               applied: [`proposal`]) and its flags, or the error
//! ```
//! The review's save is the import queue's (`save_item`: [`checked_for_save`], then the product,
//! its revision and the item's state in one transaction). Every catalog call is its own short
//! transaction on the catalog thread, so no transaction can span the network call.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::barcode::{self, Barcode};
use crate::catalog::{AttemptOutcome, AttemptUsage, Catalog, CatalogError, NewAttempt, NewPhoto, PhotoId};
use crate::catalog::{CostTotal, PreparedCopy};
use crate::error::{Coded, ErrorCode, ErrorData};
use crate::gemini::{self, GeminiClient, GeminiError, GeminiExtraction, Usage};
use crate::intake::{self, DecodeBudget, IntakeError, PreparedImage};
use crate::intake::{ImageConfig, IntakeConfig};
use crate::pricing::{self, BilledTokens, PricingConfig, Usd};
use crate::product::{field_sources, FieldFlag, FieldSource, FlagKind, Product};
use crate::resilience::{NotPermitted, ResilienceStack, SlotPolicy, StackError, Verdict};
use crate::stored_path::StoredPath;

/// The current time in unix milliseconds. Passed in, so tests control time.
pub type UnixClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> UnixClock {
    Arc::new(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    })
}

/// Why an extraction failed. The photo's own faults and Gemini's are kept apart by their codes.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error(transparent)]
    Intake(#[from] IntakeError),
    /// A photo of a product of several could not be prepared, so the product is not sent: the
    /// file is named, since the item shows the product's first photo.
    #[error("{file} (photo {number} of this product): {source}")]
    ProductPhoto { file: String, number: usize, source: IntakeError },
    /// The file no longer holds the bytes it was queued with (a catalog photo extracted again
    /// after its file was edited), and no copy of the prepared photo is kept.
    #[error(
        "{file} has changed since it was added (its content is not the photo's any more); add it again as a new photo"
    )]
    PhotoChanged { file: String },
    /// A team catalog's row names a file on this computer that this desktop did not queue: the
    /// path is not opened (anyone who can write to the shared database could have named any file).
    /// The file is not named either, so the message says nothing of what exists on this disk.
    #[error(
        "refused: this photo was not queued by this desktop (the team catalog's row carries no tag of this computer's), so its file was not opened; drop the photo again if it is yours"
    )]
    NotQueuedHere,
    #[error(transparent)]
    Gemini(#[from] GeminiError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The breaker is open (or forced open): no call was made. The code is what every failure
    /// the breaker recorded lately was (e.g. `gemini_quota`), when they agree.
    #[error("{}", circuit_open_message(.0, *.1))]
    CircuitOpen(NotPermitted, Option<ErrorCode>),
    #[error("All {max} Gemini call slots are busy; try again when one finishes (bulkhead full).")]
    BulkheadFull { max: u32 },
    #[error("The rate limit of {limit} Gemini calls per {period} is reached; try again in {wait} (rate limited).")]
    RateLimited { limit: u32, period: String, wait: String },
    /// The time limiter cancelled the call.
    #[error("Gemini did not answer within {}; try again, or raise time_limiter.timeout_duration in Settings.", humantime::format_duration(*.0))]
    TimedOut(std::time::Duration),
}

fn circuit_open_message(rejection: &NotPermitted, opened_by: Option<ErrorCode>) -> String {
    match rejection.retry_at_wall {
        Some(at) => {
            let at: chrono::DateTime<chrono::Local> = at.into();
            format!("{}, so calls are paused until {} (circuit open).", failing(opened_by), at.format("%H:%M:%S"))
        }
        None => "Calls to Gemini are paused (circuit open); open Gemini status to resume them.".into(),
    }
}

/// Why the breaker opened, as the start of a sentence: "Gemini kept answering 429 (quota)".
pub fn failing(opened_by: Option<ErrorCode>) -> String {
    match opened_by {
        Some(ErrorCode::GeminiQuota) => "Gemini kept answering 429 (quota)".into(),
        Some(ErrorCode::GeminiUnavailable) => "Gemini kept answering 5xx (overloaded or down)".into(),
        Some(ErrorCode::Timeout) => "Gemini kept timing out".into(),
        Some(ErrorCode::Network) => "Gemini kept being unreachable (network)".into(),
        Some(code) => format!("Gemini kept failing ({code})"),
        None => "Gemini is failing".into(),
    }
}

/// How many of the breaker's latest recorded failures [`Pipeline`] remembers to say why it opened.
const RECENT_FAILURES: usize = 10;

impl From<StackError<GeminiError>> for ExtractError {
    fn from(e: StackError<GeminiError>) -> Self {
        match e {
            StackError::Call(e) => Self::Gemini(e),
            StackError::CircuitOpen(r) => Self::CircuitOpen(r, None),
            StackError::BulkheadFull { max } => Self::BulkheadFull { max },
            StackError::RateLimited { limit, period, wait } => Self::RateLimited { limit, period, wait },
            StackError::Timeout(d) => Self::TimedOut(d),
        }
    }
}

impl Coded for ExtractError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::Intake(e) => e.code(),
            Self::ProductPhoto { source, .. } => source.code(),
            Self::PhotoChanged { .. } => ErrorCode::Io,
            Self::NotQueuedHere => ErrorCode::NotQueuedHere,
            Self::Gemini(e) => e.code(),
            Self::Catalog(e) => e.code(),
            Self::CircuitOpen(..) => ErrorCode::CircuitOpen,
            Self::BulkheadFull { .. } => ErrorCode::BulkheadFull,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::TimedOut(_) => ErrorCode::Timeout,
        }
    }

    fn data(&self) -> Option<ErrorData> {
        match self {
            Self::Catalog(e) => e.data(),
            _ => None,
        }
    }
}

/// Why a save was refused.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// The product's flags; at least one is invalid.
    #[error("{}", invalid_message(.0))]
    Invalid(Vec<FieldFlag>),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

fn invalid_message(flags: &[FieldFlag]) -> String {
    let list: Vec<String> =
        flags.iter().filter(|f| f.kind == FlagKind::Invalid).map(|f| format!("{}: {}", f.field, f.message)).collect();
    format!("Not saved — fix the highlighted fields first ({}).", list.join("; "))
}

impl Coded for SaveError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::Invalid(_) => ErrorCode::Validation,
            Self::Catalog(e) => e.code(),
        }
    }

    fn data(&self) -> Option<ErrorData> {
        match self {
            Self::Invalid(flags) => Some(ErrorData::Validation { flags: flags.clone() }),
            Self::Catalog(e) => e.data(),
        }
    }
}

/// Intake, Gemini (through the resilience stack) and the catalog, wired together. Cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    gemini: GeminiClient,
    stack: ResilienceStack,
    catalog: Catalog,
    image: ImageConfig,
    /// Shared by every clone, so all of a queue's decodes stay inside one budget.
    decode_budget: DecodeBudget,
    /// The codes of the latest failures the breaker recorded (every attempt's, retries
    /// included), newest last: what an open breaker's message names as the cause.
    recent_failures: Arc<std::sync::Mutex<std::collections::VecDeque<ErrorCode>>>,
    clock: UnixClock,
    /// The price table every attempt is priced with, and the daily budget.
    pricing: Arc<PricingConfig>,
}

impl Pipeline {
    pub fn new(
        gemini: GeminiClient,
        stack: ResilienceStack,
        catalog: Catalog,
        image: ImageConfig,
        clock: UnixClock,
    ) -> Self {
        let decode_budget = DecodeBudget::new(IntakeConfig::default().decode_budget_bytes);
        // The client's quota resets are computed from the pipeline's clock too.
        let gemini = gemini.with_clock(clock.clone());
        Self {
            gemini,
            stack,
            catalog,
            image,
            decode_budget,
            recent_failures: Arc::default(),
            clock,
            pricing: Arc::new(PricingConfig::default()),
        }
    }

    /// The pipeline with this price table (the list prices and no budget by default).
    pub fn with_pricing(mut self, pricing: PricingConfig) -> Self {
        self.pricing = Arc::new(pricing);
        self
    }

    /// The price table, shared with the calls it prices.
    pub fn pricing_table(&self) -> Arc<PricingConfig> {
        self.pricing.clone()
    }

    pub fn pricing(&self) -> &PricingConfig {
        &self.pricing
    }

    /// The same pipeline with another decode budget (`[intake] decode_budget_bytes`; `new` takes
    /// the default). Clones of a pipeline share its budget.
    pub fn with_decode_budget(mut self, budget: DecodeBudget) -> Self {
        self.decode_budget = budget;
        self
    }

    pub fn decode_budget(&self) -> &DecodeBudget {
        &self.decode_budget
    }

    pub fn stack(&self) -> &ResilienceStack {
        &self.stack
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn gemini(&self) -> &GeminiClient {
        &self.gemini
    }

    pub fn image_config(&self) -> &ImageConfig {
        &self.image
    }

    /// The clock the pipeline stamps its rows with.
    pub fn clock(&self) -> &UnixClock {
        &self.clock
    }

    /// Step 1: the photo, prepared for upload on the blocking pool. Never touches the network.
    pub async fn prepare(&self, file: &Path) -> Result<PreparedImage, IntakeError> {
        self.prepare_known(file, None).await
    }

    /// [`Pipeline::prepare`] for a file whose SHA-256 was computed when it was queued: not hashed
    /// again.
    pub async fn prepare_known(&self, file: &Path, sha256: Option<String>) -> Result<PreparedImage, IntakeError> {
        intake::prepare_file_async(file.to_path_buf(), self.image.clone(), sha256, &self.decode_budget).await
    }

    /// The prepared photo a team catalog keeps of the photo with `sha256` (see
    /// [`Catalog::stored_prepared`]): the same upload as when it was first prepared, without the
    /// file. `None` on SQLite, or when none was kept.
    pub async fn stored_prepared(&self, sha256: &str) -> Result<Option<PreparedImage>, CatalogError> {
        Ok(self.catalog.stored_prepared(sha256).await?.map(|s| PreparedImage {
            jpeg: s.jpeg,
            width: s.width,
            height: s.height,
            original_width: s.original_width,
            original_height: s.original_height,
            source_format: intake::SourceFormat::from_name(&s.format).unwrap_or(intake::SourceFormat::Jpeg),
            file_bytes: s.file_bytes,
            sha256: s.sha256,
            thumbnail_jpeg: s.thumbnail_jpeg,
            barcodes: s.barcodes,
        }))
    }

    /// Step 2: the prepared photo in the catalog (its own short transaction); the same bytes are
    /// the same photo.
    pub async fn record_photo(&self, file: &Path, image: &PreparedImage) -> Result<PhotoId, CatalogError> {
        let path = StoredPath::new(file);
        let prepared = PreparedCopy {
            jpeg: image.jpeg.clone(),
            width: image.width,
            height: image.height,
            barcodes: image.barcodes.clone(),
        };
        self.catalog
            .record_prepared_photo(
                NewPhoto {
                    sha256: image.sha256.clone(),
                    original_path: path.text().to_owned(),
                    original_path_bytes: path.bytes().map(<[u8]>::to_vec),
                    file_bytes: image.file_bytes,
                    width: image.original_width,
                    height: image.original_height,
                    format: image.source_format.to_string(),
                    thumbnail_jpeg: image.thumbnail_jpeg.clone(),
                    seen_at: (self.clock)(),
                },
                prepared,
            )
            .await
    }

    /// Step 3: one call to Gemini through the resilience stack. No transaction is open (the
    /// catalog is not touched); `policy` says whether to wait for a bulkhead slot.
    pub async fn call_gemini(&self, photo_id: PhotoId, image: &PreparedImage, policy: SlotPolicy) -> GeminiCall {
        self.call_gemini_photos(&[(photo_id, image)], policy).await
    }

    /// [`Pipeline::call_gemini`] for a product of several photos (at least one), sent in one
    /// request in the order given: one call, one answer, one attempt.
    pub async fn call_gemini_photos(&self, photos: &[(PhotoId, &PreparedImage)], policy: SlotPolicy) -> GeminiCall {
        let photo_id = photos.first().map_or(0, |p| p.0);
        let more_photos: Vec<PhotoId> = photos.iter().skip(1).map(|p| p.0).collect();
        let images: Vec<&[u8]> = photos.iter().map(|p| p.1.jpeg.as_slice()).collect();
        let barcodes = product_barcodes(photos.iter().map(|p| p.1));
        let started_at = (self.clock)();
        let started = Instant::now();
        let gemini = &self.gemini;
        let lock = || self.recent_failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // The verdict the breaker records, noting each failure's code on the way.
        let verdict = |e: &GeminiError| {
            let verdict = e.verdict();
            if matches!(verdict, Verdict::Failure { .. }) {
                let mut recent = lock();
                if recent.len() == RECENT_FAILURES {
                    recent.pop_front();
                }
                recent.push_back(e.code());
            }
            verdict
        };
        let result =
            self.stack.call(policy, verdict, || gemini.extract_photos(PreparedImage::MIME_TYPE, &images)).await;
        let opened_by = match &result {
            Err(StackError::CircuitOpen(_)) => {
                let recent = lock();
                recent.front().copied().filter(|first| recent.iter().all(|code| code == first))
            }
            _ => None,
        };
        GeminiCall {
            photo_id,
            more_photos,
            model: self.gemini.model().to_string(),
            started_at,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            result,
            pricing: self.pricing.clone(),
            batch: false,
            opened_by,
            barcodes,
        }
    }

    /// What the next call is expected to cost: the average of this model's recent calls in this
    /// catalog, else the image-token rule for a prepared photo of `size` (by default one of the
    /// configured long edge, 4:3) for the model's family and media resolution. `usd` is `None` when
    /// the model has no price.
    pub async fn estimate_call(&self, size: Option<(u32, u32)>) -> Result<CallEstimate, CatalogError> {
        Ok(self.call_tokens(size).await?.0)
    }

    /// [`Pipeline::estimate_call`], and the model the estimate is priced as (the one that
    /// answered the measured calls).
    async fn call_tokens(&self, size: Option<(u32, u32)>) -> Result<(CallEstimate, Option<String>), CatalogError> {
        let model = self.gemini.model();
        let (tokens, version, measured_calls) = match self.catalog.measured_call(model).await? {
            Some(m) => (m.tokens, m.model_version, m.calls),
            None => {
                let (w, h) = size.unwrap_or_else(|| pricing::prepared_size(self.image.max_long_edge));
                (pricing::estimated_tokens(self.gemini.image_tokens(w, h), self.gemini.prompt_text_chars()), None, 0)
            }
        };
        let usd = self.pricing.cost(model, version.as_deref(), tokens, false);
        Ok((CallEstimate { tokens: tokens.into(), usd, measured_calls }, version))
    }

    /// What `products` more products of `photos` photos in all are expected to cost: one call
    /// each (see [`Pipeline::estimate_call`]). A measured call already holds this catalog's mix
    /// of products of one and of several photos; the image-token rule adds each further photo's
    /// image tokens to its product's call.
    pub async fn estimate_products(&self, products: u32, photos: u32) -> Result<PhotosEstimate, CatalogError> {
        let (per_call, version) = self.call_tokens(None).await?;
        let photos = photos.max(products);
        let calls = u64::from(products);
        let t = per_call.tokens;
        let extra_images = if per_call.measured_calls > 0 {
            0
        } else {
            let (w, h) = pricing::prepared_size(self.image.max_long_edge);
            self.gemini.image_tokens(w, h) * u64::from(photos - products)
        };
        let tokens = BilledTokens {
            input: t.input * calls + extra_images,
            cached_input: t.cached_input * calls,
            output: t.output * calls,
        };
        let usd = self.pricing.cost(self.gemini.model(), version.as_deref(), tokens, false);
        Ok(PhotosEstimate { products, photos, per_call, tokens: tokens.into(), usd })
    }

    /// Tokens and cost of today's calls (the local day of the pipeline's clock).
    pub async fn spent_today(&self) -> Result<CostTotal, CatalogError> {
        let day = pricing::local_day((self.clock)());
        self.catalog.spent_between(day.start, day.end).await
    }
}

/// What a call is expected to cost, before it is made.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct CallEstimate {
    pub tokens: TokenCounts,
    /// `None`: the model has no price.
    pub usd: Option<Usd>,
    /// How many of this catalog's calls the tokens are the average of; 0: the image-token rule.
    pub measured_calls: u32,
}

/// What a number of products (one call each) of a number of photos is expected to cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct PhotosEstimate {
    /// The calls: one per product.
    pub products: u32,
    /// Their photos (at least one a product).
    pub photos: u32,
    pub per_call: CallEstimate,
    pub tokens: TokenCounts,
    /// `None`: the model has no price.
    pub usd: Option<Usd>,
}

/// Billed tokens, for the UI.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct TokenCounts {
    #[ts(type = "number")]
    pub input: u64,
    #[ts(type = "number")]
    pub cached_input: u64,
    #[ts(type = "number")]
    pub output: u64,
}

impl From<BilledTokens> for TokenCounts {
    fn from(t: BilledTokens) -> Self {
        Self { input: t.input, cached_input: t.cached_input, output: t.output }
    }
}

/// What the reviewer saves, normalized; refused with the invalid fields' flags.
pub fn checked_for_save(product: Product) -> Result<Product, SaveError> {
    let product = product.normalized();
    let flags = product.validate();
    if flags.iter().all(|f| f.kind != FlagKind::Invalid) {
        Ok(product)
    } else {
        Err(SaveError::Invalid(flags))
    }
}

/// One Gemini call for a recorded photo, as the resilience stack returned it, with what the audit
/// trail needs.
#[derive(Debug)]
pub struct GeminiCall {
    /// The product's first photo.
    pub photo_id: PhotoId,
    /// Its other photos, in the order they were sent.
    pub more_photos: Vec<PhotoId>,
    pub model: String,
    /// When the call started (unix ms, the pipeline's clock), waiting for a slot included.
    pub started_at: i64,
    pub elapsed_ms: u64,
    pub result: Result<GeminiExtraction, StackError<GeminiError>>,
    /// The price table in force when the call was made.
    pub pricing: Arc<PricingConfig>,
    /// Billed at the Batch API's discount.
    pub batch: bool,
    /// For an open breaker: what its latest failures were, when they agree.
    pub opened_by: Option<ErrorCode>,
    /// The barcodes read on the photos before the call, each with its photo's index (see
    /// [`proposal`] and [`product_barcodes`]).
    pub barcodes: Vec<Barcode>,
}

/// The barcodes read on a product's photos, in photo order, each marked with its photo's index
/// (the same GTIN on two photos is two entries: where each is drawn; [`proposal`] counts GTINs).
pub fn product_barcodes<'a>(images: impl IntoIterator<Item = &'a PreparedImage>) -> Vec<Barcode> {
    images
        .into_iter()
        .zip(0u32..)
        .flat_map(|(image, index)| image.barcodes.iter().cloned().map(move |b| Barcode { photo: index, ..b }))
        .collect()
}

/// How a [`GeminiCall`] ended, with the attempt to record in the audit trail.
#[derive(Debug)]
pub enum GeminiOutcome {
    /// Gemini proposed a product; `attempt` records it. `answer.product` is the proposal (the
    /// photo's barcode applied, see [`proposal`]) and `flags` are its flags.
    Answered { attempt: NewAttempt, answer: Box<GeminiExtraction>, flags: Vec<FieldFlag> },
    /// The call failed. Gemini's own errors and the time limiter's timeouts are attempts; the
    /// stack's rejections (open breaker, full bulkhead, rate limit) never reached Gemini and are not.
    Failed { attempt: Option<NewAttempt>, error: ExtractError },
}

impl GeminiCall {
    /// The result, with the attempt that records it.
    pub fn into_outcome(self) -> GeminiOutcome {
        let Self { photo_id, more_photos, model, started_at, elapsed_ms, result, pricing, batch, opened_by, barcodes } =
            self;
        let mut outcome = match result {
            Ok(mut answer) => {
                let cleaning = std::mem::take(&mut answer.cleaning);
                let (product, flags) = proposal(std::mem::take(&mut answer.product), cleaning, &barcodes);
                answer.product = product;
                let photos = 1 + more_photos.len();
                let read = answer.sources.as_ref().map(|s| field_sources(s, photos)).unwrap_or_default();
                let sources = located(read, &answer.product, &barcodes);
                let latency_ms = u64::try_from(answer.latency.as_millis()).unwrap_or(elapsed_ms);
                let attempt = NewAttempt {
                    photo_id,
                    model,
                    started_at,
                    latency_ms,
                    usage: Some(attempt_usage(&answer.usage)),
                    raw_response: Some(answer.raw_response.clone()),
                    outcome: AttemptOutcome::Proposed { product: answer.product.clone() },
                    model_version: answer.model_version.clone(),
                    cost: None,
                    batch,
                    barcodes: Some(barcodes),
                    more_photos,
                    sources,
                };
                GeminiOutcome::Answered { attempt, answer: Box::new(answer), flags }
            }
            Err(rejection) => {
                let (raw_response, billed) = match &rejection {
                    StackError::Call(e) => (e.raw_response().map(str::to_owned), e.billed_usage().map(attempt_usage)),
                    _ => (None, None),
                };
                // Only what reached Gemini is a call: the stack's own rejections and a missing key
                // (nothing was sent) leave no attempt.
                let audited = match &rejection {
                    StackError::Call(e) => !matches!(e, GeminiError::MissingKey),
                    StackError::Timeout(_) => true,
                    _ => false,
                };
                let error = match ExtractError::from(rejection) {
                    ExtractError::CircuitOpen(rejection, _) => ExtractError::CircuitOpen(rejection, opened_by),
                    error => error,
                };
                let attempt = audited.then(|| NewAttempt {
                    photo_id,
                    model,
                    started_at,
                    latency_ms: elapsed_ms,
                    // A blocked, cut-off or unreadable answer is billed like any other.
                    usage: billed,
                    raw_response,
                    outcome: AttemptOutcome::Failed { code: error.code(), message: error.to_string() },
                    model_version: None,
                    cost: None,
                    batch,
                    barcodes: Some(barcodes),
                    more_photos,
                    sources: Vec::new(),
                });
                GeminiOutcome::Failed { attempt, error }
            }
        };
        let attempt = match &mut outcome {
            GeminiOutcome::Answered { attempt, .. } => Some(attempt),
            GeminiOutcome::Failed { attempt, .. } => attempt.as_mut(),
        };
        if let Some(attempt) = attempt {
            price_attempt(attempt, &pricing);
        }
        outcome
    }
}

/// Gemini's product as the reviewer is shown it, with its flags: the barcodes read on the photo
/// applied ([`barcode::apply_barcodes`]: a barcode is the truth for `gtin`), then validated, with
/// the flags of the answer's cleaning (`cleaning`, [`Product::cleaned`]: the control characters
/// removed, the values cut to their maximum). The one place a proposal is made, for a direct call
/// and a batch's answer alike.
pub fn proposal(mut product: Product, cleaning: Vec<FieldFlag>, barcodes: &[Barcode]) -> (Product, Vec<FieldFlag>) {
    let read = barcode::apply_barcodes(&mut product, barcodes);
    let mut flags = product.validate();
    flags.extend(cleaning);
    flags.extend(read);
    (product, flags)
}

/// Where each field of the proposal was read: Gemini's `sources`, except the GTIN when a barcode
/// read on the machine gave it (the proposal's GTIN is a barcode's): then the barcode's own box,
/// on the photo it was read on.
pub fn located(mut sources: Vec<FieldSource>, product: &Product, barcodes: &[Barcode]) -> Vec<FieldSource> {
    let read = product
        .gtin
        .as_deref()
        .and_then(|gtin| barcodes.iter().find(|b| crate::product::gtin_key(&b.gtin) == crate::product::gtin_key(gtin)));
    if let Some(barcode) = read {
        sources.retain(|s| s.field != "gtin");
        sources.push(FieldSource { field: "gtin".into(), photo: barcode.photo, box_2d: barcode.box_2d });
    }
    sources
}

/// Every billed attempt, success or failure, is priced from its recorded usage: the one place
/// an attempt gets its cost (the rule itself is `pricing::ModelPrice::cost`). A failure's model
/// version is read from its response body, when it has one.
pub fn price_attempt(attempt: &mut NewAttempt, pricing: &PricingConfig) {
    if attempt.model_version.is_none() {
        attempt.model_version = attempt.raw_response.as_deref().and_then(gemini::response_model_version);
    }
    attempt.cost = attempt.usage.and_then(|usage| {
        pricing.cost(&attempt.model, attempt.model_version.as_deref(), usage.billed(), attempt.batch)
    });
}

fn attempt_usage(usage: &Usage) -> AttemptUsage {
    AttemptUsage {
        prompt_tokens: usage.prompt_tokens,
        output_tokens: usage.output_tokens,
        thoughts_tokens: usage.thoughts_tokens,
        total_tokens: usage.total_tokens,
        cached_tokens: usage.cached_tokens,
    }
}
