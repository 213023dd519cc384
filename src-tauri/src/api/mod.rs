//! The HTTP API (issue 25): the seed's interface, so that other programs (a warehouse scanner
//! app, a shop's back end, a PIM's import job) call the same extraction as the window and the CLI.
//! It is one more way in to the one engine: a request queues an interactive item and waits for
//! it; the handlers ([`handlers`]) only translate, as the Tauri commands do.
//!
//! `serve` runs it headless ([`crate::cli`]); Settings' "Serve the HTTP API while the window is
//! open" runs the same server in the window's process, on the window's queue.
//!
//! Safe by default: loopback only unless a bearer token is set ([`listen_allowed`]); every request
//! then carries it (compared in constant time). Limits: the body (photos × `max_file_bytes` plus
//! headroom, refused from its `Content-Length` before it is read), the time to send the headers
//! (hyper's header read timeout) and the body (`[server] body_timeout`), and the connections
//! served at once (`[server] max_connections`; more wait to be accepted).

pub mod handlers;
pub mod openapi;
pub mod problem;
pub mod window;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use pe_core::config::ServerConfig;
use pe_core::import::ImportQueue;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;

use crate::state::AppState;
use problem::Problem;

/// Room in a request's body for everything but the photos (the multipart framing, other parts).
const BODY_HEADROOM: u64 = 64 * 1024;

/// The bearer token every request must carry when one is set. Never printed.
#[derive(Clone)]
pub struct Token(Arc<[u8; 32]>);

impl Token {
    /// A token as typed or read from a file: its first line, trimmed; `None` when empty.
    pub fn new(text: &str) -> Option<Self> {
        let token = text.lines().next().unwrap_or("").trim();
        (!token.is_empty()).then(|| Token(Arc::new(Sha256::digest(token.as_bytes()).into())))
    }

    /// Whether `other` is the same token (the window's server restarts when it changes).
    pub fn same_as(&self, other: &Token) -> bool {
        bool::from(self.0.ct_eq(&*other.0))
    }

    /// Whether `given` is the token. Both are hashed first, so the comparison takes the same
    /// time whatever the given text's length and content.
    pub fn accepts(&self, given: &str) -> bool {
        let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        bool::from(self.0.ct_eq(&given))
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refused to listen on {0}: it is not a loopback address, and no token is set. Anyone who can reach this \
         computer could spend your Gemini budget. Set a token first (`product-extractor serve token set`, or \
         [server] token_file), then every request needs `Authorization: Bearer <token>`; or listen on 127.0.0.1."
    )]
    NeedsToken(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("cannot read the token file {}: {source}", .path.display())]
    TokenFile { path: PathBuf, source: std::io::Error },
    #[error("the token file {} is empty", .0.display())]
    EmptyTokenFile(PathBuf),
    #[error("cannot read the token from the OS keyring: {0}")]
    Keyring(String),
    #[error("[server] cors_allow_origins: {0:?} is not an origin (scheme://host[:port])")]
    BadOrigin(String),
    #[error("the import queue cannot open: {0}")]
    Queue(String),
}

/// Whether listening on `addr` is allowed: a loopback address always; any other only with a token.
pub fn listen_allowed(addr: SocketAddr, token: Option<&Token>) -> Result<(), ServeError> {
    if addr.ip().is_loopback() || token.is_some() {
        Ok(())
    } else {
        Err(ServeError::NeedsToken(addr))
    }
}

/// The token the configuration gives: `[server] token_file`, else the OS keyring's
/// (`serve token set`), else none.
pub async fn configured_token(state: &AppState, config: &ServerConfig) -> Result<Option<Token>, ServeError> {
    if let Some(path) = &config.token_file {
        let text =
            std::fs::read_to_string(path).map_err(|source| ServeError::TokenFile { path: path.clone(), source })?;
        return Token::new(&text).map(Some).ok_or_else(|| ServeError::EmptyTokenFile(path.clone()));
    }
    let keyring = state.keyring().clone();
    let stored = tokio::task::spawn_blocking(move || keyring.api_token())
        .await
        .map_err(|e| ServeError::Keyring(e.to_string()))?;
    match stored {
        Ok(token) => Ok(token.as_deref().and_then(Token::new)),
        // No keyring here (a server without a desktop session): no token from it.
        Err(crate::secrets::KeyringError::Unavailable(_)) => Ok(None),
        Err(e) => Err(ServeError::Keyring(e.to_string())),
    }
}

