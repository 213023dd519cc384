//! `serve [--listen ADDR]`: the HTTP API, headless (see `crate::api`), over the same catalog,
//! queue, breaker, bulkhead, budget and cost meter as the window and the other commands. A request
//! is an interactive item, and fails as a single call would (an open breaker answers 503 at once, a
//! bulkhead that stays full 429), as the seed did. When another process (the window) works the
//! catalog's queue, the photos are handed to it, as `extract` does.
//!
//! `serve token set | status | delete`: the bearer token in the OS keyring. `set` reads it from
//! standard input, never from an argument.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Subcommand};
use pe_core::import::{ClaimScope, ImportOptions, ImportQueue, StopAdvice};
use pe_core::ErrorReport;

use super::{usage_error, EXIT_FAILED, EXIT_OK};
use crate::api::{self, Api};
use crate::secrets::KeyringError;
use crate::state::AppState;
use crate::terminal::{errln, outln};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    /// The address to listen on [default: [server] listen, else 127.0.0.1:8080]. Anything but a
    /// loopback address needs a token (`serve token set`, or [server] token_file).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
}

#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// The bearer token every request must carry: `token set` (from standard input), `token
    /// status`, `token delete`.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Store the token read from standard input in the OS keyring.
    Set,
    /// Whether a token is set, and where it comes from.
    Status,
    /// Remove the token from the keyring.
    Delete,
}

pub async fn run(state: &AppState, args: ServeArgs) -> i32 {
    match args.command {
        Some(ServeCommand::Token(command)) => token(state, command).await,
        None => serve(state, args.listen).await,
    }
}

async fn serve(state: &AppState, listen: Option<SocketAddr>) -> i32 {
    if state.effective_config().gemini.api_key.is_none() {
        return usage_error(
            "no Gemini API key: set GEMINI_API_KEY, or `product-extractor key set` (the window's Settings do that for you)",
        );
    }
    let config = state.effective_config().server;
    let addr = listen.unwrap_or(config.listen);
    let token = match api::configured_token(state, &config).await {
        Ok(token) => token,
        Err(e) => return usage_error(&e.to_string()),
    };
    let listener = match api::bind(addr, token.as_ref()).await {
        Ok(listener) => listener,
        Err(e) => return usage_error(&e.to_string()),
    };
    let queue = match open_queue(state).await {
        Ok(queue) => queue,
        Err(e) => return usage_error(&e.message),
    };
    if !queue.is_working() {
        errln!("note: another product-extractor (the window, or an import) works this catalog's queue; requests are handed to it");
    }
    let router =
        match api::router(Api::new(state.clone(), queue.clone(), token.clone(), &config), &config.cors_allow_origins) {
            Ok(router) => router,
            Err(e) => return usage_error(&e.to_string()),
        };
    let bound = listener.local_addr().map_or_else(|_| addr.to_string(), |a| a.to_string());
    outln!(
        "Serving the HTTP API on http://{bound} ({}); the OpenAPI document is at /api/openapi.json. Ctrl-C or SIGTERM stops it.",
        if token.is_some() { "every request needs the bearer token" } else { "no token: loopback only" }
    );
    tracing::info!(addr = %bound, token = token.is_some(), "api: serving");
    // The calls in flight when asked to stop may take the time limiter's timeout to answer.
    let drain = state.stack().config().time_limiter.timeout_duration + Duration::from_secs(2);
    api::serve(listener, router, &config, stop_signal(), drain).await;
    queue.shutdown().await;
    errln!("stopped: the requests in flight were answered; anything else queued waits for the next run");
    EXIT_OK
}

/// The queue as `serve` works it: interactive items only (a bulk import's are its own), each
/// failing as a single call would, and waiting at most `[bulkhead] max_wait_duration` for a slot.
async fn open_queue(state: &AppState) -> Result<ImportQueue, ErrorReport> {
    let stack = state.stack();
    let bulkhead = &stack.config().bulkhead;
    let options = ImportOptions {
        claims: ClaimScope::Interactive,
        fail_fast: true,
        send_wait: Some(bulkhead.max_wait_duration),
        // As many requests prepared and waiting for a slot as there are slots.
        lookahead: Some(bulkhead.max_concurrent_calls as usize),
        stop_advice: StopAdvice::RunAgain,
        ..state.import_options()
    };
    ImportQueue::open(state.pipeline(), options).await.map_err(ErrorReport::from)
}

/// Ctrl-C, or SIGTERM (systemd's stop).
async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

async fn token(state: &AppState, command: TokenCommand) -> i32 {
    let keyring = state.keyring().clone();
    match command {
        TokenCommand::Set => {
            let token = match read_token() {
                Ok(Some(token)) => token,
                Ok(None) => return usage_error("no token on standard input: pipe it in (`serve token set < file`)"),
                Err(e) => return usage_error(&format!("cannot read the token from standard input: {e}")),
            };
            if token.len() < 16 {
                return usage_error(
                    "the token is shorter than 16 characters: use a long random one (e.g. `openssl rand -hex 32`)",
                );
            }
            keyring_said(in_keyring(move || keyring.set_api_token(&token)).await, |()| {
                "The HTTP API's token is stored in the OS keyring; `serve` now needs it on every request."
            })
        }
        TokenCommand::Status => {
            let config = state.effective_config().server;
            if let Some(path) = &config.token_file {
                outln!("token: from the file {} ([server] token_file)", path.display());
                return EXIT_OK;
            }
            match in_keyring(move || keyring.api_token()).await {
                Ok(Some(_)) => outln!("token: set, in the OS keyring"),
                Ok(None) => outln!("token: none — `serve` listens on loopback addresses only"),
                Err(e) => outln!("token: unknown ({e})"),
            }
            EXIT_OK
        }
        TokenCommand::Delete => keyring_said(in_keyring(move || keyring.delete_api_token()).await, |deleted| {
            if deleted {
                "The HTTP API's token is deleted."
            } else {
                "No token was stored."
            }
        }),
    }
}

/// A keyring call on the blocking pool (it may wait on D-Bus); a failed task is the keyring's
/// failure too.
async fn in_keyring<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, KeyringError> + Send + 'static,
) -> Result<T, KeyringError> {
    match tokio::task::spawn_blocking(call).await {
        Ok(result) => result,
        Err(e) => Err(KeyringError::Failed(e.to_string())),
    }
}

/// What a keyring change says: `said`'s line and exit 0, or the error and exit 1.
fn keyring_said<T>(result: Result<T, KeyringError>, said: impl FnOnce(T) -> &'static str) -> i32 {
    match result {
        Ok(value) => {
            outln!("{}", said(value));
            EXIT_OK
        }
        Err(e) => {
            errln!("error: {e}");
            EXIT_FAILED
        }
    }
}

/// The token from standard input ([`super::read_secret`]): its first non-empty line, trimmed.
fn read_token() -> std::io::Result<Option<String>> {
    let text = super::read_secret("HTTP API token (input hidden): ")?;
    Ok(text.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_owned))
}
