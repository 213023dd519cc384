//! One item's work, from `preparing` to its outcome.
//!
//! The task prepares the photo (at most `prepare_concurrency` at once; intake reuses the SHA-256
//! computed when the file was queued), records it, takes one of the K send slots (interactive
//! items first), waits at the gate (closed while paused or held), marks it `extracting`, calls
//! Gemini with `SlotPolicy::Wait`, and writes the outcome. Outcomes that concern the whole queue
//! set a hold *before* the item goes back to `queued`, so the driver never re-claims it first:
//! - `circuit_open` → held until the breaker's retry time, or until its state lets calls through;
//! - `gemini_quota` → held for the server's retry delay (or the default); a per-day quota →
//!   held until it resets (the next midnight Pacific time);
//! - `gemini_auth`, `gemini_not_found`, `gemini_not_available`, `config`, a catalog failure →
//!   stopped until Resume.
//!
//! Before the call, with `pricing.daily_budget_usd` set, the item checks today's spend plus the
//! calls in flight plus its own estimate against the budget; over it, the queue is held until the
//! next local day (or new Settings) and the item waits at the gate again: nothing fails.
//!
//! With [`super::ImportOptions::fail_fast`] (the CLI's `extract`), every failure fails its item
//! at once instead, as a single call would.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::driver::stop_for;
use super::phash;
use super::records::{ItemOrigin, ItemState};
use super::shared::{lock, Finishing, Hold, Shared, THROTTLE_WAIT};
use super::store::{self, Claimed, Finish, Marked, PreparedRow};
use super::ImportError;
use super::ItemId;
use crate::catalog::PhotoId;
use crate::error::{Coded, ErrorCode};
use crate::intake::{IntakeError, PreparedImage};
use crate::pipeline::{failing, ExtractError, GeminiOutcome, Pipeline};
use crate::pricing::{self, Usd};
use crate::resilience::{BreakerState, NotPermitted, SlotPolicy};

/// One item, from `preparing` to its outcome. A catalog failure stops the queue.
pub(crate) async fn process(shared: Arc<Shared>, item: Claimed) {
    // Listed by the driver when it claimed the item; off the list when this task ends, whichever
    // way (aborted too).
    struct Working<'a>(&'a Shared, ItemId);
    impl Drop for Working<'_> {
        fn drop(&mut self) {
            lock(&self.0.working_on).remove(&self.1);
        }
    }
    let _working = Working(&shared, item.id);
    let pipeline = shared.pipeline();
    if let Err(error) = work(&shared, &pipeline, &item).await {
        stop_for(&shared, &error);
        let id = item.id;
        // Back to the queue, also when the disk is full (then once there is room): an item left
        // `preparing` would hold the import until the next start.
        let requeued = shared
            .until_written(|| {
                let now = shared.now();
                shared.counted(move |conn| store::requeue_item(conn, id, now))
            })
            .await;
        if let Ok(counted) = requeued {
            shared.item_changed(id, ItemState::Queued, &counted);
        }
    }
}

/// How a failed extraction affects the item and the queue.
enum Fault {
    /// The photo's own fault: the item fails, the rest goes on.
    Own,
    /// The service failed after the stack's retries: another try later, up to the limit.
    Service,
    Breaker(NotPermitted, Option<ErrorCode>),
    Quota(Option<Duration>),
    /// A per-day quota: nothing goes through before it resets (unix ms).
    DailyQuota(i64),
    /// Nothing will work until someone acts (key, model, settings).
    Stop,
    /// The stack's own limits (rate limiter, bulkhead): a moment's wait.
    Throttled,
}