/// What the handlers share: the app (catalog, stack, settings) and the queue they hand photos to.
#[derive(Clone)]
pub struct Api {
    pub(crate) state: AppState,
    pub(crate) queue: ImportQueue,
    pub(crate) token: Option<Token>,
    pub(crate) body_timeout: Duration,
}

impl Api {
    pub fn new(state: AppState, queue: ImportQueue, token: Option<Token>, config: &ServerConfig) -> Self {
        Self { state, queue, token, body_timeout: config.body_timeout }
    }

    /// The most bytes one photo may have (`[image] max_file_bytes`).
    pub(crate) fn max_file_bytes(&self) -> u64 {
        self.state.effective_config().image.max_file_bytes
    }

    /// The most photos one product may have (`[import] max_photos_per_product`).
    pub(crate) fn max_photos(&self) -> usize {
        self.state.effective_config().import.max_photos_per_product
    }

    /// The largest request body: every photo a product may have at its largest, and headroom.
    pub(crate) fn max_body(&self) -> u64 {
        (self.max_photos() as u64).saturating_mul(self.max_file_bytes()).saturating_add(BODY_HEADROOM)
    }
}

/// The API's routes ([`openapi::ROUTES`]), behind the token check and the limits.
pub fn router(api: Api, cors_allow_origins: &[String]) -> Result<Router, ServeError> {
    let limit = usize::try_from(api.max_body()).unwrap_or(usize::MAX);
    let mut router = openapi::routes()
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(api.clone(), guard))
        .with_state(api);
    if !cors_allow_origins.is_empty() {
        let origins = cors_allow_origins
            .iter()
            .map(|o| {
                let valid = o.contains("://") && !o.ends_with('/');
                HeaderValue::from_str(o).ok().filter(|_| valid).ok_or_else(|| ServeError::BadOrigin(o.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        router = router.layer(
            tower_http::cors::CorsLayer::new()
                .allow_origin(origins)
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE]),
        );
    }
    Ok(router)
}

/// Every request: the token when one is set, then a body whose announced length is over the
/// limit is refused before a byte of it is read.
async fn guard(State(api): State<Api>, request: Request, next: Next) -> Response {
    if let Some(token) = &api.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !token.accepts(given.trim()) {
            return Problem::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "This API needs `Authorization: Bearer <token>` with the token set on the server.",
            )
            .into_response();
        }
    }
    let announced =
        request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|length| length > api.max_body()) {
        return too_large(&api).into_response();
    }
    next.run(request).await
}

/// A body or a photo over the limits.
pub(crate) fn too_large(api: &Api) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "image_too_large",
        format!(
            "The request is too large: a product may have {} photos of at most {} bytes each ([image] max_file_bytes, \
             [import] max_photos_per_product).",
            api.max_photos(),
            api.max_file_bytes()
        ),
    )
}

/// Binds `addr` as the configuration allows ([`listen_allowed`]).
pub async fn bind(addr: SocketAddr, token: Option<&Token>) -> Result<TcpListener, ServeError> {
    listen_allowed(addr, token)?;
    TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })
}

/// Serves `router` on `listener` until `shutdown` resolves: then no connection is accepted, the
/// requests in flight get up to `drain` to finish (their items stay queued either way), and the
/// rest are closed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &ServerConfig,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let connections = Arc::new(tokio::sync::Semaphore::new(config.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(config.header_timeout).keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = connections.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment rather than spin.
                    tracing::warn!(error = %e, "api: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "api: connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    tracing::info!("api: stopped accepting; finishing the requests in flight");
    if tokio::time::timeout(drain, graceful.shutdown()).await.is_err() {
        tracing::warn!("api: requests still in flight after the drain time; their items stay queued");
    }
}
