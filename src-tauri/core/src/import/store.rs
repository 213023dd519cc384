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

/// Queues a batch of scanned files in one transaction, recognizing what is known already, and
/// says which item stands for each file.
///
/// - The same path waiting or in progress: nothing to do (`unchanged`); an interactive request
///   promotes it ahead of the bulk items.
/// - The same path with the same bytes listed before (any state): nothing to do (`unchanged`);
///   this is how a resumed run or a second drop of the same folder is recognized. An interactive
///   request for such an item that failed or was discarded queues it again (the user asked anew).
/// - The same bytes as a product's photo: skipped, `already_in_catalog`.
/// - The same bytes as another item (not skipped): skipped, `already_queued`; that item's result
///   stands for this file.
/// - `force`: queued anyway (a re-extract), unless the same path is waiting or in progress.
pub(crate) fn insert_batch(
    conn: &Db<'_>,
    batch: &[Entry],
    force: bool,
    origin: ItemOrigin,
    batch_mode: bool,
    now: i64,
) -> Result<Enqueued, ImportError> {
    let tx = conn.transaction()?;
    let mut done = Enqueued::default();
    let report = &mut done.report;
    for entry in batch {
        let entry = match entry {
            Entry::File(file) => file,
            Entry::Product { photos, note } => {
                let placed = place_product(&tx, photos, note.as_ref(), force, (origin, batch_mode), now, report)?;
                done.files.extend(photos.iter().zip(placed).map(|((path, _), (item, result_of))| EnqueuedFile {
                    path: path.text().to_owned(),
                    path_bytes: path.bytes_hex(),
                    item,
                    result_of,
                }));
                continue;
            }
        };
        let (path, item, result_of) = match entry {
            Scanned::Skipped { path, reason, message } => {
                let listed: Option<ItemId> = tx
                    .query_row(
                        "SELECT id FROM import_items
                         WHERE path = ?1 AND path_bytes IS NOT DISTINCT FROM ?3 AND sha256 IS NULL AND state = 'skipped'
                           AND skip_reason = ?2
                         ORDER BY id DESC LIMIT 1",
                        params![path.text(), reason.as_str(), path.bytes()],
                        |row| row.get(0),
                    )
                    .optional()?;
                let item = match listed {
                    Some(item) => {
                        report.unchanged += 1;
                        item
                    }
                    None => {
                        report.skipped += 1;
                        insert_skipped(
                            &tx,
                            &Skip { path, sha256: None, reason: *reason, message, dup: (None, None) },
                            origin,
                            now,
                        )?
                    }
                };
                (path, item, item)
            }
            Scanned::Photo { path, sha256 } => {
                let (item, result_of) =
                    place_photo(&tx, path, sha256.as_deref(), force, (origin, batch_mode), now, report)?;
                (path, item, result_of)
            }
        };
        done.files.push(EnqueuedFile { path: path.text().to_owned(), path_bytes: path.bytes_hex(), item, result_of });
    }
    tx.commit()?;
    Ok(done)
}

/// One photo of [`insert_batch`]: returns its item and the item whose result stands for it.
fn place_photo(
    tx: &Db<'_>,
    path: &StoredPath,
    sha256: Option<&str>,
    force: bool,
    (origin, batch): (ItemOrigin, bool),
    now: i64,
    report: &mut EnqueueReport,
) -> Result<(ItemId, ItemId), ImportError> {
    if let Some(known) = known_photo(tx, path, sha256, force, origin, now, report)? {
        return Ok(known);
    }
    let item = insert_item(tx, path, sha256, force, (origin, batch), None, now, report)?;
    Ok((item, item))
}

/// The photos of one product of [`insert_batch`], each with its item and the item whose result
/// stands for it. Each photo is looked at as [`place_photo`] would (listed before, a duplicate in
/// the catalog or the queue: what it always was); the others become one item, the first its row
/// and the rest `import_item_photos` in order. A photo with the same bytes as an earlier one of
/// the same product is a duplicate of it.
fn place_product(
    tx: &Db<'_>,
    photos: &[(StoredPath, Option<String>)],
    note: Option<&GroupNote>,
    force: bool,
    (origin, batch): (ItemOrigin, bool),
    now: i64,
    report: &mut EnqueueReport,
) -> Result<Vec<(ItemId, ItemId)>, ImportError> {
    let mut placed = Vec::with_capacity(photos.len());
    let mut item: Option<(ItemId, i64)> = None;
    for (path, sha256) in photos {
        if let Some(known) = known_photo(tx, path, sha256.as_deref(), force, origin, now, report)? {
            placed.push(known);
            continue;
        }
        match &mut item {
            None => {
                let id = insert_item(tx, path, sha256.as_deref(), force, (origin, batch), note, now, report)?;
                item = Some((id, 0));
                placed.push((id, id));
            }
            Some((id, position)) => {
                *position += 1;
                tx.execute(
                    "INSERT INTO import_item_photos (item_id, position, path, path_bytes, sha256, path_tag)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![*id, *position, path.text(), path.bytes(), sha256, tx.path_tag(path, sha256.as_deref())],
                )?;
                placed.push((*id, *id));
            }
        }
    }
    Ok(placed)
}

/// This desktop listed a file another desktop of the team had queued already, with the same bytes:
/// its tag is added to that photo's (see [`crate::catalog::desktop_key`]), so either desktop may
/// open it (and finish the item if the other goes away). Nothing on SQLite.
fn cosign(tx: &Db<'_>, item: ItemId, path: &StoredPath, sha256: Option<&str>) -> Result<(), ImportError> {
    let (Some(tag), Some(own)) = (tx.path_tag(path, sha256), tx.own_tags()) else {
        return Ok(());
    };
    // The photo is the item's first, or one of its others.
    for sql in [
        "UPDATE import_items SET path_tag = CASE WHEN path_tag IS NULL THEN ?5 ELSE path_tag || ' ' || ?5 END
         WHERE id = ?1 AND path = ?2 AND path_bytes IS NOT DISTINCT FROM ?3 AND sha256 IS NOT DISTINCT FROM ?4
           AND (path_tag IS NULL OR path_tag NOT LIKE ?6)",
        "UPDATE import_item_photos SET path_tag = CASE WHEN path_tag IS NULL THEN ?5 ELSE path_tag || ' ' || ?5 END
         WHERE item_id = ?1 AND path = ?2 AND path_bytes IS NOT DISTINCT FROM ?3 AND sha256 IS NOT DISTINCT FROM ?4
           AND (path_tag IS NULL OR path_tag NOT LIKE ?6)",
    ] {
        tx.execute(sql, params![item, path.text(), path.bytes(), sha256, tag, own])?;
    }
    Ok(())
}

/// What [`place_photo`] finds for a photo already known: waiting or in progress (as an item's
/// first photo or another), listed before with the same bytes, or the same bytes in the catalog
/// or the queue (then listed as skipped here). `None`: a new photo.
fn known_photo(
    tx: &Db<'_>,
    path: &StoredPath,
    sha256: Option<&str>,
    force: bool,
    origin: ItemOrigin,
    now: i64,
    report: &mut EnqueueReport,
) -> Result<Option<(ItemId, ItemId)>, ImportError> {
    let pending: Option<ItemId> = tx
        .query_row(
            "SELECT id FROM import_items
             WHERE path = ?1 AND path_bytes IS NOT DISTINCT FROM ?2 AND state IN ('queued', 'preparing', 'extracting', 'submitted')
             UNION ALL
             SELECT i.id FROM import_item_photos p JOIN import_items i ON i.id = p.item_id
             WHERE p.path = ?1 AND p.path_bytes IS NOT DISTINCT FROM ?2 AND i.state IN ('queued', 'preparing', 'extracting', 'submitted')
             LIMIT 1",
            params![path.text(), path.bytes()],
            |row| row.get(0),
        )
        .optional()?;
    if let Some(item) = pending {
        promote(tx, item, origin)?;
        cosign(tx, item, path, sha256)?;
        report.unchanged += 1;
        return Ok(Some((item, item)));
    }
    if !force {
        let listed: Option<(ItemId, String, Option<String>, Option<ItemId>)> = tx
            .query_row(
                "SELECT id, state, skip_reason, duplicate_of_item FROM (
                     SELECT id, state, skip_reason, duplicate_of_item FROM import_items
                     WHERE path = ?1 AND path_bytes IS NOT DISTINCT FROM ?3 AND sha256 IS NOT DISTINCT FROM ?2
                     UNION ALL
                     SELECT i.id, i.state, i.skip_reason, i.duplicate_of_item
                     FROM import_item_photos p JOIN import_items i ON i.id = p.item_id
                     WHERE p.path = ?1 AND p.path_bytes IS NOT DISTINCT FROM ?3 AND p.sha256 IS NOT DISTINCT FROM ?2) AS listed
                 ORDER BY id DESC LIMIT 1",
                params![path.text(), sha256, path.bytes()],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .optional()?;
        if let Some((item, state, skip_reason, duplicate_of)) = listed {
            let asked_anew = origin == ItemOrigin::Interactive
                && (state == "failed" || skip_reason.as_deref() == Some(SkipReason::Discarded.as_str()));
            if asked_anew && requeue(tx, item, origin, now)? {
                report.queued += 1;
                return Ok(Some((item, item)));
            }
            report.unchanged += 1;
            return Ok(Some((item, duplicate_of.unwrap_or(item))));
        }
        if let Some(sha) = sha256 {
            if let Some((product, name)) = product_with_sha(tx, sha)? {
                let message = format!(
                    "The same photo (the same bytes) is already product #{product} \u{201c}{name}\u{201d} in the catalog; it is not sent again. Extract it again only if you want a new proposal."
                );
                let dup = (None, Some(product));
                let item = insert_skipped(
                    tx,
                    &Skip { path, sha256: Some(sha), reason: SkipReason::AlreadyInCatalog, message: &message, dup },
                    origin,
                    now,
                )?;
                report.duplicates += 1;
                return Ok(Some((item, item)));
            }
            if let Some((other, other_path)) = item_with_sha(tx, sha)? {
                let message = format!(
                    "The same photo (the same bytes) is already in the queue as {other_path} (item #{other}); it is not sent again."
                );
                let dup = (Some(other), None);
                let item = insert_skipped(
                    tx,
                    &Skip { path, sha256: Some(sha), reason: SkipReason::AlreadyQueued, message: &message, dup },
                    origin,
                    now,
                )?;
                promote(tx, other, origin)?;
                report.duplicates += 1;
                return Ok(Some((item, other)));
            }
        }
    }
    Ok(None)
}

