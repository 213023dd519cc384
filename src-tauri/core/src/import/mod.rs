//! Bulk import: a queue of photos in SQLite, worked through by the same pipeline steps as a single
//! drop, as fast as the Gemini bulkhead allows, surviving crashes.
//!
//! # A tour
//! - [`ImportQueue`] (this file) is the handle the window and the CLI hold: enqueue, controls
//!   (pause, resume, cancel, retry failed, clear done, force a re-extract), listing, review
//!   (save, discard, save all unflagged, undo), progress and per-item events.
//! - `scan` turns what was dropped into entries: folders walked, photos hashed (SHA-256,
//!   streamed), other files listed as skipped with the reason.
//! - `store` is the SQL over `import_items` (migration 0003), run on the catalog thread.
//! - `runner` is the driver task and one task per item in flight: prepare → record the photo →
//!   call Gemini through the resilience stack with [`crate::resilience::SlotPolicy::Wait`] → write the result.
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
//! - **One process works the queue**: [`ImportQueue::open`] takes an advisory lock on a file next
//!   to the catalog (released by the OS if the process dies); a second opener gets
//!   [`ImportError::Busy`]. Reading the queue ([`ImportStore`]) needs no lock.
//! - **K calls in flight**: with a bulkhead of K slots, up to K + lookahead items are worked on at
//!   once and K of them may be sent at a time; a sender waits for a slot instead of failing
//!   (`SlotPolicy::Wait`), so the bulkhead is full while items remain, and a pause or a hold stops
//!   the sending at once. Photos are prepared ahead (at most `prepare_concurrency` at a time).
//! - **An open breaker pauses, it does not fail**: a `circuit_open` rejection puts the item back
//!   with its attempts unchanged and holds the queue until the breaker lets a probe through (its
//!   retry time, or a state change seen on its snapshot watch). A quota error waits the server's
//!   retry delay; a rejected key (or a missing model) stops the queue until Resume. Only the item's
//!   own faults (bad image, blocked, unreadable answer) fail it; service failures fail it only after
//!   `max_attempts_per_item`.
//! - **Memory stays flat**: rows hold paths and results, never images; a prepared photo lives only
//!   while its item is in flight; the thumbnail is stored in `photos`.
//! - **Time is passed in**: rows are stamped with the pipeline's clock.

mod phash;
mod progress;
mod records;
mod runner;
mod scan;
mod store;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

pub use phash::{dhash_jpeg, NEAR_DUPLICATE_MAX_DISTANCE};
pub use progress::{ImportProgress, ImportStatus, StateCounts};
pub use records::*;
pub use store::ImportStore;

use crate::catalog::{CatalogError, ProductRecord};
use crate::error::{Coded, ErrorCode, ErrorData};
use crate::pipeline::{Pipeline, SaveError};
use crate::product::Product;
use runner::Shared;
use store::SaveFilter;

/// How the queue works.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Work without being asked: on open (resuming an unfinished import) and whenever items are
    /// queued. Otherwise the queue waits for [`ImportQueue::resume`].
    pub autostart: bool,
    /// Items worked on beyond the bulkhead's K slots, so a prepared photo is waiting whenever a
    /// slot frees up. `None`: K.
    pub lookahead: Option<usize>,
    /// Photos prepared at once (decoding and resizing are CPU-bound).
    pub prepare_concurrency: usize,
    /// Service failures (after the stack's own retries) an item may have before it fails.
    pub max_attempts_per_item: u32,
    /// How long to wait on a quota error when the server gave no retry delay.
    pub default_quota_wait: Duration,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            autostart: true,
            lookahead: None,
            prepare_concurrency: std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8),
            max_attempts_per_item: 3,
            default_quota_wait: Duration::from_secs(30),
        }
    }
}

/// How to queue files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnqueueOptions {
    /// Queue photos even when the same bytes are in the catalog or the queue (a re-extract).
    pub force: bool,
}

