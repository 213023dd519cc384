//! What each circuit breaker saved for the next run (`breaker_state`, SQLite 0014 / pg 0012): one
//! row per breaker and desktop, replaced at every save. On this computer's own catalog the
//! desktop is ''; on a team catalog it is `user@host`, since each desktop keeps its own breaker.

use rusqlite::params;

use super::db::{Db, Dialect, OptionalRow};
use super::CatalogError;
use crate::resilience::SavedBreaker;

/// The desktop a breaker's row belongs to: '' on SQLite, `user@host` on a server (the process
/// number left out: the next run is another process).
fn desktop(conn: &Db<'_>) -> String {
    conn.desktop().map(|d| d.split(" #").next().unwrap_or(d).to_string()).unwrap_or_default()
}

pub(super) fn save(conn: &Db<'_>, breaker: &str, saved: &SavedBreaker) -> Result<(), CatalogError> {
    let json = serde_json::to_string(saved)?;
    let at = i64::try_from(saved.saved_at_ms).unwrap_or(i64::MAX);
    let cast = match conn.dialect() {
        Dialect::Sqlite => "?3",
        Dialect::Postgres => "CAST(?3 AS JSON)",
    };
    conn.execute(
        &format!(
            "INSERT INTO breaker_state (breaker, desktop, saved_json, saved_at) VALUES (?1, ?2, {cast}, ?4)
             ON CONFLICT (breaker, desktop) DO UPDATE SET saved_json = excluded.saved_json, saved_at = excluded.saved_at"
        ),
        params![breaker, desktop(conn), json, at],
    )?;
    Ok(())
}

/// What `breaker` saved last on this desktop; `None` when it never saved, or saved what this
/// version cannot read (it then starts afresh).
pub(super) fn load(conn: &Db<'_>, breaker: &str) -> Result<Option<SavedBreaker>, CatalogError> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => "SELECT saved_json FROM breaker_state WHERE breaker = ?1 AND desktop = ?2",
        Dialect::Postgres => "SELECT CAST(saved_json AS TEXT) FROM breaker_state WHERE breaker = ?1 AND desktop = ?2",
    };
    let json: Option<String> = conn.query_row(sql, params![breaker, desktop(conn)], |r| r.get(0)).optional()?;
    Ok(json.and_then(|json| match serde_json::from_str(&json) {
        Ok(saved) => Some(saved),
        Err(e) => {
            tracing::warn!(breaker, error = %e, "the breaker's saved state cannot be read: it starts afresh");
            None
        }
    }))
}
