//! The one-way event bridge: the core publishes breaker snapshots on a `watch` and stack changes
//! on another; this task turns them into the `resilience://snapshot` Tauri event, at most ~10 a
//! second however fast calls finish, and follows the stack when Settings replace it. The import
//! queue's progress goes out the same way as `import://progress`; a team catalog's changes (saved
//! on any desktop) as `catalog://changed`.

use std::time::Duration;

use pe_core::catalog::server_changes::CatalogChange;
use pe_core::import::{ImportProgress, ImportStatus};
use serde::Serialize;
use tauri::{AppHandle, Emitter, Manager, Runtime};
use ts_rs::TS;

use crate::state::AppState;

/// An event Rust sends to the window: its name and its payload's type, written once. [`send`] is
/// the only way one is emitted, and [`registry`] writes the UI's `bindings/events.ts` (the names
/// and each payload's type), so a handler in the window is typed by what Rust sends.
pub trait WindowEvent {
    /// The event's name on the wire ("import://item").
    const NAME: &'static str;
    /// Its key in the UI's `EVENTS` ("IMPORT_ITEM").
    const KEY: &'static str;
    /// What it says, for the generated file.
    const DOC: &'static str;
    type Payload: Serialize + Clone + TS + 'static;
}

/// Emits `E` to every window; a window that is gone is not an error (logged at debug).
pub fn send<E: WindowEvent, R: Runtime>(app: &AppHandle<R>, payload: E::Payload) {
    if let Err(e) = app.emit(E::NAME, payload) {
        tracing::debug!(event = E::NAME, "event not delivered: {e}");
    }
}

/// One event as the generated TypeScript names it.
pub struct EventSpec {
    pub name: &'static str,
    pub key: &'static str,
    pub doc: &'static str,
    pub payload: crate::bindings::TsType,
}

