//! The one engine: every photo — dropped on the window, given to `extract`, a folder imported in
//! bulk, a catalog re-extract, a photo posted to the HTTP API — is an item of this queue, kept in
//! the catalog (a SQLite file, or the team's server, where desktops share it), worked through by
//! the pipeline's steps as fast as the Gemini bulkhead allows, surviving crashes.
//!
//! # A tour
//! - [`ImportQueue`] (this file) is the handle the window and the CLI hold: enqueue, controls
//!   (pause, resume, cancel, retry failed, clear done, force a re-extract), listing, review
//!   (save, discard, save all unflagged, undo), progress and per-item events.
//! - `scan` turns what was dropped into entries: folders walked, photos hashed (SHA-256,
//!   streamed), other files listed as skipped with the reason.
//! - `store` is the SQL over `import_items` (migrations 0004 and 0005), run on the catalog thread;
//!   it writes the catalog's own tables only through `catalog::tx`.
//! - `shared` is the state the handle, the driver and the item tasks share: the user's mode, the
//!   hold, the gate, the send slots (`slots`: interactive items first), progress and events.
//! - `driver` is the task that claims items; `item` is one item's work: prepare → record the photo
//!   → call Gemini through the resilience stack with [`crate::resilience::SlotPolicy::Wait`] →
//!   write the result.
//! - `progress` is what the window's bar and the CLI's stderr line show.
//! - `phash` gives each prepared photo a difference hash for "looks like product X" hints.
//!
//! # States
//! ```text
//! queued ─▶ preparing ─▶ extracting ─▶ ready ─▶ saved
//!   ▲  ▲        │             │  │        │
//!   │  └────────┴─────────────┘  │        └──▶ skipped (discarded)
//!   │   crash / cancel / breaker │
//!   │   open / quota / bad key   └──▶ failed ──(retry failed)──▶ queued
//!   └── skipped (duplicate, forced re-extract)
//! ```
//!
//! # Invariants
//! - **Every state change is one `UPDATE … WHERE state = <expected>`** on the catalog thread; a
//!   worker whose item moved meanwhile changes nothing.
//! - **A result is written with its state**: the attempt (audit trail), the proposal and the flags
//!   in the transaction that marks the item `ready`; the product in the one that marks it `saved`.
//!   So a ready item always has its attempt and a saved item its product.
//! - **No transaction spans a network call**: the Gemini call happens between two catalog jobs.
//! - **Crash-resume**: opening the queue puts `preparing` and `extracting` items back to `queued`;
//!   `ready` ones keep their result and are never sent again. A kill at any moment loses nothing
//!   and sends an item at most once more (if it was in flight).
//! - **One engine**: every photo, dropped in the window, given to `extract` or imported in bulk,
//!   is an item here. Interactive items ([`ItemOrigin::Interactive`]) are claimed first and get
//!   the next free send slot, so a dropped photo never waits behind a bulk import.
//! - **One process works the queue**: [`ImportQueue::open`] takes an advisory lock on a file next
//!   to the catalog (released by the OS if the process dies). A second opener does not fail: it
//!   queues its items for the process that works the queue, follows their progress from the
//!   database, and takes over when that process lets go. Reading the queue ([`ImportStore`])
//!   needs no lock.
//! - **K calls in flight**: with a bulkhead of K slots, up to K + lookahead items are worked on at
//!   once (an item past its call, only writing the outcome, no longer counts) and K of them may
//!   be sent at a time; a sender waits for a slot instead of failing (`SlotPolicy::Wait`), so the
//!   bulkhead is full while items remain, and a pause or a hold stops the sending at once. Photos
//!   are prepared ahead (at most `prepare_concurrency` at a time); on a team catalog, not at the
//!   end of an import (fewer than 2·K queued), where another desktop's free slot takes them.
//! - **An open breaker pauses, it does not fail**: a `circuit_open` rejection puts the item back
//!   with its attempts unchanged and holds the queue until the breaker lets a probe through (its
//!   retry time, or a state change seen on its snapshot watch). A quota error waits the server's
//!   retry delay; a rejected key (or a missing model) stops the queue until Resume. Only the item's
//!   own faults (bad image, blocked, unreadable answer) fail it; service failures fail it only after
//!   `max_attempts_per_item`.
//! - **Memory stays flat**: rows hold paths and results, never images; a prepared photo lives only
//!   while its item is in flight; the thumbnail is stored in `photos`.
//! - **Time is passed in**: rows are stamped with the pipeline's clock.