/// A local catalog failure is not a fault of the item's: it stops the queue (see `classified`).
fn classify(error: &ExtractError) -> Fault {
    match error {
        ExtractError::Intake(_)
        | ExtractError::ProductPhoto { .. }
        | ExtractError::PhotoChanged { .. }
        | ExtractError::NotQueuedHere
        | ExtractError::Catalog(_) => Fault::Own,
        ExtractError::CircuitOpen(rejection, opened_by) => Fault::Breaker(rejection.clone(), *opened_by),
        ExtractError::BulkheadFull { .. } | ExtractError::RateLimited { .. } => Fault::Throttled,
        ExtractError::TimedOut(_) => Fault::Service,
        ExtractError::Gemini(e) => match e.code() {
            ErrorCode::GeminiQuota => match e.quota_resets_at() {
                Some(at) => Fault::DailyQuota(at),
                None => Fault::Quota(e.retry_after()),
            },
            ErrorCode::GeminiAuth | ErrorCode::GeminiNotFound | ErrorCode::GeminiNotAvailable | ErrorCode::Config => {
                Fault::Stop
            }
            ErrorCode::GeminiUnavailable
            | ErrorCode::GeminiApiError
            | ErrorCode::Timeout
            | ErrorCode::Network
            | ErrorCode::ResponseTooLarge => Fault::Service,
            _ => Fault::Own,
        },
    }
}

async fn work(shared: &Arc<Shared>, pipeline: &Pipeline, item: &Claimed) -> Result<(), ImportError> {
    let id = item.id;
    let path = item.path.to_path_buf();
    let prepared = {
        let _slot = shared.prepare_slots.acquire().await;
        prepare_photos(pipeline, item).await
    };
    let images = match prepared {
        Ok(Some(images)) => images,
        Ok(None) => {
            // Another computer's photo this one cannot read: back to the queue for the desktops
            // that can (its own, at least), not a failure.
            let now = shared.now();
            let back = shared.counted(move |conn| store::mark_unreadable(conn, id, now)).await?;
            tracing::info!(item = id, "import: the item's files are not on this computer; left to the others");
            if back.value {
                shared.item_changed(id, ItemState::Queued, &back);
            }
            return Ok(());
        }
        Err(error) => {
            let outcome =
                Finish { id, from: ItemState::Preparing, to: ItemState::Failed, ..finish_error(&error, None, false) };
            shared.record_finished();
            return finish(shared, outcome).await;
        }
    };
    let image = &images[0];
    let thumbnail = image.thumbnail_jpeg.clone();
    let phash = tokio::task::spawn_blocking(move || phash::dhash_jpeg(&thumbnail)).await.ok().flatten();
    let photo_id = pipeline.record_photo(&path, image).await?;
    let mut more = Vec::with_capacity(item.more.len());
    for (photo, image) in item.more.iter().zip(&images[1..]) {
        let more_id = pipeline.record_photo(&photo.path.to_path_buf(), image).await?;
        more.push((photo.position, more_id, image.sha256.clone()));
    }
    let photo_ids: Vec<PhotoId> = std::iter::once(photo_id).chain(more.iter().map(|m| m.1)).collect();
    let looks_like = phash.and_then(|hash| lock(&shared.near).nearest(photo_id, hash));
    if item.batch {
        // Batch mode: `extracting` now (the photos recorded), then the prepared request waits in
        // the chunk the batch task submits; this task ends once it is there.
        let (prepared, now) = (prepared_row(&images, photo_id, phash, looks_like, more), shared.now());
        let moved = shared.counted(move |conn| store::mark_extracting(conn, id, &prepared, now)).await?;
        if marked(shared, id, &moved, phash, photo_id) {
            let jpegs: Vec<&[u8]> = images.iter().map(|i| i.jpeg.as_slice()).collect();
            let request = pipeline.gemini().batch_request(id.to_string(), PreparedImage::MIME_TYPE, &jpegs);
            drop(images);
            shared
                .batch
                .add(super::batch::Pending { id, attempts: item.attempts, request }, &shared.options.batch)
                .await;
        }
        return Ok(());
    }

    // One of K sends, then the gate (closed while paused, or held for the breaker, the quota or
    // a stop): the prepared photo waits here.
    let slots = shared.sends();
    let acquire = slots.acquire(item.origin == ItemOrigin::Interactive);
    let send = match shared.options.send_wait {
        None => acquire.await,
        Some(wait) => match tokio::time::timeout(wait, acquire).await {
            Ok(send) => send,
            Err(_) => {
                // Every slot stayed busy: the item fails as a call would at a full bulkhead.
                shared.record_finished();
                let max = pipeline.stack().config().bulkhead.max_concurrent_calls;
                let error = ExtractError::BulkheadFull { max };
                let outcome = Finish { id, from: ItemState::Preparing, ..finish_error(&error, None, false) };
                return finish(shared, outcome).await;
            }
        },
    };
    let reservation = loop {
        shared.wait_for_gate().await;
        match budget_check(shared, (image.width, image.height), images.len()).await? {
            Budget::Go(reservation) => break reservation,
            Budget::Spent { .. } if !shared.options.fail_fast => {}
            Budget::Spent { message, .. } => {
                shared.record_finished();
                let error = Some((ErrorCode::BudgetSpent, message));
                let outcome = Finish {
                    id,
                    from: ItemState::Preparing,
                    attempt: None,
                    count_attempt: false,
                    proposal: None,
                    to: ItemState::Failed,
                    error,
                    batch_name: None,
                };
                return finish(shared, outcome).await;
            }
        }
    };
    let (prepared, now) = (prepared_row(&images, photo_id, phash, looks_like, more), shared.now());
    // A bulk item that read a barcode may join another product with the same one instead of
    // being sent: it learns which before the call. On a team catalog every item is marked before
    // its call (one round trip): were the server to go away in between, the call would be paid
    // for an item not marked `extracting`, and its answer could not be kept for a later run. The
    // others mark and call at once.
    let may_join = item.origin == ItemOrigin::Import && !prepared.barcodes.is_empty();
    let mark_first = may_join || shared.store.catalog().server().is_some();
    let mut prepared = Some(prepared);
    if mark_first {
        let prepared = prepared.take().expect("not taken yet");
        let moved = shared
            .until_written(|| {
                let prepared = prepared.clone();
                shared.counted(move |conn| store::mark_extracting(conn, id, &prepared, now))
            })
            .await?;
        if !marked(shared, id, &moved, phash, photo_id) {
            return Ok(());
        }
    }
    // The call is paid for once it is made: the state it goes with waits for room on a full disk
    // rather than losing the answer with the item.
    let mark = async {
        if let Some(prepared) = prepared {
            let moved = shared
                .until_written(|| {
                    let prepared = prepared.clone();
                    shared.counted(move |conn| store::mark_extracting(conn, id, &prepared, now))
                })
                .await?;
            marked(shared, id, &moved, phash, photo_id);
        }
        Ok::<(), ImportError>(())
    };
    // `extracting` and the call start together, the state first (`biased`): the catalog thread
    // runs jobs in the order they were sent, so the state is written before the outcome below,
    // and the call does not wait for the write. No transaction is open during the call: each
    // catalog job is complete in itself. (Were the item moved meanwhile, the outcome would only
    // be audited: `finish` changes items still `extracting`.)
    let photos: Vec<(PhotoId, &PreparedImage)> = photo_ids.iter().copied().zip(&images).collect();
    let (marked, call) = tokio::join!(biased; mark, pipeline.call_gemini_photos(&photos, SlotPolicy::Wait));
    drop(photos);
    drop(images);
    let _finishing = Finishing::new(shared, item.origin);
    marked?;
    let outcome = classified(shared, pipeline, item, call.into_outcome()).await?;
    // Any hold this outcome calls for is set: the next item may go (or wait at the gate).
    drop(send);
    if let Some(attempt) = &outcome.attempt {
        shared.add_cost(attempt);
    }
    let finished = finish(shared, outcome).await;
    // Recorded (or not, then the budget check reads the catalog as it is): no longer reserved.
    drop(reservation);
    finished
}

