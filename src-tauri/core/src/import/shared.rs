//! The queue's shared state and controls: what the handle, the driver and the item tasks share
//! (the pipeline in use, the user's mode, the hold, the gate, the send slots, progress and
//! events), and queueing files.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{broadcast, oneshot, watch, Notify, Semaphore};
use tokio::time::Instant;

use super::grouping;
use super::phash::NearIndex;
use super::progress::{eta_ms, ImportProgress, ImportStatus, Throughput};
use super::records::{Enqueued, ItemChanged, ItemId, ItemOrigin, ItemState};
use super::scan::{self, Scanned};
use super::slots::SendSlots;
use super::store::{self, CostRead, Counted, ImportStore};
use super::{EnqueueOptions, ImportError, ImportOptions};
use crate::catalog::{CatalogError, CostTotal, NewAttempt};
use crate::error::{Coded, ErrorCode};
use crate::pipeline::Pipeline;
use crate::pricing::Usd;

/// Files per enqueue transaction: the first one is small so the runner starts at once, and each
/// next twice the last up to `ENQUEUE_BATCH` (on a team server a transaction of 64 takes ~150 ms,
/// which a second batch of 64 made the slots wait for).
const FIRST_BATCH: usize = 8;
const ENQUEUE_BATCH: usize = 64;
/// Capacity of the per-item event channel.
const EVENT_CAPACITY: usize = 1024;
/// How long to hold after the stack refused a call for its own limits (rate limiter, bulkhead).
pub(crate) const THROTTLE_WAIT: Duration = Duration::from_secs(1);
/// The pauses before trying a team catalog's server that went away again: doubling up to the
/// most (a server restart takes seconds; a failover or a Wi-Fi drop can take minutes).
const SERVER_RETRY_FIRST: Duration = Duration::from_millis(500);
const SERVER_RETRY_MAX: Duration = Duration::from_secs(30);

/// The pause before the next try at a server that is away, after `previous` (none: it just went
/// away): doubling from [`SERVER_RETRY_FIRST`] up to [`SERVER_RETRY_MAX`].
fn server_pause(previous: Option<Duration>) -> Duration {
    previous.map_or(SERVER_RETRY_FIRST, |pause| (pause * 2).min(SERVER_RETRY_MAX))
}

/// What the driver, the item tasks and the handle share.
pub(crate) struct Shared {
    pub(crate) store: ImportStore,
    /// Replaced when Settings change; each item runs with the pipeline it started with.
    pub(crate) pipeline: RwLock<Pipeline>,
    /// What the user asked for and what the queue waits for. A std mutex: never held across
    /// an `.await`.
    pub(crate) control: Mutex<Control>,
    /// Wakes the driver after any change to `control` or to the queued items.
    pub(crate) wake: Notify,
    /// Open while calls may be sent; prepared items wait here while paused or held.
    pub(crate) gate: watch::Sender<bool>,
    pub(crate) progress: watch::Sender<ImportProgress>,
    pub(crate) events: broadcast::Sender<ItemChanged>,
    /// The newest count read published (see `Counted::seq`): an older read never wins.
    pub(crate) last_counts_seq: AtomicU64,
    /// The queue's cost as the reads that carry it told it (see [`CostBook`]).
    pub(crate) cost_book: Mutex<CostBook>,
    /// A call's cost came after a newer total that may not have seen it (on a server the reads
    /// run on pooled connections, so a read asked for later can run before an earlier write
    /// commits): the next look at the queue reads the total again.
    pub(crate) cost_stale: AtomicBool,
    /// Perceptual hashes of product photos and queued photos, for near-duplicate hints.
    pub(crate) near: Mutex<NearIndex>,
    /// Bounds the photos prepared at once (CPU), independently of the calls in flight.
    pub(crate) prepare_slots: Semaphore,
    /// K slots (the bulkhead's) to pass the gate: at most K items are sent at a time, so a pause
    /// or a hold stops the sending at once instead of after the items queued for a slot; an
    /// interactive item gets the next free one. Replaced with the pipeline when K changes.
    pub(crate) sends: RwLock<Arc<SendSlots>>,
    pub(crate) throughput: Mutex<Throughput>,
    /// True while this process works the queue (holds the queue lock); otherwise another process
    /// does, and this one only queues items and follows their progress.
    pub(crate) working: AtomicBool,
    /// What the last look at other processes' changes saw.
    pub(crate) follow: Mutex<Follow>,
    pub(crate) options: ImportOptions,
    /// The estimated cost of the calls that passed the budget check and are not recorded yet, so
    /// K calls in flight cannot each spend the last of the budget.
    pub(crate) reserved: Mutex<Usd>,
    /// Batch mode's requests waiting to be submitted.
    pub(crate) batch: super::batch::BatchLane,
    /// Items past their call, writing its outcome, per origin (bulk, interactive): the driver
    /// does not count them against the items in flight (see [`Finishing`]).
    pub(crate) finishing: [AtomicUsize; 2],
    /// When the disk was last looked at, and whether it was too full then.
    pub(crate) disk_seen: Mutex<Option<(Instant, bool)>>,
    /// Since when (unix ms) the team catalog's server has been away, and the next pause before
    /// trying it again; `None` while it answers.
    pub(crate) server_away: Mutex<Option<(i64, Duration)>>,
    /// The items this process's tasks work on now (claimed, not yet finished): what a desktop's
    /// leases should cover once its server is back.
    pub(crate) working_on: Mutex<std::collections::HashSet<ItemId>>,
    /// True until the answers a previous run left in the spool are written: the driver claims
    /// nothing meanwhile, or it could claim (and pay again for) an item whose answer waits there.
    pub(crate) replaying: AtomicBool,
    /// A replay ended with answers the catalog refused both ways still in the spool (it stopped
    /// the queue): the driver replays again before it claims anything once the queue runs.
    pub(crate) spool_left: AtomicBool,
}