/// A new item for `path` (its product's first photo), `queued`.
#[allow(clippy::too_many_arguments)]
fn insert_item(
    tx: &Db<'_>,
    path: &StoredPath,
    sha256: Option<&str>,
    force: bool,
    (origin, batch): (ItemOrigin, bool),
    note: Option<&GroupNote>,
    now: i64,
    report: &mut EnqueueReport,
) -> Result<ItemId, ImportError> {
    let group_json = note.map(serde_json::to_string).transpose()?;
    let inserted: Option<ItemId> = tx
        .query_row(
            "INSERT INTO import_items (path, path_bytes, sha256, state, forced, origin, batch, queued_at, updated_at,
                                      group_json, queued_on, path_tag)
             VALUES (?1, ?7, ?2, 'queued', ?3, ?4, ?6, ?5, ?5, ?8, ?9, ?10)
             ON CONFLICT DO NOTHING
             RETURNING id",
            params![
                path.text(),
                sha256,
                force,
                origin.as_str(),
                now,
                batch && origin == ItemOrigin::Import,
                path.bytes(),
                group_json,
                tx.host(),
                tx.path_tag(path, sha256)
            ],
            |row| row.get(0),
        )
        .optional()?;
    let item = match inserted {
        Some(item) => {
            report.queued += 1;
            item
        }
        // Another process queued the same path meanwhile (the pending-path index).
        None => {
            report.unchanged += 1;
            let item = tx.query_row(
                "SELECT id FROM import_items
                 WHERE path = ?1 AND path_bytes IS NOT DISTINCT FROM ?2 AND state IN ('queued', 'preparing', 'extracting', 'submitted')",
                params![path.text(), path.bytes()],
                |row| row.get(0),
            )?;
            cosign(tx, item, path, sha256)?;
            item
        }
    };
    Ok(item)
}

/// An interactive request for an item a bulk import queued: it goes ahead of the bulk items.
fn promote(tx: &Db<'_>, item: ItemId, origin: ItemOrigin) -> Result<(), ImportError> {
    if origin == ItemOrigin::Interactive {
        tx.execute(
            "UPDATE import_items SET origin = 'interactive'
             WHERE id = ?1 AND origin <> 'interactive' AND state IN ('queued', 'preparing', 'extracting', 'ready')",
            params![item],
        )?;
    }
    Ok(())
}

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

/// A failed or discarded item back to the queue with a fresh attempt count (false when its path
/// is waiting again already).
fn requeue(tx: &Db<'_>, item: ItemId, origin: ItemOrigin, now: i64) -> Result<bool, ImportError> {
    Ok(tx.execute(
        concat!(
            "UPDATE import_items
             SET state = 'queued', origin = ?2, attempts = 0, skip_reason = NULL, error_code = NULL,
                 error_message = NULL, updated_at = ?3
             WHERE id = ?1 AND (state = 'failed' OR skip_reason = 'discarded') AND ",
            path_not_waiting!()
        ),
        params![item, origin.as_str(), now],
    )? == 1)
}

/// A file listed as skipped, and why.
struct Skip<'a> {
    path: &'a StoredPath,
    sha256: Option<&'a str>,
    reason: SkipReason,
    message: &'a str,
    /// The item or product it duplicates.
    dup: (Option<ItemId>, Option<ProductId>),
}

fn insert_skipped(tx: &Db<'_>, skip: &Skip<'_>, origin: ItemOrigin, now: i64) -> Result<ItemId, ImportError> {
    let Skip { path, sha256, reason, message, dup: (dup_item, dup_product) } = *skip;
    // A duplicate is not an error: it has a message and no code.
    let code = match reason {
        SkipReason::UnsupportedFormat => Some(ErrorCode::UnsupportedFormat),
        SkipReason::Unreadable => Some(ErrorCode::Io),
        SkipReason::NotAPhoto => Some(ErrorCode::InvalidImage),
        SkipReason::AlreadyInCatalog | SkipReason::AlreadyQueued | SkipReason::Discarded => None,
    };
    Ok(tx.query_row(
        "INSERT INTO import_items (path, sha256, state, skip_reason, duplicate_of_item, duplicate_of_product,
                                   error_code, error_message, origin, queued_at, updated_at, path_bytes, queued_on)
         VALUES (?1, ?2, 'skipped', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11)
         RETURNING id",
        params![
            path.text(),
            sha256,
            reason.as_str(),
            dup_item,
            dup_product,
            code.map(ErrorCode::as_str),
            message,
            origin.as_str(),
            now,
            path.bytes(),
            tx.host()
        ],
        |row| row.get(0),
    )?)
}

fn product_with_sha(tx: &Db<'_>, sha: &str) -> Result<Option<(ProductId, String)>, ImportError> {
    Ok(tx
        .query_row(
            "SELECT p.id, p.name FROM photos ph JOIN products p ON p.photo_id = ph.id
             WHERE ph.sha256 = ?1 AND p.duplicate_of IS NULL AND p.deleted_at IS NULL
             UNION ALL
             SELECT p.id, p.name FROM photos ph JOIN product_photos pp ON pp.photo_id = ph.id
                                   JOIN products p ON p.id = pp.product_id
             WHERE ph.sha256 = ?1 AND p.duplicate_of IS NULL AND p.deleted_at IS NULL
             LIMIT 1",
            params![sha],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?)
}

fn item_with_sha(tx: &Db<'_>, sha: &str) -> Result<Option<(ItemId, String)>, ImportError> {
    Ok(tx
        .query_row(
            "SELECT id, path FROM (
                 SELECT id, path FROM import_items WHERE sha256 = ?1 AND state <> 'skipped'
                 UNION ALL
                 SELECT i.id, p.path FROM import_item_photos p JOIN import_items i ON i.id = p.item_id
                 WHERE p.sha256 = ?1 AND i.state <> 'skipped') AS found
             ORDER BY id LIMIT 1",
            params![sha],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?)
}

/// Claims up to `want` queued items of each origin, in that order (interactive first), each
/// `preparing` under this desktop's lease: the oldest with the fewest attempts first, one
/// statement per origin. On a server the rows are taken `FOR UPDATE SKIP LOCKED`, so desktops
/// claiming at once never take the same item and never wait for each other. Claiming the room a
/// round of calls left in one statement (not one item a statement) keeps the slots busy on a
/// server, where each statement is a round trip.
pub(crate) fn claim(
    conn: &Db<'_>,
    want: &[(ItemOrigin, usize)],
    lease: std::time::Duration,
    now: i64,
) -> Result<Vec<Claimed>, ImportError> {
    let (lock, until) = match conn.dialect() {
        Dialect::Sqlite => ("", "NULL"),
        Dialect::Postgres => (" FOR UPDATE SKIP LOCKED", "pe_now_ms() + ?4"),
    };
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX).max(1);
    let host = conn.host();
    let mut all = Vec::new();
    // An index range scan on (state, origin, attempts, id) per origin. The rows are picked in a
    // materialized CTE, not an `IN (subquery … LIMIT n)`: on PostgreSQL, a row another desktop
    // changed meanwhile makes the UPDATE re-check its condition, which runs such a subquery again
    // (with SKIP LOCKED, on other rows) — one claim of 4 took 64 items.
    for &(origin, n) in want.iter().filter(|(_, n)| *n > 0) {
        let limit = i64::try_from(n).unwrap_or(i64::MAX);
        let mut claimed = conn.query_map(
            &format!(
                "WITH picked AS MATERIALIZED (
                     SELECT id FROM import_items WHERE state = 'queued' AND origin = ?2
                       AND (CAST(?5 AS TEXT) IS NULL OR ((origin = 'import' OR queued_on IS NULL OR queued_on = ?5)
                            AND NOT EXISTS (SELECT 1 FROM import_item_unreadable u
                                            WHERE u.item_id = import_items.id AND u.host = ?5)
                            -- Another desktop's row (its tag: a 16-digit key id and a dot) only
                            -- once it was prepared: its bytes travel. A row nobody tagged is
                            -- claimed, to be refused.
                            AND (path_tag IS NULL OR path_tag LIKE ?7 OR photo_id IS NOT NULL
                                 OR length(path_tag) < 17 OR substr(path_tag, 17, 1) <> '.')))
                     ORDER BY attempts, id LIMIT ?6{lock})
                 UPDATE import_items SET state = 'preparing', updated_at = ?1, lease_owner = ?3, lease_until = {until}
                 WHERE id IN (SELECT id FROM picked) AND state = 'queued'
                 RETURNING id, path, sha256, attempts, origin, batch, path_bytes, path_tag"
            ),
            params![now, origin.as_str(), conn.desktop(), lease_ms, host, limit, conn.own_tags()],
            |row| {
                let path = StoredPath::from_stored(row.get(1)?, row.get(6)?);
                let sha256: Option<String> = row.get(2)?;
                let tag: Option<String> = row.get(7)?;
                let whose = conn.judge_path(&path, sha256.as_deref(), tag.as_deref());
                Ok(Claimed {
                    id: row.get(0)?,
                    trusted: whose == Tagged::Mine,
                    elsewhere: whose == Tagged::Anothers,
                    path,
                    sha256,
                    more: Vec::new(),
                    attempts: row.get(3)?,
                    origin,
                    batch: row.get(5)?,
                    shared: host.is_some(),
                })
            },
        )?;
        // RETURNING says nothing of the order: the claim's own.
        claimed.sort_by_key(|c| (c.attempts, c.id));
        for item in &mut claimed {
            item.more = more_photos(conn, item.id)?;
        }
        all.extend(claimed);
    }
    Ok(all)
}