/// Publishes what [`store::mark_extracting`] did; true when the item is to be sent.
fn marked(
    shared: &Arc<Shared>,
    id: ItemId,
    moved: &crate::import::store::Counted<Marked>,
    phash: Option<u64>,
    photo_id: PhotoId,
) -> bool {
    match moved.value {
        Marked::Extracting => {
            shared.item_changed(id, ItemState::Extracting, moved);
            if let Some(hash) = phash {
                lock(&shared.near).insert(photo_id, hash);
            }
            true
        }
        Marked::Joined(into, state) => {
            shared.record_finished();
            shared.item_changed(id, ItemState::Skipped, moved);
            shared.item_changed(into, state, moved);
            false
        }
        Marked::Moved => false,
    }
}

/// The item's photos prepared, in order (its own, then the product's others): each decoded under
/// the shared budget, one after another inside the item's prepare slot. A photo that cannot be
/// prepared fails the item; another than the first is named in the error.
///
/// A path is opened only by the desktop that queued it, and only as it queued it
/// ([`Claimed::trusted`]: on a team catalog, the row carries this desktop's tag for that path and
/// hash, and what is read must still hash to it). Work another desktop takes over travels as
/// bytes: a photo queued elsewhere is sent from the prepared copy the catalog holds (by its hash),
/// and without one the item is left to the desktop that queued it (`None`). Any other row without
/// this desktop's tag (one naming this computer, or none) is refused
/// ([`ExtractError::NotQueuedHere`]) without opening or sending anything, whatever exists at its
/// path.
async fn prepare_photos(pipeline: &Pipeline, item: &Claimed) -> Result<Option<Vec<PreparedImage>>, ExtractError> {
    let photos = std::iter::once((&item.path, &item.sha256, item.trusted))
        .chain(item.more.iter().map(|m| (&m.path, &m.sha256, m.trusted)));
    // A file listed on this computer for an import into its own catalog was hashed then: not
    // again. On a team catalog (whose rows anyone on the team can write), and for an interactive
    // one (a catalog photo extracted again is queued with the SHA-256 the catalog knows), it is
    // hashed again and must still hold those bytes.
    let verify = item.shared || item.origin == ItemOrigin::Interactive;
    let mut images = Vec::with_capacity(1 + item.more.len());
    for (number, (path, sha256, trusted)) in (1..).zip(photos) {
        // Why this photo cannot be sent from its path (`None`: another desktop's, never opened).
        let unusable = if item.elsewhere {
            None
        } else if !trusted {
            tracing::warn!(
                item = item.id,
                "import: refused a queue row this desktop did not queue; its path was not opened"
            );
            return Err(ExtractError::NotQueuedHere);
        } else {
            let known = if verify { None } else { sha256.clone() };
            match pipeline.prepare_known(&path.to_path_buf(), known).await {
                Ok(image) if verify && sha256.as_ref().is_some_and(|queued| *queued != image.sha256) => {
                    Some(ExtractError::PhotoChanged { file: path.text().to_owned() })
                }
                Ok(image) => {
                    images.push(image);
                    continue;
                }
                Err(source @ (IntakeError::Io { .. } | IntakeError::NotAFile { .. })) if is_missing(&source) => {
                    Some(if number == 1 {
                        source.into()
                    } else {
                        ExtractError::ProductPhoto { file: path.file_name(), number, source }
                    })
                }
                Err(source) if number == 1 => return Err(source.into()),
                Err(source) => return Err(ExtractError::ProductPhoto { file: path.file_name(), number, source }),
            }
        };
        // Queued elsewhere, or not there any more: a team catalog keeps the prepared photo, the
        // same upload as when it was first prepared.
        if let Some(sha256) = sha256 {
            if let Some(stored) = pipeline.stored_prepared(sha256).await? {
                tracing::info!(item = item.id, file = %path.text(), "import: its prepared photo from the catalog is sent");
                images.push(stored);
                continue;
            }
        }
        match unusable {
            // Another desktop's photo, not prepared yet: left to the desktop that queued it.
            None => return Ok(None),
            Some(error) => return Err(error),
        }
    }
    Ok(Some(images))
}

