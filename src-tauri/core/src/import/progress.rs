//! What the queue reports while it works: counts per state, throughput, ETA and the runner's
//! status, published on a `tokio::sync::watch` (the window's bar, the CLI's stderr line).

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use ts_rs::TS;

use super::records::{BatchInfo, ItemState};
use crate::catalog::CostTotal;
use crate::error::ErrorCode;

/// Items per state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct StateCounts {
    pub queued: u32,
    pub preparing: u32,
    pub extracting: u32,
    pub submitted: u32,
    pub ready: u32,
    pub saved: u32,
    pub failed: u32,
    pub skipped: u32,
}

impl StateCounts {
    pub fn get(&self, state: ItemState) -> u32 {
        match state {
            ItemState::Queued => self.queued,
            ItemState::Preparing => self.preparing,
            ItemState::Extracting => self.extracting,
            ItemState::Submitted => self.submitted,
            ItemState::Ready => self.ready,
            ItemState::Saved => self.saved,
            ItemState::Failed => self.failed,
            ItemState::Skipped => self.skipped,
        }
    }

    pub(crate) fn set(&mut self, state: ItemState, n: u32) {
        let slot = match state {
            ItemState::Queued => &mut self.queued,
            ItemState::Preparing => &mut self.preparing,
            ItemState::Extracting => &mut self.extracting,
            ItemState::Submitted => &mut self.submitted,
            ItemState::Ready => &mut self.ready,
            ItemState::Saved => &mut self.saved,
            ItemState::Failed => &mut self.failed,
            ItemState::Skipped => &mut self.skipped,
        };
        *slot = n;
    }

    pub fn total(&self) -> u32 {
        ItemState::ALL.iter().map(|s| self.get(*s)).sum()
    }

    /// Waiting or in progress.
    pub fn active(&self) -> u32 {
        self.queued + self.preparing + self.extracting + self.submitted
    }
}

/// What the runner is doing. Tagged by `kind` so the UI can switch on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[ts(export)]
pub enum ImportStatus {
    /// Not started (or cancelled); items wait for Resume.
    Idle,
    /// Working through the queue.
    Running,
    /// The user paused it; calls in flight finish, nothing new is sent.
    PausedByUser,
    /// Gemini's circuit breaker is open: nothing is sent until it lets a probe through, then the
    /// queue resumes by itself. `until_unix_ms` is when the next try is allowed (`None`: when the
    /// breaker is released by hand, or when the running probes end).
    PausedBreaker {
        #[ts(type = "number | null")]
        until_unix_ms: Option<i64>,
        message: String,
    },
    /// The next call would pass today's budget (`pricing.daily_budget_usd`): nothing is sent until
    /// the next local day (`until_unix_ms`) or a higher budget in Settings; nothing fails.
    PausedBudget {
        #[ts(type = "number")]
        until_unix_ms: i64,
        message: String,
    },
    /// The disk holding the catalog is too full (under `[import] min_free_disk_*`, or SQLite found
    /// it full): no more photos are taken, what is in flight is written, and the queue goes on by
    /// itself once there is room (looked at again every few seconds).
    PausedDisk {
        #[ts(type = "number | null")]
        free_bytes: Option<u64>,
        message: String,
    },
    /// The team catalog's server cannot be reached (since `since_unix_ms`): nothing is claimed,
    /// the answers already paid for wait to be written, and the queue tries again at
    /// `next_try_unix_ms` (backing off) and goes on by itself once the server is back.
    WaitingServer {
        #[ts(type = "number")]
        since_unix_ms: i64,
        #[ts(type = "number")]
        next_try_unix_ms: i64,
        message: String,
    },
    /// Gemini's quota is used up; the queue waits for the server's retry delay (a per-day quota:
    /// until it resets, the next midnight Pacific time), then goes on.
    WaitingQuota {
        #[ts(type = "number")]
        until_unix_ms: i64,
        message: String,
    },
    /// Stopped until someone acts: `gemini_auth` means a key is needed (enter it, then Resume);
    /// `gemini_not_found` a model; `gemini_not_available` another project or location; `catalog` a
    /// local database failure.
    Stopped { code: ErrorCode, message: String },
    /// Nothing left to do: every item is ready, saved, failed or skipped.
    Finished,
    /// Another product-extractor (the window, or an import on the command line) works this
    /// catalog's queue: this one hands it its items and follows their progress.
    WorkedElsewhere,
}

/// The queue at a glance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ImportProgress {
    pub counts: StateCounts,
    /// Every item in the queue.
    pub total: u32,
    /// Items nothing more will happen to without the user: ready, saved, failed, skipped. The
    /// progress bar is `done / total`.
    pub done: u32,
    /// Skipped items that were duplicates by content (a subset of `counts.skipped`).
    pub duplicates: u32,
    /// Items finished (ready or failed) per minute, over the last minute.
    pub throughput_per_min: f64,
    /// At this throughput, when the waiting and running items will be done.
    #[ts(type = "number | null")]
    pub eta_ms: Option<u64>,
    pub status: ImportStatus,
    /// Items a worker holds right now (preparing, waiting for a slot, or in a call).
    pub in_flight: u32,
    /// Bumped on every change to any item (bulk actions included), so the window knows when to
    /// refresh the rows it shows.
    #[ts(type = "number")]
    pub changes: u64,
    /// What this import's calls cost so far (this process's calls since the queue last settled;
    /// failed but billed calls included).
    pub cost: CostTotal,
    /// What the calls for the items in the queue cost, read with the counts: every process's and
    /// desktop's, retries and failures included (what the Import view's "spent" says).
    pub queue_cost: CostTotal,
    /// Batch mode: the newest batches (those not finished, and those that changed since the
    /// oldest listed item was queued) with their state and time of submission.
    pub batches: Vec<BatchInfo>,
}