/// An item's photos after its first, in order.
fn more_photos(conn: &Db<'_>, item: ItemId) -> Result<Vec<MorePhoto>, ImportError> {
    Ok(conn.query_map(
        "SELECT position, path, path_bytes, sha256, path_tag FROM import_item_photos WHERE item_id = ?1 ORDER BY position",
        params![item],
        |r| {
            let path = StoredPath::from_stored(r.get(1)?, r.get(2)?);
            let sha256: Option<String> = r.get(3)?;
            let tag: Option<String> = r.get(4)?;
            Ok(MorePhoto {
                position: r.get(0)?,
                trusted: conn.judge_path(&path, sha256.as_deref(), tag.as_deref()) == Tagged::Mine,
                path,
                sha256,
            })
        },
    )?)
}

/// What [`mark_extracting`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marked {
    /// `extracting`: send it.
    Extracting,
    /// Its photos show the same barcode as this other bulk item (extracting, submitted or ready,
    /// its state given): they joined it, and this item is skipped as `already_queued` (the
    /// product is: the message names the barcode); nothing is sent.
    Joined(ItemId, ItemState),
    /// It was no longer preparing.
    Moved,
}

/// `preparing → extracting`: the photo is recorded; its content hash (what was actually
/// prepared), perceptual hash and near-duplicate hint are stored with the state. A bulk item whose
/// photos read a barcode another bulk item already read (one marked before it: the check and the
/// write are one transaction, so of two such items exactly one is sent) joins that item instead.
pub(crate) fn mark_extracting(
    conn: &Db<'_>,
    id: ItemId,
    prepared: &PreparedRow,
    now: i64,
) -> Result<Marked, ImportError> {
    let PreparedRow { photo_id, sha256, phash, looks_like, barcodes, more } = prepared;
    let barcodes_json = serde_json::to_string(barcodes)?;
    let tx = conn.transaction()?;
    let keys: Vec<String> = {
        let mut keys: Vec<String> = barcodes.iter().map(|b| crate::product::gtin_key(&b.gtin)).collect();
        keys.sort();
        keys.dedup();
        keys
    };
    if let Some((into, state)) = same_barcode_item(&tx, id, &keys)? {
        join_by_barcode(&tx, id, into, prepared, now)?;
        tx.commit()?;
        return Ok(Marked::Joined(into, state));
    }
    if let Some(hash) = phash {
        catalog_tx::set_photo_phash(&tx, *photo_id, &phash::to_hex(*hash))?;
    }
    let changed = tx.execute(
        "UPDATE import_items
         SET state = 'extracting', photo_id = ?2, sha256 = ?3, looks_like_photo_id = ?4, looks_like_distance = ?5,
             barcodes_json = ?7, updated_at = ?6
         WHERE id = ?1 AND state = 'preparing' AND lease_owner IS NOT DISTINCT FROM ?8",
        params![
            id,
            photo_id,
            sha256,
            looks_like.map(|l| l.0),
            looks_like.map(|l| l.1),
            now,
            barcodes_json,
            tx.desktop()
        ],
    )?;
    if changed == 1 {
        for (position, photo, sha256) in more {
            tx.execute(
                "UPDATE import_item_photos SET photo_id = ?3, sha256 = ?4 WHERE item_id = ?1 AND position = ?2",
                params![id, position, photo, sha256],
            )?;
        }
        for key in &keys {
            tx.execute(
                "INSERT INTO import_item_gtins (item_id, gtin_key) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![id, key],
            )?;
        }
    }
    // Already `extracting` under this desktop's lease with these photos: this same mark went
    // through before and its answer was lost on the way back (a server that went away as it
    // committed), and the write was tried again.
    let marked_before = changed == 0
        && tx
            .query_row(
                "SELECT 1 FROM import_items
                 WHERE id = ?1 AND state = 'extracting' AND photo_id = ?2 AND lease_owner IS NOT DISTINCT FROM ?3",
                params![id, photo_id, tx.desktop()],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
    tx.commit()?;
    Ok(if changed == 1 || marked_before { Marked::Extracting } else { Marked::Moved })
}

/// Another bulk item whose photos read one of `keys` (GTIN keys), not yet saved, with room for
/// more photos; only for a bulk item (`id`) still preparing.
fn same_barcode_item(tx: &Db<'_>, id: ItemId, keys: &[String]) -> Result<Option<(ItemId, ItemState)>, ImportError> {
    if keys.is_empty() {
        return Ok(None);
    }
    let bulk: bool = tx
        .query_row(
            "SELECT origin = 'import' AND state = 'preparing' AND lease_owner IS NOT DISTINCT FROM ?2
             FROM import_items WHERE id = ?1",
            params![id, tx.desktop()],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(false);
    if !bulk {
        return Ok(None);
    }
    let max = i64::try_from(super::MAX_PHOTOS_PER_PRODUCT_LIMIT).unwrap_or(i64::MAX);
    for key in keys {
        let found = tx
            .query_row(
                "SELECT i.id, i.state FROM import_item_gtins g JOIN import_items i ON i.id = g.item_id
                 WHERE g.gtin_key = ?1 AND i.id <> ?2 AND i.origin = 'import'
                   AND i.state IN ('extracting', 'submitted', 'ready')
                   AND (SELECT count(*) FROM import_item_photos p WHERE p.item_id = i.id) + 1 < ?3
                 ORDER BY i.id LIMIT 1",
                params![key, id, max],
                |r| Ok((r.get(0)?, parse_state(r, 1)?)),
            )
            .optional()?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// Item `id`'s prepared photos join item `into` (after its photos, their barcodes added to its
/// own with their new positions), and `id` is skipped as `already_queued` (its product is, by its
/// barcode; the skip reasons are CHECKed by the schema since 0007), pointing at `into`.
fn join_by_barcode(tx: &Db<'_>, id: ItemId, into: ItemId, prepared: &PreparedRow, now: i64) -> Result<(), ImportError> {
    let (path, path_bytes, into_barcodes, group_json): (String, Option<Vec<u8>>, Option<String>, Option<String>) = tx
        .query_row(
        "SELECT (SELECT path FROM import_items WHERE id = ?1), (SELECT path_bytes FROM import_items WHERE id = ?1),
                    barcodes_json, group_json
             FROM import_items WHERE id = ?2",
        params![id, into],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    let mut photos = vec![(path, path_bytes, prepared.sha256.clone(), prepared.photo_id)];
    let rows = tx.query_map(
        "SELECT position, path, path_bytes FROM import_item_photos WHERE item_id = ?1 ORDER BY position",
        params![id],
        |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?, r.get::<Option<Vec<u8>>>(2)?)),
    )?;
    for (position, path, path_bytes) in rows {
        if let Some((_, photo, sha)) = prepared.more.iter().find(|m| m.0 == position) {
            photos.push((path, path_bytes, sha.clone(), *photo));
        }
    }
    let first: i64 = tx.query_row(
        "SELECT coalesce(max(position), 0) + 1 FROM import_item_photos WHERE item_id = ?1",
        params![into],
        |r| r.get(0),
    )?;
    for (offset, (path, path_bytes, sha, photo)) in (0i64..).zip(&photos) {
        tx.execute(
            "INSERT INTO import_item_photos (item_id, position, path, path_bytes, sha256, photo_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![into, first + offset, path, path_bytes, sha, photo],
        )?;
    }
    // The joined photos' barcodes, at their places in `into`'s photos.
    let mut all: Vec<Barcode> = into_barcodes.as_deref().map(serde_json::from_str).transpose()?.unwrap_or_default();
    let shift = u32::try_from(first).unwrap_or(u32::MAX);
    all.extend(prepared.barcodes.iter().cloned().map(|b| Barcode { photo: b.photo.saturating_add(shift), ..b }));
    let mut note: GroupNote = group_json.as_deref().map(serde_json::from_str).transpose()?.unwrap_or_default();
    for barcode in &prepared.barcodes {
        if !note.joined_by_barcode.contains(&barcode.gtin) {
            note.joined_by_barcode.push(barcode.gtin.clone());
        }
    }
    tx.execute(
        "UPDATE import_items SET barcodes_json = ?2, group_json = ?3, updated_at = ?4 WHERE id = ?1",
        params![into, serde_json::to_string(&all)?, serde_json::to_string(&note)?, now],
    )?;
    tx.execute("DELETE FROM import_item_photos WHERE item_id = ?1", params![id])?;
    let gtins: Vec<&str> = prepared.barcodes.iter().map(|b| b.gtin.as_str()).collect();
    let message = format!(
        "Its barcode {} is also on item #{into}'s photos: they are one product, so these photos joined it and were not sent on their own.",
        gtins.join(", ")
    );
    tx.execute(
        "UPDATE import_items SET state = 'skipped', skip_reason = 'already_queued', duplicate_of_item = ?2,
                                 photo_id = ?3, sha256 = ?4, barcodes_json = ?5, error_code = NULL,
                                 error_message = ?6, updated_at = ?7, lease_owner = NULL, lease_until = NULL
         WHERE id = ?1 AND state = 'preparing' AND lease_owner IS NOT DISTINCT FROM ?8",
        params![
            id,
            into,
            prepared.photo_id,
            prepared.sha256,
            serde_json::to_string(&prepared.barcodes)?,
            message,
            now,
            tx.desktop()
        ],
    )?;
    Ok(())
}

/// What an item's prepared photo adds to its row as it becomes `extracting`.
#[derive(Clone)]
pub(crate) struct PreparedRow {
    pub photo_id: PhotoId,
    pub sha256: String,
    pub phash: Option<u64>,
    /// The nearest earlier photo by dHash, and its distance.
    pub looks_like: Option<(PhotoId, u32)>,
    /// Read from the prepared photos: what a batch's answer is checked against after a restart.
    pub barcodes: Vec<Barcode>,
    /// The product's other photos as recorded: position, photo, SHA-256 of what was prepared.
    pub more: Vec<(i64, PhotoId, String)>,
}

/// Moves an item out of `preparing`/`extracting`, recording its attempt in the same transaction.
/// The attempt is kept even when the item had moved meanwhile (the audit trail has every call);
/// the item is then left alone and this returns false.
pub(crate) fn finish(conn: &Db<'_>, f: &Finish, now: i64) -> Result<bool, ImportError> {
    write_finish(conn, f, now, Guard::Worker)
}

/// An outcome written after this desktop's process that paid for it is gone (a restart while the
/// team catalog's server was away, the answer kept in the spool): the attempt is recorded (once),
/// and the item takes the outcome unless another desktop holds it now under a live lease, or it
/// is past waiting (ready, saved, failed, skipped) already.
pub(crate) fn finish_spooled(
    conn: &Db<'_>,
    f: &Finish,
    spooled_by: Option<&str>,
    now: i64,
) -> Result<bool, ImportError> {
    write_finish(conn, f, now, Guard::Spooled(spooled_by))
}

/// Which item a [`Finish`] may change.
enum Guard<'a> {
    /// The worker that holds the item: in the state it knew, under its own lease.
    Worker,
    /// The spool's: any waiting item that no other live lease holds.
    Spooled(Option<&'a str>),
}

fn write_finish(conn: &Db<'_>, f: &Finish, now: i64, guard: Guard<'_>) -> Result<bool, ImportError> {
    let (proposal_json, flags_json, flag_count) = match &f.proposal {
        Some((product, flags)) => {
            (Some(serde_json::to_string(product)?), Some(serde_json::to_string(flags)?), flags.len() as i64)
        }
        None => (None, None, 0),
    };
    let tx = conn.transaction()?;
    let attempt_id = f.attempt.as_ref().map(|a| catalog_tx::record_attempt_once(&tx, a)).transpose()?;
    if let (Some(attempt), Some(batch)) = (attempt_id, &f.batch_name) {
        catalog_tx::mark_batch_attempt(&tx, attempt, batch)?;
    }
    let lease_clock = match tx.dialect() {
        Dialect::Sqlite => "?11",
        Dialect::Postgres => "pe_now_ms()",
    };
    let (condition, holder) = match guard {
        Guard::Worker => (
            "state = ?2 AND (?2 NOT IN ('preparing', 'extracting') OR lease_owner IS NOT DISTINCT FROM ?12)"
                .to_string(),
            tx.desktop().map(str::to_owned),
        ),
        Guard::Spooled(by) => (
            format!(
                "state IN ('queued', 'preparing', 'extracting') AND CAST(?2 AS TEXT) IS NOT NULL
                 AND (state = 'queued' OR lease_owner IS NULL OR lease_owner = ?12 OR lease_until < {lease_clock})"
            ),
            by.map(str::to_owned),
        ),
    };
    let changed = tx.execute(
        &format!(
            "UPDATE import_items
         SET state = ?3,
             attempts = attempts + ?4,
             attempt_id = coalesce(?5, attempt_id),
             proposal_json = CASE WHEN ?3 = 'ready' THEN ?6 ELSE proposal_json END,
             flags_json = CASE WHEN ?3 = 'ready' THEN ?7 ELSE flags_json END,
             flag_count = CASE WHEN ?3 = 'ready' THEN ?8 ELSE flag_count END,
             error_code = ?9,
             error_message = ?10,
             updated_at = ?11,
             batch_id = CASE WHEN ?3 = 'queued' THEN NULL ELSE batch_id END,
             lease_owner = CASE WHEN ?3 IN ('preparing', 'extracting') THEN lease_owner END,
             lease_until = CASE WHEN ?3 IN ('preparing', 'extracting') THEN lease_until END
         WHERE id = ?1 AND {condition}"
        ),
        params![
            f.id,
            f.from.as_str(),
            f.to.as_str(),
            i64::from(f.count_attempt),
            attempt_id,
            proposal_json,
            flags_json,
            flag_count,
            f.error.as_ref().map(|e| e.0.as_str()),
            f.error.as_ref().map(|e| e.1.as_str()),
            now,
            holder
        ],
    )?;
    tx.commit()?;
    Ok(changed == 1)
}

/// This desktop's items that none of its tasks works on (`working`: those they do) back to
/// `queued`: claims whose answer was lost with a server that went away as they committed.
pub(crate) fn requeue_orphans(conn: &Db<'_>, working: &[ItemId], now: i64) -> Result<usize, ImportError> {
    let Some(desktop) = conn.desktop() else { return Ok(0) };
    let working = working.iter().map(ItemId::to_string).collect::<Vec<_>>().join(", ");
    let not_working = if working.is_empty() { String::new() } else { format!("AND id NOT IN ({working})") };
    Ok(conn.execute(
        &format!(
            "UPDATE import_items SET state = 'queued', updated_at = ?2, lease_owner = NULL, lease_until = NULL
             WHERE lease_owner = ?1 AND state IN ('preparing', 'extracting') {not_working}"
        ),
        params![desktop, now],
    )?)
}

/// One item a worker gave up on (its catalog write failed) back to `queued`.
pub(crate) fn requeue_item(conn: &Db<'_>, id: ItemId, now: i64) -> Result<usize, ImportError> {
    Ok(conn.execute(
        "UPDATE import_items SET state = 'queued', updated_at = ?2, lease_owner = NULL, lease_until = NULL
         WHERE id = ?1 AND state IN ('preparing', 'extracting') AND lease_owner IS NOT DISTINCT FROM ?3",
        params![id, now, conn.desktop()],
    )?)
}

/// This desktop could not read an item's files (queued on another computer: not on this disk, or
/// other bytes at that path): it goes back to `queued`, attempts unchanged, for the desktops that
/// can, and this computer does not claim it again. False when the lease was lost meanwhile.
pub(crate) fn mark_unreadable(conn: &Db<'_>, id: ItemId, now: i64) -> Result<bool, ImportError> {
    let Some(host) = conn.host() else { return Ok(false) };
    let tx = conn.transaction()?;
    let changed = tx.execute(
        "UPDATE import_items SET state = 'queued', updated_at = ?2, lease_owner = NULL, lease_until = NULL
         WHERE id = ?1 AND state = 'preparing' AND lease_owner IS NOT DISTINCT FROM ?3",
        params![id, now, tx.desktop()],
    )?;
    if changed == 1 {
        tx.execute(
            "INSERT INTO import_item_unreadable (item_id, host) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![id, host],
        )?;
    }
    tx.commit()?;
    Ok(changed == 1)
}

/// Crash-resume and cancel: everything `preparing` or `extracting` goes back to `queued`
/// (attempts unchanged). Ready items keep their result; submitted ones wait for their batch; and
/// items of a batch being submitted (linked to it, still `extracting`) wait until that batch is
/// found or known lost ([`batch_accepted`], [`batch_abandoned`]), so they are never sent twice.
///
/// On a server only this desktop's own items: the others' are theirs (their leases say so).
pub(crate) fn requeue_unfinished(conn: &Db<'_>, now: i64) -> Result<usize, ImportError> {
    Ok(conn.execute(
        "UPDATE import_items SET state = 'queued', updated_at = ?1, lease_owner = NULL, lease_until = NULL
         WHERE state IN ('preparing', 'extracting') AND batch_id IS NULL AND lease_owner IS NOT DISTINCT FROM ?2",
        params![now, conn.desktop()],
    )?)
}

/// The shared queue's upkeep, on a server, run by every desktop now and then: extends this
/// desktop's leases (on the server's clock) while it works its items, and puts the items whose
/// lease ran out back to `queued` (their desktop was killed, crashed or lost the network),
/// attempts unchanged, together with those leased by a process of this computer that is gone
/// (`alive` says which process ids still run here), without waiting for its lease. Returns how
/// many items went back. Nothing to do on SQLite (one process works the queue; no leases).
pub(crate) fn tend_leases(
    conn: &Db<'_>,
    lease: std::time::Duration,
    alive: &dyn Fn(u32) -> bool,
    now: i64,
) -> Result<usize, ImportError> {
    let (Some(desktop), Some(host)) = (conn.desktop(), conn.host()) else { return Ok(0) };
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX).max(1);
    conn.execute(
        "UPDATE import_items SET lease_until = pe_now_ms() + ?2
         WHERE lease_owner = ?1 AND state IN ('preparing', 'extracting')",
        params![desktop, lease_ms],
    )?;
    let owners: Vec<String> = conn.query_map(
        "SELECT DISTINCT lease_owner FROM import_items WHERE lease_owner IS NOT NULL AND lease_owner <> ?1",
        params![desktop],
        |r| r.get(0),
    )?;
    let gone: Vec<String> = owners
        .into_iter()
        .filter(|owner| {
            crate::catalog::server::desktop_host(owner) == host
                && owner.rsplit_once(" #").and_then(|(_, pid)| pid.parse().ok()).is_some_and(|pid| !alive(pid))
        })
        .collect();
    let mut back = conn.execute(
        "UPDATE import_items SET state = 'queued', updated_at = ?1, lease_owner = NULL, lease_until = NULL
         WHERE lease_owner IS NOT NULL AND lease_until < pe_now_ms() AND state IN ('preparing', 'extracting')
           AND batch_id IS NULL",
        params![now],
    )?;
    for owner in gone {
        back += conn.execute(
            "UPDATE import_items SET state = 'queued', updated_at = ?1, lease_owner = NULL, lease_until = NULL
             WHERE lease_owner = ?2 AND state IN ('preparing', 'extracting') AND batch_id IS NULL",
            params![now, owner],
        )?;
    }
    Ok(back)
}

/// `ready → saved`, with the product, in one transaction. `product` is what the reviewer saves.
pub(crate) fn save_item(conn: &Db<'_>, id: ItemId, product: Product, now: i64) -> Result<ProductRecord, ImportError> {
    let product = checked_for_save(product)?;
    let tx = conn.transaction()?;
    let record = save_in(&tx, id, product, now)?;
    tx.commit()?;
    Ok(record)
}

fn save_in(tx: &Db<'_>, id: ItemId, product: Product, now: i64) -> Result<ProductRecord, ImportError> {
    let (state, photo_id, attempt_id, origin): (String, Option<PhotoId>, Option<i64>, String) = tx
        .query_row("SELECT state, photo_id, attempt_id, origin FROM import_items WHERE id = ?1", params![id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()?
        .ok_or(ImportError::NotFound(id))?;
    let state = ItemState::parse(&state).unwrap_or(ItemState::Skipped);
    let (ItemState::Ready, Some(photo_id)) = (state, photo_id) else {
        return Err(ImportError::WrongState { id, state, expected: "ready" });
    };
    let existed: bool = tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM products WHERE photo_id = ?1 AND duplicate_of IS NULL)",
        params![photo_id],
        |row| row.get(0),
    )?;
    let save = SaveProduct { photo_id, attempt_id, saved: product, saved_at: now, saved_by: local_user() };
    // A photo someone dropped (or gave to `extract`) is reviewed one by one; a bulk import's item
    // is saved from the import's review.
    let source =
        if origin == ItemOrigin::Interactive.as_str() { RevisionSource::Review } else { RevisionSource::Import };
    let record = catalog_tx::save_product(tx, &save, source)?;
    catalog_tx::set_product_photos(tx, record.id, &more_photo_ids(tx, id)?)?;
    tx.execute(
        "UPDATE import_items SET state = 'saved', product_id = ?2, saved_revision = ?3, created_product = ?4,
                                 error_code = NULL, error_message = NULL, updated_at = ?5
         WHERE id = ?1 AND state = 'ready'",
        params![id, record.id, record.revision, !existed, now],
    )?;
    Ok(record)
}

/// What one [`save_ready`] transaction did.
pub(crate) struct SavedBatch {
    pub saved: Vec<ItemId>,
    /// The last item looked at (the next batch starts after it); `None` when none was left.
    pub last: Option<ItemId>,
}

/// Saves ready items in queue order, `limit` at most, in one transaction; those that `filter`
/// leaves out (or whose proposal is invalid) stay ready.
pub(crate) fn save_ready(
    conn: &Db<'_>,
    filter: SaveFilter,
    after: ItemId,
    limit: u32,
    now: i64,
) -> Result<SavedBatch, ImportError> {
    let tx = conn.transaction()?;
    let candidates: Vec<(ItemId, String)> = tx.query_map(
        "SELECT i.id, i.proposal_json FROM import_items i
         WHERE i.state = 'ready' AND i.id > ?1
           AND (?2 = 0 OR (i.flag_count = 0 AND i.looks_like_photo_id IS NULL
                           AND NOT EXISTS (SELECT 1 FROM products p WHERE p.photo_id = i.photo_id
                                           AND p.duplicate_of IS NULL AND p.deleted_at IS NULL)))
         ORDER BY i.id LIMIT ?3",
        params![after, filter == SaveFilter::Unflagged, limit],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    let last = candidates.last().map(|c| c.0);
    let mut saved = Vec::new();
    for (id, json) in candidates {
        let Ok(product) = checked_for_save(serde_json::from_str::<Product>(&json)?) else {
            continue;
        };
        save_in(&tx, id, product, now)?;
        saved.push(id);
    }
    tx.commit()?;
    Ok(SavedBatch { saved, last })
}

/// Undoes saves: for each item still `saved` whose save created its product, and whose product
/// is still at the revision that save left, the product is deleted and the item is ready again.
pub(crate) fn undo_saves(conn: &Db<'_>, ids: &[ItemId], now: i64) -> Result<UndoReport, ImportError> {
    let tx = conn.transaction()?;
    let mut report = UndoReport::default();
    for &id in ids {
        let row: Option<(String, Option<ProductId>, Option<u32>, bool)> = tx
            .query_row(
                "SELECT state, product_id, saved_revision, created_product FROM import_items WHERE id = ?1",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .optional()?;
        let restorable = match row {
            Some((state, Some(product), Some(revision), true)) if state == "saved" => {
                // Its history goes with it (ON DELETE CASCADE); a product someone duplicated since stays.
                catalog_tx::remove_unchanged_product(&tx, product, revision)?
            }
            _ => false,
        };
        if restorable {
            tx.execute(
                "UPDATE import_items SET state = 'ready', product_id = NULL, saved_revision = NULL, created_product = 0,
                                         updated_at = ?2
                 WHERE id = ?1 AND state = 'saved'",
                params![id, now],
            )?;
            report.restored.push(id);
        } else {
            report.kept.push(id);
        }
    }
    tx.commit()?;
    Ok(report)
}

/// Every failed item back to the queue with a fresh attempt count. An item whose path is waiting
/// again already (the file was queued anew) stays failed.
pub(crate) fn retry_failed(conn: &Db<'_>, now: i64) -> Result<usize, ImportError> {
    Ok(conn.execute(
        concat!(
            "UPDATE import_items
             SET state = 'queued', attempts = 0, error_code = NULL, error_message = NULL, updated_at = ?1
             WHERE state = 'failed' AND ",
            path_not_waiting!()
        ),
        params![now],
    )?)
}

/// Removes the saved and skipped items (the photos, attempts and products stay in the catalog).
pub(crate) fn clear_done(conn: &Db<'_>) -> Result<usize, ImportError> {
    Ok(conn.execute("DELETE FROM import_items WHERE state IN ('saved', 'skipped')", params![])?)
}

/// A skipped or failed item back to the queue, marked forced: it is extracted even though the
/// same bytes are known.
pub(crate) fn force(conn: &Db<'_>, id: ItemId, now: i64) -> Result<(), ImportError> {
    let changed = conn.execute(
        concat!(
            "UPDATE import_items
             SET state = 'queued', forced = 1, attempts = 0, skip_reason = NULL, duplicate_of_item = NULL,
                 duplicate_of_product = NULL, error_code = NULL, error_message = NULL, updated_at = ?2
             WHERE id = ?1
               AND (state = 'failed' OR skip_reason IN ('already_in_catalog', 'already_queued', 'discarded')) AND ",
            path_not_waiting!()
        ),
        params![id, now],
    )?;
    if changed == 1 {
        return Ok(());
    }
    let state = state_of(conn, id)?;
    Err(ImportError::WrongState { id, state, expected: "skipped as a duplicate, discarded, or failed" })
}

/// One photo of an item, as [`move_photo`] rewrites them.
struct ItemPhotoRow {
    path: String,
    path_bytes: Option<Vec<u8>>,
    sha256: Option<String>,
    photo_id: Option<PhotoId>,
    /// The queuing desktop's tag, carried with the photo (never made here: a regrouped photo is
    /// still the row it was, trusted exactly as before).
    path_tag: Option<String>,
}

/// An item's state, origin, batch mode and photos, in order (its own first).
fn photos_of(tx: &Db<'_>, id: ItemId) -> Result<(ItemState, String, bool, Vec<ItemPhotoRow>), ImportError> {
    let (state, origin, batch, first) = tx
        .query_row(
            "SELECT state, origin, batch, path, path_bytes, sha256, photo_id, path_tag FROM import_items WHERE id = ?1",
            params![id],
            |r| {
                let photo = ItemPhotoRow {
                    path: r.get(3)?,
                    path_bytes: r.get(4)?,
                    sha256: r.get(5)?,
                    photo_id: r.get(6)?,
                    path_tag: r.get(7)?,
                };
                Ok((parse_state(r, 0)?, r.get::<String>(1)?, r.get::<bool>(2)?, photo))
            },
        )
        .optional()?
        .ok_or(ImportError::NotFound(id))?;
    let mut photos = vec![first];
    photos.extend(tx.query_map(
        "SELECT path, path_bytes, sha256, photo_id, path_tag FROM import_item_photos WHERE item_id = ?1 ORDER BY position",
        params![id],
        |r| {
            Ok(ItemPhotoRow {
                path: r.get(0)?,
                path_bytes: r.get(1)?,
                sha256: r.get(2)?,
                photo_id: r.get(3)?,
                path_tag: r.get(4)?,
            })
        },
    )?);
    Ok((state, origin, batch, photos))
}

/// The states whose photos review may change: waiting (not claimed), or settled and not saved.
const REGROUPABLE: [ItemState; 3] = [ItemState::Queued, ItemState::Ready, ItemState::Failed];

/// What an item becomes once its photos changed: a waiting item just sends its new photos; a
/// settled one is `failed` with `regrouped` (its proposal was for other photos), extracted again
/// only when asked ([`force`]).
fn write_photos(
    tx: &Db<'_>,
    id: ItemId,
    state: ItemState,
    photos: &[ItemPhotoRow],
    now: i64,
) -> Result<(), ImportError> {
    let first = &photos[0];
    tx.execute("DELETE FROM import_item_photos WHERE item_id = ?1", params![id])?;
    tx.execute(
        "UPDATE import_items SET path = ?2, path_bytes = ?3, sha256 = ?4, photo_id = ?5, group_json = NULL,
                                 updated_at = ?6, path_tag = ?7
         WHERE id = ?1",
        params![id, first.path, first.path_bytes, first.sha256, first.photo_id, now, first.path_tag],
    )?;
    for (position, photo) in (1i64..).zip(&photos[1..]) {
        tx.execute(
            "INSERT INTO import_item_photos (item_id, position, path, path_bytes, sha256, photo_id, path_tag)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![id, position, photo.path, photo.path_bytes, photo.sha256, photo.photo_id, photo.path_tag],
        )?;
    }
    if state != ItemState::Queued {
        tx.execute(
            "UPDATE import_items
             SET state = 'failed', attempts = 0, proposal_json = NULL, flags_json = NULL, flag_count = 0,
                 barcodes_json = NULL, looks_like_photo_id = NULL, looks_like_distance = NULL,
                 error_code = 'regrouped', error_message = ?2
             WHERE id = ?1",
            params![
                id,
                "Its photos changed in review; extract it again to get a proposal from these photos (one Gemini call)."
            ],
        )?;
    }
    Ok(())
}

/// Review moves photo `index` (0-based, in the order sent) of item `from` to item `to` (after its
/// photos), or to a product of its own (`to` = `None`). Both items must be waiting or settled
/// and not saved; an item left without photos is listed as skipped, merged into `to`. Changed
/// settled items are not sent again by themselves ([`write_photos`]). Returns the items changed
/// (the new one last).
pub(crate) fn move_photo(
    conn: &Db<'_>,
    from: ItemId,
    index: usize,
    to: Option<ItemId>,
    max_photos: usize,
    now: i64,
) -> Result<Vec<(ItemId, ItemState)>, ImportError> {
    let tx = conn.transaction()?;
    let (from_state, origin, batch, mut from_photos) = photos_of(&tx, from)?;
    if !REGROUPABLE.contains(&from_state) {
        return Err(ImportError::WrongState { id: from, state: from_state, expected: "queued, ready or failed" });
    }
    if index >= from_photos.len() {
        return Err(ImportError::NotFound(from));
    }
    if to == Some(from) {
        return Ok(Vec::new());
    }
    if to.is_none() && from_photos.len() == 1 {
        // Already a product of its own.
        return Ok(Vec::new());
    }
    let photo = from_photos.remove(index);
    // `from` first: its row may have had the moved photo's path, which a waiting new item takes.
    if from_photos.is_empty() {
        // Its only photo goes to `to`: listed as merged, pointing at the item that has it.
        tx.execute("DELETE FROM import_item_photos WHERE item_id = ?1", params![from])?;
        tx.execute(
            "UPDATE import_items SET state = 'skipped', skip_reason = 'discarded', duplicate_of_item = ?2,
                                     error_code = NULL, error_message = ?3, proposal_json = NULL, flags_json = NULL,
                                     flag_count = 0, updated_at = ?4
             WHERE id = ?1",
            params![from, to, format!("Its photo was moved into item #{} in review.", to.unwrap_or_default()), now],
        )?;
    } else {
        write_photos(&tx, from, from_state, &from_photos, now)?;
    }
    let mut changed = vec![from];
    match to {
        Some(to) => {
            let (to_state, _, _, mut to_photos) = photos_of(&tx, to)?;
            if !REGROUPABLE.contains(&to_state) {
                return Err(ImportError::WrongState { id: to, state: to_state, expected: "queued, ready or failed" });
            }
            if to_photos.len() >= max_photos {
                return Err(ImportError::TooManyPhotos { id: to, max: max_photos });
            }
            to_photos.push(photo);
            write_photos(&tx, to, to_state, &to_photos, now)?;
            changed.push(to);
        }
        None => {
            let new: ItemId = tx.query_row(
                "INSERT INTO import_items (path, path_bytes, sha256, photo_id, state, origin, batch, queued_at,
                                          updated_at, queued_on)
                 VALUES (?1, ?2, ?3, ?4, 'queued', ?5, ?6, ?7, ?7, (SELECT queued_on FROM import_items WHERE id = ?8))
                 RETURNING id",
                params![photo.path, photo.path_bytes, photo.sha256, photo.photo_id, origin, batch, now, from],
                |r| r.get(0),
            )?;
            write_photos(&tx, new, from_state, std::slice::from_ref(&photo), now)?;
            changed.push(new);
        }
    }
    tx.commit()?;
    let mut states = Vec::with_capacity(changed.len());
    for id in changed {
        states.push((id, state_of(conn, id)?));
    }
    Ok(states)
}

/// `ready`, `failed` or `queued` → skipped (`discarded`).
pub(crate) fn discard(conn: &Db<'_>, id: ItemId, now: i64) -> Result<(), ImportError> {
    let changed = conn.execute(
        "UPDATE import_items
         SET state = 'skipped', skip_reason = 'discarded', error_code = NULL, error_message = 'Discarded in review.',
             updated_at = ?2
         WHERE id = ?1 AND state IN ('ready', 'failed', 'queued')",
        params![id, now],
    )?;
    if changed == 1 {
        return Ok(());
    }
    let state = state_of(conn, id)?;
    Err(ImportError::WrongState { id, state, expected: "ready, failed or queued" })
}

fn state_of(conn: &Db<'_>, id: ItemId) -> Result<ItemState, ImportError> {
    let state: String = conn
        .query_row("SELECT state FROM import_items WHERE id = ?1", params![id], |row| row.get(0))
        .optional()?
        .ok_or(ImportError::NotFound(id))?;
    Ok(ItemState::parse(&state).unwrap_or(ItemState::Skipped))
}

/// The hashes of the photos in the catalog (a live product, or an item not skipped). Read when
/// the queue opens, so it must stay one index pass: a covering index for the hashes and one
/// index search per check (migration 0010; the test below reads the plan).
const NEAR_SEED: &str = "SELECT ph.id, ph.phash FROM photos ph
     WHERE ph.phash IS NOT NULL
       AND (EXISTS (SELECT 1 FROM products p WHERE p.photo_id = ph.id AND p.deleted_at IS NULL)
            OR EXISTS (SELECT 1 FROM import_items i WHERE i.photo_id = ph.id AND i.state <> 'skipped'))";

/// The photos the near-duplicate index starts with: those of products and of items not skipped.
pub(crate) fn near_seed(conn: &Db<'_>) -> Result<Vec<(PhotoId, u64)>, ImportError> {
    let rows = conn.query_map(NEAR_SEED, params![], |row| Ok((row.get::<PhotoId>(0)?, row.get::<String>(1)?)))?;
    let mut seed = Vec::new();
    for (photo, hex) in rows {
        if let Some(hash) = phash::from_hex(&hex) {
            seed.push((photo, hash));
        }
    }
    Ok(seed)
}

/// Thumbnails of product photos saved before perceptual hashes existed, `limit` at a time.
pub(crate) fn photos_without_phash(
    conn: &Db<'_>,
    after: PhotoId,
    limit: u32,
) -> Result<Vec<(PhotoId, Vec<u8>)>, ImportError> {
    Ok(conn.query_map(
        "SELECT id, thumbnail_jpeg FROM photos
         WHERE phash IS NULL AND id > ?1 AND id IN (SELECT photo_id FROM products WHERE deleted_at IS NULL)
         ORDER BY id LIMIT ?2",
        params![after, limit],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?)
}

pub(crate) fn set_phashes(conn: &Db<'_>, hashes: &[(PhotoId, u64)]) -> Result<(), ImportError> {
    let tx = conn.transaction()?;
    for (photo, hash) in hashes {
        catalog_tx::set_photo_phash(&tx, *photo, &phash::to_hex(*hash))?;
    }
    tx.commit()?;
    Ok(())
}

/// The columns of [`row`], with the joins that resolve the near-duplicate hint and the product.
const ROW_SELECT: &str = "
    SELECT i.id, i.path, i.state, i.attempts, i.error_code, i.error_message, i.skip_reason,
           i.duplicate_of_item, i.duplicate_of_product,
           json_extract(i.proposal_json, '$.name'), json_extract(i.proposal_json, '$.brand'),
           i.flag_count, i.photo_id,
           coalesce(i.product_id, (SELECT p.id FROM products p
                                   WHERE p.photo_id = i.photo_id AND p.duplicate_of IS NULL AND p.deleted_at IS NULL)),
           i.updated_at, i.looks_like_distance,
           lp.id, lp.name,
           li.id, li.path, json_extract(li.proposal_json, '$.name'),
           i.origin, i.path_bytes,
           1 + (SELECT count(*) FROM import_item_photos x WHERE x.item_id = i.id),
           i.lease_owner, i.queued_on, (SELECT ph.sha256 FROM photos ph WHERE ph.id = i.photo_id)
    FROM import_items i
    LEFT JOIN products lp ON lp.photo_id = i.looks_like_photo_id AND lp.duplicate_of IS NULL AND lp.deleted_at IS NULL
    LEFT JOIN import_items li ON li.id = (SELECT max(x.id) FROM import_items x
                                         WHERE x.photo_id = i.looks_like_photo_id AND x.state <> 'skipped')";

fn row(r: &DbRow<'_>) -> rusqlite::Result<ImportRow> {
    let path: String = r.get(1)?;
    let state = parse_state(r, 2)?;
    let code = match r.get::<Option<String>>(4)? {
        Some(code) => Some(parse_code(4, &code)?),
        None => None,
    };
    let message: Option<String> = r.get(5)?;
    let (last_error, skipped) = match r.get::<Option<String>>(6)? {
        Some(reason) => {
            let reason = SkipReason::parse(&reason).ok_or_else(|| bad_column(6, &reason))?;
            let skip = SkipInfo {
                reason,
                message: message.unwrap_or_default(),
                duplicate_of_item: r.get(7)?,
                duplicate_of_product: r.get(8)?,
            };
            (None, Some(skip))
        }
        None => (code.zip(message).map(|(code, message)| ErrorReport::new(code, message)), None),
    };
    let proposal = match r.get::<Option<String>>(9)? {
        Some(name) => Some(ProposalSummary { name, brand: r.get(10)? }),
        None => None,
    };
    let distance: Option<u32> = r.get(15)?;
    let looks_like = match (distance, r.get::<Option<ProductId>>(16)?, r.get::<Option<ItemId>>(18)?) {
        (Some(distance), Some(product_id), _) => Some(LooksLike::Product { product_id, name: r.get(17)?, distance }),
        (Some(distance), None, Some(item_id)) => {
            Some(LooksLike::Item { item_id, path: r.get(19)?, name: r.get(20)?, distance })
        }
        _ => None,
    };
    let origin_text: String = r.get(21)?;
    let origin = ItemOrigin::parse(&origin_text).ok_or_else(|| bad_column(21, &origin_text))?;
    let stored = StoredPath::from_stored(path, r.get(22)?);
    Ok(ImportRow {
        id: r.get(0)?,
        file_name: stored.file_name(),
        path_bytes: stored.bytes_hex(),
        path: stored.text().to_owned(),
        state,
        origin,
        attempts: r.get(3)?,
        last_error,
        skipped,
        proposal,
        flag_count: r.get(11)?,
        looks_like,
        photo_id: r.get(12)?,
        product_id: r.get(13)?,
        updated_at: r.get(14)?,
        photo_count: r.get(23)?,
        worked_by: r.get(24)?,
        queued_on: r.get(25)?,
        photo_sha256: r.get(26)?,
    })
}

pub(crate) fn page(
    conn: &Db<'_>,
    offset: u32,
    limit: u32,
    states: Option<&[ItemState]>,
) -> Result<ImportPage, ImportError> {
    // The filter is built from our own enum's names, never from user text.
    let filter = match states {
        Some(states) => {
            let names: Vec<String> = states.iter().map(|s| format!("'{}'", s.as_str())).collect();
            format!("WHERE i.state IN ({})", if names.is_empty() { "NULL".to_string() } else { names.join(", ") })
        }
        None => String::new(),
    };
    let total: u64 = conn
        .query_row(&format!("SELECT count(*) FROM import_items i {filter}"), params![], |r| r.get::<i64>(0))?
        as u64;
    let rows = conn.query_map(
        &format!("{ROW_SELECT} {filter} ORDER BY i.id LIMIT ?1 OFFSET ?2"),
        params![limit, offset],
        row,
    )?;
    Ok(ImportPage { total, rows })
}

/// The interactive items not saved or discarded yet, oldest first: the window's Extract view.
///
/// On a team catalog, only this computer's: the photos a person dropped here (or handed to this
/// computer's window) wait for their review here, not on a colleague's desktop.
pub(crate) fn interactive_open(conn: &Db<'_>) -> Result<Vec<ImportRow>, ImportError> {
    Ok(conn.query_map(
        &format!(
            "{ROW_SELECT} WHERE i.origin = 'interactive' AND i.state NOT IN ('saved', 'skipped')
               AND (CAST(?1 AS TEXT) IS NULL OR i.queued_on IS NULL OR i.queued_on = ?1)
             ORDER BY i.id"
        ),
        params![conn.host()],
        row,
    )?)
}

/// Items changed at or after `since`, with their state and change time: how a process follows
/// what another process does to the shared queue. The time is the follow clock's
/// ([`follow_now`]): the rows' `updated_at` on SQLite (one computer's clock), the server's own
/// `changed_at` on a server (pg/0008), so desktops whose clocks disagree miss nothing.
pub(crate) fn changed_since(conn: &Db<'_>, since: i64) -> Result<Vec<(ItemId, ItemState, i64)>, ImportError> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => "SELECT id, state, updated_at FROM import_items WHERE updated_at >= ?1 ORDER BY id",
        Dialect::Postgres => "SELECT id, state, changed_at FROM import_items WHERE changed_at >= ?1 ORDER BY id",
    };
    Ok(conn.query_map(sql, params![since], |r| Ok((r.get(0)?, parse_state(r, 1)?, r.get(2)?)))?)
}

/// Now on the clock [`changed_since`] compares with: `local_now` on SQLite, the server's on a
/// server.
pub(crate) fn follow_now(conn: &Db<'_>, local_now: i64) -> Result<i64, ImportError> {
    match conn.dialect() {
        Dialect::Sqlite => Ok(local_now),
        Dialect::Postgres => Ok(conn.query_row("SELECT pe_now_ms()", params![], |r| r.get(0))?),
    }
}

/// A number that changes when another connection (another process, another desktop) commits a
/// change to the queue: SQLite's `data_version`; on a server, the change sequence every item's
/// change and every deletion bumps (pg/0008), one read.
pub(crate) fn data_version(conn: &Db<'_>) -> Result<i64, ImportError> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => "PRAGMA data_version",
        Dialect::Postgres => "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM import_items_changes",
    };
    Ok(conn.query_row(sql, params![], |r| r.get(0))?)
}

pub(crate) fn detail(conn: &Db<'_>, id: ItemId) -> Result<ImportItemDetail, ImportError> {
    let row = conn
        .query_row(&format!("{ROW_SELECT} WHERE i.id = ?1"), params![id], row)
        .optional()?
        .ok_or(ImportError::NotFound(id))?;
    let (sha256, proposal, flags, attempt, (barcodes, group, sources)) = conn.query_row(
        "SELECT i.sha256, i.proposal_json, i.flags_json,
                a.id, a.model, a.latency_ms, a.prompt_tokens, a.output_tokens, a.thoughts_tokens, a.total_tokens,
                a.raw_response, a.cached_tokens, a.cost_nanos, a.batch, i.barcodes_json, i.group_json,
                a.sources_json
         FROM import_items i LEFT JOIN attempts a ON a.id = i.attempt_id
         WHERE i.id = ?1",
        params![id],
        |r| {
            let proposal: Option<Product> = json(r, 1)?;
            let flags: Vec<FieldFlag> = json(r, 2)?.unwrap_or_default();
            let attempt = match r.get::<Option<i64>>(3)? {
                Some(attempt_id) => {
                    let tokens: [Option<u32>; 5] = [r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?, r.get(11)?];
                    let usage = tokens[0].map(|prompt_tokens| Usage {
                        prompt_tokens,
                        output_tokens: tokens[1].unwrap_or_default(),
                        thoughts_tokens: tokens[2].unwrap_or_default(),
                        total_tokens: tokens[3].unwrap_or_default(),
                        cached_tokens: tokens[4].unwrap_or_default(),
                    });
                    Some(AttemptInfo {
                        id: attempt_id,
                        model: r.get(4)?,
                        latency_ms: r.get::<i64>(5)?.max(0) as u64,
                        usage,
                        raw_response: r.get(10)?,
                        cost_usd: r.get::<Option<i64>>(12)?.map(Usd::from_nanos),
                        batch: r.get(13)?,
                    })
                }
                None => None,
            };
            let barcodes: Option<Vec<Barcode>> = json(r, 14)?;
            let group: Option<GroupNote> = json(r, 15)?;
            let sources: Vec<crate::product::FieldSource> = json(r, 16)?.unwrap_or_default();
            Ok((r.get::<Option<String>>(0)?, proposal, flags, attempt, (barcodes, group, sources)))
        },
    )?;
    let first = ItemPhoto {
        path: row.path.clone(),
        path_bytes: row.path_bytes.clone(),
        file_name: row.file_name.clone(),
        photo_id: row.photo_id,
        photo_sha256: row.photo_sha256.clone(),
    };
    let mut photos = vec![first];
    photos.extend(conn.query_map(
        "SELECT x.path, x.path_bytes, x.photo_id, ph.sha256
         FROM import_item_photos x LEFT JOIN photos ph ON ph.id = x.photo_id
         WHERE x.item_id = ?1 ORDER BY x.position",
        params![id],
        |r| {
            let stored = StoredPath::from_stored(r.get(0)?, r.get(1)?);
            Ok(ItemPhoto {
                file_name: stored.file_name(),
                path_bytes: stored.bytes_hex(),
                path: stored.text().to_owned(),
                photo_id: r.get(2)?,
                photo_sha256: r.get(3)?,
            })
        },
    )?);
    Ok(ImportItemDetail { row, sha256, proposal, flags, attempt, barcodes, photos, group, sources })
}

fn json<T: serde::de::DeserializeOwned>(r: &DbRow<'_>, idx: usize) -> rusqlite::Result<Option<T>> {
    match r.get_ref(idx)?.as_str_or_null()? {
        None => Ok(None),
        Some(text) => serde_json::from_str(text)
            .map(Some)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))),
    }
}

