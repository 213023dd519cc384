//! What the attempts cost: totals per day and model, per photo, for a time range, and the
//! measured average call an estimate starts from. Reads only `attempts` (migration 0006 added
//! the cost columns and the `started_at` index these range scans use).

use rusqlite::params;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::db::{Db, DbRow, Dialect, OptionalRow};
use super::records::PhotoId;
use super::CatalogError;
use crate::pricing::{BilledTokens, Usd};

/// Tokens and cost of a set of attempts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct CostTotal {
    /// Every attempt (calls that returned no usage, e.g. a timeout, were not billed).
    pub calls: u32,
    /// `promptTokenCount`, the cached part included.
    #[ts(type = "number")]
    pub input_tokens: u64,
    #[ts(type = "number")]
    pub cached_tokens: u64,
    /// Answer and thinking.
    #[ts(type = "number")]
    pub output_tokens: u64,
    /// The sum of the known costs.
    pub usd: Usd,
    /// Attempts with usage but no price (their model had no row): `usd` leaves them out.
    pub unpriced_calls: u32,
}

impl CostTotal {
    /// Adds another total.
    pub fn add_total(&mut self, other: &CostTotal) {
        self.calls = self.calls.saturating_add(other.calls);
        self.input_tokens += other.input_tokens;
        self.cached_tokens += other.cached_tokens;
        self.output_tokens += other.output_tokens;
        self.usd = self.usd.saturating_add(other.usd);
        self.unpriced_calls = self.unpriced_calls.saturating_add(other.unpriced_calls);
    }

    /// Adds one attempt's usage and cost.
    pub fn add(&mut self, tokens: Option<BilledTokens>, cost: Option<Usd>) {
        self.calls = self.calls.saturating_add(1);
        if let Some(t) = tokens {
            self.input_tokens += t.input;
            self.cached_tokens += t.cached_input;
            self.output_tokens += t.output;
            match cost {
                Some(cost) => self.usd = self.usd.saturating_add(cost),
                None => self.unpriced_calls = self.unpriced_calls.saturating_add(1),
            }
        }
    }
}

/// One day's attempts on one model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct UsageDay {
    /// `YYYY-MM-DD`, the local day.
    pub day: String,
    /// The model that answered (`modelVersion`), else the id called.
    pub model: String,
    pub total: CostTotal,
}

/// The average billed call of a model in this catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasuredCall {
    /// How many calls the average is over.
    pub calls: u32,
    pub tokens: BilledTokens,
    /// The model the newest of them was answered by (prices an alias).
    pub model_version: Option<String>,
}

/// How many recent calls an average is taken over.
pub const MEASURED_CALLS: u32 = 200;

/// The calls: every attempt but those older versions recorded for a missing key (`gemini_auth`
/// with no answer: nothing reached Gemini; a key Gemini rejected keeps its answer).
const TOTAL_COLUMNS: &str =
    "count(*) FILTER (WHERE error_code IS NULL OR error_code <> 'gemini_auth' OR raw_response IS NOT NULL),
     coalesce(sum(prompt_tokens), 0), coalesce(sum(cached_tokens), 0),
     coalesce(sum(output_tokens), 0), coalesce(sum(cost_nanos), 0),
     count(*) FILTER (WHERE prompt_tokens IS NOT NULL AND cost_nanos IS NULL)";

fn total_at(row: &DbRow<'_>, first: usize) -> rusqlite::Result<CostTotal> {
    let count = |i: usize| -> rusqlite::Result<u64> { Ok(row.get::<i64>(first + i)?.max(0) as u64) };
    Ok(CostTotal {
        calls: u32::try_from(count(0)?).unwrap_or(u32::MAX),
        input_tokens: count(1)?,
        cached_tokens: count(2)?,
        output_tokens: count(3)?,
        usd: Usd::from_nanos(row.get(first + 4)?),
        unpriced_calls: u32::try_from(count(5)?).unwrap_or(u32::MAX),
    })
}