/// Held by an item task from the moment its call is answered to its end: the task only writes
/// the outcome now (its photos are dropped), so the driver claims the next item at once instead
/// of after that write, which on a team server is a few round trips on a busy connection, and
/// used to leave slots idle after every round of calls.
pub(crate) struct Finishing<'a>(&'a Shared, usize);

impl<'a> Finishing<'a> {
    pub(crate) fn new(shared: &'a Shared, origin: ItemOrigin) -> Self {
        let index = usize::from(origin == ItemOrigin::Interactive);
        shared.finishing[index].fetch_add(1, Ordering::SeqCst);
        shared.wake.notify_one();
        Finishing(shared, index)
    }
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        self.0.finishing[self.1].fetch_sub(1, Ordering::SeqCst);
    }
}

/// Following the changes other processes make to the shared queue.
#[derive(Default)]
pub(crate) struct Follow {
    data_version: Option<i64>,
    /// Items seen changed at the last look (id → state, change time), so an overlap of the time
    /// windows does not announce a change twice.
    seen: HashMap<ItemId, (ItemState, i64)>,
    since: i64,
    /// The state this process last announced for each item, so its own changes, seen again in
    /// the database, are not announced twice.
    announced: HashMap<ItemId, ItemState>,
}

/// How far back each look at other processes' changes reaches beyond the previous one: their
/// clocks are the same machine's, but a change and its commit are not the same instant.
const FOLLOW_OVERLAP_MS: i64 = 2_000;