fn parse_state(r: &DbRow<'_>, idx: usize) -> rusqlite::Result<ItemState> {
    let text = r.get_ref(idx)?.as_str()?;
    ItemState::parse(text).ok_or_else(|| bad_column(idx, text))
}

fn parse_code(idx: usize, code: &str) -> rusqlite::Result<ErrorCode> {
    serde_json::from_value(serde_json::Value::String(code.to_string())).map_err(|_| bad_column(idx, code))
}

fn bad_column(idx: usize, text: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        idx,
        rusqlite::types::Type::Text,
        format!("unexpected value {text:?} in import_items").into(),
    )
}

// ---------------------------------------------------------------------------------------------
// Batch mode: the `batches` table (migration 0007) and the items' link to it
// ---------------------------------------------------------------------------------------------

/// A batch Gemini accepted and has not finished.
#[derive(Debug, Clone)]
pub(crate) struct OpenBatch {
    pub id: i64,
    pub name: String,
    pub submitted_at: i64,
    pub last_polled_at: Option<i64>,
}

/// An item waiting in a batch.
#[derive(Debug, Clone)]
pub(crate) struct BatchItem {
    pub id: ItemId,
    pub photo_id: PhotoId,
    /// The product's other photos, in order.
    pub more_photos: Vec<PhotoId>,
    /// Attempts counted before this batch's.
    pub attempts: u32,
    /// Read from its photo when it was prepared.
    pub barcodes: Vec<Barcode>,
}