macro_rules! window_events {
    ($( $(#[doc = $doc:literal])* $ty:ident = $key:ident: $name:literal => $payload:ty; )*) => {
        $(
            $(#[doc = $doc])*
            pub struct $ty;

            impl WindowEvent for $ty {
                const NAME: &'static str = $name;
                const KEY: &'static str = stringify!($key);
                const DOC: &'static str = concat!($($doc, "\n"),*);
                type Payload = $payload;
            }
        )*

        /// Every event Rust sends to the window.
        pub fn registry(cfg: &ts_rs::Config) -> Vec<EventSpec> {
            vec![$(EventSpec {
                name: $ty::NAME,
                key: $ty::KEY,
                doc: $ty::DOC,
                payload: crate::bindings::TsType::of::<$payload>(cfg),
            }),*]
        }
    };
}

window_events! {
    /// The live breaker panel's: the stack's snapshot, at most ~10 a second.
    Resilience = RESILIENCE: "resilience://snapshot" => pe_core::resilience::ResilienceSnapshot;
    /// The import view's: the queue's progress, coalesced like the breaker's.
    ImportProgressEvent = IMPORT_PROGRESS: "import://progress" => ImportProgress;
    /// Each import item's state change (the Extract view's cards, the import list).
    ImportItem = IMPORT_ITEM: "import://item" => pe_core::import::ItemChanged;
    /// A team catalog's change (a product saved, edited, deleted, undeleted or duplicated on any
    /// desktop). A SQLite catalog never sends it.
    CatalogChangedEvent = CATALOG_CHANGED: "catalog://changed" => CatalogChanged;
    /// The team catalog's server went away or is back. A SQLite catalog never sends it.
    CatalogServerEvent = CATALOG_SERVER: "catalog://server" => CatalogServer;
    /// Photos arrived from outside the window (launch arguments, a second launch): how many. The
    /// window shows the Extract view, where their cards appear.
    Opened = OPENED: "app://opened" => usize;
}

/// The breaker panel's event name ([`Resilience`]).
pub const RESILIENCE_EVENT: &str = Resilience::NAME;
/// The import view's event name ([`ImportProgressEvent`]).
pub const IMPORT_EVENT: &str = ImportProgressEvent::NAME;
/// An item's change's event name ([`ImportItem`]).
pub const IMPORT_ITEM_EVENT: &str = ImportItem::NAME;
/// A team catalog change's event name ([`CatalogChangedEvent`]).
pub const CATALOG_EVENT: &str = CatalogChangedEvent::NAME;
/// The team catalog server's event name ([`CatalogServerEvent`]).
pub const CATALOG_SERVER_EVENT: &str = CatalogServerEvent::NAME;

/// Whether the team catalog's server can be reached.
#[derive(Debug, Clone, Serialize, TS)]
#[ts(export)]
pub struct CatalogServer {
    /// Since when (unix ms) it cannot be reached; `null`: it answers.
    #[ts(type = "number | null")]
    pub away_since_ms: Option<i64>,
    /// Why, as the connection said.
    pub reason: Option<String>,
}

/// What changed in the team catalog.
#[derive(Debug, Clone, Serialize, TS)]
#[ts(export)]
pub struct CatalogChanged {
    /// The product that changed; `null`: anything may have (the connection to the server came
    /// back, or changes came too fast): read again what is shown.
    #[ts(type = "number | null")]
    pub product_id: Option<i64>,
}

/// Forwards a team catalog's changes to the window as they commit, on any desktop. Ends at once
/// for a SQLite catalog.
pub async fn catalog_bridge<R: Runtime>(app: AppHandle<R>, state: AppState) {
    let Some(mut changes) = state.catalog().subscribe_changes() else { return };
    loop {
        let product_id = match changes.recv().await {
            Ok(CatalogChange::Product(id)) => Some(id),
            Ok(CatalogChange::Everything) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => None,
            Ok(CatalogChange::ServerAway { since_ms, reason }) => {
                let away = CatalogServer { away_since_ms: Some(since_ms), reason: Some(reason) };
                send::<CatalogServerEvent, _>(&app, away);
                continue;
            }
            Ok(CatalogChange::Listening) => continue,
            Ok(CatalogChange::ServerBack) => {
                send::<CatalogServerEvent, _>(&app, CatalogServer { away_since_ms: None, reason: None });
                continue;
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        send::<CatalogChangedEvent, _>(&app, CatalogChanged { product_id });
    }
}

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
            send::<Resilience, _>(&app, stack.snapshot());
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
                    send::<ImportItem, _>(&items_app, changed);
                }
                // The window re-reads what it shows on the next progress event.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    let mut progress = queue.progress();
    let mut last_status = progress.borrow().status.clone();
    loop {
        let snapshot = progress.borrow_and_update().clone();
        if let Some((title, body)) = notice(&last_status, &snapshot) {
            notify_if_away(&app, &title, &body);
        }
        last_status = snapshot.status.clone();
        send::<ImportProgressEvent, _>(&app, snapshot);
        if progress.changed().await.is_err() {
            return;
        }
        tokio::time::sleep(COALESCE).await;
    }
}

/// What a person away from the window should hear about the queue's change from `before` to
/// `now`: it finished working, or it stopped for something only they can fix. `None` otherwise.
pub fn notice(before: &ImportStatus, now: &ImportProgress) -> Option<(String, String)> {
    if before == &now.status {
        return None;
    }
    match &now.status {
        ImportStatus::Finished if matches!(before, ImportStatus::Running) => {
            let c = &now.counts;
            let mut body = format!("{} ready for review", c.ready);
            if c.failed > 0 {
                body.push_str(&format!(", {} failed", c.failed));
            }
            Some(("Import finished".into(), body))
        }
        ImportStatus::Stopped { message, .. } => Some(("Import stopped".into(), message.clone())),
        ImportStatus::WaitingQuota { message, .. } if !matches!(before, ImportStatus::WaitingQuota { .. }) => {
            Some(("Import waiting for Gemini's quota".into(), message.clone()))
        }
        _ => None,
    }
}

/// A desktop notification, only while the window is not in front (whoever looks at it sees the
/// change there). Silent without the notification plugin (the mock runtime's tests).
fn notify_if_away<R: Runtime>(app: &AppHandle<R>, title: &str, body: &str) {
    let focused = app.get_webview_window("main").and_then(|w| w.is_focused().ok()).unwrap_or(false);
    if focused {
        return;
    }
    if let Some(notification) = app.try_state::<tauri_plugin_notification::Notification<R>>() {
        if let Err(e) = notification.builder().title(title).body(body).show() {
            tracing::debug!("desktop notification not shown: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pe_core::import::StateCounts;
    use pe_core::ErrorCode;

    fn progress(status: ImportStatus, ready: u32, failed: u32) -> ImportProgress {
        let counts = StateCounts { ready, failed, ..StateCounts::default() };
        ImportProgress {
            counts,
            total: ready + failed,
            done: ready + failed,
            duplicates: 0,
            throughput_per_min: 0.0,
            eta_ms: None,
            status,
            in_flight: 0,
            changes: 0,
            cost: Default::default(),
            queue_cost: Default::default(),
            batches: Vec::new(),
        }
    }

    #[test]
    fn a_finished_run_is_told_with_its_counts() {
        let (title, body) = notice(&ImportStatus::Running, &progress(ImportStatus::Finished, 12, 2)).unwrap();
        assert_eq!(title, "Import finished");
        assert_eq!(body, "12 ready for review, 2 failed");
        assert_eq!(
            notice(&ImportStatus::Running, &progress(ImportStatus::Finished, 3, 0)).unwrap().1,
            "3 ready for review"
        );
    }

    #[test]
    fn only_changes_that_need_a_person_are_told() {
        let stopped = ImportStatus::Stopped { code: ErrorCode::GeminiAuth, message: "Gemini refused the key".into() };
        assert_eq!(
            notice(&ImportStatus::Running, &progress(stopped.clone(), 0, 0)),
            Some(("Import stopped".into(), "Gemini refused the key".into()))
        );
        // The same status again, a start, a pause by the user, an idle queue: nothing.
        assert_eq!(notice(&stopped, &progress(stopped.clone(), 0, 0)), None);
        assert_eq!(notice(&ImportStatus::Idle, &progress(ImportStatus::Running, 0, 0)), None);
        assert_eq!(notice(&ImportStatus::Running, &progress(ImportStatus::PausedByUser, 0, 0)), None);
        // Finished without having run (a window opened on a done queue): nothing.
        assert_eq!(notice(&ImportStatus::Idle, &progress(ImportStatus::Finished, 5, 0)), None);
    }
}