#[derive(Default)]
pub(crate) struct Control {
    pub(crate) mode: Mode,
    pub(crate) hold: Option<Hold>,
    /// Bumped on every new hold, so a timer only clears the hold it was armed for.
    pub(crate) hold_seq: u64,
    /// Callers of `cancel` waiting for the driver to have abandoned the work in flight.
    pub(crate) cancels: Vec<oneshot::Sender<()>>,
    /// The driver runs; once it ended (the queue shut down), `cancel` has nobody to wait for.
    pub(crate) driver_alive: bool,
    /// Items in flight (the driver's count).
    pub(crate) in_flight: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Mode {
    #[default]
    Idle,
    Running,
    PausedByUser,
}

#[derive(Debug, Clone)]
pub(crate) enum Hold {
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
    /// Today's budget is spent: until the next local day, or a new pipeline (Settings).
    Budget {
        wake_at: Instant,
        until_unix_ms: i64,
        message: String,
    },
    /// The team catalog's server cannot be reached: tried again at `wake_at`, backing off.
    Server {
        wake_at: Instant,
        since_unix_ms: i64,
        next_try_unix_ms: i64,
        message: String,
    },
    /// The catalog's disk is too full: until it has room again, looked at every `recheck`.
    Disk {
        wake_at: Instant,
        free_bytes: Option<u64>,
        message: String,
    },
    Stopped {
        code: ErrorCode,
        message: String,
    },
}

impl Shared {
    pub(crate) fn new(store: ImportStore, pipeline: Pipeline, options: ImportOptions, seed: Vec<(i64, u64)>) -> Self {
        let mut near = NearIndex::default();
        for (photo, hash) in seed {
            near.insert(photo, hash);
        }
        let mode = if options.autostart { Mode::Running } else { Mode::Idle };
        let sends = SendSlots::new(slots_of(&pipeline));
        Self {
            store,
            pipeline: RwLock::new(pipeline),
            control: Mutex::new(Control { mode, ..Control::default() }),
            wake: Notify::new(),
            gate: watch::channel(false).0,
            progress: watch::channel(ImportProgress::new(ImportStatus::Idle)).0,
            events: broadcast::channel(EVENT_CAPACITY).0,
            last_counts_seq: AtomicU64::new(0),
            cost_book: Mutex::new(CostBook::default()),
            cost_stale: AtomicBool::new(false),
            near: Mutex::new(near),
            prepare_slots: Semaphore::new(options.prepare_concurrency.max(1)),
            sends: RwLock::new(sends),
            throughput: Mutex::new(Throughput::new()),
            working: AtomicBool::new(false),
            follow: Mutex::new(Follow::default()),
            options,
            reserved: Mutex::new(Usd::ZERO),
            batch: super::batch::BatchLane::default(),
            finishing: [AtomicUsize::new(0), AtomicUsize::new(0)],
            disk_seen: Mutex::new(None),
            server_away: Mutex::new(None),
            working_on: Mutex::new(std::collections::HashSet::new()),
            replaying: AtomicBool::new(false),
            spool_left: AtomicBool::new(false),
        }
    }

    /// Items of `origin` past their call, writing its outcome.
    pub(crate) fn finishing(&self, origin: ItemOrigin) -> usize {
        self.finishing[usize::from(origin == ItemOrigin::Interactive)].load(Ordering::SeqCst)
    }

