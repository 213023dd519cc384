//! Batch imports: a chunk's `batches` row and its items, from submission to the end.

use super::*;

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
pub(super) fn more_photo_ids(conn: &Db<'_>, item: ItemId) -> Result<Vec<PhotoId>, ImportError> {
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