/// Why a queue operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("Import item {0} does not exist; refresh the list.")]
    NotFound(ItemId),
    #[error("Import item {id} is {state}, but this needs it {expected}; refresh the list and try again.")]
    WrongState { id: ItemId, state: ItemState, expected: &'static str },
    /// Review: the product is refused, with the invalid fields' flags.
    #[error(transparent)]
    Save(#[from] SaveError),
    #[error("The import queue is in use by another product-extractor (the window, or an import on the command line); finish or close that one first.")]
    Busy { lock: PathBuf },
    #[error("Cannot lock the import queue ({}): {source}", .path.display())]
    Lock { path: PathBuf, source: std::io::Error },
    #[error("Listing the files to import failed unexpectedly ({0}).")]
    Scan(String),
}

impl From<rusqlite::Error> for ImportError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Catalog(CatalogError::Sqlite(e))
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
            Self::WrongState { .. } | Self::Busy { .. } => ErrorCode::Conflict,
            Self::Save(e) => e.code(),
            Self::Lock { .. } | Self::Scan(_) => ErrorCode::Io,
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
    /// The driver and the hash backfill; aborted on drop.
    tasks: Vec<tokio::task::AbortHandle>,
    /// Held while this handle lives: the OS releases it when the file closes or the process dies.
    _lock: QueueLock,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in &self.tasks {
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
    /// Opens the queue of the pipeline's catalog: takes the queue lock, puts items left
    /// `preparing` or `extracting` by a previous run back to `queued` (crash-resume), and starts
    /// the runner (working at once when `options.autostart`). Needs a tokio runtime.
    pub async fn open(pipeline: Pipeline, options: ImportOptions) -> Result<ImportQueue, ImportError> {
        let catalog = pipeline.catalog().clone();
        let lock_path = QueueLock::path_for(catalog.path());
        let lock = tokio::task::spawn_blocking(move || QueueLock::acquire(&lock_path))
            .await
            .map_err(|e| ImportError::Scan(e.to_string()))??;
        let store = ImportStore::new(catalog);
        let now = (pipeline.clock())();
        let resumed = store.counted(move |conn| store::requeue_unfinished(conn, now)).await?;
        if resumed.value > 0 {
            tracing::info!(items = resumed.value, "import: unfinished items from an earlier run are queued again");
        }
        let seed = store.run(store::near_seed).await?;
        let shared = Arc::new(Shared::new(store, pipeline, options, seed));
        shared.publish(&resumed, 0);
        let driver = tokio::spawn(runner::drive(shared.clone()));
        let backfill = tokio::spawn(runner::backfill_phashes(shared.clone()));
        Ok(ImportQueue {
            inner: Arc::new(Inner { shared, tasks: vec![driver.abort_handle(), backfill.abort_handle()], _lock: lock }),
        })
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
    /// A pause for the old stack's open breaker ends; a stop (e.g. for the key) waits for Resume.
    pub fn set_pipeline(&self, pipeline: Pipeline) {
        self.shared().set_pipeline(pipeline);
    }

    /// Queues files and folders (recursively): photos by content hash, everything else listed as
    /// skipped. Photos already in the catalog or the queue are skipped as duplicates unless
    /// `options.force`. Items are written in batches, and the runner starts on the first batch
    /// (when `autostart`) while the rest is still being read.
    pub async fn enqueue(&self, paths: Vec<PathBuf>, options: EnqueueOptions) -> Result<EnqueueReport, ImportError> {
        self.shared().enqueue(paths, options.force).await
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
    /// stay for later (Resume, or the next start).
    pub async fn cancel(&self) {
        self.shared().cancel().await;
    }

    /// [`ImportQueue::cancel`], then the runner ends. Other clones of this handle stop working.
    pub async fn shutdown(self) {
        self.cancel().await;
        for task in &self.inner.tasks {
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

    /// The item's photo thumbnail (`data:image/jpeg;base64,…`), once prepared.
    pub async fn thumbnail(&self, id: ItemId) -> Result<Option<String>, ImportError> {
        self.store().thumbnail(id).await
    }

    /// Review's accept: saves `product` (validated like the review form: refused while a field is
    /// invalid) and marks the item saved, in one transaction. The item must be `ready`.
    pub async fn save_item(&self, id: ItemId, product: Product) -> Result<ProductRecord, ImportError> {
        let now = self.shared().now();
        self.shared().single(id, ItemState::Saved, move |conn| store::save_item(conn, id, product, now)).await
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
        F: FnOnce(&mut rusqlite::Connection) -> Result<T, ImportError> + Send + 'static,
    {
        let counted = self.shared().counted(f).await?;
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

    fn acquire(path: &Path) -> Result<QueueLock, ImportError> {
        let lock_error = |source| ImportError::Lock { path: path.to_path_buf(), source };
        let file =
            std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(lock_error)?;
        let mut lock = fd_lock::RwLock::new(file);
        match lock.try_write() {
            // Keep the lock for as long as the file is open: forgetting the guard skips its unlock.
            Ok(guard) => std::mem::forget(guard),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(ImportError::Busy { lock: path.to_path_buf() })
            }
            Err(e) => return Err(lock_error(e)),
        }
        Ok(QueueLock { _file: lock })
    }
}