    pub(crate) fn pipeline(&self) -> Pipeline {
        self.pipeline.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    pub(crate) fn now(&self) -> i64 {
        (self.pipeline().clock())()
    }

    pub(crate) fn control(&self) -> std::sync::MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn set_pipeline(&self, pipeline: Pipeline) {
        let slots = slots_of(&pipeline);
        let old = self.pipeline();
        let mut sends = self.sends.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slots != slots_of(&old) {
            *sends = SendSlots::new(slots);
        }
        drop(sends);
        // Another key, model or address (a key added in Settings, the demo turned on): what
        // stopped the queue for the old one may be fixed, so it goes on by itself.
        let retarget = !old.gemini().same_target(pipeline.gemini());
        *self.pipeline.write().unwrap_or_else(std::sync::PoisonError::into_inner) = pipeline;
        let mut control = self.control();
        let restart = match &control.hold {
            // A new breaker, or a new budget, decides afresh.
            Some(Hold::Breaker { .. } | Hold::Budget { .. }) => true,
            Some(Hold::Stopped { code, .. }) => retarget && stopped_by_settings(*code),
            _ => false,
        };
        if restart {
            if matches!(control.hold, Some(Hold::Stopped { .. })) {
                self.throughput_restart();
            }
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

    /// This desktop's name on a team catalog (what its spooled answers say paid for them).
    pub(crate) fn desktop(&self) -> Option<String> {
        self.store.catalog().server().map(|s| s.desktop().to_string())
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
    pub(crate) fn hold(&self, hold: Hold) {
        let mut control = self.control();
        if !matches!(control.hold, Some(Hold::Stopped { .. })) {
            control.hold = Some(hold);
            control.hold_seq += 1;
        }
        drop(control);
        self.changed();
    }

    pub(crate) fn clear_hold(&self, seq: u64) {
        let mut control = self.control();
        if control.hold_seq == seq && !matches!(control.hold, Some(Hold::Stopped { .. })) {
            control.hold = None;
        }
        drop(control);
        self.changed();
    }

    /// The gate and the status follow the control; the driver looks again.
    pub(crate) fn changed(&self) {
        self.refresh();
        self.wake.notify_one();
    }

    /// Recomputes the gate and the status from the control and the counts.
    pub(crate) fn refresh(&self) {
        let working = self.working.load(Ordering::SeqCst);
        let control = self.control();
        let open = control.mode == Mode::Running && control.hold.is_none();
        let in_flight = control.in_flight;
        let (mode, hold) = (control.mode, control.hold.clone());
        drop(control);
        self.gate.send_if_modified(|was| std::mem::replace(was, open) != open);
        self.progress.send_if_modified(|p| {
            let status =
                if working { status_of(mode, hold.as_ref(), p, in_flight) } else { ImportStatus::WorkedElsewhere };
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
    pub(crate) fn item_changed<T>(&self, id: ItemId, state: ItemState, counted: &Counted<T>) {
        self.publish_with(counted, 1, Some((id, state)));
    }

    fn publish_with<T>(&self, counted: &Counted<T>, changes: u64, item: Option<(ItemId, ItemState)>) {
        let now = Instant::now();
        let per_minute = self.throughput.lock().unwrap_or_else(std::sync::PoisonError::into_inner).per_minute(now);
        self.progress.send_modify(|p| {
            if self.last_counts_seq.fetch_max(counted.seq, Ordering::SeqCst) < counted.seq {
                p.set_counts(counted.counts, counted.duplicates);
            }
            if let Some(cost) = counted.cost {
                let mut book = self.cost_book.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if !book.apply(cost, counted.seq) {
                    self.cost_stale.store(true, Ordering::SeqCst);
                }
                p.queue_cost = book.total();
            }
            p.changes += changes;
            p.throughput_per_min = (per_minute * 10.0).round() / 10.0;
            p.eta_ms = eta_ms(p.counts.active(), per_minute);
            // Sent before the progress watchers wake: whoever sees the new progress (e.g. "settled")
            // finds the event already in the channel. Nobody listening is fine.
            if let Some((id, state)) = item {
                lock(&self.follow).announced.insert(id, state);
                let _ = self.events.send(ItemChanged { id, state, change: p.changes });
            }
        });
        self.refresh();
    }

    /// Runs a single-item change and announces it.
    pub(crate) async fn single<T, F>(&self, id: ItemId, state: ItemState, f: F) -> Result<T, ImportError>
    where
        T: Send + 'static,
        F: FnMut(&crate::catalog::db::Db<'_>) -> Result<T, ImportError> + Send + 'static,
    {
        let counted = self.counted(f).await?;
        self.item_changed(id, state, &counted);
        Ok(counted.value)
    }

    pub(crate) async fn counted<T, F>(&self, f: F) -> Result<Counted<T>, ImportError>
    where
        T: Send + 'static,
        F: FnMut(&crate::catalog::db::Db<'_>) -> Result<T, ImportError> + Send + 'static,
    {
        self.store.counted(f, false).await
    }

    /// Runs a write until it is done, waiting whenever the catalog's disk is full or the team
    /// catalog's server is away: the queue holds meanwhile (no more photos are taken) and the
    /// write is tried again once the hold clears. For what must not be lost: an answer paid for,
    /// an item's way back to the queue.
    pub(crate) async fn until_written<T, Fut>(&self, write: impl FnMut() -> Fut) -> Result<T, ImportError>
    where
        Fut: std::future::Future<Output = Result<T, ImportError>>,
    {
        self.until_written_keeping(write, |_| {}).await
    }

    /// [`Shared::until_written`], calling `before_waiting` with the error each time before the
    /// queue waits (to keep what the write carries somewhere safer than memory meanwhile).
    pub(crate) async fn until_written_keeping<T, Fut>(
        &self,
        mut write: impl FnMut() -> Fut,
        mut before_waiting: impl FnMut(&ImportError),
    ) -> Result<T, ImportError>
    where
        Fut: std::future::Future<Output = Result<T, ImportError>>,
    {
        loop {
            match write().await {
                Err(e) if e.code() == ErrorCode::DiskFull => {
                    tracing::warn!(error = %e, "import: a write waits for room on the catalog's disk");
                    before_waiting(&e);
                    self.hold_for_disk(None, super::driver::disk_full_message(self));
                    self.wait_for_gate().await;
                }
                Err(e) if e.server_away().is_some() => {
                    before_waiting(&e);
                    self.hold_for_server(e.server_away().unwrap_or_default());
                    self.wait_for_gate().await;
                }
                done => return done,
            }
        }
    }

    /// Writes an item's outcome ([`store::finish`]) and returns its counts, with what its attempt
    /// cost to add to the queue's cost (a read over every item after each call would cost
    /// milliseconds at thousands of items).
    pub(crate) async fn write_outcome(&self, finish: store::Finish) -> Result<Counted<bool>, ImportError> {
        let now = self.now();
        let added = finish.attempt.as_ref().map(|attempt| {
            let mut cost = CostTotal::default();
            cost.add(attempt.usage.map(|u| u.billed()), attempt.cost);
            cost
        });
        let mut counted = self.counted(move |conn| store::finish(conn, &finish, now)).await?;
        counted.cost = added.map(CostRead::Add);
        Ok(counted)
    }

    /// [`Shared::counted`] after a change that can change what the queue's items cost (items
    /// removed, another process's changes, the queue opened), reading that too.
    pub(crate) async fn counted_costing<T, F>(&self, f: F) -> Result<Counted<T>, ImportError>
    where
        T: Send + 'static,
        F: FnMut(&crate::catalog::db::Db<'_>) -> Result<T, ImportError> + Send + 'static,
    {
        self.store.counted(f, true).await
    }

    pub(crate) fn throughput_restart(&self) {
        self.throughput.lock().unwrap_or_else(std::sync::PoisonError::into_inner).restart(Instant::now());
    }

    /// Adds a recorded attempt's tokens and cost to this import's running total.
    pub(crate) fn add_cost(&self, attempt: &NewAttempt) {
        let tokens = attempt.usage.map(|u| u.billed());
        self.progress.send_modify(|p| p.cost.add(tokens, attempt.cost));
    }

    /// A new import starts when files arrive at a settled queue: its running total starts at 0.
    pub(crate) fn start_import_if_settled(&self) {
        self.progress.send_if_modified(|p| {
            let settled = p.counts.active() == 0 && p.in_flight == 0;
            let restart = settled && p.cost != CostTotal::default();
            if restart {
                p.cost = CostTotal::default();
            }
            restart
        });
    }

    pub(crate) fn record_finished(&self) {
        self.throughput.lock().unwrap_or_else(std::sync::PoisonError::into_inner).record(Instant::now());
    }

    /// Items in flight at most: the bulkhead's slots plus the lookahead, K photos prepared
    /// ahead so that a freed slot sends at once.
    ///
    /// On a team catalog, no photo is claimed ahead once fewer than 2·K items are queued: an item
    /// claimed ahead is out of the other desktops' reach until this desktop has a free slot, and
    /// at the end of an import it waited up to a round of calls while another desktop's slots sat
    /// idle (two desktops took 0.556 of one's time instead of 0.522; BENCHMARKS.md).
    pub(crate) fn in_flight_limit(&self) -> usize {
        let slots = slots_of(&self.pipeline());
        let shared_queue = self.store.catalog().server().is_some();
        let queued = usize::try_from(self.progress.borrow().counts.queued).unwrap_or(usize::MAX);
        let default = if shared_queue && queued < 2 * slots { 0 } else { slots };
        slots + self.options.lookahead.unwrap_or(default)
    }

    /// Whether the catalog's disk has too little room for more work, looked at most every quarter
    /// of a second: a hold ([`Hold::Disk`]) is set when it has.
    pub(crate) fn disk_too_full(&self) -> bool {
        const EVERY: Duration = Duration::from_millis(250);
        let mut last = lock(&self.disk_seen);
        if let Some((at, full)) = *last {
            if at.elapsed() < EVERY {
                return full;
            }
        }
        let too_full = self.options.disk.too_full();
        *last = Some((Instant::now(), too_full.is_some()));
        drop(last);
        match too_full {
            Some(full) => {
                tracing::warn!(dir = %full.dir.display(), free = full.free.available, "import: the disk is too full");
                self.hold_for_disk(Some(full.free.available), full.message());
                true
            }
            None => false,
        }
    }

    /// Holds the queue while the team catalog's server cannot be reached: it is tried again after
    /// a pause that doubles up to [`SERVER_RETRY_MAX`] (the driver's next claim is the try), and
    /// the queue goes on by itself once a statement goes through ([`Shared::server_back`]).
    pub(crate) fn hold_for_server(&self, reason: &str) {
        let now = self.now();
        let (since, pause) = {
            let mut away = lock(&self.server_away);
            let (since, pause) = match *away {
                Some((since, pause)) => (since, server_pause(Some(pause))),
                None => {
                    tracing::warn!(reason, "import: the team catalog's server cannot be reached; waiting for it");
                    (now, server_pause(None))
                }
            };
            *away = Some((since, pause));
            (since, pause)
        };
        let next_try = now + i64::try_from(pause.as_millis()).unwrap_or(i64::MAX);
        let message = format!(
            "Waiting for the team catalog's server ({}). The import goes on by itself once it is back; the answers \
             already paid for are written then.",
            reason.trim().trim_end_matches('.')
        );
        self.hold(Hold::Server {
            wake_at: Instant::now() + pause,
            since_unix_ms: since,
            next_try_unix_ms: next_try,
            message,
        });
    }

    /// A statement went through: a server that was away is back (the pause starts afresh next
    /// time); true when it was away.
    pub(crate) fn server_back(&self) -> bool {
        let was_away = lock(&self.server_away).take().is_some();
        if was_away {
            tracing::info!("import: the team catalog's server is back");
        }
        was_away
    }

    /// Holds the queue until the disk has room again (looked at every `recheck`); the message
    /// says what to do in its reader's words.
    pub(crate) fn hold_for_disk(&self, free_bytes: Option<u64>, message: String) {
        let wake_at = Instant::now() + self.options.disk.recheck;
        let message = format!("{message} {}", self.options.stop_advice.disk_text());
        self.hold(Hold::Disk { wake_at, free_bytes, message });
    }

    pub(crate) fn sends(&self) -> Arc<SendSlots> {
        self.sends.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    pub(crate) async fn wait_for_gate(&self) {
        let mut gate = self.gate.subscribe();
        // The sender lives as long as `self`.
        let _ = gate.wait_for(|open| *open).await;
    }

    pub(crate) async fn enqueue(
        self: &Arc<Self>,
        paths: Vec<PathBuf>,
        options: EnqueueOptions,
    ) -> Result<Enqueued, ImportError> {
        if options.batch && self.store.catalog().server().is_some() {
            // A batch's answer is settled by the desktop that submitted it; sharing that between
            // desktops (who polls, who adopts an orphaned batch) is not built.
            let url = self.store.catalog().location();
            return Err(CatalogError::ServerNotSupported { operation: "overnight (batch) imports".into(), url }.into());
        }
        self.start_import_if_settled();
        let max_bytes = self.pipeline().image_config().max_file_bytes;
        let links_outside = self.options.follow_links_outside;
        let (batches, mut incoming) = tokio::sync::mpsc::channel::<Vec<Scanned>>(2);
        let walker = tokio::task::spawn_blocking(move || {
            scan::scan(&paths, max_bytes, links_outside, FIRST_BATCH, ENQUEUE_BATCH, |batch| {
                batches.blocking_send(batch).is_ok()
            });
        });
        let mut enqueued = Enqueued::default();
        // With a grouping, the folder being listed waits until the walk has left it (the walk
        // lists a folder's files together, before its subfolders).
        let mut held: Vec<Scanned> = Vec::new();
        loop {
            let received = incoming.recv().await;
            let last = received.is_none();
            let (batch, sequences) = grouping::entries(received.unwrap_or_default(), &mut held, options.grouping, last);
            enqueued.report.sequences.extend(sequences);
            if !batch.is_empty() {
                let now = self.now();
                let mut counted = self
                    .counted(move |conn| {
                        store::insert_batch(conn, &batch, options.force, options.origin, options.batch, now)
                    })
                    .await?;
                let added = std::mem::take(&mut counted.value.report);
                self.publish(&counted, u64::from(added.queued + added.duplicates + added.skipped));
                enqueued.files.extend(std::mem::take(&mut counted.value.files));
                // New items, or ones already waiting (another desktop of a team queued the same
                // photos a moment ago): either way there is work to claim now.
                let work = added.queued + added.unchanged > 0;
                enqueued.report += added;
                if work {
                    self.kick();
                }
            }
            if last {
                break;
            }
        }
        walker.await.map_err(|source| ImportError::Task { what: "listing the files", source })?;
        Ok(enqueued)
    }

    /// Queues the photos of one product whose SHA-256 is known (a catalog product extracted
    /// again): no walk, one item, sent as one request. Intake hashes each file again and, when
    /// it is missing or holds other bytes, sends the prepared photo a team catalog keeps.
    pub(crate) async fn enqueue_product(
        self: &Arc<Self>,
        photos: Vec<(crate::stored_path::StoredPath, String)>,
        options: EnqueueOptions,
    ) -> Result<Enqueued, ImportError> {
        self.start_import_if_settled();
        let photos: Vec<(crate::stored_path::StoredPath, Option<String>)> =
            photos.into_iter().map(|(p, s)| (p, Some(s))).collect();
        let batch = vec![store::Entry::Product { photos, note: None }];
        let now = self.now();
        let mut counted = self
            .counted(move |conn| store::insert_batch(conn, &batch, options.force, options.origin, options.batch, now))
            .await?;
        let added = &counted.value.report;
        self.publish(&counted, u64::from(added.queued + added.duplicates + added.skipped));
        if added.queued + added.unchanged > 0 {
            self.kick();
        }
        Ok(std::mem::take(&mut counted.value))
    }

    /// Looks at what other processes changed in the shared queue since the last look (only when
    /// SQLite's `data_version` says another connection committed): announces each changed item,
    /// publishes the counts, and returns true when anything changed (new items may be queued).
    pub(crate) async fn follow_others(&self) -> Result<bool, ImportError> {
        let (known, since) = {
            let follow = lock(&self.follow);
            (follow.data_version, follow.since)
        };
        let local_now = self.now();
        // Cheap when nothing changed (the common case, twice a second): one pragma (on a server,
        // one read of a sequence), no counts.
        let first = known.is_none();
        let (version, now) = self
            .store
            .run(move |conn| {
                let now = if first { store::follow_now(conn, local_now)? } else { local_now };
                Ok((store::data_version(conn)?, now))
            })
            .await?;
        {
            let mut follow = lock(&self.follow);
            follow.data_version = Some(version);
            // The first look only notes where things stand.
            if known.is_none() {
                follow.since = now - FOLLOW_OVERLAP_MS;
            }
        }
        if known.is_none() || known == Some(version) {
            if self.cost_stale.swap(false, Ordering::SeqCst) {
                let counted = self.counted_costing(|_| Ok(())).await?;
                self.publish(&counted, 0);
            }
            return Ok(false);
        }
        let counted = self.counted_costing(move |conn| store::changed_since(conn, since)).await?;
        let changes = &counted.value;
        let fresh: Vec<(ItemId, ItemState)> = {
            let mut follow = lock(&self.follow);
            let newest = changes.iter().map(|c| c.2).max().unwrap_or(since + FOLLOW_OVERLAP_MS);
            follow.since = follow.since.max(newest - FOLLOW_OVERLAP_MS);
            let fresh = changes
                .iter()
                .filter(|(id, state, at)| {
                    follow.seen.get(id) != Some(&(*state, *at)) && follow.announced.get(id) != Some(state)
                })
                .map(|(id, state, _)| (*id, *state))
                .collect();
            follow.seen = changes.iter().map(|(id, state, at)| (*id, (*state, *at))).collect();
            fresh
        };
        for (id, state) in &fresh {
            self.item_changed(*id, *state, &counted);
        }
        if fresh.is_empty() {
            self.publish(&counted, 0);
        }
        Ok(!fresh.is_empty())
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a stop for `code` is one the Gemini settings cause (a missing or rejected key, a model
/// the key cannot use): another key, model or address may fix it.
fn stopped_by_settings(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::Config | ErrorCode::GeminiAuth | ErrorCode::GeminiNotFound | ErrorCode::GeminiNotAvailable
    )
}

/// The bulkhead's slots: K.
pub(crate) fn slots_of(pipeline: &Pipeline) -> usize {
    pipeline.stack().config().bulkhead.max_concurrent_calls.max(1) as usize
}

/// The status the window and the CLI show.
pub(crate) fn status_of(mode: Mode, hold: Option<&Hold>, p: &ImportProgress, in_flight: usize) -> ImportStatus {
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
        (Some(Hold::Budget { until_unix_ms, message, .. }), Mode::Running) => {
            ImportStatus::PausedBudget { until_unix_ms: *until_unix_ms, message: message.clone() }
        }
        (Some(Hold::Disk { free_bytes, message, .. }), Mode::Running) => {
            ImportStatus::PausedDisk { free_bytes: *free_bytes, message: message.clone() }
        }
        (Some(Hold::Server { since_unix_ms, next_try_unix_ms, message, .. }), Mode::Running) => {
            ImportStatus::WaitingServer {
                since_unix_ms: *since_unix_ms,
                next_try_unix_ms: *next_try_unix_ms,
                message: message.clone(),
            }
        }
        (None, Mode::Running) if p.counts.active() > 0 || in_flight > 0 => ImportStatus::Running,
        (None, Mode::Running) if p.total == 0 => ImportStatus::Idle,
        (None, Mode::Running) => ImportStatus::Finished,
    }
}

/// The queue's cost from reads published in any order: a total (read over every item) replaces
/// what older reads said; a call's cost (read when its outcome was written) adds to the newest
/// total older than it, whenever it is published. Before, a call published after a newer call was
/// dropped as "older", and the Import view missed its cost until the next total.
#[derive(Debug, Default)]
pub(crate) struct CostBook {
    total: CostTotal,
    total_seq: u64,
    /// Calls read after `total`, each once.
    added: Vec<(u64, CostTotal)>,
}

impl CostBook {
    /// False when a call's cost was left out as counted in a newer total: on SQLite that total
    /// read it (one connection runs the jobs in order); on a server it may not have, so the
    /// caller reads the total again.
    fn apply(&mut self, read: CostRead, seq: u64) -> bool {
        match read {
            CostRead::Total(total) if seq > self.total_seq => {
                self.total = total;
                self.total_seq = seq;
                self.added.retain(|(at, _)| *at > seq);
                true
            }
            CostRead::Add(added) if seq > self.total_seq => {
                self.added.push((seq, added));
                true
            }
            CostRead::Add(_) => false,
            // An older total: a newer one is in force.
            CostRead::Total(_) => true,
        }
    }

    fn total(&self) -> CostTotal {
        let mut total = self.total;
        for (_, added) in &self.added {
            total.add_total(added);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_stays_away_is_tried_again_after_doubling_pauses_up_to_30_s() {
        let pauses: Vec<u64> = std::iter::successors(Some(server_pause(None)), |p| Some(server_pause(Some(*p))))
            .take(9)
            .map(|p| u64::try_from(p.as_millis()).unwrap())
            .collect();
        assert_eq!(pauses, [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
    }

    #[test]
    fn a_calls_cost_counts_whatever_order_the_reads_are_published_in() {
        let call = |n: u32| CostTotal { calls: n, input_tokens: u64::from(n) * 100, ..CostTotal::default() };
        // Two calls read as 11 and 12, published 12 first: both count (one used to be dropped).
        let mut book = CostBook::default();
        book.apply(CostRead::Total(call(0)), 10);
        book.apply(CostRead::Add(call(1)), 12);
        book.apply(CostRead::Add(call(1)), 11);
        assert_eq!(book.total().calls, 2);
        // A newer total counts what it read; an older one published late changes nothing.
        book.apply(CostRead::Total(call(5)), 13);
        assert_eq!(book.total().calls, 5);
        book.apply(CostRead::Total(call(1)), 9);
        assert_eq!(book.total().calls, 5);
        // A call read before that total is in it (on a server, maybe not: the caller reads the
        // total again); one read after adds.
        assert!(!book.apply(CostRead::Add(call(1)), 12));
        assert_eq!(book.total().calls, 5);
        book.apply(CostRead::Add(call(1)), 14);
        assert_eq!(book.total().calls, 6);
        // A total read after a call that was published before it replaces it (it includes it).
        book.apply(CostRead::Total(call(7)), 15);
        assert_eq!(book.total().calls, 7);
    }
}