/// Before the create call: a `submitting` batch named `display_name`, linked to those of `items`
/// still `extracting` in batch mode. Returns the batch and the items linked (none: no batch).
pub(crate) fn open_batch(
    conn: &Db<'_>,
    display_name: &str,
    model: &str,
    items: &[ItemId],
    now: i64,
) -> Result<Option<(i64, Vec<ItemId>)>, ImportError> {
    let tx = conn.transaction()?;
    let batch: i64 = tx.query_row(
        "INSERT INTO batches (display_name, state, model, requests, created_at, updated_at)
         VALUES (?1, 'submitting', ?2, ?3, ?4, ?4) RETURNING id",
        params![display_name, model, items.len().max(1) as i64, now],
        |row| row.get(0),
    )?;
    let mut linked = Vec::with_capacity(items.len());
    for &id in items {
        let link = tx.execute(
            "UPDATE import_items SET batch_id = ?2, updated_at = ?3
             WHERE id = ?1 AND state = 'extracting' AND batch = 1 AND batch_id IS NULL",
            params![id, batch, now],
        )?;
        if link == 1 {
            linked.push(id);
        }
    }
    if linked.is_empty() {
        return Ok(None);
    }
    tx.execute("UPDATE batches SET requests = ?2 WHERE id = ?1", params![batch, linked.len() as i64])?;
    tx.commit()?;
    Ok(Some((batch, linked)))
}

