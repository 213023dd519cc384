//! The runner: one driver task that claims items and one task per item in flight.
//!
//! The driver claims the next queued item whenever fewer than K + lookahead items are in flight
//! (K = the bulkhead's slots, read from the current stack) and the queue may send calls; otherwise
//! it sleeps until something changes: an item finishes, the user acts, items are queued, a hold's
//! time is up, or the breaker's snapshot says it lets calls through again.
//!
//! An item task prepares the photo (at most `prepare_concurrency` at once), records it, waits at
//! the gate (closed while paused or held), marks it `extracting`, calls Gemini with
//! `SlotPolicy::Wait`, and writes the outcome. Outcomes that concern the whole queue set a hold
//! *before* the item goes back to `queued`, so the driver never re-claims it first:
//! - `circuit_open` → held until the breaker's retry time, or until its state lets calls through;
//! - `gemini_quota` → held for the server's retry delay (or the default);
//! - `gemini_auth`, `gemini_not_found`, `config`, a catalog failure → stopped until Resume.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{broadcast, oneshot, watch, Notify, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::phash::{self, NearIndex};
use super::progress::{eta_ms, ImportProgress, ImportStatus, Throughput};
use super::records::{EnqueueReport, ItemChanged, ItemId, ItemState};
use super::scan::{self, Scanned};
use super::store::{self, Claimed, Counted, Finish, ImportStore};
use super::{ImportError, ImportOptions};
use crate::error::{Coded, ErrorCode};
use crate::pipeline::{ExtractError, GeminiOutcome, Pipeline};
use crate::resilience::{BreakerSnapshot, BreakerState, NotPermitted, ResilienceStack, SlotPolicy};

/// Files per enqueue transaction; the first one is small so the runner starts at once.
const FIRST_BATCH: usize = 8;
const ENQUEUE_BATCH: usize = 64;
/// Capacity of the per-item event channel.
const EVENT_CAPACITY: usize = 1024;
/// How long to hold after the stack refused a call for its own limits (rate limiter, bulkhead).
const THROTTLE_WAIT: Duration = Duration::from_secs(1);

/// What the driver, the item tasks and the handle share.
pub(crate) struct Shared {
    pub(crate) store: ImportStore,
    /// Replaced when Settings change; each item runs with the pipeline it started with.
    pipeline: RwLock<Pipeline>,
    /// What the user asked for and what the queue waits for. A std mutex: never held across
    /// an `.await`.
    control: Mutex<Control>,
    /// Wakes the driver after any change to `control` or to the queued items.
    wake: Notify,
    /// Open while calls may be sent; prepared items wait here while paused or held.
    gate: watch::Sender<bool>,
    pub(crate) progress: watch::Sender<ImportProgress>,
    pub(crate) events: broadcast::Sender<ItemChanged>,
    /// The newest count read published (see `Counted::seq`): an older read never wins.
    last_counts_seq: AtomicU64,
    /// Perceptual hashes of product photos and queued photos, for near-duplicate hints.
    near: Mutex<NearIndex>,
    /// Bounds the photos prepared at once (CPU), independently of the calls in flight.
    prepare_slots: Semaphore,
    /// K permits (the bulkhead's slots) to pass the gate: at most K items are sent at a time, so
    /// a pause or a hold stops the sending at once instead of after the items queued for a slot.
    /// Replaced with the pipeline when K changes.
    sends: RwLock<Arc<Semaphore>>,
    throughput: Mutex<Throughput>,
    options: ImportOptions,
}

