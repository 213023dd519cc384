//! The driver: one task that claims items and reaps their tasks.
//!
//! It claims the next queued item whenever fewer than K + lookahead items are in flight (K = the
//! bulkhead's slots, read from the current stack) and the queue may send calls — and an
//! interactive item even beyond that, so a dropped photo never waits behind a bulk import's
//! lookahead. Otherwise it sleeps until something changes: an item finishes, the user acts, items
//! are queued, a hold's time is up, the breaker's snapshot says it lets calls through again, or
//! another process changed the shared queue (looked at every `follow_interval`).

use std::collections::HashSet;
use std::sync::Arc;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::item;
use super::phash;
use super::records::{ItemOrigin, ItemState};
use super::shared::{lock, Hold, Mode, Shared};
use super::store::{self, Counted};
use super::{ClaimScope, ImportError, StopAdvice};
use crate::error::{Coded, ErrorCode};
use crate::resilience::{BreakerSnapshot, BreakerState, ResilienceStack};

/// The driver: claims items while the queue may run, and reaps their tasks. Ends when aborted
/// (the last handle dropped), dropping (aborting) the item tasks with it.
pub(crate) async fn drive(shared: Arc<Shared>) {
    let _alive = DriverAlive(shared.clone());
    let mut tasks: JoinSet<()> = JoinSet::new();
    // The tasks of interactive items: they have a limit of their own beside the bulk items'.
    let mut interactive: HashSet<tokio::task::Id> = HashSet::new();
    // The last claim found no bulk (or no interactive) item queued; look again only after a
    // change.
    let mut no_bulk = false;
    let mut no_interactive = false;
    // A CLI `extract` works its own (interactive) files, not a bulk import's.
    let bulk_too = shared.options.claims == ClaimScope::All;
    let mut follow = tokio::time::interval(shared.options.follow_interval);
    follow.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        while let Some(done) = tasks.try_join_next_with_id() {
            reap(done, &mut interactive);
            no_bulk = false;
            no_interactive = false;
        }
        let (cancels, stopped) = {
            let mut control = shared.control();
            (std::mem::take(&mut control.cancels), matches!(control.hold, Some(Hold::Stopped { .. })))
        };
        // Cancelled, or stopped until someone acts: the work in flight is abandoned and its items
        // wait in the queue (not half-prepared at the gate).
        if !cancels.is_empty() || (stopped && !tasks.is_empty()) {
            tasks.abort_all();
            while let Some(done) = tasks.join_next_with_id().await {
                reap(done, &mut interactive);
            }
            shared.control().in_flight = 0;
            let now = shared.now();
            // The aborted tasks' catalog jobs were sent before this one: it sees their effects.
            match shared.counted(move |conn| store::requeue_unfinished(conn, now)).await {
                Ok(counted) => shared.publish(&counted, counted.value as u64),
                Err(e) => tracing::error!(error = %e, "import: could not re-queue the cancelled items"),
            }
            // Answers the aborted tasks had in hand went to the spool: written before any claim,
            // so that Resume does not send those photos again.
            if shared.options.spool_dir.is_some() && !shared.replaying.swap(true, std::sync::atomic::Ordering::SeqCst) {
                tokio::spawn(super::spool::replay(Arc::downgrade(&shared)));
            }
            for reply in cancels {
                let _ = reply.send(());
            }
            no_bulk = false;
            no_interactive = false;
            continue;
        }
        shared.control().in_flight = tasks.len();
        shared.refresh();
        let (mode, hold, seq) = {
            let control = shared.control();
            (control.mode, control.hold.clone(), control.hold_seq)
        };
        let wait = match (hold, mode) {
            (Some(Hold::Stopped { .. }), _) | (_, Mode::Idle | Mode::PausedByUser) => Wait::Event,
            (Some(Hold::Breaker { wake_at, .. }), Mode::Running) => {
                Wait::Breaker(wake_at, seq, shared.pipeline().stack().clone())
            }
            (
                Some(
                    Hold::Quota { wake_at, .. }
                    | Hold::Budget { wake_at, .. }
                    | Hold::Disk { wake_at, .. }
                    | Hold::Server { wake_at, .. },
                ),
                Mode::Running,
            ) => Wait::Until(wake_at, seq),
            // A disk too full for more work: nothing is claimed (what is in flight is written, in
            // the room the watermark keeps); the hold's timer looks again.
            (None, Mode::Running) if shared.disk_too_full() => continue,
            // The answers a previous run paid for are written first (`spool::replay` wakes us).
            (None, Mode::Running) if shared.replaying.load(std::sync::atomic::Ordering::SeqCst) => Wait::Event,
            // A replay left answers the catalog refused, and stopped the queue; it runs again now.
            (None, Mode::Running) if shared.spool_left.swap(false, std::sync::atomic::Ordering::SeqCst) => {
                if !shared.replaying.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    tokio::spawn(super::spool::replay(Arc::downgrade(&shared)));
                }
                Wait::Event
            }
            // Bulk items fill K + lookahead; interactive ones have as many again of their own, so
            // a dropped photo never waits behind a bulk import's lookahead (and memory stays
            // bounded however many photos are dropped).
            (None, Mode::Running) => {
                let limit = shared.in_flight_limit();
                // An item past its call only writes the outcome: it leaves room for the next one,
                // up to `limit` of them (the tasks stay within twice the limit).
                let past = |origin| shared.finishing(origin).min(limit);
                let urgent = interactive.len().saturating_sub(past(ItemOrigin::Interactive));
                let bulk = (tasks.len() - interactive.len()).saturating_sub(past(ItemOrigin::Import));
                let mut want = Vec::with_capacity(2);
                if !no_interactive && urgent < limit {
                    want.push((ItemOrigin::Interactive, limit - urgent));
                }
                if bulk_too && !no_bulk && bulk < limit {
                    want.push((ItemOrigin::Import, limit - bulk));
                }
                if want.is_empty() {
                    Wait::Event
                } else {
                    let (now, lease, asked) = (shared.now(), shared.options.lease, want.clone());
                    match shared.counted(move |conn| store::claim(conn, &want, lease, now)).await {
                        Ok(Counted { value: items, counts, duplicates, cost, seq }) => {
                            for item in &items {
                                lock(&shared.working_on).insert(item.id);
                            }
                            if shared.server_back() {
                                // A claim whose answer was lost with the server (it committed as
                                // the connection dropped) leased items no task works on here:
                                // back to the queue, or they would wait for this desktop for good.
                                let working: Vec<_> = lock(&shared.working_on).iter().copied().collect();
                                let now = shared.now();
                                match shared.counted(move |conn| store::requeue_orphans(conn, &working, now)).await {
                                    Ok(back) if back.value > 0 => {
                                        tracing::info!(
                                            items = back.value,
                                            "import: claims lost with the server are queued again"
                                        );
                                        shared.publish(&back, back.value as u64);
                                    }
                                    Ok(_) => {}
                                    Err(e) => {
                                        tracing::warn!(error = %e, "import: could not look for claims lost with the server")
                                    }
                                }
                            }
                            // An origin that gave fewer than asked has nothing more queued for
                            // this desktop: look again only after a change.
                            for (origin, n) in asked {
                                if items.iter().filter(|i| i.origin == origin).count() < n {
                                    match origin {
                                        ItemOrigin::Interactive => no_interactive = true,
                                        ItemOrigin::Import => no_bulk = true,
                                    }
                                }
                            }
                            let counted = Counted { value: (), counts, duplicates, cost, seq };
                            if items.is_empty() {
                                shared.publish(&counted, 0);
                            }
                            for item in items {
                                shared.item_changed(item.id, ItemState::Preparing, &counted);
                                let urgent = item.origin == ItemOrigin::Interactive;
                                let task = tasks.spawn(item::process(shared.clone(), item));
                                if urgent {
                                    interactive.insert(task.id());
                                }
                            }
                        }
                        Err(e) => stop_for(&shared, &e),
                    }
                    continue;
                }
            }
        };
        tokio::select! {
            () = shared.wake.notified() => {
                no_bulk = false;
                no_interactive = false;
            }
            Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                reap(done, &mut interactive);
                no_bulk = false;
                no_interactive = false;
            }
            seq = hold_over(wait) => shared.clear_hold(seq),
            _ = follow.tick() => match shared.follow_others().await {
                Ok(true) => {
                    no_bulk = false;
                    no_interactive = false;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "import: could not look at the queue's changes"),
            },
        }
    }
}