mod batch;
pub mod config;
mod driver;
pub mod grouping;
mod item;
mod phash;
mod progress;
mod records;
mod scan;
mod shared;
mod slots;
mod spool;
mod store;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{broadcast, watch};

pub use batch::BatchOptions;
pub use config::{BatchConfig, ImportConfig, MAX_PHOTOS_PER_PRODUCT_LIMIT};
pub use grouping::{GroupBy, Grouping};
pub use phash::{dhash_jpeg, NEAR_DUPLICATE_MAX_DISTANCE};
pub use progress::{ImportProgress, ImportStatus, StateCounts};
pub use records::*;
pub use store::ImportStore;

use crate::catalog::{CatalogError, ProductRecord};
use crate::error::{Coded, ErrorCode, ErrorData};
use crate::pipeline::{Pipeline, SaveError};
use crate::product::Product;
use shared::{lock, Shared};
use store::SaveFilter;

/// How the queue works.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Work without being asked: on open (resuming an unfinished import) and whenever items are
    /// queued. Otherwise the queue waits for [`ImportQueue::resume`].
    pub autostart: bool,
    /// Items worked on beyond the bulkhead's K slots, so a prepared photo is waiting whenever a
    /// slot frees up. `None`: K (on a team catalog, 0 once fewer than 2·K items are queued).
    pub lookahead: Option<usize>,
    /// Photos prepared at once (decoding and resizing are CPU-bound).
    pub prepare_concurrency: usize,
    /// Service failures (after the stack's own retries) an item may have before it fails.
    pub max_attempts_per_item: u32,
    /// How long to wait on a quota error when the server gave no retry delay.
    pub default_quota_wait: Duration,
    /// Which items this process works.
    pub claims: ClaimScope,
    /// Every failure fails its item at once (an open breaker, a quota, a rejected key included),
    /// as a single call would: the CLI's `extract`, which prints a line per file and ends.
    /// Otherwise such failures pause, hold or stop the queue with the item waiting.
    pub fail_fast: bool,
    /// How long a prepared item may wait for one of the K send slots before it fails with
    /// `bulkhead_full`, without a call (as a single call waits `[bulkhead] max_wait_duration` for
    /// the bulkhead): the HTTP API's items, which answer 429 as the seed's bulkhead did. `None`:
    /// it waits its turn (the window, the CLI).
    pub send_wait: Option<Duration>,
    /// How often to look at what other processes changed in the queue (items they queued for this
    /// one to work; results of the items this one handed over), and whether the queue is free.
    pub follow_interval: Duration,
    /// Batch mode's chunks and polling.
    pub batch: BatchOptions,
    /// On a team catalog (a server's shared queue): how long an item this desktop claimed stays
    /// its own without a renewal (renewed every third of it while the desktop works). An item whose
    /// desktop died goes back to the queue after this (at once when that desktop was a process of
    /// this computer that is gone).
    pub lease: Duration,
    /// On a team catalog: a file whose lock makes the processes of one computer and data dir
    /// share one worker, as on a SQLite catalog: the one holding it (the window) works the shared
    /// queue, and another one (`extract`, `import` in a terminal) hands it its photos and follows
    /// their progress, then takes over once it is free. `None`: every process works the shared
    /// queue itself (ignored on SQLite, where the lock is always the catalog file's).
    pub worker_lock: Option<PathBuf>,
    /// What the message of a queue stopped by a catalog failure (a full disk, a lost server) says
    /// to do next, in the words of whoever reads it.
    pub stop_advice: StopAdvice,
    /// The free space kept on the catalog's disk: below it, the queue takes no more photos (see
    /// [`crate::disk`]); its `dir` is the catalog's folder unless set.
    pub disk: crate::disk::DiskCheck,
    /// Where answers paid for wait while the team catalog's server is away, so that a restart
    /// meanwhile loses none (see `spool`); `None`: they wait in memory only.
    pub spool_dir: Option<PathBuf>,
    /// Follow links in a dropped folder that lead outside it (`[import] follow_links_outside`);
    /// off: they are listed as skipped.
    pub follow_links_outside: bool,
}