/// The create call answered (or the batch was found by its display name): the batch's name is
/// stored in the transaction that marks its items `submitted`. Returns how many moved.
pub(crate) fn batch_accepted(
    conn: &Db<'_>,
    batch: i64,
    name: &str,
    phase: BatchPhase,
    now: i64,
) -> Result<usize, ImportError> {
    let tx = conn.transaction()?;
    tx.execute(
        "UPDATE batches SET name = ?2, state = ?3, submitted_at = ?4, updated_at = ?4
         WHERE id = ?1 AND state = 'submitting'",
        params![batch, name, phase.as_str(), now],
    )?;
    let moved = tx.execute(
        "UPDATE import_items SET state = 'submitted', error_code = NULL, error_message = NULL, updated_at = ?2
         WHERE batch_id = ?1 AND state = 'extracting'",
        params![batch, now],
    )?;
    tx.commit()?;
    Ok(moved)
}

/// The batch was certainly not created: its row goes, and its items leave `extracting` for
/// `to` (`queued`, or `failed` for their own fault), with the error, counting an attempt when
/// `count_attempt`.
pub(crate) fn batch_abandoned(
    conn: &Db<'_>,
    batch: i64,
    to: ItemState,
    count_attempt: bool,
    error: &(ErrorCode, String),
    now: i64,
) -> Result<Vec<ItemId>, ImportError> {
    let tx = conn.transaction()?;
    let moved: Vec<ItemId> = tx.query_map(
        "UPDATE import_items SET state = ?2, batch_id = NULL, attempts = attempts + ?3, error_code = ?4,
                                 error_message = ?5, updated_at = ?6
         WHERE batch_id = ?1 AND state = 'extracting' RETURNING id",
        params![batch, to.as_str(), i64::from(count_attempt), error.0.as_str(), error.1, now],
        |r| r.get(0),
    )?;
    tx.execute("UPDATE import_items SET batch_id = NULL WHERE batch_id = ?1", params![batch])?;
    tx.execute("DELETE FROM batches WHERE id = ?1 AND state = 'submitting'", params![batch])?;
    tx.commit()?;
    Ok(moved)
}

