//! The shared import queue's leases on a PostgreSQL catalog (issue 13): several desktops work one
//! queue. This is the queue's claim protocol on the server, tested against a real server; the
//! import engine still works a SQLite catalog only (see [`super::server`]).
//!
//! - **Claim**: one statement takes the next `queued` item (interactive first, then fewest
//!   attempts, then oldest) with `FOR UPDATE SKIP LOCKED`, so two desktops claiming at the same
//!   moment never take the same item and never wait for each other, and marks it `preparing` with
//!   a lease: which desktop, until when.
//! - **Renew**: a desktop extends the leases of the items it holds while it works on them (a call
//!   may take minutes). An item is only ever changed by the desktop that holds its lease.
//! - **Expire**: an item still `preparing` or `extracting` whose lease ran out goes back to
//!   `queued` (its desktop was killed or lost the network); any desktop may do this, and then
//!   claim it. A `ready` item is never sent again: only unfinished items are leased.
//! - **Finish**: the desktop that holds the lease moves the item on (and the lease ends); a desktop
//!   whose lease was taken over changes nothing.
//!
//! Not built yet: the engine (`import::`) on top of this — its item work, results and `ready`
//! written under the lease check, a renewal task, LISTEN/NOTIFY for the other desktops' changes.
//!
//! Time is passed in (unix ms), so tests control it.

use std::time::Duration;

use super::server::{ServerCatalog, ServerError};

/// The lease a desktop takes by default: long enough to cover a slow call between renewals.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);

/// An item a desktop claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedItem {
    pub id: i64,
    pub path: String,
    pub path_bytes: Option<Vec<u8>>,
    pub sha256: Option<String>,
    pub attempts: i64,
    /// `interactive` or `import`.
    pub origin: String,
    /// Until when (unix ms) the lease runs unless renewed.
    pub lease_until: i64,
}

/// How an item a desktop worked ends, as far as the lease goes (a `ready` item's results are
/// written by the engine with the same lease check, `lease_owner = <this desktop>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// The item's own fault (`code` is an `ErrorCode`'s name): the attempt counts.
    Failed { code: String, message: String },
    /// Back to the queue (a transient failure when `counted`, or a hold that is not the item's).
    Requeued { counted: bool },
}

/// Who works an item now (the Import view's "which desktop works which item").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    pub state: String,
    pub owner: String,
    pub until: i64,
}

/// One desktop's hand on the shared queue.
pub struct ServerQueue<'a> {
    catalog: &'a ServerCatalog,
    desktop: String,
    lease_ms: i64,
}

impl<'a> ServerQueue<'a> {
    /// `desktop` names this desktop in leases (e.g. user@host and a process id); `lease` is how
    /// long a claim holds without a renewal.
    pub fn new(catalog: &'a ServerCatalog, desktop: impl Into<String>, lease: Duration) -> Self {
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX).max(1);
        Self { catalog, desktop: desktop.into(), lease_ms }
    }

    pub fn desktop(&self) -> &str {
        &self.desktop
    }

    /// Takes the next queued item (interactive first, fewest attempts, oldest) and leases it to
    /// this desktop until `now + lease`; `None` when nothing is queued or every queued item is
    /// being claimed by another desktop at this moment.
    pub async fn claim(&self, now: i64) -> Result<Option<LeasedItem>, ServerError> {
        let client = self.catalog.client().await?;
        let until = now.saturating_add(self.lease_ms);
        let row = client
            .query_opt(
                "UPDATE import_items
                 SET state = 'preparing', lease_owner = $1, lease_until = $2, updated_at = $3
                 WHERE id = (SELECT id FROM import_items WHERE state = 'queued'
                             ORDER BY (origin = 'interactive') DESC, attempts, id
                             FOR UPDATE SKIP LOCKED LIMIT 1)
                 RETURNING id, path, path_bytes, sha256, attempts, origin, lease_until",
                &[&self.desktop, &until, &now],
            )
            .await
            .map_err(|e| self.catalog.driver_error(&e))?;
        Ok(row.map(|r| LeasedItem {
            id: r.get(0),
            path: r.get(1),
            path_bytes: r.get(2),
            sha256: r.get(3),
            attempts: r.get(4),
            origin: r.get(5),
            lease_until: r.get(6),
        }))
    }

    /// Extends this desktop's leases on `ids` (those it still holds, unfinished) to `now + lease`;
    /// returns the ids renewed. An id missing from the answer was taken over: stop working on it.
    pub async fn renew(&self, ids: &[i64], now: i64) -> Result<Vec<i64>, ServerError> {
        let client = self.catalog.client().await?;
        let until = now.saturating_add(self.lease_ms);
        let rows = client
            .query(
                "UPDATE import_items SET lease_until = $3
                 WHERE id = ANY($1) AND lease_owner = $2 AND state IN ('preparing', 'extracting')
                 RETURNING id",
                &[&ids, &self.desktop, &until],
            )
            .await
            .map_err(|e| self.catalog.driver_error(&e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Items whose lease ran out before `now` (their desktop crashed or lost the network) back to
    /// `queued`, the lease cleared and the attempts unchanged; returns them. Any desktop may call
    /// this (each does, now and then).
    pub async fn expire(&self, now: i64) -> Result<Vec<i64>, ServerError> {
        let client = self.catalog.client().await?;
        let rows = client
            .query(
                "UPDATE import_items SET state = 'queued', lease_owner = NULL, lease_until = NULL, updated_at = $1
                 WHERE lease_owner IS NOT NULL AND lease_until < $1 AND state IN ('preparing', 'extracting')
                 RETURNING id",
                &[&now],
            )
            .await
            .map_err(|e| self.catalog.driver_error(&e))?;
        let mut ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// The item's outcome by the desktop that holds its lease, which ends. False when the lease
    /// was taken over meanwhile: nothing changes.
    pub async fn finish(&self, id: i64, outcome: &Finished, now: i64) -> Result<bool, ServerError> {
        let (to, code, message, counted) = match outcome {
            Finished::Failed { code, message } => ("failed", Some(code.as_str()), Some(message.as_str()), 1i64),
            Finished::Requeued { counted } => ("queued", None, None, i64::from(*counted)),
        };
        let client = self.catalog.client().await?;
        let changed = client
            .execute(
                "UPDATE import_items
                 SET state = $3, error_code = $4, error_message = $5, attempts = attempts + $6,
                     lease_owner = NULL, lease_until = NULL, updated_at = $7
                 WHERE id = $1 AND lease_owner = $2 AND state IN ('preparing', 'extracting')",
                &[&id, &self.desktop, &to, &code, &message, &counted, &now],
            )
            .await
            .map_err(|e| self.catalog.driver_error(&e))?;
        Ok(changed == 1)
    }

    /// Every lease held now, by item: which desktop works which item.
    pub async fn leases(&self) -> Result<Vec<Lease>, ServerError> {
        let client = self.catalog.client().await?;
        let rows = client
            .query(
                "SELECT id, state, lease_owner, lease_until FROM import_items WHERE lease_owner IS NOT NULL ORDER BY id",
                &[],
            )
            .await
            .map_err(|e| self.catalog.driver_error(&e))?;
        Ok(rows.iter().map(|r| Lease { id: r.get(0), state: r.get(1), owner: r.get(2), until: r.get(3) }).collect())
    }
}