/// What to do after the queue stopped for a catalog failure: the window has a Resume button, a
/// terminal does not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StopAdvice {
    /// The window's Resume button.
    #[default]
    Resume,
    /// A terminal's: run the same command again (the CLI's `import` and `extract`).
    RunAgain,
}

impl StopAdvice {
    /// What to do about a full disk, for the reader: the window's queue goes on by itself once
    /// there is room; a terminal's command ends, its photos queued.
    pub fn disk_text(self) -> &'static str {
        match self {
            Self::Resume => "Free some space: the import goes on by itself, and what was paid for is written then.",
            Self::RunAgain => "Free some space, then run the same command again: the photos stay queued.",
        }
    }

    /// The sentence that ends the stopped queue's message.
    pub fn text(self) -> &'static str {
        match self {
            Self::Resume => "Resume to try again.",
            Self::RunAgain => {
                "Fix that (free some disk space if the disk is full), then run the same command again: the photos \
                 stay queued."
            }
        }
    }
}

/// How long a desktop's claim on a shared queue's item holds without a renewal.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);

/// Which queued items a process works.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClaimScope {
    #[default]
    All,
    /// Only interactive items: `extract` works the photos it was given (and other interactive
    /// ones), never a bulk import it would have to abandon when it ends.
    Interactive,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            autostart: true,
            lookahead: None,
            prepare_concurrency: std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8),
            max_attempts_per_item: 3,
            default_quota_wait: Duration::from_secs(30),
            claims: ClaimScope::All,
            fail_fast: false,
            send_wait: None,
            follow_interval: Duration::from_millis(500),
            batch: BatchOptions::default(),
            lease: DEFAULT_LEASE,
            worker_lock: None,
            stop_advice: StopAdvice::Resume,
            disk: crate::disk::DiskCheck::default(),
            spool_dir: None,
            follow_links_outside: false,
        }
    }
}

/// How to queue files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnqueueOptions {
    /// Queue photos even when the same bytes are in the catalog or the queue (a re-extract).
    pub force: bool,
    /// Who asks: interactive items go first.
    pub origin: ItemOrigin,
    /// Through the Gemini Batch API (half price, answered within 24 hours; bulk imports only).
    /// Stored with each item, so the mode survives a restart.
    pub batch: bool,
    /// Which photos are one product (`[import]`); by default each photo is its own.
    pub grouping: Grouping,
}

impl EnqueueOptions {
    /// Photos a person dropped, added or named on the command line, waiting for their answer.
    pub fn interactive() -> Self {
        Self { force: false, origin: ItemOrigin::Interactive, batch: false, grouping: Grouping::NONE }
    }
}

/// Why a queue operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("Import item {0} does not exist; refresh the list.")]
    NotFound(ItemId),
    #[error(
        "Import item {id} has {max} photos already, the most one product may have (import.max_photos_per_product)."
    )]
    TooManyPhotos { id: ItemId, max: usize },
    #[error("Import item {id} is {state}, but this needs it {expected}; refresh the list and try again.")]
    WrongState { id: ItemId, state: ItemState, expected: &'static str },
    /// Review: the product is refused, with the invalid fields' flags.
    #[error(transparent)]
    Save(#[from] SaveError),
    #[error("Cannot lock the import queue ({}): {source}", .path.display())]
    Lock { path: PathBuf, source: std::io::Error },
    #[error("A background task ({what}) failed unexpectedly: {source}")]
    Task { what: &'static str, source: tokio::task::JoinError },
}

impl ImportError {
    /// The team catalog's server cannot be reached now; the reason (see
    /// [`CatalogError::server_away`]).
    pub fn server_away(&self) -> Option<&str> {
        match self {
            Self::Catalog(e) => e.server_away(),
            _ => None,
        }
    }
}

impl From<rusqlite::Error> for ImportError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Catalog(CatalogError::Sqlite(e))
    }
}