/// Whether intake failed because the file is not there (or not readable, or not a file): what a
/// file on another computer looks like from this one.
fn is_missing(error: &IntakeError) -> bool {
    match error {
        IntakeError::Io { source, .. } => {
            matches!(source.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied)
        }
        IntakeError::NotAFile { .. } => true,
        _ => false,
    }
}

fn prepared_row(
    images: &[PreparedImage],
    photo_id: PhotoId,
    phash: Option<u64>,
    looks_like: Option<(PhotoId, u32)>,
    more: Vec<(i64, PhotoId, String)>,
) -> PreparedRow {
    PreparedRow {
        photo_id,
        sha256: images[0].sha256.clone(),
        phash,
        looks_like,
        barcodes: crate::pipeline::product_barcodes(images),
        more,
    }
}

/// Whether the next call fits in today's budget.
enum Budget {
    /// It fits (or there is no budget): its estimate stays reserved until its attempt is recorded.
    Go(Option<Reservation>),
    /// It would pass the budget: the queue is held until the next local day (nothing fails),
    /// except with `fail_fast` (the CLI's `extract`), where the item fails with `budget_spent`.
    Spent { message: String },
}

/// An estimate counted against the budget while its call is in flight.
struct Reservation {
    shared: Arc<Shared>,
    amount: Usd,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut reserved = lock(&self.shared.reserved);
        *reserved = Usd::from_nanos(reserved.nanos().saturating_sub(self.amount.nanos()).max(0));
    }
}