#[derive(Default)]
struct Control {
    mode: Mode,
    hold: Option<Hold>,
    /// Bumped on every new hold, so a timer only clears the hold it was armed for.
    hold_seq: u64,
    /// Callers of `cancel` waiting for the driver to have abandoned the work in flight.
    cancels: Vec<oneshot::Sender<()>>,
    /// The driver runs; once it ended (the queue shut down), `cancel` has nobody to wait for.
    driver_alive: bool,
    /// Items in flight (the driver's count).
    in_flight: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Mode {
    #[default]
    Idle,
    Running,
    PausedByUser,
}

#[derive(Debug, Clone)]
enum Hold {
    /// `wake_at`: when the breaker lets a probe through (`None`: only a state change helps).
    Breaker {
        wake_at: Option<Instant>,
        until_unix_ms: Option<i64>,
        message: String,
    },
    Quota {
        wake_at: Instant,
        until_unix_ms: i64,
        message: String,
    },
    Stopped {
        code: ErrorCode,
        message: String,
    },
}

/// What the driver waits for before looking again.
enum Wait {
    /// An event: a finished item, a wake-up.
    Event,
    /// An event, or the time (a quota hold).
    Until(Instant, u64),
    /// An event, the time if any, or the breaker letting calls through.
    Breaker(Option<Instant>, u64, ResilienceStack),
}

impl Shared {
    pub(crate) fn new(store: ImportStore, pipeline: Pipeline, options: ImportOptions, seed: Vec<(i64, u64)>) -> Self {
        let mut near = NearIndex::default();
        for (photo, hash) in seed {
            near.insert(photo, hash);
        }
        let mode = if options.autostart { Mode::Running } else { Mode::Idle };
        let sends = Arc::new(Semaphore::new(slots_of(&pipeline)));
        Self {
            store,
            pipeline: RwLock::new(pipeline),
            control: Mutex::new(Control { mode, driver_alive: true, ..Control::default() }),
            wake: Notify::new(),
            gate: watch::channel(false).0,
            progress: watch::channel(ImportProgress::new(ImportStatus::Idle)).0,
            events: broadcast::channel(EVENT_CAPACITY).0,
            last_counts_seq: AtomicU64::new(0),
            near: Mutex::new(near),
            prepare_slots: Semaphore::new(options.prepare_concurrency.max(1)),
            sends: RwLock::new(sends),
            throughput: Mutex::new(Throughput::new()),
            options,
        }
    }

