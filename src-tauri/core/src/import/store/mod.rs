//! The queue's SQL (`import_items`, migration 0003), run on the catalog thread through
//! [`Catalog::with_connection`]. Every function is one short transaction (or one statement);
//! none is ever open across a network call.
//!
//! Every state change is a single `UPDATE … WHERE id = ? AND state = <expected>`: a worker whose
//! item was moved meanwhile (cancelled, resumed elsewhere) changes nothing. Results are written in
//! the same transaction as the state they justify: the attempt and the proposal with `ready`, the
//! product with `saved`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::params;

use crate::catalog::db::{Db, DbRow, Dialect, OptionalRow};
use crate::catalog::desktop_key::Tagged;

use super::phash;
use super::progress::StateCounts;
use super::records::*;
use super::scan::Scanned;
use super::ImportError;
use crate::barcode::Barcode;
use crate::catalog::tx as catalog_tx;
use crate::catalog::{
    local_user, Catalog, CostTotal, NewAttempt, PhotoId, ProductId, ProductRecord, RevisionSource, SaveProduct,
};
use crate::error::ErrorCode;
use crate::gemini::Usage;
use crate::pipeline::checked_for_save;
use crate::pricing::Usd;
use crate::product::{FieldFlag, Product};
use crate::stored_path::StoredPath;
use crate::ErrorReport;

/// The condition under which an item goes back to the queue: its path is not waiting or in
/// progress already (the pending-path unique index would refuse it; SQLite's `UPDATE OR IGNORE`
/// said the same, in a form a server does not have).
macro_rules! path_not_waiting {
    () => {
        "NOT EXISTS (SELECT 1 FROM import_items o
                     WHERE o.path = import_items.path AND o.path_bytes IS NOT DISTINCT FROM import_items.path_bytes
                       AND o.state IN ('queued', 'preparing', 'extracting', 'submitted'))"
    };
}

mod batch;
mod claims;
mod enqueue;
mod finish;
mod listing;
mod review;

pub(crate) use batch::*;
pub(crate) use claims::*;
pub(crate) use enqueue::*;
pub(crate) use finish::*;
pub(crate) use listing::*;
pub(crate) use review::*;

/// The queue's rows, read and written through the catalog's thread. Cheap to clone. Reading needs
/// no [`super::ImportQueue`] (and so no queue lock): `import status` uses this directly.
#[derive(Clone, Debug)]
pub struct ImportStore {
    catalog: Catalog,
    /// Numbers the count reads in the order the catalog thread made them, so that concurrent
    /// publishers never replace newer counts with older ones.
    reads: Arc<AtomicU64>,
}

/// A result together with the queue's counts right after it, read on the same thread.
#[derive(Debug)]
pub(crate) struct Counted<T> {
    pub value: T,
    pub counts: StateCounts,
    pub duplicates: u32,
    /// What the calls for the queue's items cost, when this read changes it.
    pub cost: Option<CostRead>,
    /// The read's place in the catalog thread's order.
    pub seq: u64,
}

/// A change to what the calls for the queue's items cost (`ImportProgress::queue_cost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CostRead {
    /// Read over every item (at open, after items were removed, after other processes' changes).
    Total(CostTotal),
    /// One attempt this process recorded: added to the last total, unless a total read after it
    /// (a later `seq`) was published already, which holds it.
    Add(CostTotal),
}

/// What the enqueue hands the store, in the order scanned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    /// A file as scanned: one listed as skipped, or a photo that is a product of its own.
    File(Scanned),
    /// The photos of one product, in the order they will be sent (front-like first).
    Product { photos: Vec<(StoredPath, Option<String>)>, note: Option<GroupNote> },
}

/// An item a worker took.
#[derive(Debug, Clone)]
pub(crate) struct Claimed {
    pub id: ItemId,
    pub path: StoredPath,
    /// The SHA-256 computed when the file was queued: intake does not hash the file again.
    pub sha256: Option<String>,
    /// The product's other photos (`import_item_photos`), in order.
    pub more: Vec<MorePhoto>,
    pub attempts: u32,
    pub origin: ItemOrigin,
    /// Worked through the Batch API.
    pub batch: bool,
    /// Queued by another desktop of a team (its tag carries another key's id; claimed only once
    /// prepared): its path is never opened here; only a prepared photo the catalog holds (by its
    /// hash) can be sent, and without one the item is given back ([`mark_unreadable`]).
    pub elsewhere: bool,
    /// The catalog is a team's server, whose rows anyone on the team can write.
    pub shared: bool,
    /// This desktop may open the path: on SQLite always; on a server only when the row carries
    /// this desktop's own tag for the path and hash ([`crate::catalog::desktop_key`]). A row of
    /// this computer without it was not queued by this desktop: it is refused, its path unopened.
    pub trusted: bool,
}

/// A photo of an item's product after its first.
#[derive(Debug, Clone)]
pub(crate) struct MorePhoto {
    /// 1-based, the order sent.
    pub position: i64,
    pub path: StoredPath,
    pub sha256: Option<String>,
    /// This desktop may open the path ([`Claimed::trusted`]).
    pub trusted: bool,
}

