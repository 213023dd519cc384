//! Reading the queue: the near-duplicate hashes, the rows of the list and their detail, and what
//! a follower polls (changes since, the data version).

use super::*;

/// The hashes of the photos in the catalog (a live product, or an item not skipped). Read when
/// the queue opens, so it must stay one index pass: a covering index for the hashes and one
/// index search per check (migration 0010; the test below reads the plan).
pub(super) const NEAR_SEED: &str = "SELECT ph.id, ph.phash FROM photos ph
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
pub(super) const ROW_SELECT: &str = "
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

pub(super) fn row(r: &DbRow<'_>) -> rusqlite::Result<ImportRow> {
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

pub(super) fn json<T: serde::de::DeserializeOwned>(r: &DbRow<'_>, idx: usize) -> rusqlite::Result<Option<T>> {
    match r.get_ref(idx)?.as_str_or_null()? {
        None => Ok(None),
        Some(text) => serde_json::from_str(text)
            .map(Some)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))),
    }
}

pub(super) fn parse_state(r: &DbRow<'_>, idx: usize) -> rusqlite::Result<ItemState> {
    let text = r.get_ref(idx)?.as_str()?;
    ItemState::parse(text).ok_or_else(|| bad_column(idx, text))
}

pub(super) fn parse_code(idx: usize, code: &str) -> rusqlite::Result<ErrorCode> {
    serde_json::from_value(serde_json::Value::String(code.to_string())).map_err(|_| bad_column(idx, code))
}

pub(super) fn bad_column(idx: usize, text: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        idx,
        rusqlite::types::Type::Text,
        format!("unexpected value {text:?} in import_items").into(),
    )
}

// ---------------------------------------------------------------------------------------------
// Batch mode: the `batches` table (migration 0007) and the items' link to it
// ---------------------------------------------------------------------------------------------