impl ImportProgress {
    pub(crate) fn new(status: ImportStatus) -> Self {
        Self {
            counts: StateCounts::default(),
            total: 0,
            done: 0,
            duplicates: 0,
            throughput_per_min: 0.0,
            eta_ms: None,
            status,
            in_flight: 0,
            changes: 0,
            cost: CostTotal::default(),
            queue_cost: CostTotal::default(),
            batches: Vec::new(),
        }
    }

    pub(crate) fn set_counts(&mut self, counts: StateCounts, duplicates: u32) {
        self.counts = counts;
        self.total = counts.total();
        self.done = self.total - counts.active();
        self.duplicates = duplicates;
    }

    /// No worker will move any item without the user: finished, idle (cancelled or not started)
    /// or stopped, with no item held by a worker (a stop abandons the work in flight first).
    pub fn is_settled(&self) -> bool {
        match self.status {
            ImportStatus::Finished => self.in_flight == 0 && self.counts.active() == 0,
            ImportStatus::Idle | ImportStatus::Stopped { .. } => self.in_flight == 0,
            ImportStatus::WorkedElsewhere => self.counts.active() == 0,
            _ => false,
        }
    }
}

/// Items finished per minute over a sliding window; a monotonic clock, not the catalog's.
pub(crate) struct Throughput {
    window: Duration,
    /// When the current run (re)started: the rate is not averaged over time spent paused before.
    since: Instant,
    finished: VecDeque<Instant>,
}

impl Throughput {
    pub(crate) const WINDOW: Duration = Duration::from_secs(60);

    pub(crate) fn new() -> Self {
        Self { window: Self::WINDOW, since: Instant::now(), finished: VecDeque::new() }
    }

    /// Starts measuring afresh (a run starts or resumes).
    pub(crate) fn restart(&mut self, now: Instant) {
        self.since = now;
        self.finished.clear();
    }

    pub(crate) fn record(&mut self, now: Instant) {
        self.finished.push_back(now);
        self.trim(now);
    }

    fn trim(&mut self, now: Instant) {
        while self.finished.front().is_some_and(|t| now.duration_since(*t) > self.window) {
            self.finished.pop_front();
        }
    }

    /// Items per minute; 0 until something finished.
    pub(crate) fn per_minute(&mut self, now: Instant) -> f64 {
        self.trim(now);
        if self.finished.is_empty() {
            return 0.0;
        }
        let start = self.since.max(now.checked_sub(self.window).unwrap_or(self.since));
        let span = now.duration_since(start).max(Duration::from_millis(500));
        self.finished.len() as f64 * 60.0 / span.as_secs_f64()
    }
}

/// How long `remaining` items take at `per_minute`.
pub(crate) fn eta_ms(remaining: u32, per_minute: f64) -> Option<u64> {
    if remaining == 0 {
        return Some(0);
    }
    (per_minute > 0.0).then(|| (f64::from(remaining) / per_minute * 60_000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_is_per_minute_over_the_window_and_eta_follows() {
        let t0 = Instant::now();
        let mut t = Throughput::new();
        t.restart(t0);
        assert_eq!(t.per_minute(t0), 0.0);
        for i in 1..=30 {
            t.record(t0 + Duration::from_secs(i));
        }
        let rate = t.per_minute(t0 + Duration::from_secs(30));
        assert!((rate - 60.0).abs() < 0.01, "{rate}");
        // 90 s later only the window's last 60 s count: items 31..=90 s would be needed; none came.
        assert_eq!(t.per_minute(t0 + Duration::from_secs(120)), 0.0);
        assert_eq!(eta_ms(120, 60.0), Some(120_000));
        assert_eq!(eta_ms(0, 0.0), Some(0));
        assert_eq!(eta_ms(5, 0.0), None);
    }

    #[test]
    fn settled_means_nothing_will_move() {
        let mut p = ImportProgress::new(ImportStatus::Finished);
        assert!(p.is_settled());
        p.counts.queued = 1;
        assert!(!p.is_settled(), "finished but something was just queued");
        p.status = ImportStatus::Stopped { code: ErrorCode::GeminiAuth, message: "key".into() };
        assert!(p.is_settled());
        p.in_flight = 2;
        assert!(!p.is_settled(), "stopped, but the work in flight is not abandoned yet");
        p.status = ImportStatus::PausedBreaker { until_unix_ms: None, message: String::new() };
        assert!(!p.is_settled());
    }
}