/// Per local day and model, oldest first, from `since` (unix ms). `utc_offset_ms` is the local
/// time's offset from UTC (the caller's clock: nothing here reads it).
pub(super) fn usage_by_day(conn: &Db<'_>, since: i64, utc_offset_ms: i64) -> Result<Vec<UsageDay>, CatalogError> {
    let day = match conn.dialect() {
        Dialect::Sqlite => "date((started_at + ?2) / 1000, 'unixepoch')",
        Dialect::Postgres => "to_char(to_timestamp((started_at + ?2) / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
    };
    Ok(conn.query_map(
        &format!(
            "SELECT {day} AS day, coalesce(model_version, model) AS m, {TOTAL_COLUMNS}
             FROM attempts WHERE started_at >= ?1 GROUP BY day, m ORDER BY day, m"
        ),
        params![since, utc_offset_ms],
        |row| Ok(UsageDay { day: row.get(0)?, model: row.get(1)?, total: total_at(row, 2)? }),
    )?)
}

/// The attempts started in `[from, to)` (unix ms).
pub(super) fn spent_between(conn: &Db<'_>, from: i64, to: i64) -> Result<CostTotal, CatalogError> {
    let sql = format!("SELECT {TOTAL_COLUMNS} FROM attempts WHERE started_at >= ?1 AND started_at < ?2");
    Ok(conn.query_row(&sql, params![from, to], |row| total_at(row, 0))?)
}

/// What the calls for the import queue's items cost: the attempts on each item's (first) photo
/// made since the item was queued, whichever process or desktop made them (retries, failures and
/// batch answers included; an attempt two items share counted once).
pub(super) fn queue_cost(conn: &Db<'_>) -> Result<CostTotal, CatalogError> {
    let sql = format!(
        "SELECT {TOTAL_COLUMNS} FROM attempts WHERE id IN (
             SELECT a.id FROM import_items i JOIN attempts a ON a.photo_id = i.photo_id AND a.started_at >= i.queued_at)"
    );
    Ok(conn.query_row(&sql, params![], |row| total_at(row, 0))?)
}

/// Every attempt for a photo (a product's extractions, retries and failures included).
pub(super) fn photo_cost(conn: &Db<'_>, photo: PhotoId) -> Result<CostTotal, CatalogError> {
    let sql = format!("SELECT {TOTAL_COLUMNS} FROM attempts WHERE photo_id = ?1");
    Ok(conn.query_row(&sql, params![photo], |row| total_at(row, 0))?)
}

/// The average of the newest [`MEASURED_CALLS`] billed calls to `model`; `None` before the first.
pub(super) fn measured_call(conn: &Db<'_>, model: &str) -> Result<Option<MeasuredCall>, CatalogError> {
    let (calls, input, cached, output): (i64, f64, f64, f64) = conn.query_row(
        "SELECT count(*), coalesce(avg(prompt_tokens), 0), coalesce(avg(coalesce(cached_tokens, 0)), 0),
                coalesce(avg(output_tokens), 0)
         FROM (SELECT prompt_tokens, cached_tokens, output_tokens FROM attempts
               WHERE model = ?1 AND prompt_tokens IS NOT NULL ORDER BY id DESC LIMIT ?2) AS recent",
        params![model, MEASURED_CALLS],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    if calls == 0 {
        return Ok(None);
    }
    let model_version: Option<String> = conn
        .query_row(
            "SELECT model_version FROM attempts WHERE model = ?1 AND prompt_tokens IS NOT NULL ORDER BY id DESC LIMIT 1",
            params![model],
            |r| r.get(0),
        )
        .optional()?
        .flatten();
    Ok(Some(MeasuredCall {
        calls: u32::try_from(calls).unwrap_or(u32::MAX),
        tokens: BilledTokens {
            input: input.round() as u64,
            cached_input: cached.round() as u64,
            output: output.round() as u64,
        },
        model_version,
    }))
}