/// With `pricing.daily_budget_usd` set: today's spend, the calls in flight and this call's
/// estimate against the budget. A model without a price counts 0 for its estimate (its spend is
/// unknown too); without a budget nothing is read. The budget is the current Settings' (a raised
/// budget lets a waiting item go), not the item's pipeline's.
async fn budget_check(shared: &Arc<Shared>, size: (u32, u32), photos: usize) -> Result<Budget, ImportError> {
    let pipeline = shared.pipeline();
    let Some(budget) = pipeline.pricing().daily_budget() else {
        return Ok(Budget::Go(None));
    };
    // A product of several photos: a call's estimate per photo (its text counted each time, so
    // the estimate errs high, as a budget should).
    let per_photo = pipeline.estimate_call(Some(size)).await?.usd.unwrap_or(Usd::ZERO);
    let estimate = Usd::from_nanos(per_photo.nanos().saturating_mul(i64::try_from(photos).unwrap_or(1)));
    let now = shared.now();
    let day = pricing::local_day(now);
    let spent = pipeline.catalog().spent_between(day.start, day.end).await?.usd;
    let mut reserved = lock(&shared.reserved);
    let next = spent.saturating_add(*reserved).saturating_add(estimate);
    if next <= budget {
        *reserved = reserved.saturating_add(estimate);
        return Ok(Budget::Go(Some(Reservation { shared: shared.clone(), amount: estimate })));
    }
    drop(reserved);
    let message = pricing::budget_spent_message(budget);
    if !shared.options.fail_fast {
        let wait = Duration::from_millis(u64::try_from(day.end - now).unwrap_or(0).max(1));
        shared.hold(Hold::Budget { wake_at: Instant::now() + wait, until_unix_ms: day.end, message: message.clone() });
    }
    Ok(Budget::Spent { message })
}

/// What the call's outcome does to the item, setting the queue's hold when it concerns the queue.
async fn classified(
    shared: &Arc<Shared>,
    pipeline: &Pipeline,
    item: &Claimed,
    outcome: GeminiOutcome,
) -> Result<Finish, ImportError> {
    let id = item.id;
    Ok(match outcome {
        GeminiOutcome::Answered { attempt, answer, flags } => {
            let product = answer.product;
            shared.record_finished();
            Finish {
                id,
                from: ItemState::Extracting,
                to: ItemState::Ready,
                attempt: Some(attempt),
                count_attempt: true,
                proposal: Some((product, flags)),
                error: None,
                batch_name: None,
            }
        }
        GeminiOutcome::Failed { attempt, error: ExtractError::Catalog(e) } => {
            if let Some(attempt) = attempt {
                let _ = pipeline.catalog().record_attempt(attempt).await;
            }
            return Err(ImportError::Catalog(e));
        }
        GeminiOutcome::Failed { attempt, error } => {
            let (to, counted) = failed_item(shared, item.attempts, &error);
            if to == ItemState::Failed {
                shared.record_finished();
            }
            Finish { id, from: ItemState::Extracting, to, ..finish_error(&error, attempt, counted) }
        }
    })
}