/// What the driver waits for before looking again.
pub(crate) enum Wait {
    /// An event: a finished item, a wake-up.
    Event,
    /// An event, or the time (a quota or budget hold).
    Until(Instant, u64),
    /// An event, the time if any, or the breaker letting calls through.
    Breaker(Option<Instant>, u64, ResilienceStack),
}

/// Marks the driver gone when its future is dropped (the queue aborted it), answering waiting
/// `cancel` calls: their items are re-queued at the next open.
struct DriverAlive(Arc<Shared>);

impl Drop for DriverAlive {
    fn drop(&mut self) {
        let mut control = self.0.control();
        control.driver_alive = false;
        control.cancels.clear();
    }
}

/// Resolves when the hold `wait` describes is over (never for [`Wait::Event`]).
async fn hold_over(wait: Wait) -> u64 {
    match wait {
        Wait::Event => std::future::pending().await,
        Wait::Until(at, seq) => {
            tokio::time::sleep_until(at).await;
            seq
        }
        Wait::Breaker(at, seq, stack) => {
            let timer = async {
                match at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = timer => seq,
                () = breaker_admits(&stack) => seq,
            }
        }
    }
}

/// Resolves when the breaker's published state lets calls through.
async fn breaker_admits(stack: &ResilienceStack) {
    let mut snapshots = stack.breaker().snapshot_watch();
    loop {
        if admits(&snapshots.borrow_and_update()) {
            return;
        }
        if snapshots.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

fn admits(snapshot: &BreakerSnapshot) -> bool {
    match snapshot.state {
        BreakerState::Closed | BreakerState::Disabled | BreakerState::MetricsOnly => true,
        BreakerState::HalfOpen => snapshot.half_open.is_some_and(|h| h.permits_used < h.permits_permitted),
        BreakerState::Open | BreakerState::ForcedOpen => false,
    }
}

/// A finished (or aborted) item task: no longer counted, and its panic logged.
fn reap(done: Result<(tokio::task::Id, ()), tokio::task::JoinError>, interactive: &mut HashSet<tokio::task::Id>) {
    match done {
        Ok((id, ())) => {
            interactive.remove(&id);
        }
        Err(e) => {
            interactive.remove(&e.id());
            if e.is_panic() {
                tracing::error!(error = %e, "import: an item task panicked");
            }
        }
    }
}

pub(crate) fn stop_for(shared: &Shared, error: &ImportError) {
    if let Some(reason) = error.server_away() {
        // Not a stop: the queue waits for the server and goes on by itself.
        shared.hold_for_server(reason);
        return;
    }
    if error.code() == ErrorCode::DiskFull {
        // Not a stop: the queue waits for room and goes on by itself.
        tracing::warn!(error = %error, "import: the catalog's disk is full");
        shared.hold_for_disk(None, disk_full_message(shared));
        return;
    }
    tracing::error!(error = %error, "import: stopped");
    shared.hold(Hold::Stopped { code: error.code(), message: stopped_message(error, shared.options.stop_advice) });
}

/// "The import stopped: <the error>. <what to do>", in the words of the queue's reader.
fn stopped_message(error: &impl std::fmt::Display, advice: StopAdvice) -> String {
    let error = error.to_string();
    format!("The import stopped: {}. {}", error.trim_end().trim_end_matches('.'), advice.text())
}

/// What a queue held by SQLite's `SQLITE_FULL` says (the free-space check had not caught it: the
/// disk filled faster, or a quota or a file size limit stopped the writes).
pub(crate) fn disk_full_message(shared: &Shared) -> String {
    let dir = shared.options.disk.dir.as_ref().map(|d| format!(" ({})", d.display())).unwrap_or_default();
    format!("The disk holding the catalog{dir} is full: the catalog could not be written.")
}

/// Gives product photos saved before hashes existed a perceptual hash, in small batches, so they
/// can be "looked like" too.
pub(crate) async fn backfill_phashes(shared: Arc<Shared>) {
    const BATCH: u32 = 64;
    let mut after = 0;
    loop {
        let thumbnails = match shared.store.run(move |conn| store::photos_without_phash(conn, after, BATCH)).await {
            Ok(t) if !t.is_empty() => t,
            Ok(_) => return,
            Err(e) => return tracing::warn!(error = %e, "import: could not hash older photos"),
        };
        after = thumbnails.last().map_or(after, |t| t.0);
        let hashes: Vec<(i64, u64)> = tokio::task::spawn_blocking(move || {
            thumbnails.iter().filter_map(|(photo, jpeg)| phash::dhash_jpeg(jpeg).map(|h| (*photo, h))).collect()
        })
        .await
        .unwrap_or_default();
        for (photo, hash) in &hashes {
            lock(&shared.near).insert(*photo, *hash);
        }
        if let Err(e) = shared.store.run(move |conn| store::set_phashes(conn, &hashes)).await {
            return tracing::warn!(error = %e, "import: could not store the hashes of older photos");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CatalogError;

    #[test]
    fn a_stop_says_what_to_do_in_the_words_of_its_reader() {
        let full = ImportError::Catalog(CatalogError::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            Some("database or disk is full".into()),
        )));
        assert_eq!(
            stopped_message(&full, StopAdvice::Resume),
            "The import stopped: catalog database error: database or disk is full. Resume to try again."
        );
        let terminal = stopped_message(&full, StopAdvice::RunAgain);
        assert_eq!(
            terminal,
            "The import stopped: catalog database error: database or disk is full. Fix that (free some disk space \
             if the disk is full), then run the same command again: the photos stay queued."
        );
        assert!(!terminal.contains("Resume"), "a terminal has no Resume button: {terminal}");
        // An error that ends its own sentence is not given a second full stop.
        assert_eq!(
            stopped_message(&"the catalog is closed.", StopAdvice::Resume),
            "The import stopped: the catalog is closed. Resume to try again."
        );
    }
}
