//! The catalog: photos, every extraction attempt (the audit trail, with every billed token), the
//! products reviewers saved (each with Gemini's proposal, the saved version and every earlier
//! saved version, its revisions) and the import queue's rows (the one engine's, see
//! [`crate::import`]). It lives in a SQLite file on this computer, or on a team's PostgreSQL
//! server shared by several desktops (`server*` modules, the same rules over the same schema).
//!
//! # Layout
//! - [`Catalog`] (this file) is the async API, a cheap `Clone` handle over either backend.
//! - `db` is the one seam every read and write goes through once for both backends (`Db`,
//!   `DbRow`): photos, attempts, products and their revisions, facets, counts, exports and the
//!   import queue. What each engine does its own way stays beside it, each behind one `Catalog`
//!   method: the full-text search and its ranking (`listing` on SQLite, `server_listing` on a
//!   server), the schema and its migrations (`migrations`, `server`), connections (`db_thread`,
//!   `server_connect`), backups (SQLite's file) and live changes (`server_changes`).
//! - `db_thread` owns the one [`rusqlite::Connection`] on a dedicated OS thread and runs jobs.
//! - `queries` holds the SQL of photos, attempts and saving, as plain synchronous functions;
//!   `listing` the catalog table ([`Catalog::query_products`], search) and its facets; `revisions`
//!   editing (optimistic concurrency, history, soft delete, duplicates); `backup` backups and
//!   restores with SQLite's online backup API; `columns` the column conversions they share
//!   (it uses none of them).
//! - [`migrations`] applies the versioned schema (`migrations/NNNN_*.sql`, `PRAGMA user_version`).
//! - [`records`] defines inputs and the DTOs the UI sees (re-exported here).
//! - `usage` sums what the attempts cost (per day and model, per photo, per time range) and
//!   measures the average call an estimate starts from.
//! - [`export`] streams the saved products as Shopify CSV, flat CSV, JSON or JSON Lines
//!   ([`Catalog::export`]).
//!
//! Search: `products_fts` (FTS5, migration 0002) indexes each live product's saved name, brand,
//! category, description and attributes; triggers on `products` keep it in sync, so every save
//! updates the index in the save's own transaction. Since 0003 a deleted product leaves the
//! index (and an undeleted one returns), so search never sees it. See [`Catalog::search_products`].
//!
//! Revisions (migration 0003): `products.revision` starts at 1 and grows with every new saved
//! version; `product_revisions` keeps each one (who, when, why — [`RevisionSource`] — and the
//! proposal in force). An edit names the revision it started from and is refused with
//! [`CatalogError::Conflict`] if someone saved in between ([`Catalog::update_product`]).
//! Deleting is soft (`deleted_at`): a deleted product is hidden from lists, search, counts and
//! exports and keeps its history until it is undeleted. A duplicate shares its original's photo;
//! a photo has at most one extracted (non-duplicate) product.
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
//! - **Every saved version is a revision.** Each write of `saved_json` bumps `revision` and
//!   inserts the `product_revisions` row in the same transaction (a trigger refuses a new
//!   `saved_json` without a new revision).
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
//! `busy_timeout = 5 s`. No `ANALYZE` / `PRAGMA optimize`: every listing query is written for one
//! index that SQLite's default planning picks (`listing`'s tests check the plans), and statistics
//! taken while the catalog was young made it worse, not better (measured: with `optimize` run on
//! a new catalog, saving the first 20,000 products took 8× longer, and more as it grew). The file lives in the platform data dir ([`Catalog::path_in`] with
//! [`crate::config::data_dir`]).
//!
//! The bulk-import queue's table (`import_items`, migration 0004) belongs to [`crate::import`],
//! which runs its SQL through [`Catalog::with_connection`] and writes an attempt or a product in
//! its own transaction through `queries::record_attempt_in` / `queries::save_product_in`.

mod backup;
mod breakers;
mod columns;
pub mod copy;
pub(crate) mod db;
mod db_thread;
pub mod desktop_key;
mod error;
pub mod export;
mod listing;
pub mod migrations;
pub(crate) mod queries;
pub mod records;
mod revisions;
pub mod server;
pub mod server_changes;
mod server_connect;
mod server_listing;
pub(crate) mod tx;
mod usage;

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rusqlite::Connection;

