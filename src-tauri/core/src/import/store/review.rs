//! Ready to saved: the reviewer's save, save all, undo; retry, clear, force a re-extract;
//! moving a photo between products and discarding an item.

use super::*;

/// `ready → saved`, with the product, in one transaction. `product` is what the reviewer saves.
pub(crate) fn save_item(conn: &Db<'_>, id: ItemId, product: Product, now: i64) -> Result<ProductRecord, ImportError> {
    let product = checked_for_save(product)?;
    let tx = conn.transaction()?;
    let record = save_in(&tx, id, product, now)?;
    tx.commit()?;
    Ok(record)
}

pub(super) fn save_in(tx: &Db<'_>, id: ItemId, product: Product, now: i64) -> Result<ProductRecord, ImportError> {
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
pub(super) struct ItemPhotoRow {
    path: String,
    path_bytes: Option<Vec<u8>>,
    sha256: Option<String>,
    photo_id: Option<PhotoId>,
    /// The queuing desktop's tag, carried with the photo (never made here: a regrouped photo is
    /// still the row it was, trusted exactly as before).
    path_tag: Option<String>,
}

/// An item's state, origin, batch mode and photos, in order (its own first).
pub(super) fn photos_of(tx: &Db<'_>, id: ItemId) -> Result<(ItemState, String, bool, Vec<ItemPhotoRow>), ImportError> {
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
pub(super) const REGROUPABLE: [ItemState; 3] = [ItemState::Queued, ItemState::Ready, ItemState::Failed];

/// What an item becomes once its photos changed: a waiting item just sends its new photos; a
/// settled one is `failed` with `regrouped` (its proposal was for other photos), extracted again
/// only when asked ([`force`]).
pub(super) fn write_photos(
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

pub(super) fn state_of(conn: &Db<'_>, id: ItemId) -> Result<ItemState, ImportError> {
    let state: String = conn
        .query_row("SELECT state FROM import_items WHERE id = ?1", params![id], |row| row.get(0))
        .optional()?
        .ok_or(ImportError::NotFound(id))?;
    Ok(ItemState::parse(&state).unwrap_or(ItemState::Skipped))
}