impl From<crate::catalog::db::DbError> for ImportError {
    fn from(e: crate::catalog::db::DbError) -> Self {
        Self::Catalog(e.into())
    }
}

impl crate::catalog::db::Contention for ImportError {
    fn is_contention(&self) -> bool {
        matches!(self, Self::Catalog(CatalogError::Contended))
    }
}

impl From<serde_json::Error> for ImportError {
    fn from(e: serde_json::Error) -> Self {
        Self::Catalog(CatalogError::Json(e))
    }
}

impl Coded for ImportError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::Catalog(e) => e.code(),
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::WrongState { .. } | Self::TooManyPhotos { .. } => ErrorCode::Conflict,
            Self::Save(e) => e.code(),
            Self::Lock { .. } | Self::Task { .. } => ErrorCode::Io,
        }
    }

    fn data(&self) -> Option<ErrorData> {
        match self {
            Self::Catalog(e) => e.data(),
            Self::Save(e) => e.data(),
            _ => None,
        }
    }
}

/// The import queue of one catalog, and the runner working it. Cheap to clone; the runner stops
/// (abruptly, like a crash: unfinished items are re-queued at the next open) when the last clone
/// is dropped. [`ImportQueue::shutdown`] stops it tidily.
#[derive(Clone)]
pub struct ImportQueue {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// The driver and the hash backfill while this process works the queue, or the follower
    /// while another one does; aborted on drop.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Held while this process works the queue: the OS releases it when the file closes or the
    /// process dies.
    lock: Mutex<Option<QueueLock>>,
    /// The lock's file: next to a SQLite catalog; on a server, [`ImportOptions::worker_lock`]
    /// (desktops share the server's queue under leases, the processes of one data dir one
    /// worker), or `None` when every process works the shared queue itself.
    lock_path: Option<PathBuf>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in lock(&self.tasks).iter() {
            task.abort();
        }
    }
}

impl std::fmt::Debug for ImportQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImportQueue").field("catalog", self.inner.shared.store.catalog()).finish_non_exhaustive()
    }
}

impl ImportQueue {
    /// Opens the queue of the pipeline's catalog. When no other process works it, this one does:
    /// it takes the queue lock, puts items left `preparing` or `extracting` by a previous run back
    /// to `queued` (crash-resume), and starts the driver (working at once when
    /// `options.autostart`). Otherwise it follows: [`ImportQueue::enqueue`] hands items to the
    /// process that works the queue, events and progress follow the database, and this one takes
    /// over when the queue is free. Needs a tokio runtime.
    ///
    /// On a team catalog (a PostgreSQL server) every desktop works the shared queue at once: there
    /// is no lock; each claims items under a lease it renews (see `store::claim`,
    /// `store::tend_leases`), and the items of a desktop that died go back to the queue when
    /// their lease runs out.
    pub async fn open(pipeline: Pipeline, mut options: ImportOptions) -> Result<ImportQueue, ImportError> {
        look_the_model_up(&pipeline);
        let catalog = pipeline.catalog().clone();
        // The disk whose free space is kept: the catalog file's, unless the caller chose one.
        if options.disk.dir.is_none() {
            options.disk.dir = catalog.file().and_then(Path::parent).map(Path::to_path_buf);
        }
        let lock_path = match catalog.file() {
            Some(file) => Some(QueueLock::path_for(file)),
            None => options.worker_lock.clone(),
        };
        let shared = Arc::new(Shared::new(ImportStore::new(catalog), pipeline, options, Vec::new()));
        let queue = ImportQueue {
            inner: Arc::new(Inner { shared, tasks: Mutex::new(Vec::new()), lock: Mutex::new(None), lock_path }),
        };
        if !queue.try_to_work().await? {
            tracing::info!("import: another process works this catalog's queue; items are handed to it");
            let counted = queue.shared().counted_costing(|_| Ok(())).await?;
            queue.shared().publish(&counted, 0);
            // Where things stand now: every change the worker makes from here on is followed.
            queue.shared().follow_others().await?;
            let follower = tokio::spawn(follow_until_free(Arc::downgrade(&queue.inner)));
            lock(&queue.inner.tasks).push(follower.abort_handle());
        }
        Ok(queue)
    }

