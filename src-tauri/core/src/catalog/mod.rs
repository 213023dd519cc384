//! The catalog: a SQLite file holding photos, every extraction attempt (the audit trail) and the
//! products reviewers saved, each with both Gemini's proposal and the saved version.
//!
//! # Layout
//! - [`Catalog`] (this file) is the async API, a cheap `Clone` handle.
//! - `db_thread` owns the one [`rusqlite::Connection`] on a dedicated OS thread and runs jobs.
//! - `queries` holds the SQL as plain synchronous functions.
//! - [`migrations`] applies the versioned schema (`migrations/NNNN_*.sql`, `PRAGMA user_version`).
//! - [`records`] defines inputs and the DTOs the UI sees (re-exported here).
//! - [`export`] streams the saved products as Shopify CSV, flat CSV, JSON or JSON Lines
//!   ([`Catalog::export`]).
//!
//! Search: `products_fts` (FTS5, migration 0002) indexes each product's saved name, brand,
//! category, description and attributes; triggers on `products` keep it in sync, so every save
//! updates the index in the save's own transaction. See [`Catalog::search_products`].
//!
//! # Invariants
//! - **Only the catalog thread touches SQLite.** Async methods box a synchronous closure, send it
//!   over an unbounded std channel (never blocks) and await a tokio oneshot (never blocks), so no
//!   tokio worker and no main thread ever waits on disk or on a lock.
//! - **No transaction spans a network call.** Every job is one synchronous closure that runs
//!   to completion on the catalog thread and opens at most one short transaction; a closure cannot
//!   `.await`, so a Gemini call cannot happen inside one. The pipeline records the attempt *after*
//!   the call returns. Between jobs the connection is always in autocommit mode: a job that
//!   panics or forgets to commit is rolled back before the next job runs.
//! - **A panic in a job does not kill the catalog.** It surfaces as [`CatalogError::Panicked`];
//!   later calls work.
//! - **References are checked by the API** (`NotFound`, `Invalid`) and again by SQLite
//!   (`foreign_keys = ON`, CHECK constraints, STRICT tables).
//! - **Time is passed in** (unix ms arguments); nothing here reads the clock.
//! - **No secrets**: the API key is never stored here.
//!
//! Dropping a method's future does not cancel its job: once sent, it runs (and commits). The
//! thread finishes the queued jobs and closes the connection when the last handle is dropped.
//!
//! Connection settings: `journal_mode = WAL`, `synchronous = NORMAL`, `foreign_keys = ON`,
//! `busy_timeout = 5 s`. The file lives in the platform data dir ([`Catalog::path_in`] with
//! [`crate::config::data_dir`]).
//!
//! The bulk-import queue's table (`import_items`, migration 0003) belongs to [`crate::import`],
//! which runs its SQL through [`Catalog::with_connection`] and writes an attempt or a product in
//! its own transaction through `queries::record_attempt_in` / `queries::save_product_in`.
//!
//! Planned, and designed for: per-product revisions with optimistic concurrency (`products.revision`
//! exists now).

mod db_thread;
mod error;
pub mod export;
pub mod migrations;
pub(crate) mod queries;
pub mod records;

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rusqlite::Connection;

pub use error::CatalogError;
pub use export::{ExportError, ExportFormat, ExportSummary, ExportedProduct};
pub use migrations::SCHEMA_VERSION;
pub use records::*;

/// The database file's name inside the data dir.
pub const FILE_NAME: &str = "catalog.sqlite3";

/// How long a statement waits for a lock held by another connection (another process, a backup).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A handle to the catalog. Cloning is cheap and every clone talks to the same thread.
#[derive(Clone)]
pub struct Catalog {
    shared: Arc<Shared>,
}

struct Shared {
    /// Where jobs go. The catalog thread ends when the last sender, held here, is dropped.
    jobs: mpsc::Sender<db_thread::Job>,
    /// The database file, for diagnostics.
    path: PathBuf,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("path", &self.shared.path).finish()
    }
}

impl Catalog {
    /// The catalog file inside a data dir (see [`crate::config::data_dir`]).
    pub fn path_in(data_dir: &Path) -> PathBuf {
        data_dir.join(FILE_NAME)
    }

