//! Prepared and sent: a worker claims items, marks them extracting, joins an item to another with
//! the same barcode; a crash, a cancel or a lost lease puts them back, and leases are renewed.

use super::*;

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
pub(super) fn more_photos(conn: &Db<'_>, item: ItemId) -> Result<Vec<MorePhoto>, ImportError> {
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
pub(super) fn same_barcode_item(
    tx: &Db<'_>,
    id: ItemId,
    keys: &[String],
) -> Result<Option<(ItemId, ItemState)>, ImportError> {
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
    let max = i64::try_from(crate::import::MAX_PHOTOS_PER_PRODUCT_LIMIT).unwrap_or(i64::MAX);
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
pub(super) fn join_by_barcode(
    tx: &Db<'_>,
    id: ItemId,
    into: ItemId,
    prepared: &PreparedRow,
    now: i64,
) -> Result<(), ImportError> {
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