    /// Takes the queue lock if it is free and starts working the queue; false when another
    /// process holds it.
    async fn try_to_work(&self) -> Result<bool, ImportError> {
        let queue_lock = match self.inner.lock_path.clone() {
            Some(path) => {
                let acquired = tokio::task::spawn_blocking(move || QueueLock::try_acquire(&path))
                    .await
                    .map_err(|source| ImportError::Task { what: "locking the import queue", source })??;
                let Some(queue_lock) = acquired else { return Ok(false) };
                Some(queue_lock)
            }
            None => None,
        };
        let shared = self.shared();
        let now = shared.now();
        let lease = shared.options.lease;
        let on_server = shared.store.catalog().server().is_some();
        // Crash-resume: on SQLite everything a previous run left in flight; on a server only what
        // a dead desktop left (a lease run out, or a process of this computer that is gone).
        let resumed = if on_server {
            shared.counted_costing(move |conn| store::tend_leases(conn, lease, &process_alive, now)).await?
        } else {
            shared.counted_costing(move |conn| store::requeue_unfinished(conn, now)).await?
        };
        if resumed.value > 0 {
            tracing::info!(items = resumed.value, "import: unfinished items from an earlier run are queued again");
        }
        let seed = shared.store.run(store::near_seed).await?;
        {
            let mut near = lock(&shared.near);
            for (photo, hash) in seed {
                near.insert(photo, hash);
            }
        }
        *lock(&self.inner.lock) = queue_lock;
        shared.working.store(true, std::sync::atomic::Ordering::SeqCst);
        lock(&shared.control).driver_alive = true;
        shared.publish(&resumed, 0);
        // Answers a previous run paid for and could not write (its server was away): written
        // before the driver claims anything (see `Shared::replaying`).
        shared.replaying.store(shared.options.spool_dir.is_some(), std::sync::atomic::Ordering::SeqCst);
        let replay = tokio::spawn(spool::replay(Arc::downgrade(shared)));
        lock(&self.inner.tasks).push(replay.abort_handle());
        let driver = tokio::spawn(driver::drive(shared.clone()));
        let backfill = tokio::spawn(driver::backfill_phashes(shared.clone()));
        if let Err(e) = batch::publish_batches(shared).await {
            tracing::warn!(error = %e, "import: could not read the batches");
        }
        let batches = tokio::spawn(batch::run(shared.clone()));
        lock(&self.inner.tasks).extend([driver.abort_handle(), backfill.abort_handle(), batches.abort_handle()]);
        if on_server {
            let leases = tokio::spawn(tend_leases(Arc::downgrade(shared)));
            lock(&self.inner.tasks).push(leases.abort_handle());
        }
        Ok(true)
    }

