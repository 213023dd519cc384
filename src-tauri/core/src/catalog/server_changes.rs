//! Live updates between desktops on a server catalog (issue 13): LISTEN/NOTIFY.
//!
//! Every write of a product notifies [`CHANNEL`] with the product's id from inside its
//! transaction, so PostgreSQL delivers it when (and only if) the write commits. Each desktop
//! listens on one connection of its own, opened when the first subscriber asks
//! ([`super::Catalog::subscribe_changes`]), and hands every id to its subscribers. When that
//! connection drops (the network, a server restart) it is opened again with a growing pause, and
//! the subscribers are told [`CatalogChange::Everything`]: what changed meanwhile was not heard,
//! so they read again what they show. The listener ends when nobody subscribes any more.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::broadcast;
use tokio_postgres::AsyncMessage;

use super::records::ProductId;
use super::server_connect::Transport;

/// The notification channel product writes use.
pub const CHANNEL: &str = "pe_catalog_changes";

/// How many changes a slow subscriber may fall behind before it is told to read everything again.
const BACKLOG: usize = 1024;
/// Pauses between attempts to listen again after the connection dropped.
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// How often an idle listener looks whether anybody still subscribes.
const IDLE_CHECK: Duration = Duration::from_secs(10);

/// What another desktop (or this one) changed in a server catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogChange {
    /// A product was saved, edited, deleted, undeleted or created as a duplicate.
    Product(ProductId),
    /// Changes may have been missed (the listener reconnected, or a subscriber fell behind):
    /// read everything shown again.
    Everything,
    /// The server cannot be reached (the listener's connection ended and cannot be opened again)
    /// since `since_ms` (unix ms): what is shown is what was read before; it is tried again,
    /// backing off.
    ServerAway { since_ms: i64, reason: String },
    /// The server answers again (followed by [`CatalogChange::Everything`]).
    ServerBack,
    /// The listener listens (after it connected, and after each reconnect): from now on every
    /// committed change is heard.
    Listening,
}

/// The listener's sender, shared by a server catalog's handles.
#[derive(Default)]
pub(crate) struct Changes {
    sender: Mutex<Option<broadcast::Sender<CatalogChange>>>,
}

impl Changes {
    /// A receiver of the catalog's changes; the first one starts the listener (which needs a
    /// tokio runtime).
    pub(super) fn subscribe(
        &self,
        config: &tokio_postgres::Config,
        transport: &Transport,
    ) -> broadcast::Receiver<CatalogChange> {
        let mut sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = sender.as_ref().filter(|s| s.receiver_count() > 0) {
            return sender.subscribe();
        }
        let (tx, rx) = broadcast::channel(BACKLOG);
        *sender = Some(tx.clone());
        tokio::spawn(listen(config.clone(), transport.clone(), Arc::new(tx)));
        rx
    }
}

/// Listens until nobody subscribes, reconnecting when the connection drops.
async fn listen(config: tokio_postgres::Config, transport: Transport, sender: Arc<broadcast::Sender<CatalogChange>>) {
    let mut pause = RETRY_FIRST;
    let mut first = true;
    let mut away = false;
    while sender.receiver_count() > 0 {
        let heard = listen_once(&config, &transport, &sender, first, &mut away).await;
        match heard {
            Ok(()) => return,
            Err(ListenEnded::Connected(message)) => {
                tracing::warn!(%message, "the catalog change listener lost its connection; listening again");
                first = false;
                pause = RETRY_FIRST;
            }
            Err(ListenEnded::NotConnected(message)) => {
                tracing::warn!(%message, ?pause, "the catalog change listener cannot connect; trying again");
                if !away {
                    // Not reachable now (a lost connection that cannot be opened again, or none
                    // at all): the window says so until it is back.
                    away = true;
                    let since_ms = chrono::Utc::now().timestamp_millis();
                    let _ = sender.send(CatalogChange::ServerAway { since_ms, reason: message.clone() });
                }
                first = false;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
        }
    }
}

enum ListenEnded {
    /// Listening worked, then the connection ended.
    Connected(String),
    /// Connecting or LISTEN failed.
    NotConnected(String),
}

/// One connection: LISTEN, then forward notifications until it ends (`Err`) or nobody subscribes
/// (`Ok`). After a reconnect, subscribers are told to read everything again.
async fn listen_once(
    config: &tokio_postgres::Config,
    transport: &Transport,
    sender: &broadcast::Sender<CatalogChange>,
    first: bool,
    away: &mut bool,
) -> Result<(), ListenEnded> {
    let (client, mut stream) =
        transport.connect(config).await.map_err(|e| ListenEnded::NotConnected(super::server::error_chain(&e)))?;
    let (messages, mut incoming) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        while let Some(message) = stream.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if messages.send(n.payload().to_string()).is_err() {
                        return Ok(());
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(super::server::error_chain(&e)),
            }
        }
        Err("the server closed the connection".to_string())
    });
    let listening = client.batch_execute(&format!("LISTEN {CHANNEL}")).await;
    if let Err(e) = listening {
        driver.abort();
        return Err(ListenEnded::NotConnected(super::server::error_chain(&e)));
    }
    let _ = sender.send(CatalogChange::Listening);
    if std::mem::take(away) {
        let _ = sender.send(CatalogChange::ServerBack);
    }
    if !first {
        let _ = sender.send(CatalogChange::Everything);
    }
    let mut idle = tokio::time::interval(IDLE_CHECK);
    loop {
        tokio::select! {
            payload = incoming.recv() => {
                let Some(payload) = payload else { break };
                let change = payload.parse().map(CatalogChange::Product).unwrap_or(CatalogChange::Everything);
                if sender.send(change).is_err() {
                    driver.abort();
                    return Ok(());
                }
            }
            _ = idle.tick() => {
                if sender.receiver_count() == 0 {
                    driver.abort();
                    return Ok(());
                }
            }
        }
    }
    drop(client);
    let message = match driver.await {
        Ok(Err(message)) => message,
        Ok(Ok(())) => "the listener stopped".to_string(),
        Err(e) => e.to_string(),
    };
    Err(ListenEnded::Connected(message))
}
