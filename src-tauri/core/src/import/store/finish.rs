//! Answered: how an item leaves `preparing` or `extracting` — its attempt, proposal and flags
//! written with its new state (or its failure), from the live call or the spool.

use super::*;

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
pub(super) enum Guard<'a> {
    /// The worker that holds the item: in the state it knew, under its own lease.
    Worker,
    /// The spool's: any waiting item that no other live lease holds.
    Spooled(Option<&'a str>),
}

pub(super) fn write_finish(conn: &Db<'_>, f: &Finish, now: i64, guard: Guard<'_>) -> Result<bool, ImportError> {
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
