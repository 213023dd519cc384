//! The HTTP API served from the window's process ("Serve the HTTP API while the window is open",
//! `[server] with_window`): the same router as `serve`, on the window's own queue, so requests
//! show in the Extract view and follow the window's rules (an item waits out an open breaker
//! there; its request is answered with the reason at once, and the same photos sent again later
//! get its result). Started with the window, and again whenever Settings change its address or
//! turn it on or off ([`WindowServer::reconcile`]).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use pe_core::config::ServerConfig;

use super::{bind, configured_token, router, serve, Api, Token};
use crate::dto::HttpApiStatus;
use crate::state::AppState;

/// The window's server, when it runs.
#[derive(Default)]
pub struct WindowServer {
    running: tokio::sync::Mutex<Option<Running>>,
    status: Mutex<HttpApiStatus>,
}

struct Running {
    /// What it was started with: any change restarts it.
    config: ServerConfig,
    token: Option<Token>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl WindowServer {
    /// What Settings shows.
    pub fn status(&self) -> HttpApiStatus {
        self.status.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set_status(&self, status: HttpApiStatus) {
        *self.status.lock().unwrap_or_else(PoisonError::into_inner) = status;
    }

    /// Brings the server in line with the settings: started when turned on, restarted when its
    /// `[server]` settings or its token changed, stopped when turned off. A server that cannot start (the
    /// address is taken) says why in [`WindowServer::status`]; the window goes on either way.
    pub async fn reconcile(&self, state: &AppState) {
        let config = state.effective_config().server;
        let mut running = self.running.lock().await;
        let token = if config.with_window {
            match configured_token(state, &config).await {
                Ok(token) => Some(token),
                Err(e) => {
                    stop(running.take()).await;
                    self.set_status(HttpApiStatus::Failed { message: e.to_string() });
                    return;
                }
            }
        } else {
            None
        };
        if let (Some(current), Some(token)) = (running.as_ref(), &token) {
            let same_token = match (&current.token, token) {
                (Some(a), Some(b)) => a.same_as(b),
                (a, b) => a.is_none() && b.is_none(),
            };
            if current.config == config && same_token && !current.task.is_finished() {
                return;
            }
        }
        stop(running.take()).await;
        let Some(token) = token else {
            self.set_status(HttpApiStatus::Off);
            return;
        };
        let started = async {
            let listener = bind(config.listen, token.as_ref()).await?;
            let queue = state.import_queue().await.map_err(|e| super::ServeError::Queue(e.message))?;
            let router = router(Api::new(state.clone(), queue, token.clone(), &config), &config.cors_allow_origins)?;
            Ok::<_, super::ServeError>((listener, router))
        };
        match started.await {
            Ok((listener, router)) => {
                let url = format!("http://{}", listener.local_addr().unwrap_or(config.listen));
                let (stop_tx, stop_rx) = oneshot::channel();
                let drain = state.stack().config().time_limiter.timeout_duration + Duration::from_secs(2);
                let served = config.clone();
                let task = tokio::spawn(async move {
                    serve(listener, router, &served, async move { drop(stop_rx.await) }, drain).await;
                });
                tracing::info!(%url, "api: serving from the window");
                *running = Some(Running { config, token, stop: stop_tx, task });
                self.set_status(HttpApiStatus::Serving { url });
            }
            Err(e) => {
                tracing::warn!(error = %e, "api: the window's server cannot start");
                self.set_status(HttpApiStatus::Failed { message: e.to_string() });
            }
        }
    }
}

async fn stop(running: Option<Running>) {
    if let Some(running) = running {
        let _ = running.stop.send(());
        let _ = running.task.await;
    }
}