/// How an item leaves `preparing` or `extracting`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Finish {
    pub id: ItemId,
    pub from: ItemState,
    /// `Ready`, `Failed` or `Queued`.
    pub to: ItemState,
    /// Recorded in the audit trail in the same transaction.
    pub attempt: Option<NewAttempt>,
    /// Whether this counts as one of the item's attempts.
    pub count_attempt: bool,
    /// For `Ready`: the proposal and its flags.
    pub proposal: Option<(Product, Vec<FieldFlag>)>,
    pub error: Option<(ErrorCode, String)>,
    /// The batch that answered (batch mode): the attempt is marked with it.
    pub batch_name: Option<String>,
}

/// Which ready items "save all" takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SaveFilter {
    /// No flagged field, no near-duplicate hint, not already a product: safe without a look.
    Unflagged,
    /// Every proposal without an invalid field (the CLI's `--save`).
    Valid,
}

impl ImportStore {
    pub fn new(catalog: Catalog) -> Self {
        Self { catalog, reads: Arc::new(AtomicU64::new(0)) }
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Items per state, and how many were skipped as duplicates.
    pub async fn counts(&self) -> Result<(StateCounts, u32), ImportError> {
        self.run(counts).await
    }

    /// The items waiting to be sent (queued or being prepared), and their photos: what the next
    /// calls are (one per item) and what they carry.
    pub async fn waiting(&self) -> Result<(u32, u32), ImportError> {
        self.run(|conn| {
            Ok(conn.query_row(
                "SELECT count(*), coalesce(sum(1 + (SELECT count(*) FROM import_item_photos p WHERE p.item_id = i.id)), 0)
                 FROM import_items i WHERE i.state IN ('queued', 'preparing')",
                params![],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .await
    }

    /// A page of items in queue order, optionally only those in `states`.
    pub async fn items(
        &self,
        offset: u32,
        limit: u32,
        states: Option<Vec<ItemState>>,
    ) -> Result<ImportPage, ImportError> {
        self.run(move |conn| page(conn, offset, limit, states.as_deref())).await
    }

    /// The interactive items (dropped or added in the window, or given to `extract`) not saved or
    /// discarded yet, oldest first.
    pub async fn interactive_open(&self) -> Result<Vec<ImportRow>, ImportError> {
        self.run(interactive_open).await
    }

    /// One item with its proposal, flags and attempt; `NotFound` if it does not exist.
    pub async fn item(&self, id: ItemId) -> Result<ImportItemDetail, ImportError> {
        self.run(move |conn| detail(conn, id)).await
    }

    /// Runs `f` on the catalog's connection: the SQLite thread, or a server session (where a
    /// transaction that raced another desktop's runs again, so `f` may run more than once).
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T, ImportError>
    where
        T: Send + 'static,
        F: FnMut(&Db<'_>) -> Result<T, ImportError> + Send + 'static,
    {
        self.catalog.run_db(f).await
    }

    /// Runs `f`, then reads the counts (outside `f`'s transaction, on the same thread); with
    /// `cost`, also what the queue's items cost (a read over every item: only after a change that
    /// can change it, an attempt recorded or items removed, not after every claim).
    pub(crate) async fn counted<T, F>(&self, f: F, cost: bool) -> Result<Counted<T>, ImportError>
    where
        T: Send + 'static,
        F: FnMut(&Db<'_>) -> Result<T, ImportError> + Send + 'static,
    {
        let reads = self.reads.clone();
        let mut f = f;
        self.run(move |conn| {
            let value = f(conn)?;
            let (counts, duplicates) = counts(conn)?;
            let cost = if cost { Some(CostRead::Total(catalog_tx::queue_cost(conn)?)) } else { None };
            let seq = reads.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(Counted { value, counts, duplicates, cost, seq })
        })
        .await
    }
}

pub(crate) fn counts(conn: &Db<'_>) -> Result<(StateCounts, u32), ImportError> {
    let mut counts = StateCounts::default();
    let rows = conn.query_map("SELECT state, count(*) FROM import_items GROUP BY state", params![], |row| {
        Ok((parse_state(row, 0)?, row.get(1)?))
    })?;
    for (state, count) in rows {
        counts.set(state, count);
    }
    let duplicates = conn.query_row(
        "SELECT count(*) FROM import_items
         WHERE state = 'skipped' AND skip_reason IN ('already_in_catalog', 'already_queued')",
        params![],
        |row| row.get(0),
    )?;
    Ok((counts, duplicates))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opening the queue of a large catalog reads the hashes through indexes only: before 0010,
    /// each check scanned the live products (O(N²): minutes at 100,000 photos).
    #[test]
    fn near_seed_is_one_index_pass() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::catalog::migrations::apply(&mut conn, crate::catalog::migrations::MIGRATIONS).unwrap();
        let plan: Vec<String> = {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {NEAR_SEED}")).unwrap();
            stmt.query_map([], |r| r.get::<_, String>(3)).unwrap().map(Result::unwrap).collect()
        };
        assert!(plan.iter().any(|l| l.contains("COVERING INDEX photos_phash")), "{plan:?}");
        assert!(plan.iter().any(|l| l.starts_with("SEARCH p USING INDEX products_live_photo")), "{plan:?}");
        assert!(plan.iter().any(|l| l.starts_with("SEARCH i USING INDEX")), "{plan:?}");
        assert!(!plan.iter().any(|l| l.starts_with("SCAN p ") || l.starts_with("SCAN i ")), "{plan:?}");
        near_seed(&Db::Sqlite(&conn)).unwrap();
    }
}
