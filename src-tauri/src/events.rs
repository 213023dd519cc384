//! The one-way event bridge: the core publishes breaker snapshots on a `watch` and stack changes
//! on another; this task turns them into the `resilience://snapshot` Tauri event, at most ~10 a
//! second however fast calls finish, and follows the stack when Settings replace it. The import
//! queue's progress goes out the same way as `import://progress`.

use std::time::Duration;

use tauri::{AppHandle, Emitter, Runtime};

use crate::state::AppState;

/// The event the live breaker panel listens to; its payload is a `ResilienceSnapshot`.
pub const RESILIENCE_EVENT: &str = "resilience://snapshot";

/// The event the import view listens to; its payload is an `ImportProgress`.
pub const IMPORT_EVENT: &str = "import://progress";

/// The event each import item's state change sends (the Extract view's cards, the import list);
/// its payload is an `ItemChanged`.
pub const IMPORT_ITEM_EVENT: &str = "import://item";

/// How long the bridge waits before trying again to open the queue after a failure.
const IMPORT_RETRY: Duration = Duration::from_secs(5);

/// The least time between two events: bursts in between coalesce into the next one.
const COALESCE: Duration = Duration::from_millis(100);

pub async fn resilience_bridge<R: Runtime>(app: AppHandle<R>, state: AppState) {
    let mut stacks = state.stack_watch();
    loop {
        let stack = stacks.borrow_and_update().clone();
        let mut breaker = stack.breaker().snapshot_watch();
        let mut changes = stack.changes();
        loop {
            if let Err(e) = app.emit(RESILIENCE_EVENT, stack.snapshot()) {
                tracing::debug!("resilience snapshot not delivered: {e}");
            }
            tokio::select! {
                changed = breaker.changed() => if changed.is_err() { break },
                changed = changes.changed() => if changed.is_err() { break },
                replaced = stacks.changed() => {
                    if replaced.is_err() {
                        return;
                    }
                    break;
                }
            }
            tokio::time::sleep(COALESCE).await;
        }
    }
}

/// Opens the import queue (so an unfinished import resumes at start) and forwards its progress
/// as `import://progress`, coalesced like the breaker's snapshots, and each item's change as
/// `import://item`.
pub async fn import_bridge<R: Runtime>(app: AppHandle<R>, state: AppState) {
    let mut warned = false;
    let queue = loop {
        match state.import_queue().await {
            Ok(queue) => break queue,
            Err(e) => {
                if !warned {
                    tracing::warn!(code = %e.code, "the import queue is not available yet: {}", e.message);
                    warned = true;
                }
                tokio::time::sleep(IMPORT_RETRY).await;
            }
        }
    };
    let mut items = queue.subscribe();
    let items_app = app.clone();
    tauri::async_runtime::spawn(async move {
        loop {
            match items.recv().await {
                Ok(changed) => {
                    if let Err(e) = items_app.emit(IMPORT_ITEM_EVENT, changed) {
                        tracing::debug!("import item event not delivered: {e}");
                    }
                }
                // The window re-reads what it shows on the next progress event.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    let mut progress = queue.progress();
    loop {
        let snapshot = progress.borrow_and_update().clone();
        if let Err(e) = app.emit(IMPORT_EVENT, snapshot) {
            tracing::debug!("import progress not delivered: {e}");
        }
        if progress.changed().await.is_err() {
            return;
        }
        tokio::time::sleep(COALESCE).await;
    }
}
