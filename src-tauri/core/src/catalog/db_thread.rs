//! The thread that owns the SQLite connection, and the jobs it runs.
//!
//! Jobs arrive over an unbounded std channel, so submitting one never blocks; each job replies on
//! its own tokio oneshot, so waiting for one never blocks either. The thread runs one job at a
//! time, to completion, and ends when every sender (every `Catalog` handle) is gone.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::CatalogError;

/// A unit of work for the catalog thread. It is synchronous: it cannot await, so it cannot hold a
/// transaction across network I/O.
pub(super) type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// Starts the thread that owns `conn`; returns where to send jobs.
pub(super) fn spawn(conn: Connection) -> std::io::Result<mpsc::Sender<Job>> {
    let (jobs, inbox) = mpsc::channel::<Job>();
    std::thread::Builder::new().name("catalog-sqlite".into()).spawn(move || run(conn, inbox))?;
    Ok(jobs)
}

fn run(mut conn: Connection, inbox: mpsc::Receiver<Job>) {
    while let Ok(job) = inbox.recv() {
        job(&mut conn);
        // Invariant: between jobs the connection is in autocommit mode. A job that panicked or
        // forgot to commit does not leave its transaction open for the next one.
        if !conn.is_autocommit() {
            tracing::error!("a catalog job left a transaction open; rolling it back");
            if let Err(e) = conn.execute_batch("ROLLBACK") {
                tracing::error!(error = %e, "catalog rollback failed");
            }
        }
    }
    if let Err((_, e)) = conn.close() {
        tracing::warn!(error = %e, "closing the catalog failed");
    }
    tracing::debug!("catalog thread finished");
}

/// Wraps `f` into a [`Job`] whose result (or panic, as [`CatalogError::Panicked`]) goes to the
/// returned receiver.
pub(super) fn job<R, F>(f: F) -> (Job, oneshot::Receiver<Result<R, CatalogError>>)
where
    R: Send + 'static,
    F: FnOnce(&mut Connection) -> Result<R, CatalogError> + Send + 'static,
{
    let (reply, receiver) = oneshot::channel();
    let job: Job = Box::new(move |conn| {
        // AssertUnwindSafe: after a panic the only shared state is the connection, and `run`
        // rolls back whatever transaction the job had open before the next job sees it.
        let result = panic::catch_unwind(AssertUnwindSafe(|| f(conn)))
            .unwrap_or_else(|payload| Err(CatalogError::Panicked { message: panic_message(payload.as_ref()) }));
        // The caller may have stopped waiting (its future was dropped); the job still ran.
        let _ = reply.send(result);
    });
    (job, receiver)
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