    /// True while this process works the queue; false while it hands its items to another.
    pub fn is_working(&self) -> bool {
        self.shared().working.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// Reading the queue.
    pub fn store(&self) -> &ImportStore {
        &self.shared().store
    }

    /// Counts, throughput, ETA and status, updated on every change.
    pub fn progress(&self) -> watch::Receiver<ImportProgress> {
        self.shared().progress.subscribe()
    }

    /// One event per item state change made by the runner or a single-item action. Bulk actions
    /// (enqueue, retry failed, clear done, save all, undo) send none; they bump
    /// [`ImportProgress::changes`]. A receiver that falls behind gets `Lagged`: refresh the list.
    pub fn subscribe(&self) -> broadcast::Receiver<ItemChanged> {
        self.shared().events.subscribe()
    }

    /// Uses `pipeline` from the next item on (Settings changed the key, the model or the stack).
    /// A pause for the old stack's open breaker ends; a stop for the key or the model (missing,
    /// rejected, unknown) ends when the new pipeline calls with another key, model or address;
    /// another stop waits for Resume.
    pub fn set_pipeline(&self, pipeline: Pipeline) {
        look_the_model_up(&pipeline);
        self.shared().set_pipeline(pipeline);
    }

    /// Queues files and folders (recursively): photos by content hash, everything else listed as
    /// skipped. Photos already in the catalog or the queue are skipped as duplicates unless
    /// `options.force`. Items are written in batches, and the runner starts on the first batch
    /// (when `autostart`) while the rest is still being read.
    pub async fn enqueue(&self, paths: Vec<PathBuf>, options: EnqueueOptions) -> Result<EnqueueReport, ImportError> {
        Ok(self.shared().enqueue(paths, options).await?.report)
    }

    /// [`ImportQueue::enqueue`], also saying which item stands for each file, in the order given
    /// (what the window's Extract view shows and `extract` waits for).
    pub async fn enqueue_files(&self, paths: Vec<PathBuf>, options: EnqueueOptions) -> Result<Enqueued, ImportError> {
        self.shared().enqueue(paths, options).await
    }

    /// Queues the photos of one catalog product again, in order, as one item (see
    /// `Shared::enqueue_product`): each photo's path and the SHA-256 the catalog knows it by.
    pub async fn enqueue_product(
        &self,
        photos: Vec<(crate::stored_path::StoredPath, String)>,
        options: EnqueueOptions,
    ) -> Result<Enqueued, ImportError> {
        self.shared().enqueue_product(photos, options).await
    }

    /// The interactive items not saved or discarded yet, oldest first: the reviews a person
    /// still owes, kept across restarts.
    pub async fn interactive_open(&self) -> Result<Vec<ImportRow>, ImportError> {
        self.store().interactive_open().await
    }

    /// Stops sending new calls; calls in flight finish. [`ImportQueue::resume`] goes on.
    pub fn pause(&self) {
        self.shared().pause();
    }

    /// Starts or continues: after a pause, a cancel, a stop (once the key is fixed) or a breaker
    /// or quota wait (trying again now).
    pub fn resume(&self) {
        self.shared().resume();
    }

    /// Stops now: calls in flight are abandoned and their items go back to `queued`, where they
    /// stay for later (Resume, or the next start). Batches Gemini is working on are cancelled
    /// (`batches/{id}:cancel`) and their photos queued again.
    pub async fn cancel(&self) -> Result<(), ImportError> {
        self.shared().cancel().await;
        batch::cancel_all(self.shared()).await
    }

    /// Stops working (calls in flight are abandoned, their items queued again), then the runner
    /// ends. Batches stay with Gemini: the next start goes on polling them. Other clones of this
    /// handle stop working.
    pub async fn shutdown(self) {
        // What the aborted work had in hand goes to the spool (`item::InHand`) for the next start
        // to write: marked as replaying already, so the cancel below starts no replay of its own
        // that would outlive this queue.
        self.shared().replaying.store(true, std::sync::atomic::Ordering::SeqCst);
        self.shared().cancel().await;
        for task in lock(&self.inner.tasks).iter() {
            task.abort();
        }
    }

    /// Waits until no item will move without the user: finished, stopped, or idle (see
    /// [`ImportProgress::is_settled`]); returns the progress then.
    pub async fn settled(&self) -> ImportProgress {
        let mut rx = self.progress();
        let settled = rx.wait_for(ImportProgress::is_settled).await.map(|p| p.clone());
        settled.unwrap_or_else(|_| self.shared().progress.borrow().clone())
    }

    /// Waits until the item is no longer waiting or in progress (ready, saved, failed or skipped)
    /// and returns it. While paused or held, that is until the queue goes on.
    pub async fn finished(&self, id: ItemId) -> Result<ImportItemDetail, ImportError> {
        let mut events = self.subscribe();
        loop {
            let detail = self.item(id).await?;
            if !detail.row.state.is_active() {
                return Ok(detail);
            }
            // Any change may be this item's; a receiver that lagged looks again.
            if let Err(broadcast::error::RecvError::Closed) = events.recv().await {
                return self.item(id).await;
            }
        }
    }

    /// Failed items back to the queue, with a fresh attempt count. Returns how many.
    pub async fn retry_failed(&self) -> Result<usize, ImportError> {
        let now = self.shared().now();
        let n = self.bulk(move |conn| store::retry_failed(conn, now)).await?;
        self.shared().kick();
        Ok(n)
    }

    /// Removes saved and skipped items from the queue (the catalog keeps photos and products).
    pub async fn clear_done(&self) -> Result<usize, ImportError> {
        self.bulk(store::clear_done).await
    }

    /// Extracts a duplicate (or discarded, or failed) item anyway.
    pub async fn force_extract(&self, id: ItemId) -> Result<(), ImportError> {
        let now = self.shared().now();
        self.shared().single(id, ItemState::Queued, move |conn| store::force(conn, id, now)).await?;
        self.shared().kick();
        Ok(())
    }

    /// A page of items in queue order (all states, or those in `states`).
    pub async fn items(
        &self,
        offset: u32,
        limit: u32,
        states: Option<Vec<ItemState>>,
    ) -> Result<ImportPage, ImportError> {
        self.store().items(offset, limit, states).await
    }

    /// One item with everything review needs.
    pub async fn item(&self, id: ItemId) -> Result<ImportItemDetail, ImportError> {
        self.store().item(id).await
    }

    /// Review's accept: saves `product` (validated like the review form: refused while a field is
    /// invalid) and marks the item saved, in one transaction. The item must be `ready`.
    pub async fn save_item(&self, id: ItemId, product: Product) -> Result<ProductRecord, ImportError> {
        let now = self.shared().now();
        self.shared().single(id, ItemState::Saved, move |conn| store::save_item(conn, id, product.clone(), now)).await
    }

    /// Review's split and merge: photo `index` (0-based, in the order sent) of item `from` moves
    /// to item `to` (after its photos), or to a product of its own (`to` = `None`). Both must be
    /// queued, ready or failed. A settled item whose photos changed is `failed` with `regrouped`
    /// and is extracted again only when asked ([`ImportQueue::force_extract`]); a queued one sends
    /// its new photos. An item left without photos is skipped (its photo was merged). Returns the
    /// items changed, with their states, the new one last.
    pub async fn move_photo(
        &self,
        from: ItemId,
        index: usize,
        to: Option<ItemId>,
    ) -> Result<Vec<(ItemId, ItemState)>, ImportError> {
        let shared = self.shared();
        let now = shared.now();
        let max = MAX_PHOTOS_PER_PRODUCT_LIMIT;
        let counted = shared.counted(move |conn| store::move_photo(conn, from, index, to, max, now)).await?;
        for (id, state) in &counted.value {
            shared.item_changed(*id, *state, &counted);
        }
        if counted.value.iter().any(|(_, state)| *state == ItemState::Queued) {
            shared.kick();
        }
        Ok(counted.value)
    }

    /// Review's discard: the item is skipped (`discarded`); nothing is saved.
    pub async fn discard_item(&self, id: ItemId) -> Result<(), ImportError> {
        let now = self.shared().now();
        self.shared().single(id, ItemState::Skipped, move |conn| store::discard(conn, id, now)).await
    }

    /// "Save all ready": every ready item with no flagged field, no near-duplicate hint and no
    /// product for its photo yet, saved as proposed. Returns the items saved, for
    /// [`ImportQueue::undo_save_all`].
    pub async fn save_all_ready_unflagged(&self) -> Result<Vec<ItemId>, ImportError> {
        self.save_ready(SaveFilter::Unflagged).await
    }

    /// Every ready item whose proposal has no invalid field, saved as proposed (the CLI's
    /// `--save`; uncertain fields and near-duplicates included). Returns the items saved.
    pub async fn save_all_ready_valid(&self) -> Result<Vec<ItemId>, ImportError> {
        self.save_ready(SaveFilter::Valid).await
    }

    async fn save_ready(&self, filter: SaveFilter) -> Result<Vec<ItemId>, ImportError> {
        const BATCH: u32 = 200;
        let mut saved = Vec::new();
        let mut after = 0;
        loop {
            let now = self.shared().now();
            let batch = self.bulk(move |conn| store::save_ready(conn, filter, after, BATCH, now)).await?;
            saved.extend(batch.saved);
            match batch.last {
                Some(last) => after = last,
                None => return Ok(saved),
            }
        }
    }

    /// Undoes a "save all": each item's product is removed (only if that save created it and it
    /// is unchanged since) and the item is ready again. The others are reported as kept.
    pub async fn undo_save_all(&self, ids: Vec<ItemId>) -> Result<UndoReport, ImportError> {
        let now = self.shared().now();
        self.bulk(move |conn| store::undo_saves(conn, &ids, now)).await
    }

    /// Runs a bulk change and publishes the counts (no per-item events).
    async fn bulk<T, F>(&self, f: F) -> Result<T, ImportError>
    where
        T: Send + 'static,
        F: FnMut(&crate::catalog::db::Db<'_>) -> Result<T, ImportError> + Send + 'static,
    {
        let counted = self.shared().counted_costing(f).await?;
        self.shared().publish(&counted, 1);
        Ok(counted.value)
    }
}

/// Exclusive use of a catalog's import queue by one process.
struct QueueLock {
    /// The locked file. The lock is never released explicitly: closing the file (dropping this)
    /// or the process ending releases it.
    _file: fd_lock::RwLock<std::fs::File>,
}

impl QueueLock {
    fn path_for(catalog: &Path) -> PathBuf {
        let mut name = catalog.as_os_str().to_owned();
        name.push(".import-lock");
        PathBuf::from(name)
    }

    /// The lock, or `None` when another process holds it.
    fn try_acquire(path: &Path) -> Result<Option<QueueLock>, ImportError> {
        let lock_error = |source| ImportError::Lock { path: path.to_path_buf(), source };
        let file =
            std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(lock_error)?;
        let mut lock = fd_lock::RwLock::new(file);
        match lock.try_write() {
            // Keep the lock for as long as the file is open: forgetting the guard skips its unlock.
            Ok(guard) => std::mem::forget(guard),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(lock_error(e)),
        }
        Ok(Some(QueueLock { _file: lock }))
    }
}

/// On a shared queue: renews this desktop's leases every third of a lease, and puts the items of
/// dead desktops back in the queue (then wakes the driver); a server that does not answer holds
/// the queue ([`Shared::hold_for_server`]). Holds the queue weakly.
async fn tend_leases(shared: Weak<Shared>) {
    loop {
        let Some(lease) = shared.upgrade().map(|s| s.options.lease) else { return };
        tokio::time::sleep((lease / 3).max(Duration::from_millis(50))).await;
        let Some(shared) = shared.upgrade() else { return };
        let now = shared.now();
        match shared.counted(move |conn| store::tend_leases(conn, lease, &process_alive, now)).await {
            Ok(counted) if counted.value > 0 => {
                tracing::info!(items = counted.value, "import: items of a desktop that is gone are queued again");
                shared.publish(&counted, counted.value as u64);
                shared.kick();
            }
            Ok(_) => {}
            // The server is away: the queue waits for it (and says so) even while every slot is
            // busy with a long call and nothing else would have noticed.
            Err(e) if e.server_away().is_some() => shared.hold_for_server(e.server_away().unwrap_or_default()),
            Err(e) => tracing::warn!(error = %e, "import: could not renew this desktop's leases"),
        }
    }
}

/// Whether process `pid` of this computer still runs (a desktop's lease names its process).
/// Where the OS does not tell, it is taken as running: its items wait for their lease instead.
fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// While another process works the queue: follows its changes and takes over once it lets go.
/// Holds the queue only weakly, so dropping the last handle ends it.
async fn follow_until_free(inner: Weak<Inner>) {
    loop {
        let Some(interval) = inner.upgrade().map(|i| i.shared.options.follow_interval) else { return };
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else { return };
        let queue = ImportQueue { inner };
        match queue.try_to_work().await {
            Ok(true) => {
                tracing::info!("import: the queue is free; this process works it now");
                return;
            }
            Ok(false) => {
                if let Err(e) = queue.shared().follow_others().await {
                    tracing::warn!(error = %e, "import: could not follow the queue");
                }
            }
            Err(e) => tracing::warn!(error = %e, "import: could not take the queue over"),
        }
    }
}

/// An alias model (`gemini-flash-latest`) is looked up once per client before its first call
/// (the request's shape depends on its family): done as the queue opens (or gets a new pipeline),
/// in the background, so the first photo's answer does not wait for a `models.get` round trip.
/// Without a key nothing is asked; a model named by its id needs no lookup.
fn look_the_model_up(pipeline: &Pipeline) {
    let gemini = pipeline.gemini().clone();
    tokio::spawn(async move { gemini.model_family().await });
}