/// Batches whose create call may or may not have reached Gemini (the process died, or the
/// answer was lost): id and display name.
pub(crate) fn submitting_batches(conn: &Db<'_>) -> Result<Vec<(i64, String)>, ImportError> {
    Ok(conn.query_map(
        "SELECT id, display_name FROM batches WHERE state = 'submitting' ORDER BY id",
        params![],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

/// Batches Gemini works on (pending or running).
pub(crate) fn open_batches(conn: &Db<'_>) -> Result<Vec<OpenBatch>, ImportError> {
    Ok(conn.query_map(
        "SELECT id, name, submitted_at, last_polled_at FROM batches
         WHERE state IN ('pending', 'running') AND name IS NOT NULL ORDER BY id",
        params![],
        |r| Ok(OpenBatch { id: r.get(0)?, name: r.get(1)?, submitted_at: r.get(2)?, last_polled_at: r.get(3)? }),
    )?)
}

/// A poll's answer: the batch's state and when it was looked at.
pub(crate) fn batch_polled(conn: &Db<'_>, batch: i64, phase: BatchPhase, now: i64) -> Result<(), ImportError> {
    conn.execute(
        "UPDATE batches SET state = ?2, last_polled_at = ?3, updated_at = ?3
         WHERE id = ?1 AND state IN ('pending', 'running')",
        params![batch, phase.as_str(), now],
    )?;
    Ok(())
}

/// The items still waiting in a batch.
pub(crate) fn batch_items(conn: &Db<'_>, batch: i64) -> Result<Vec<BatchItem>, ImportError> {
    let mut items: Vec<BatchItem> = conn.query_map(
        "SELECT id, photo_id, attempts, barcodes_json FROM import_items
         WHERE batch_id = ?1 AND state = 'submitted' ORDER BY id",
        params![batch],
        |r| {
            Ok(BatchItem {
                id: r.get(0)?,
                photo_id: r.get(1)?,
                more_photos: Vec::new(),
                attempts: r.get(2)?,
                barcodes: json(r, 3)?.unwrap_or_default(),
            })
        },
    )?;
    for item in &mut items {
        item.more_photos = more_photo_ids(conn, item.id)?;
    }
    Ok(items)
}

/// The photo ids of an item's other photos, in order (set once it was prepared).
fn more_photo_ids(conn: &Db<'_>, item: ItemId) -> Result<Vec<PhotoId>, ImportError> {
    Ok(conn.query_map(
        "SELECT photo_id FROM import_item_photos WHERE item_id = ?1 AND photo_id IS NOT NULL ORDER BY position",
        params![item],
        |r| r.get(0),
    )?)
}

/// The batch ended (`phase`): its items still `submitted` go back to `queued` with `error` (the
/// reason), counting an attempt when `count_attempt`, or fail once they reach `max_attempts`.
/// Returns the items moved and their new state.
pub(crate) fn batch_ended(
    conn: &Db<'_>,
    batch: i64,
    phase: BatchPhase,
    error: Option<&(ErrorCode, String)>,
    count_attempt: bool,
    max_attempts: u32,
    now: i64,
) -> Result<Vec<(ItemId, ItemState)>, ImportError> {
    let tx = conn.transaction()?;
    tx.execute(
        "UPDATE batches SET state = ?2, error = ?3, last_polled_at = ?4, updated_at = ?4 WHERE id = ?1",
        params![batch, phase.as_str(), error.map(|e| e.1.as_str()), now],
    )?;
    let (code, message) = match error {
        Some((code, message)) => (code.as_str(), message.as_str()),
        None => (ErrorCode::GeminiApiError.as_str(), "Gemini's batch gave no answer for this photo."),
    };
    let moved: Vec<(ItemId, ItemState)> = tx.query_map(
        "UPDATE import_items
         SET state = CASE WHEN attempts + ?2 >= ?3 THEN 'failed' ELSE 'queued' END,
             attempts = attempts + ?2, batch_id = NULL, error_code = ?4, error_message = ?5, updated_at = ?6
         WHERE batch_id = ?1 AND state = 'submitted' RETURNING id, state",
        params![batch, i64::from(count_attempt), max_attempts, code, message, now],
        |r| Ok((r.get(0)?, parse_state(r, 1)?)),
    )?;
    tx.commit()?;
    Ok(moved)
}

/// Batch-mode items that will still join a chunk: queued or being prepared, and those
/// `extracting` but in no batch yet (in a chunk, or about to join one).
pub(crate) fn batch_items_coming(conn: &Db<'_>) -> Result<(usize, usize), ImportError> {
    Ok(conn.query_row(
        "SELECT count(*) FILTER (WHERE state IN ('queued', 'preparing')),
                count(*) FILTER (WHERE state = 'extracting' AND batch_id IS NULL)
         FROM import_items WHERE batch = 1",
        params![],
        |r| Ok((r.get::<i64>(0)? as usize, r.get::<i64>(1)? as usize)),
    )?)
}

/// The batches not finished, and those that changed since the oldest item listed was queued
/// (so a failed or expired one is still shown with its reason), newest first.
pub(crate) fn batch_infos(conn: &Db<'_>) -> Result<Vec<BatchInfo>, ImportError> {
    Ok(conn.query_map(
        "SELECT b.name, b.state, b.requests, b.submitted_at, b.last_polled_at, b.error FROM batches b
         WHERE b.state IN ('submitting', 'pending', 'running')
            OR b.updated_at >= (SELECT min(queued_at) FROM import_items)
         ORDER BY b.id DESC LIMIT 20",
        params![],
        |r| {
            let state: String = r.get(1)?;
            Ok(BatchInfo {
                name: r.get(0)?,
                state: BatchPhase::parse(&state).ok_or_else(|| bad_column(1, &state))?,
                requests: r.get(2)?,
                submitted_at: r.get(3)?,
                last_polled_at: r.get(4)?,
                error: r.get(5)?,
            })
        },
    )?)
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