pub use backup::SAFETY_BACKUP_DIR;
pub use error::CatalogError;
pub use export::{ExportError, ExportFormat, ExportSummary, ExportedProduct};
pub use listing::RANKED_MATCHES;
pub use migrations::{MigrationStep, SCHEMA_VERSION};
pub use records::*;
pub use usage::{CostTotal, MeasuredCall, UsageDay, MEASURED_CALLS};

/// Who is saving, for `updated_by` and the revision history: the OS account name, else the
/// `USER` or `USERNAME` variable, else "unknown".
pub fn local_user() -> String {
    // The OS account first (USER is often unset for apps started by a launcher or a driver).
    whoami::username()
        .ok()
        .into_iter()
        .chain(["USER", "USERNAME"].into_iter().filter_map(|name| std::env::var(name).ok()))
        .map(|user| user.trim().to_string())
        .find(|user| !user.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// This computer's host name, recorded with every photo's path (a team catalog holds paths from
/// many desktops); `None` when the OS does not say.
pub fn local_host() -> Option<String> {
    static HOST: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    HOST.get_or_init(|| whoami::hostname().ok().map(|h| h.trim().to_string()).filter(|h| !h.is_empty())).clone()
}

/// Whether `text` is a photo's hash as the catalog keeps it: 64 lowercase hexadecimal digits
/// (SHA-256 of the file's bytes).
pub fn is_photo_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The database file's name inside the data dir.
pub const FILE_NAME: &str = "catalog.sqlite3";

/// How long a statement waits for a lock held by another connection (another process, a backup).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A handle to the catalog: a SQLite file (the default) or a team catalog on a PostgreSQL server
/// (issue 13). Cloning is cheap and every clone talks to the same thread or pool. The methods are
/// the same for both; the SQLite file's own (backup, restore, [`Catalog::with_connection`]) return
/// [`CatalogError::ServerNotSupported`] on a server.
#[derive(Clone)]
pub struct Catalog {
    shared: Arc<Shared>,
}

enum Shared {
    Local {
        /// Where jobs go. The catalog thread ends when the last sender, held here, is dropped.
        jobs: mpsc::Sender<db_thread::Job>,
        /// The database file, for diagnostics.
        path: PathBuf,
    },
    Server(Box<server::ServerCatalog>),
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("at", &self.location()).finish()
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
        Self::open_with(path, &mut |_| {})
    }

    /// [`Catalog::open`], telling `on_step` before each pending migration runs (see
    /// [`migrations::MigrationStep`]), so a long upgrade can show its progress.
    pub fn open_with(
        path: &Path,
        on_step: &mut dyn FnMut(&migrations::MigrationStep),
    ) -> Result<Catalog, CatalogError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::files::create_private_dir(dir)
                .map_err(|source| CatalogError::CreateDir { path: dir.into(), source })?;
        }
        // Only this user reads the catalog: the file 0600 before SQLite opens it (its -wal and
        // -shm take its mode).
        crate::files::private_file(path).map_err(|source| CatalogError::File {
            action: "create the catalog",
            path: path.into(),
            source,
        })?;
        let open_error = |source| CatalogError::Open { path: path.into(), source };
        let mut conn = Connection::open(path).map_err(open_error)?;
        configure(&conn).map_err(open_error)?;
        let applied = migrations::apply_with(&mut conn, migrations::MIGRATIONS, on_step)?;
        if !applied.is_empty() {
            // A migration that rewrote a large catalog leaves its pages in the WAL (hundreds of MB
            // at 100,000 products): fold them into the file now, behind the progress window, so
            // the next start does not have to read them all back.
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(open_error)?;
        }
        tracing::info!(path = %path.display(), ?applied, version = SCHEMA_VERSION, "catalog open");
        let jobs = db_thread::spawn(conn).map_err(CatalogError::Spawn)?;
        Ok(Catalog { shared: Arc::new(Shared::Local { jobs, path: path.into() }) })
    }

    /// Opens the catalog at `url`: a SQLite file as [`Catalog::open_with`] does (on the blocking
    /// pool), or a server catalog, connected and migrated ([`server::ServerCatalog::migrate`],
    /// once under an advisory lock whatever the number of desktops starting). `env` and `home`
    /// are where the server's password may be (`PGPASSWORD`, `~/.pgpass`).
    pub async fn open_url(url: &server::CatalogUrl, env: server::EnvFn<'_>) -> Result<Catalog, CatalogError> {
        let home = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
        Self::open_url_with(url, env, home.as_deref()).await
    }

    /// [`Catalog::open_url`] with the home directory (for `~/.pgpass`) given.
    pub async fn open_url_with(
        url: &server::CatalogUrl,
        env: server::EnvFn<'_>,
        home: Option<&Path>,
    ) -> Result<Catalog, CatalogError> {
        Self::open_url_using(url, &server::Credentials::of(env, home)).await
    }

    /// [`Catalog::open_url`] with every place a server's password may be: the environment, the
    /// home directory and this desktop's saved passwords (the app's keyring).
    pub async fn open_url_using(
        url: &server::CatalogUrl,
        credentials: &server::Credentials<'_>,
    ) -> Result<Catalog, CatalogError> {
        match url {
            server::CatalogUrl::Sqlite(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || Self::open(&path))
                    .await
                    .map_err(|e| CatalogError::Panicked { message: e.to_string() })?
            }
            server::CatalogUrl::Server(url) => {
                let catalog = server::ServerCatalog::connect_using(url, credentials).await?;
                catalog.migrate().await?;
                Ok(Self::on_server(catalog))
            }
        }
    }

    /// A handle on a connected (and migrated) server catalog.
    pub fn on_server(catalog: server::ServerCatalog) -> Catalog {
        tracing::info!(url = %catalog.url(), "server catalog open");
        Catalog { shared: Arc::new(Shared::Server(Box::new(catalog))) }
    }

    /// The database file; `None` for a server catalog.
    pub fn file(&self) -> Option<&Path> {
        match &*self.shared {
            Shared::Local { path, .. } => Some(path),
            Shared::Server(_) => None,
        }
    }

    /// The database file. Panics on a server catalog: callers that may have one use
    /// [`Self::file`] (the import queue's lock, backups, benches of the file size).
    pub fn path(&self) -> &Path {
        self.file().expect("the catalog is a SQLite file")
    }

    /// Where the catalog is, for people: the file's path, or the server's URL (password masked).
    pub fn location(&self) -> String {
        match &*self.shared {
            Shared::Local { path, .. } => path.display().to_string(),
            Shared::Server(server) => server.url().to_string(),
        }
    }

    /// The server catalog, when this is one.
    pub fn server(&self) -> Option<&server::ServerCatalog> {
        match &*self.shared {
            Shared::Local { .. } => None,
            Shared::Server(server) => Some(server),
        }
    }

    /// The changes saved to a server catalog by any desktop (this one too), as they commit; `None`
    /// for a SQLite catalog, which one desktop has to itself. The first subscriber starts the
    /// listener (call it inside the tokio runtime).
    pub fn subscribe_changes(&self) -> Option<tokio::sync::broadcast::Receiver<server_changes::CatalogChange>> {
        self.server().map(|server| server.changes.subscribe(server.config(), server.transport()))
    }

    /// The catalog's schema version: SQLite's `PRAGMA user_version` ([`SCHEMA_VERSION`] once
    /// open), or the server's ([`server::SERVER_SCHEMA_VERSION`]).
    pub async fn schema_version(&self) -> Result<u32, CatalogError> {
        // How each engine's migrations are recorded differs (`migrations`, `server::migrate`).
        match &*self.shared {
            Shared::Server(server) => Ok(server.schema_version().await?),
            Shared::Local { .. } => self.run("the schema version", |conn| Ok(migrations::schema_version(conn)?)).await,
        }
    }

    /// Records a photo, or, if the same bytes (SHA-256) were recorded before, returns that photo
    /// and updates where it was last seen.
    pub async fn record_photo(&self, photo: NewPhoto) -> Result<PhotoId, CatalogError> {
        self.run_db(move |db| queries::record_photo(db, &photo)).await
    }

    /// [`Catalog::record_photo`] with the photo's prepared image, which a server catalog keeps
    /// (another desktop shows it and sends it again when the file is not on its disk); SQLite
    /// records the photo alone.
    pub async fn record_prepared_photo(
        &self,
        photo: NewPhoto,
        prepared: PreparedCopy,
    ) -> Result<PhotoId, CatalogError> {
        self.run_db(move |db| queries::record_prepared_photo(db, &photo, &prepared)).await
    }

    /// The prepared image kept of the photo with `sha256` (a server catalog; `None` on SQLite or
    /// when none was kept).
    pub async fn stored_prepared(&self, sha256: &str) -> Result<Option<StoredPrepared>, CatalogError> {
        let sha256 = sha256.to_string();
        self.run_db(move |db| queries::stored_prepared(db, &sha256)).await
    }

    /// The prepared photo kept of a photo, as a `data:` URL (a server catalog; `None` on SQLite
    /// or when none was kept): what review shows when the file is on another computer.
    pub async fn prepared_image_url(&self, photo: PhotoId) -> Result<Option<String>, CatalogError> {
        let jpeg = self.run_db(move |db| queries::prepared_image(db, photo)).await?;
        Ok(jpeg.map(|jpeg| columns::jpeg_data_url(&jpeg)))
    }

    /// Appends an attempt to the audit trail. `NotFound` if the photo does not exist.
    pub async fn record_attempt(&self, attempt: NewAttempt) -> Result<AttemptId, CatalogError> {
        self.run_db(move |db| queries::record_attempt(db, &attempt)).await
    }

    /// The photo's attempts, oldest first.
    pub async fn attempts(&self, photo: PhotoId) -> Result<Vec<AttemptRecord>, CatalogError> {
        self.run_db(move |db| queries::attempts(db, photo)).await
    }

    /// Saves what the breaker `name` is, for the next run to start from (see
    /// [`crate::resilience::CircuitBreaker::restore`]); one row per breaker and desktop.
    pub async fn save_breaker(&self, name: &str, saved: crate::resilience::SavedBreaker) -> Result<(), CatalogError> {
        let name = name.to_string();
        self.run_db(move |db| breakers::save(db, &name, &saved)).await
    }

    /// What the breaker `name` saved last on this desktop.
    pub async fn saved_breaker(&self, name: &str) -> Result<Option<crate::resilience::SavedBreaker>, CatalogError> {
        let name = name.to_string();
        self.run_db(move |db| breakers::load(db, &name)).await
    }

    /// Tokens and cost per local day and model from `since` (unix ms), oldest first;
    /// `utc_offset_ms` is the local time's offset from UTC.
    pub async fn usage_by_day(&self, since: i64, utc_offset_ms: i64) -> Result<Vec<UsageDay>, CatalogError> {
        self.run_db(move |db| usage::usage_by_day(db, since, utc_offset_ms)).await
    }

    /// Tokens and cost of the attempts started in `[from, to)` (unix ms).
    pub async fn spent_between(&self, from: i64, to: i64) -> Result<CostTotal, CatalogError> {
        self.run_db(move |db| usage::spent_between(db, from, to)).await
    }

    /// Tokens and cost of every attempt for a photo.
    pub async fn photo_cost(&self, photo: PhotoId) -> Result<CostTotal, CatalogError> {
        self.run_db(move |db| usage::photo_cost(db, photo)).await
    }

    /// The average of the newest billed calls to `model` (the id called); `None` before the first.
    pub async fn measured_call(&self, model: &str) -> Result<Option<MeasuredCall>, CatalogError> {
        let model = model.to_string();
        self.run_db(move |db| usage::measured_call(db, &model)).await
    }

    /// Saves the reviewer's product for a photo, in one transaction, as a new revision (source
    /// [`RevisionSource::Review`]).
    ///
    /// The first save creates the photo's product (revision 1) with the attempt's proposal copied
    /// next to the saved version; later saves of the same photo update it (revision + 1), so a
    /// photo never has two extracted products (duplicates aside). A later save with
    /// `attempt_id: None` keeps the stored proposal. A save over a deleted product undeletes it.
    ///
    /// Refused: a product with invalid fields (`Invalid`, naming them), an attempt of another
    /// photo (`Invalid`), a missing photo or attempt (`NotFound`).
    pub async fn save_product(&self, save: SaveProduct) -> Result<ProductRecord, CatalogError> {
        self.run_db(move |db| queries::save_product(db, &save)).await
    }

    /// Saves an edit of a product as a new revision, if nobody saved it since the editor opened
    /// `expected_revision`. With an `attempt_id` (a re-extraction), that attempt's proposal becomes
    /// the product's proposal. An update that changes nothing (same product, no attempt) writes
    /// nothing and returns the product as it is. The caller normalizes the product
    /// ([`crate::product::Product::normalized`]); it is stored as given.
    ///
    /// Refused, with nothing saved: invalid fields (`Invalid`, naming them); a stale
    /// `expected_revision` ([`CatalogError::Conflict`], saying who saved which revision); an
    /// attempt of another photo or one that failed (`Invalid`); a missing product or attempt
    /// (`NotFound`); a deleted product ([`CatalogError::Deleted`], code `not_found`: undo the
    /// delete first).
    pub async fn update_product(&self, update: UpdateProduct) -> Result<ProductRecord, CatalogError> {
        self.run_db(move |db| revisions::update_product(db, &update)).await
    }

    /// Every revision of a product (deleted or not), newest first, each with what it changed:
    /// against the revision before, and for the first one kept, against the proposal in force
    /// then (Gemini's original proposal; every filled field when there was none). Products saved
    /// before schema version 3 start their history at the revision they had then.
    ///
    /// Refused: a missing product (`NotFound`).
    pub async fn history(&self, id: ProductId) -> Result<Vec<RevisionRecord>, CatalogError> {
        self.run_db(move |db| revisions::history(db, id)).await
    }

    /// Deletes a product softly: it leaves lists, search, counts and exports, keeps its history
    /// and can be brought back with [`Self::undelete_product`]. The revision does not change.
    ///
    /// Refused: a missing product (`NotFound`), an already deleted one
    /// ([`CatalogError::Deleted`], code `not_found`).
    pub async fn delete_product(
        &self,
        id: ProductId,
        deleted_by: &str,
        at: i64,
    ) -> Result<ProductRecord, CatalogError> {
        let by = deleted_by.to_owned();
        self.run_db(move |db| revisions::delete_product(db, id, &by, at)).await
    }

    /// Undoes [`Self::delete_product`]. The revision does not change; who undid it and when is
    /// logged, not stored.
    ///
    /// Refused: a missing product (`NotFound`); one that is not deleted (`Invalid`); an extracted
    /// product whose photo has another extracted product now (`Invalid`; cannot happen through
    /// this API, since saving the photo again undeletes the deleted product instead).
    pub async fn undelete_product(&self, id: ProductId, by: &str, at: i64) -> Result<ProductRecord, CatalogError> {
        let by = by.to_owned();
        self.run_db(move |db| revisions::undelete_product(db, id, &by, at)).await
    }

    /// Copies a product into a new one for the same photo: `duplicate_of` = `id`, revision 1
    /// (source [`RevisionSource::Duplicate`]), the saved product with " (copy)" after its name,
    /// no proposal and no attempt.
    ///
    /// Refused: a missing product (`NotFound`), a deleted one ([`CatalogError::Deleted`]).
    pub async fn duplicate_product(&self, id: ProductId, by: &str, at: i64) -> Result<ProductRecord, CatalogError> {
        let by = by.to_owned();
        self.run_db(move |db| revisions::duplicate_product(db, id, &by, at)).await
    }

    /// One page of the catalog table and how many live products match in all (see
    /// [`ProductQuery`]): the text search of [`Self::search_products`], the filters, the sort.
    /// Deleted products never appear. A text search counts its matches up to 1,000 past the page
    /// ([`ProductPage::total_capped`]).
    pub async fn query_products(&self, query: ProductQuery) -> Result<ProductPage, CatalogError> {
        self.query_products_counting(query, listing::TOTAL_CAP).await
    }

    /// [`Self::query_products`] counting a text search's matches up to `cap` past the page (the
    /// tests' small cap; the app's is 1,000).
    #[doc(hidden)]
    pub async fn query_products_counting(&self, query: ProductQuery, cap: u64) -> Result<ProductPage, CatalogError> {
        match &*self.shared {
            Shared::Server(server) => server_listing::query_products(server, &query, cap).await,
            Shared::Local { .. } => {
                self.run("the catalog table", move |conn| listing::query_products(conn, &query, cap)).await
            }
        }
    }

    /// The categories and brands of live products with their counts, most common first (then by
    /// value), for the catalog's filters.
    pub async fn facets(&self) -> Result<Facets, CatalogError> {
        self.run_db(listing::facets).await
    }

    /// Live products, most recently updated first.
    pub async fn list_products(&self, offset: u32, limit: u32) -> Result<Vec<ProductSummary>, CatalogError> {
        let query = ProductQuery {
            sort: SortKey::Updated,
            direction: SortDirection::Desc,
            offset,
            limit,
            ..Default::default()
        };
        self.query_rows(query).await
    }

    /// Live products matching the user's text, best match first (name matches above brand,
    /// category, description and attribute matches; equal scores: the newer product first; when
    /// more than [`RANKED_MATCHES`] products match, the newest that many are ranked and the
    /// others follow, newest first). Every
    /// whitespace-separated term must match the start of a word, case and diacritics ignored
    /// ("gran" and "GRÀN" find "Granola", "müsli" finds "Musli"). The text is never FTS5 syntax:
    /// quotes, `AND`, `*`, `(`, `-`, `:` are plain characters. A query without letters or digits
    /// lists the products like [`Self::list_products`].
    pub async fn search_products(
        &self,
        query: &str,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<ProductSummary>, CatalogError> {
        let query = ProductQuery { text: query.to_owned(), offset, limit, ..Default::default() };
        self.query_rows(query).await
    }

    /// A page of [`Self::query_products`] without the total. The full-text search and its ranking
    /// are the one part of the catalog each engine does its own way (FTS5's bm25 on SQLite, a
    /// search vector with its bands on a server: `listing`, `server_listing`).
    async fn query_rows(&self, query: ProductQuery) -> Result<Vec<ProductSummary>, CatalogError> {
        match &*self.shared {
            Shared::Server(server) => server_listing::query_rows(server, &query).await,
            Shared::Local { .. } => self.run("the catalog table", move |conn| listing::query_rows(conn, &query)).await,
        }
    }

    /// One product, deleted or not (see [`ProductRecord::deleted_at`]); `NotFound` if it does not
    /// exist.
    pub async fn get_product(&self, id: ProductId) -> Result<ProductRecord, CatalogError> {
        self.run_db(move |db| queries::get_product(db, id)).await
    }

    /// Every photo of a product, in the order they were sent (its first, then `product_photos`).
    pub async fn product_photos(&self, id: ProductId) -> Result<Vec<PhotoRef>, CatalogError> {
        self.run_db(move |db| queries::product_photos(db, id)).await
    }

    /// The JPEG thumbnail of the photo with this content hash (64 lowercase hex digits); `None`
    /// when there is no such photo or the text is not a hash. What the window's thumbnail
    /// protocol serves: a hash names one content on every catalog, so the webview may cache it.
    pub async fn thumbnail_jpeg(&self, sha256: &str) -> Result<Option<Vec<u8>>, CatalogError> {
        let sha256 = sha256.to_string();
        self.run_db(move |db| queries::thumbnail_jpeg(db, &sha256)).await
    }

    /// The product extracted from a photo (not a duplicate), deleted or not: the one a new save of
    /// the photo updates.
    pub async fn product_for_photo(&self, photo: PhotoId) -> Result<Option<ProductId>, CatalogError> {
        self.run_db(move |db| queries::product_for_photo(db, photo)).await
    }

    /// How many live (not deleted) products the catalog holds.
    pub async fn count_products(&self) -> Result<u64, CatalogError> {
        self.run_db(listing::count_live).await
    }

    /// Copies the whole catalog to `path` with SQLite's online backup API, as one consistent
    /// snapshot, through a temporary file renamed into place (a failed backup leaves no file
    /// under `path`). An existing file at `path` is replaced. The backup is a standalone SQLite
    /// file that [`Self::restore_from`] accepts.
    ///
    /// Refused: `path` naming the live catalog file (`Invalid`). Fails with `File`/`CreateDir`
    /// (code `io`) or `Sqlite` when the disk does.
    pub async fn backup_to(&self, path: &Path) -> Result<BackupSummary, CatalogError> {
        let live = self.file().map(Path::to_path_buf).unwrap_or_default();
        let target = path.to_path_buf();
        self.run("backups (the server has its own: pg_dump)", move |conn| backup::backup_to(conn, &live, &target)).await
    }

    /// Replaces the catalog with the backup at `path`, after a safety copy of the current
    /// catalog to `<catalog dir>/backups/before-restore-<at>.sqlite3` ([`SAFETY_BACKUP_DIR`]);
    /// then migrates it to [`SCHEMA_VERSION`] and checks it. One job on the catalog thread: no
    /// other call sees a half-restored catalog. If the migration or the final check fails, the
    /// safety copy is put back and the error returned.
    ///
    /// Refused, without touching the catalog ([`CatalogError::RestoreRefused`], code
    /// `validation`, saying why): a missing file, the live catalog itself, a file that is not a
    /// SQLite database or is damaged (`integrity_check`, `foreign_key_check`), one written by a
    /// newer app (schema version above [`SCHEMA_VERSION`]), a SQLite file that is not a catalog
    /// (or has another page size).
    pub async fn restore_from(&self, path: &Path, at: i64) -> Result<RestoreSummary, CatalogError> {
        let live = self.file().map(Path::to_path_buf).unwrap_or_default();
        let source = path.to_path_buf();
        self.run("restoring a backup", move |conn| backup::restore_from(conn, &live, &source, at)).await
    }

    /// Runs `f` with the connection on the catalog thread: for diagnostics (`PRAGMA
    /// integrity_check`), maintenance and tests. Prefer the typed methods. `f` must be short; a
    /// transaction it leaves open is rolled back.
    pub async fn with_connection<R, F>(&self, f: F) -> Result<R, CatalogError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, CatalogError> + Send + 'static,
    {
        self.run("the import queue", f).await
    }

    /// Runs `f` with a synchronous [`db::Db`] on either backend: on the SQLite catalog's thread, or
    /// on the blocking pool with a connection from the server's pool (each statement waits with
    /// the runtime's `block_on`). On a server, a transaction that lost a race with another
    /// desktop ([`CatalogError::Contended`]) is run again, up to [`CONTENTION_RETRIES`] times,
    /// from the third time alone (no other desktop's seam transaction runs beside it), so `f` must
    /// only change the database (it may run more than once).
    pub(crate) async fn run_db<R, E, F>(&self, mut f: F) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<CatalogError> + db::Contention + Send + 'static,
        F: FnMut(&db::Db<'_>) -> Result<R, E> + Send + 'static,
    {
        let server = match &*self.shared {
            Shared::Local { jobs, .. } => {
                let (job, reply) = db_thread::job(move |conn| Ok(f(&db::Db::Sqlite(conn))));
                jobs.send(job).map_err(|_| E::from(CatalogError::Closed))?;
                return reply.await.map_err(|_| E::from(CatalogError::Closed))?.map_err(E::from)?;
            }
            Shared::Server(server) => server,
        };
        let client = server.client().await.map_err(|e| E::from(CatalogError::from(e)))?;
        let session = db::PgSession::new(
            client,
            tokio::runtime::Handle::current(),
            server.url().to_string(),
            server.user().to_string(),
            server.desktop().to_string(),
            server.desktop_key(),
        );
        tokio::task::spawn_blocking(move || {
            let mut retries = 0;
            let result = loop {
                match f(&db::Db::Postgres(&session)) {
                    Err(e) if e.is_contention() && retries < CONTENTION_RETRIES => {
                        retries += 1;
                        if retries >= RUN_ALONE_AFTER {
                            session.run_alone();
                        } else {
                            std::thread::sleep(contention_pause(retries));
                        }
                    }
                    result => break result,
                }
            };
            session.finish();
            result
        })
        .await
        .map_err(|e| E::from(CatalogError::Panicked { message: e.to_string() }))?
    }

    /// Runs `f` on the SQLite catalog's thread; on a server catalog, the typed refusal of
    /// `operation` (what the user asked for, in words).
    async fn run<R, F>(&self, operation: &str, f: F) -> Result<R, CatalogError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, CatalogError> + Send + 'static,
    {
        let jobs = match &*self.shared {
            Shared::Local { jobs, .. } => jobs,
            Shared::Server(server) => {
                return Err(CatalogError::ServerNotSupported {
                    operation: operation.to_string(),
                    url: server.url().to_string(),
                })
            }
        };
        let (job, reply) = db_thread::job(f);
        jobs.send(job).map_err(|_| CatalogError::Closed)?;
        reply.await.map_err(|_| CatalogError::Closed)?
    }
}

/// How many times a server transaction that raced another desktop's is run again.
pub(crate) const CONTENTION_RETRIES: u32 = 8;
/// After this many lost races, a closure's transactions run alone (see `db::PgSession::run_alone`):
/// a long transaction is never starved by a stream of short ones.
pub(crate) const RUN_ALONE_AFTER: u32 = 3;

/// A random pause before running a raced transaction again, longer after each try, so two
/// desktops that collided do not collide again.
fn contention_pause(retry: u32) -> Duration {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    let jitter = u64::from(nanos % 1000) * u64::from(retry.min(6)) * 20;
    Duration::from_micros(2_000 + jitter)
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
