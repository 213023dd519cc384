//! Queued: what an enqueue writes — the items, their photos and products, the same bytes
//! recognized (a photo already saved, an item already queued) and cosigned, skipped entries.

use super::*;

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
pub(super) fn place_photo(
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
pub(super) fn place_product(
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
pub(super) fn cosign(tx: &Db<'_>, item: ItemId, path: &StoredPath, sha256: Option<&str>) -> Result<(), ImportError> {
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
pub(super) fn known_photo(
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
pub(super) fn insert_item(
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
pub(super) fn promote(tx: &Db<'_>, item: ItemId, origin: ItemOrigin) -> Result<(), ImportError> {
    if origin == ItemOrigin::Interactive {
        tx.execute(
            "UPDATE import_items SET origin = 'interactive'
             WHERE id = ?1 AND origin <> 'interactive' AND state IN ('queued', 'preparing', 'extracting', 'ready')",
            params![item],
        )?;
    }
    Ok(())
}

/// A failed or discarded item back to the queue with a fresh attempt count (false when its path
/// is waiting again already).
pub(super) fn requeue(tx: &Db<'_>, item: ItemId, origin: ItemOrigin, now: i64) -> Result<bool, ImportError> {
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
pub(super) struct Skip<'a> {
    path: &'a StoredPath,
    sha256: Option<&'a str>,
    reason: SkipReason,
    message: &'a str,
    /// The item or product it duplicates.
    dup: (Option<ItemId>, Option<ProductId>),
}

pub(super) fn insert_skipped(
    tx: &Db<'_>,
    skip: &Skip<'_>,
    origin: ItemOrigin,
    now: i64,
) -> Result<ItemId, ImportError> {
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

pub(super) fn product_with_sha(tx: &Db<'_>, sha: &str) -> Result<Option<(ProductId, String)>, ImportError> {
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

pub(super) fn item_with_sha(tx: &Db<'_>, sha: &str) -> Result<Option<(ItemId, String)>, ImportError> {
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