/// Where an item goes after `error` (having had `attempts` before), and whether this counts as
/// an attempt; sets the queue's hold when the error concerns the whole queue. The one mapping
/// for a direct call and a batch that could not be submitted.
pub(crate) fn failed_item(shared: &Shared, attempts: u32, error: &ExtractError) -> (ItemState, bool) {
    match classify(error) {
        Fault::Own => (ItemState::Failed, true),
        // A line per file now, as a single call would give (the CLI's `extract`).
        Fault::Service if shared.options.fail_fast => (ItemState::Failed, true),
        Fault::Breaker(..) | Fault::Quota(_) | Fault::DailyQuota(_) | Fault::Throttled | Fault::Stop
            if shared.options.fail_fast =>
        {
            (ItemState::Failed, false)
        }
        Fault::Service if attempts + 1 >= shared.options.max_attempts_per_item => (ItemState::Failed, true),
        Fault::Service => (ItemState::Queued, true),
        Fault::Breaker(rejection, opened_by) => {
            shared.hold(breaker_hold(&rejection, opened_by, shared.now()));
            (ItemState::Queued, false)
        }
        Fault::Quota(delay) => {
            let wait = delay.unwrap_or(shared.options.default_quota_wait);
            shared.hold(quota_hold(wait, shared.now(), &error.to_string()));
            (ItemState::Queued, false)
        }
        Fault::DailyQuota(resets_at) => {
            let now = shared.now();
            let wait = Duration::from_millis(u64::try_from(resets_at.saturating_sub(now)).unwrap_or(0));
            shared.hold(quota_hold(wait, now, &error.to_string()));
            (ItemState::Queued, false)
        }
        Fault::Throttled => {
            shared.hold(quota_hold(THROTTLE_WAIT, shared.now(), &error.to_string()));
            (ItemState::Queued, false)
        }
        Fault::Stop => {
            shared.hold(Hold::Stopped { code: error.code(), message: error.to_string() });
            (ItemState::Queued, false)
        }
    }
}

/// Where an item goes after its own error among a succeeded batch's results (having had
/// `attempts` before); the attempt always counts. A transient error — the service's (500, 503,
/// 504, a timeout) or a per-request quota — puts it back to `queued`, to join the next chunk,
/// until it reaches `max_attempts_per_item`; any other error fails this item only. The queue is
/// never held: the batch as a whole was answered.
pub(crate) fn failed_batch_item(shared: &Shared, attempts: u32, error: &ExtractError) -> ItemState {
    match classify(error) {
        Fault::Service | Fault::Quota(_) if attempts + 1 < shared.options.max_attempts_per_item => ItemState::Queued,
        _ => ItemState::Failed,
    }
}

fn finish_error(error: &ExtractError, attempt: Option<crate::catalog::NewAttempt>, count_attempt: bool) -> Finish {
    Finish {
        id: 0,
        from: ItemState::Extracting,
        to: ItemState::Failed,
        attempt,
        count_attempt,
        proposal: None,
        error: Some((error.code(), error.to_string())),
        batch_name: None,
    }
}

/// Writes the outcome. A full disk does not lose it: the queue waits for room (no more photos are
/// taken meanwhile) and the outcome, paid for already, is written then. An outcome the catalog
/// refuses (a constraint, a value it cannot hold) does not lose the call either: the item fails
/// with the catalog's error and the attempt is recorded without the answer ([`unwritable`]), so
/// the cost meter still counts every billed token.
async fn finish(shared: &Arc<Shared>, outcome: Finish) -> Result<(), ImportError> {
    let (id, mut to) = (outcome.id, outcome.to);
    // A billed answer in hand is never dropped unwritten: if this task is aborted while the write
    // waits (a cancel, the app's shutdown — with the server away, before the first try has even
    // failed), the guard keeps the answer in the spool, and the spool's replay writes it instead
    // of the photo being sent and paid for again.
    let mut in_hand = InHand { shared, outcome: outcome.attempt.is_some().then(|| outcome.clone()) };
    // While the team catalog's server is away the outcome waits in memory and in the spool (a
    // restart meanwhile writes it from there).
    let mut spooled = None;
    let keep = |spooled: &mut Option<std::path::PathBuf>| {
        if let (None, Some(dir)) = (&spooled, &shared.options.spool_dir) {
            *spooled = super::spool::keep(dir, shared.desktop().as_deref(), &outcome);
        }
    };
    let written = shared
        .until_written_keeping(
            || shared.write_outcome(outcome.clone()),
            |error| {
                if error.server_away().is_some() {
                    keep(&mut spooled);
                }
            },
        )
        .await;
    let counted = match written {
        Ok(counted) => counted,
        Err(error) => {
            // Refused, or failed in a way not known as the server's absence: a billed answer is
            // kept in the spool too until its attempt is written (the write below may wait for a
            // server that went away meanwhile, and a restart must not lose the call).
            if outcome.attempt.is_some() {
                keep(&mut spooled);
            }
            let (counted, now) = refused(shared, outcome.clone(), error).await?;
            to = now;
            counted
        }
    };
    in_hand.outcome = None;
    if let Some(path) = spooled {
        super::spool::written(&path);
    }
    if counted.value {
        shared.item_changed(id, to, &counted);
    } else {
        shared.publish(&counted, 0);
    }
    Ok(())
}

