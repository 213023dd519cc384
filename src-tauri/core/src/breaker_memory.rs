//! What the Gemini breaker remembers across restarts (issue 26): the seed service forgot, on a
//! restart, that Gemini had been failing a minute before, and started CLOSED and empty. Here the
//! breaker's state, window and recent events are saved in the catalog after each change
//! ([`keep_saving`]) and the next run starts from them ([`restore`], before its first call), as
//! `[circuit_breaker] remember_across_restarts` says (on by default).

use std::time::Duration;

use crate::catalog::Catalog;
use crate::resilience::ResilienceStack;

/// How long a burst of calls coalesces into one save (a change of state is saved at once).
const SAVE_EVERY: Duration = Duration::from_millis(250);

/// Starts the stack's breaker from what the last run saved on this desktop; true when it did. A
/// breaker told not to remember, a catalog that never saved one, or one that cannot be read
/// leaves it CLOSED and empty.
pub async fn restore(catalog: &Catalog, stack: &ResilienceStack) -> bool {
    let breaker = stack.breaker();
    if !breaker.config().remember_across_restarts {
        return false;
    }
    match catalog.saved_breaker(breaker.name()).await {
        Ok(Some(saved)) => {
            breaker.restore(&saved);
            true
        }
        Ok(None) => false,
        Err(e) => {
            tracing::warn!(error = %e, "the breaker's saved state could not be read: it starts afresh");
            false
        }
    }
}

/// Saves the stack's breaker after every change, until the future is dropped (the stack was
/// replaced) or the breaker is gone. A change of state is saved at once; calls within
/// [`SAVE_EVERY`] of each other are saved together.
pub async fn keep_saving(catalog: Catalog, stack: ResilienceStack) {
    let breaker = stack.breaker().clone();
    if !breaker.config().remember_across_restarts {
        return;
    }
    let mut snapshots = breaker.snapshot_watch();
    snapshots.borrow_and_update();
    // Saved first as it is now (a change before this task ran is in it), then after each change.
    loop {
        let saved = breaker.saved();
        let saved_state = saved.state;
        if let Err(e) = catalog.save_breaker(breaker.name(), saved).await {
            tracing::warn!(error = %e, "the breaker's state could not be saved");
        }
        if snapshots.changed().await.is_err() {
            return;
        }
        if snapshots.borrow_and_update().state == saved_state {
            tokio::time::sleep(SAVE_EVERY).await;
        }
    }
}