    pub(crate) fn pipeline(&self) -> Pipeline {
        self.pipeline.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    pub(crate) fn now(&self) -> i64 {
        (self.pipeline().clock())()
    }

    fn control(&self) -> std::sync::MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn set_pipeline(&self, pipeline: Pipeline) {
        let slots = slots_of(&pipeline);
        let mut sends = self.sends.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slots != slots_of(&self.pipeline()) {
            *sends = Arc::new(Semaphore::new(slots));
        }
        drop(sends);
        *self.pipeline.write().unwrap_or_else(std::sync::PoisonError::into_inner) = pipeline;
        let mut control = self.control();
        if matches!(control.hold, Some(Hold::Breaker { .. })) {
            control.hold = None;
        }
        drop(control);
        self.changed();
    }

    pub(crate) fn pause(&self) {
        let mut control = self.control();
        if control.mode == Mode::Running {
            control.mode = Mode::PausedByUser;
        }
        drop(control);
        self.changed();
    }

    pub(crate) fn resume(&self) {
        let mut control = self.control();
        if control.mode != Mode::Running || control.hold.is_some() {
            self.throughput_restart();
        }
        control.mode = Mode::Running;
        control.hold = None;
        drop(control);
        self.changed();
    }

    /// New work arrived: start when `autostart` and idle; wake the driver.
    pub(crate) fn kick(&self) {
        let mut control = self.control();
        if self.options.autostart && control.mode == Mode::Idle {
            control.mode = Mode::Running;
            self.throughput_restart();
        }
        drop(control);
        self.changed();
    }

    pub(crate) async fn cancel(&self) {
        let (reply, done) = oneshot::channel();
        {
            let mut control = self.control();
            control.mode = Mode::Idle;
            if !control.driver_alive {
                return;
            }
            control.cancels.push(reply);
        }
        self.changed();
        // The driver answers once the work in flight is abandoned (or when it ends).
        let _ = done.await;
    }

    /// Sets a hold that concerns the whole queue and closes the gate at once. A stop is not
    /// replaced by a pause.
    fn hold(&self, hold: Hold) {
        let mut control = self.control();
        if !matches!(control.hold, Some(Hold::Stopped { .. })) {
            control.hold = Some(hold);
            control.hold_seq += 1;
        }
        drop(control);
        self.changed();
    }

    fn clear_hold(&self, seq: u64) {
        let mut control = self.control();
        if control.hold_seq == seq && !matches!(control.hold, Some(Hold::Stopped { .. })) {
            control.hold = None;
        }
        drop(control);
        self.changed();
    }

    /// The gate and the status follow the control; the driver looks again.
    fn changed(&self) {
        self.refresh();
        self.wake.notify_one();
    }

    /// Recomputes the gate and the status from the control and the counts.
    fn refresh(&self) {
        let control = self.control();
        let open = control.mode == Mode::Running && control.hold.is_none();
        let in_flight = control.in_flight;
        let (mode, hold) = (control.mode, control.hold.clone());
        drop(control);
        self.gate.send_if_modified(|was| std::mem::replace(was, open) != open);
        self.progress.send_if_modified(|p| {
            let status = status_of(mode, hold.as_ref(), p, in_flight);
            let in_flight = u32::try_from(in_flight).unwrap_or(u32::MAX);
            let changed = p.status != status || p.in_flight != in_flight;
            p.status = status;
            p.in_flight = in_flight;
            changed
        });
    }

    /// Publishes counts read on the catalog thread (unless newer ones were published already),
    /// with `changes` more changes to items.
    pub(crate) fn publish<T>(&self, counted: &Counted<T>, changes: u64) {
        self.publish_with(counted, changes, None);
    }

    /// One item changed: counts, the change counter, and its event.
    fn item_changed<T>(&self, id: ItemId, state: ItemState, counted: &Counted<T>) {
        self.publish_with(counted, 1, Some((id, state)));
    }

    fn publish_with<T>(&self, counted: &Counted<T>, changes: u64, item: Option<(ItemId, ItemState)>) {
        let now = Instant::now();
        let per_minute = self.throughput.lock().unwrap_or_else(std::sync::PoisonError::into_inner).per_minute(now);
        self.progress.send_modify(|p| {
            if self.last_counts_seq.fetch_max(counted.seq, Ordering::SeqCst) < counted.seq {
                p.set_counts(counted.counts, counted.duplicates);
            }
            p.changes += changes;
            p.throughput_per_min = (per_minute * 10.0).round() / 10.0;
            p.eta_ms = eta_ms(p.counts.active(), per_minute);
            // Sent before the progress watchers wake: whoever sees the new progress (e.g. "settled")
            // finds the event already in the channel. Nobody listening is fine.
            if let Some((id, state)) = item {
                let _ = self.events.send(ItemChanged { id, state, change: p.changes });
            }
        });
        self.refresh();
    }

    /// Runs a single-item change and announces it.
    pub(crate) async fn single<T, F>(&self, id: ItemId, state: ItemState, f: F) -> Result<T, ImportError>
    where
        T: Send + 'static,
        F: FnOnce(&mut rusqlite::Connection) -> Result<T, ImportError> + Send + 'static,
    {
        let counted = self.counted(f).await?;
        self.item_changed(id, state, &counted);
        Ok(counted.value)
    }

    pub(crate) async fn counted<T, F>(&self, f: F) -> Result<Counted<T>, ImportError>
    where
        T: Send + 'static,
        F: FnOnce(&mut rusqlite::Connection) -> Result<T, ImportError> + Send + 'static,
    {
        self.store.counted(f).await
    }

    fn throughput_restart(&self) {
        self.throughput.lock().unwrap_or_else(std::sync::PoisonError::into_inner).restart(Instant::now());
    }

    fn record_finished(&self) {
        self.throughput.lock().unwrap_or_else(std::sync::PoisonError::into_inner).record(Instant::now());
    }

    /// Items in flight at most: the bulkhead's slots plus the lookahead.
    fn in_flight_limit(&self) -> usize {
        let slots = slots_of(&self.pipeline());
        slots + self.options.lookahead.unwrap_or(slots)
    }

    fn sends(&self) -> Arc<Semaphore> {
        self.sends.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    async fn wait_for_gate(&self) {
        let mut gate = self.gate.subscribe();
        // The sender lives as long as `self`.
        let _ = gate.wait_for(|open| *open).await;
    }

    pub(crate) async fn enqueue(
        self: &Arc<Self>,
        paths: Vec<PathBuf>,
        force: bool,
    ) -> Result<EnqueueReport, ImportError> {
        let max_bytes = self.pipeline().image_config().max_file_bytes;
        let (batches, mut incoming) = tokio::sync::mpsc::channel::<Vec<Scanned>>(2);
        let walker = tokio::task::spawn_blocking(move || {
            scan::scan(&paths, max_bytes, FIRST_BATCH, ENQUEUE_BATCH, |batch| batches.blocking_send(batch).is_ok());
        });
        let mut report = EnqueueReport::default();
        while let Some(batch) = incoming.recv().await {
            let now = self.now();
            let counted = self.counted(move |conn| store::insert_batch(conn, &batch, force, now)).await?;
            let added = counted.value;
            self.publish(&counted, u64::from(added.queued + added.duplicates + added.skipped));
            report += added;
            if added.queued > 0 {
                self.kick();
            }
        }
        walker.await.map_err(|e| ImportError::Scan(e.to_string()))?;
        Ok(report)
    }
}

/// The bulkhead's slots: K.
fn slots_of(pipeline: &Pipeline) -> usize {
    pipeline.stack().config().bulkhead.max_concurrent_calls.max(1) as usize
}

/// The status the window and the CLI show.
fn status_of(mode: Mode, hold: Option<&Hold>, p: &ImportProgress, in_flight: usize) -> ImportStatus {
    match (hold, mode) {
        (Some(Hold::Stopped { code, message }), _) => ImportStatus::Stopped { code: *code, message: message.clone() },
        (_, Mode::PausedByUser) => ImportStatus::PausedByUser,
        (_, Mode::Idle) => ImportStatus::Idle,
        (Some(Hold::Breaker { until_unix_ms, message, .. }), Mode::Running) => {
            ImportStatus::PausedBreaker { until_unix_ms: *until_unix_ms, message: message.clone() }
        }
        (Some(Hold::Quota { until_unix_ms, message, .. }), Mode::Running) => {
            ImportStatus::WaitingQuota { until_unix_ms: *until_unix_ms, message: message.clone() }
        }
        (None, Mode::Running) if p.counts.active() > 0 || in_flight > 0 => ImportStatus::Running,
        (None, Mode::Running) if p.total == 0 => ImportStatus::Idle,
        (None, Mode::Running) => ImportStatus::Finished,
    }
}

/// The driver: claims items while the queue may run, and reaps their tasks. Ends when aborted
/// (the last handle dropped), dropping (aborting) the item tasks with it.
pub(crate) async fn drive(shared: Arc<Shared>) {
    let _alive = DriverAlive(shared.clone());
    let mut tasks: JoinSet<()> = JoinSet::new();
    // The last claim found nothing queued; look again only after a change.
    let mut exhausted = false;
    loop {
        while let Some(done) = tasks.try_join_next() {
            report_panic(done);
            exhausted = false;
        }
        let (cancels, stopped) = {
            let mut control = shared.control();
            (std::mem::take(&mut control.cancels), matches!(control.hold, Some(Hold::Stopped { .. })))
        };
        // Cancelled, or stopped until someone acts: the work in flight is abandoned and its items
        // wait in the queue (not half-prepared at the gate).
        if !cancels.is_empty() || (stopped && !tasks.is_empty()) {
            tasks.abort_all();
            while let Some(done) = tasks.join_next().await {
                report_panic(done);
            }
            shared.control().in_flight = 0;
            let now = shared.now();
            // The aborted tasks' catalog jobs were sent before this one: it sees their effects.
            match shared.counted(move |conn| store::requeue_unfinished(conn, now)).await {
                Ok(counted) => shared.publish(&counted, counted.value as u64),
                Err(e) => tracing::error!(error = %e, "import: could not re-queue the cancelled items"),
            }
            for reply in cancels {
                let _ = reply.send(());
            }
            exhausted = false;
            continue;
        }
        shared.control().in_flight = tasks.len();
        shared.refresh();
        let (mode, hold, seq) = {
            let control = shared.control();
            (control.mode, control.hold.clone(), control.hold_seq)
        };
        let wait = match (hold, mode) {
            (Some(Hold::Stopped { .. }), _) | (_, Mode::Idle | Mode::PausedByUser) => Wait::Event,
            (Some(Hold::Breaker { wake_at, .. }), Mode::Running) => {
                Wait::Breaker(wake_at, seq, shared.pipeline().stack().clone())
            }
            (Some(Hold::Quota { wake_at, .. }), Mode::Running) => Wait::Until(wake_at, seq),
            (None, Mode::Running) if exhausted || tasks.len() >= shared.in_flight_limit() => Wait::Event,
            (None, Mode::Running) => {
                let now = shared.now();
                match shared.counted(move |conn| store::claim_next(conn, now)).await {
                    Ok(Counted { value: Some(item), counts, duplicates, seq }) => {
                        shared.item_changed(
                            item.id,
                            ItemState::Preparing,
                            &Counted { value: (), counts, duplicates, seq },
                        );
                        tasks.spawn(process(shared.clone(), item));
                    }
                    Ok(counted) => {
                        shared.publish(&counted, 0);
                        exhausted = true;
                    }
                    Err(e) => stop_for(&shared, &e),
                }
                continue;
            }
        };
        tokio::select! {
            () = shared.wake.notified() => exhausted = false,
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                report_panic(done);
                exhausted = false;
            }
            seq = hold_over(wait) => shared.clear_hold(seq),
        }
    }
}

/// Marks the driver gone when its future is dropped (the queue aborted it), answering waiting
/// `cancel` calls: their items are re-queued at the next open.
struct DriverAlive(Arc<Shared>);

impl Drop for DriverAlive {
    fn drop(&mut self) {
        let mut control = self.0.control();
        control.driver_alive = false;
        control.cancels.clear();
    }
}

/// Resolves when the hold `wait` describes is over (never for [`Wait::Event`]).
async fn hold_over(wait: Wait) -> u64 {
    match wait {
        Wait::Event => std::future::pending().await,
        Wait::Until(at, seq) => {
            tokio::time::sleep_until(at).await;
            seq
        }
        Wait::Breaker(at, seq, stack) => {
            let timer = async {
                match at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = timer => seq,
                () = breaker_admits(&stack) => seq,
            }
        }
    }
}

/// Resolves when the breaker's published state lets calls through.
async fn breaker_admits(stack: &ResilienceStack) {
    let mut snapshots = stack.breaker().snapshot_watch();
    loop {
        if admits(&snapshots.borrow_and_update()) {
            return;
        }
        if snapshots.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

fn admits(snapshot: &BreakerSnapshot) -> bool {
    match snapshot.state {
        BreakerState::Closed | BreakerState::Disabled | BreakerState::MetricsOnly => true,
        BreakerState::HalfOpen => snapshot.half_open.is_some_and(|h| h.permits_used < h.permits_permitted),
        BreakerState::Open | BreakerState::ForcedOpen => false,
    }
}

fn report_panic(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        if e.is_panic() {
            tracing::error!(error = %e, "import: an item task panicked");
        }
    }
}

fn stop_for(shared: &Shared, error: &ImportError) {
    tracing::error!(error = %error, "import: stopped");
    shared.hold(Hold::Stopped {
        code: error.code(),
        message: format!("The import stopped: {error} Resume to try again."),
    });
}

/// One item, from `preparing` to its outcome. A catalog failure stops the queue.
async fn process(shared: Arc<Shared>, item: Claimed) {
    let pipeline = shared.pipeline();
    if let Err(error) = work(&shared, &pipeline, &item).await {
        stop_for(&shared, &error);
        let (id, now) = (item.id, shared.now());
        let requeued = shared
            .counted(move |conn| {
                Ok(conn.execute(
                    "UPDATE import_items SET state = 'queued', updated_at = ?2
                     WHERE id = ?1 AND state IN ('preparing', 'extracting')",
                    rusqlite::params![id, now],
                )?)
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
    Breaker(NotPermitted),
    Quota(Option<Duration>),
    /// Nothing will work until someone acts (key, model, settings).
    Stop,
    /// The stack's own limits (rate limiter, bulkhead): a moment's wait.
    Throttled,
    /// The local catalog failed.
    Local,
}

fn classify(error: &ExtractError) -> Fault {
    match error {
        ExtractError::Intake(_) => Fault::Own,
        ExtractError::Catalog(_) => Fault::Local,
        ExtractError::CircuitOpen(rejection) => Fault::Breaker(rejection.clone()),
        ExtractError::BulkheadFull { .. } | ExtractError::RateLimited { .. } => Fault::Throttled,
        ExtractError::TimedOut(_) => Fault::Service,
        ExtractError::Gemini(e) => match e.code() {
            ErrorCode::GeminiQuota => Fault::Quota(e.retry_after()),
            ErrorCode::GeminiAuth | ErrorCode::GeminiNotFound | ErrorCode::Config => Fault::Stop,
            ErrorCode::GeminiUnavailable | ErrorCode::GeminiApiError | ErrorCode::Timeout | ErrorCode::Network => {
                Fault::Service
            }
            _ => Fault::Own,
        },
    }
}

async fn work(shared: &Arc<Shared>, pipeline: &Pipeline, item: &Claimed) -> Result<(), ImportError> {
    let id = item.id;
    let path = PathBuf::from(&item.path);
    let prepared = {
        let _slot = shared.prepare_slots.acquire().await;
        pipeline.prepare(&path).await
    };
    let image = match prepared {
        Ok(image) => image,
        Err(error) => {
            let error = ExtractError::Intake(error);
            let outcome =
                Finish { id, from: ItemState::Preparing, to: ItemState::Failed, ..finish_error(&error, None, false) };
            shared.record_finished();
            return finish(shared, outcome).await;
        }
    };
    let thumbnail = image.thumbnail_jpeg.clone();
    let phash = tokio::task::spawn_blocking(move || phash::dhash_jpeg(&thumbnail)).await.ok().flatten();
    let photo_id = pipeline.record_photo(&path, &image).await?;
    let looks_like = phash.and_then(|hash| lock(&shared.near).nearest(photo_id, hash));

    // One of K sends, then the gate (closed while paused, or held for the breaker, the quota or
    // a stop): the prepared photo waits here.
    let send = shared.sends().acquire_owned().await;
    shared.wait_for_gate().await;
    let (sha256, now) = (image.sha256.clone(), shared.now());
    let mark = async {
        let moved = shared
            .counted(move |conn| store::mark_extracting(conn, id, photo_id, &sha256, phash, looks_like, now))
            .await?;
        if moved.value {
            shared.item_changed(id, ItemState::Extracting, &moved);
            if let Some(hash) = phash {
                lock(&shared.near).insert(photo_id, hash);
            }
        }
        Ok::<(), ImportError>(())
    };
    // `extracting` and the call start together, the state first (`biased`): the catalog thread
    // runs jobs in the order they were sent, so the state is written before the outcome below,
    // and the call does not wait for the write. No transaction is open during the call: each
    // catalog job is complete in itself. (Were the item moved meanwhile, the outcome would only
    // be audited: `finish` changes items still `extracting`.)
    let (marked, call) = tokio::join!(biased; mark, pipeline.call_gemini(photo_id, &image, SlotPolicy::Wait));
    drop(image);
    marked?;
    let outcome = classified(shared, pipeline, item, call.into_outcome()).await?;
    // Any hold this outcome calls for is set: the next item may go (or wait at the gate).
    drop(send);
    finish(shared, outcome).await
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
        GeminiOutcome::Answered { attempt, answer } => {
            let product = answer.product;
            let flags = product.validate();
            shared.record_finished();
            Finish {
                id,
                from: ItemState::Extracting,
                to: ItemState::Ready,
                attempt: Some(attempt),
                count_attempt: true,
                proposal: Some((product, flags)),
                error: None,
            }
        }
        GeminiOutcome::Failed { attempt, error } => {
            let (to, counted) = match classify(&error) {
                Fault::Own => (ItemState::Failed, true),
                Fault::Service if item.attempts + 1 >= shared.options.max_attempts_per_item => {
                    (ItemState::Failed, true)
                }
                Fault::Service => (ItemState::Queued, true),
                Fault::Breaker(rejection) => {
                    shared.hold(breaker_hold(&rejection, shared.now()));
                    (ItemState::Queued, false)
                }
                Fault::Quota(delay) => {
                    let wait = delay.unwrap_or(shared.options.default_quota_wait);
                    shared.hold(quota_hold(wait, shared.now(), &error.to_string()));
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
                Fault::Local => {
                    if let Some(attempt) = attempt {
                        let _ = pipeline.catalog().record_attempt(attempt).await;
                    }
                    return Err(match error {
                        ExtractError::Catalog(e) => ImportError::Catalog(e),
                        other => ImportError::Scan(other.to_string()),
                    });
                }
            };
            if to == ItemState::Failed {
                shared.record_finished();
            }
            Finish { id, from: ItemState::Extracting, to, ..finish_error(&error, attempt, counted) }
        }
    })
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
    }
}

async fn finish(shared: &Arc<Shared>, outcome: Finish) -> Result<(), ImportError> {
    let (id, to, now) = (outcome.id, outcome.to, shared.now());
    let counted = shared.counted(move |conn| store::finish(conn, &outcome, now)).await?;
    if counted.value {
        shared.item_changed(id, to, &counted);
    } else {
        shared.publish(&counted, 0);
    }
    Ok(())
}

fn breaker_hold(rejection: &NotPermitted, now_ms: i64) -> Hold {
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
            format!("Paused: Gemini is failing, next try at {}.", at.format("%H:%M:%S"))
        }
        (_, None) => "Paused: Gemini is failing.".into(),
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Gives product photos saved before hashes existed a perceptual hash, in small batches, so they
/// can be "looked like" too.
pub(crate) async fn backfill_phashes(shared: Arc<Shared>) {
    const BATCH: u32 = 64;
    let mut after = 0;
    loop {
        let thumbnails = match shared.store.run(move |conn| store::photos_without_phash(conn, after, BATCH)).await {
            Ok(t) if !t.is_empty() => t,
            Ok(_) => return,
            Err(e) => return tracing::warn!(error = %e, "import: could not hash older photos"),
        };
        after = thumbnails.last().map_or(after, |t| t.0);
        let hashes: Vec<(i64, u64)> = tokio::task::spawn_blocking(move || {
            thumbnails.iter().filter_map(|(photo, jpeg)| phash::dhash_jpeg(jpeg).map(|h| (*photo, h))).collect()
        })
        .await
        .unwrap_or_default();
        for (photo, hash) in &hashes {
            lock(&shared.near).insert(*photo, *hash);
        }
        if let Err(e) = shared.store.run(move |conn| store::set_phashes(conn, &hashes)).await {
            return tracing::warn!(error = %e, "import: could not store the hashes of older photos");
        }
    }
}