    /// Opens (or creates) the catalog at `path`, creating parent directories, configures the
    /// connection, applies pending migrations and starts the catalog thread.
    ///
    /// This blocks on disk I/O: call it at startup or from `spawn_blocking`, not on a tokio worker.
    pub fn open(path: &Path) -> Result<Catalog, CatalogError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| CatalogError::CreateDir { path: dir.into(), source })?;
        }
        let open_error = |source| CatalogError::Open { path: path.into(), source };
        let mut conn = Connection::open(path).map_err(open_error)?;
        configure(&conn).map_err(open_error)?;
        let applied = migrations::apply(&mut conn, migrations::MIGRATIONS)?;
        tracing::info!(path = %path.display(), ?applied, version = SCHEMA_VERSION, "catalog open");
        let jobs = db_thread::spawn(conn).map_err(CatalogError::Spawn)?;
        Ok(Catalog { shared: Arc::new(Shared { jobs, path: path.into() }) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The file's schema version (`PRAGMA user_version`); [`SCHEMA_VERSION`] once open.
    pub async fn schema_version(&self) -> Result<u32, CatalogError> {
        self.run(|conn| Ok(migrations::schema_version(conn)?)).await
    }

    /// Records a photo, or, if the same bytes (SHA-256) were recorded before, returns that photo
    /// and updates where it was last seen.
    pub async fn record_photo(&self, photo: NewPhoto) -> Result<PhotoId, CatalogError> {
        self.run(move |conn| queries::record_photo(conn, &photo)).await
    }

    /// Appends an attempt to the audit trail. `NotFound` if the photo does not exist.
    pub async fn record_attempt(&self, attempt: NewAttempt) -> Result<AttemptId, CatalogError> {
        self.run(move |conn| queries::record_attempt(conn, &attempt)).await
    }

    /// The photo's attempts, oldest first.
    pub async fn attempts(&self, photo: PhotoId) -> Result<Vec<AttemptRecord>, CatalogError> {
        self.run(move |conn| queries::attempts(conn, photo)).await
    }

    /// Saves the reviewer's product for a photo, in one transaction.
    ///
    /// The first save creates the product (revision 1) with the attempt's proposal copied next to
    /// the saved version; later saves of the same photo update it (revision + 1), so a photo never
    /// has two products. A later save with `attempt_id: None` keeps the stored proposal.
    ///
    /// Refused: a product with invalid fields (`Invalid`, naming them), an attempt of another
    /// photo (`Invalid`), a missing photo or attempt (`NotFound`).
    pub async fn save_product(&self, save: SaveProduct) -> Result<ProductRecord, CatalogError> {
        self.run(move |conn| queries::save_product(conn, &save)).await
    }

    /// Products, most recently updated first.
    pub async fn list_products(&self, offset: u32, limit: u32) -> Result<Vec<ProductSummary>, CatalogError> {
        self.run(move |conn| queries::list_products(conn, offset, limit)).await
    }

    /// Products matching the user's text, best match first (name matches above brand, category,
    /// description and attribute matches). Every whitespace-separated term must match the start
    /// of a word, case and diacritics ignored ("gran" and "GRÀN" find "Granola", "müsli" finds
    /// "Musli"). The text is never FTS5 syntax: quotes, `AND`, `*`, `(`, `-`, `:` are plain
    /// characters. A query without letters or digits lists the products like [`Self::list_products`].
    pub async fn search_products(
        &self,
        query: &str,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<ProductSummary>, CatalogError> {
        let query = query.to_owned();
        self.run(move |conn| queries::search_products(conn, &query, offset, limit)).await
    }

    /// One product; `NotFound` if it does not exist.
    pub async fn get_product(&self, id: ProductId) -> Result<ProductRecord, CatalogError> {
        self.run(move |conn| queries::get_product(conn, id)).await
    }

    /// The product saved for a photo, if any.
    pub async fn product_for_photo(&self, photo: PhotoId) -> Result<Option<ProductId>, CatalogError> {
        self.run(move |conn| queries::product_for_photo(conn, photo)).await
    }

    /// How many products the catalog holds.
    pub async fn count_products(&self) -> Result<u64, CatalogError> {
        self.run(|conn| queries::count_products(conn)).await
    }

    /// Runs `f` with the connection on the catalog thread: for diagnostics (`PRAGMA
    /// integrity_check`), maintenance and tests. Prefer the typed methods. `f` must be short; a
    /// transaction it leaves open is rolled back.
    pub async fn with_connection<R, F>(&self, f: F) -> Result<R, CatalogError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, CatalogError> + Send + 'static,
    {
        self.run(f).await
    }

    async fn run<R, F>(&self, f: F) -> Result<R, CatalogError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, CatalogError> + Send + 'static,
    {
        let (job, reply) = db_thread::job(f);
        self.shared.jobs.send(job).map_err(|_| CatalogError::Closed)?;
        reply.await.map_err(|_| CatalogError::Closed)?
    }
}

/// Per-connection settings; `journal_mode = WAL` also persists in the file.
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        // E.g. a network file system without shared memory; correct, only slower under contention.
        tracing::warn!(%mode, "the catalog could not switch to WAL");
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}