/// A billed outcome on its way to the catalog ([`finish`]): dropped before it is written (its task
/// aborted by a cancel or a shutdown), it is kept in the spool, where the next replay finds it.
struct InHand<'a> {
    shared: &'a Shared,
    /// `None` once written (or for an outcome nobody paid for).
    outcome: Option<Finish>,
}

impl Drop for InHand<'_> {
    fn drop(&mut self) {
        let (Some(outcome), Some(dir)) = (self.outcome.take(), &self.shared.options.spool_dir) else { return };
        if super::spool::keep(dir, self.shared.desktop().as_deref(), &outcome).is_some() {
            tracing::info!(
                item = outcome.id,
                "import: an answer in hand when its work was stopped is kept in the spool"
            );
        }
    }
}

/// After the catalog refused `outcome` with `error`: [`unwritable`] written instead when the
/// outcome has an attempt (a billed call is never lost), with the state the item took; `error`
/// otherwise.
pub(crate) async fn refused(
    shared: &Shared,
    outcome: Finish,
    error: ImportError,
) -> Result<(store::Counted<bool>, ItemState), ImportError> {
    if outcome.attempt.is_none() {
        return Err(error);
    }
    tracing::error!(item = outcome.id, %error, "import: the catalog refused an outcome; its billed attempt is recorded alone");
    let kept = unwritable(outcome, &error);
    let to = kept.to;
    Ok((shared.until_written(|| shared.write_outcome(kept.clone())).await?, to))
}

/// What is written instead of an outcome the catalog refused with `error`: the item failed with
/// that error, and the attempt (its usage, cost, model and photos: what was paid for) without
/// the answer, the raw response and the sources, which may be what the catalog could not hold.
pub(crate) fn unwritable(outcome: Finish, error: &ImportError) -> Finish {
    let code = error.code();
    let message = format!("Gemini's answer could not be written to the catalog: {error}");
    let attempt = outcome.attempt.map(|attempt| crate::catalog::NewAttempt {
        raw_response: None,
        outcome: crate::catalog::AttemptOutcome::Failed { code, message: message.clone() },
        sources: Vec::new(),
        ..attempt
    });
    Finish {
        to: ItemState::Failed,
        attempt,
        count_attempt: true,
        proposal: None,
        error: Some((code, message)),
        ..outcome
    }
}

fn breaker_hold(rejection: &NotPermitted, opened_by: Option<ErrorCode>, now_ms: i64) -> Hold {
    // "Strictly after" the retry time: wake a millisecond late rather than early.
    let wake_at = rejection.retry_in.map(|wait| Instant::now() + wait + Duration::from_millis(1));
    let until_unix_ms = rejection.retry_in.map(|wait| now_ms + millis(wait));
    let message = match (rejection.state, rejection.retry_at_wall) {
        (BreakerState::ForcedOpen, _) => {
            "Paused: calls to Gemini are switched off (circuit forced open); release them in Gemini status.".into()
        }
        (BreakerState::HalfOpen, _) => "Paused: Gemini was failing; waiting for the test calls to finish.".into(),
        (_, Some(at)) => {
            let at: chrono::DateTime<chrono::Local> = at.into();
            format!("Paused: {} (circuit open) — next probe at {}.", failing(opened_by), at.format("%H:%M:%S"))
        }
        (_, None) => format!("Paused: {} (circuit open).", failing(opened_by)),
    };
    Hold::Breaker { wake_at, until_unix_ms, message }
}

fn quota_hold(wait: Duration, now_ms: i64, message: &str) -> Hold {
    Hold::Quota {
        wake_at: Instant::now() + wait,
        until_unix_ms: now_ms + millis(wait),
        message: format!("Waiting: {message}"),
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
