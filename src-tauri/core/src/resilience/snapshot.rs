//! What the breaker reports: its state, events and metrics snapshots. These are the DTOs the UI
//! panel reads (TypeScript types are generated with ts-rs); times are unix milliseconds.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::config::SlidingWindowType;
use super::window::{BucketSummary, RecordedCall};

/// The six states of Resilience4j's circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum BreakerState {
    /// Calls pass and are recorded; the rates decide whether to open.
    Closed,
    /// Calls are rejected until the wait is over.
    Open,
    /// A limited number of probes pass; their rates decide between CLOSED and OPEN.
    HalfOpen,
    /// Everything passes, nothing is recorded.
    Disabled,
    /// Everything is rejected (and counted) until someone moves it elsewhere.
    ForcedOpen,
    /// Calls pass and are recorded, but the state never changes by itself.
    MetricsOnly,
}

impl BreakerState {
    /// The name as Resilience4j and Spring's actuator spell it, e.g. `HALF_OPEN`.
    pub fn as_actuator(self) -> &'static str {
        match self {
            Self::Closed => "CLOSED",
            Self::Open => "OPEN",
            Self::HalfOpen => "HALF_OPEN",
            Self::Disabled => "DISABLED",
            Self::ForcedOpen => "FORCED_OPEN",
            Self::MetricsOnly => "METRICS_ONLY",
        }
    }
}

impl std::fmt::Display for BreakerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_actuator())
    }
}

/// Something that happened to a breaker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct BreakerEvent {
    /// The breaker's name, e.g. `gemini`.
    pub breaker: String,
    /// When it happened, unix milliseconds.
    #[ts(type = "number")]
    pub time_ms: u64,
    pub kind: BreakerEventKind,
    /// How long the call took (success, error, ignored_error).
    #[ts(type = "number | null")]
    pub duration_ms: Option<u64>,
    /// The error's message, when the caller gave one.
    pub message: Option<String>,
}

/// The event types of Resilience4j's `CircuitBreakerEvent.Type`, tagged by `type`, and
/// `restored` (this app's: the breaker started from the state the last run saved).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "type", rename_all = "snake_case")]
#[ts(export)]
pub enum BreakerEventKind {
    /// A success was recorded; `slow` if it took longer than the slow-call threshold.
    Success {
        slow: bool,
    },
    /// A failure was recorded.
    Error {
        slow: bool,
    },
    /// An outcome that counts neither way; its permit was given back.
    IgnoredError,
    /// A call was rejected.
    NotPermitted,
    StateTransition {
        from: BreakerState,
        to: BreakerState,
    },
    Reset,
    /// The failure rate reached the threshold (published before the CLOSED → OPEN transition).
    FailureRateExceeded {
        rate: f32,
    },
    /// The slow-call rate reached the threshold.
    SlowCallRateExceeded {
        rate: f32,
    },
    /// The breaker was forced open.
    ForcedOpen,
    /// The breaker was disabled.
    Disabled,
    /// The breaker started from what the last run saved (`saved_at_ms`): its state and window, and
    /// the events before this one.
    Restored {
        #[ts(type = "number")]
        saved_at_ms: u64,
    },
}

impl BreakerEventKind {
    /// Resilience4j publishes only these while DISABLED or FORCED_OPEN (its `forcePublish`).
    pub(crate) fn force_publish(&self) -> bool {
        matches!(
            self,
            Self::StateTransition { .. } | Self::Reset | Self::ForcedOpen | Self::Disabled | Self::Restored { .. }
        )
    }
}

/// Progress of the probes in HALF_OPEN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct HalfOpenProgress {
    /// Permits handed out and not given back (running or finished probes).
    pub permits_used: u32,
    /// permitted_number_of_calls_in_half_open_state.
    pub permits_permitted: u32,
}

/// When OPEN began and when a probe will be let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct OpenTiming {
    #[ts(type = "number")]
    pub opened_at_ms: u64,
    /// The first request strictly after this instant becomes the first probe.
    #[ts(type = "number")]
    pub probe_allowed_at_ms: u64,
}

/// Everything the panel shows about a breaker at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[ts(export)]
pub struct BreakerSnapshot {
    pub name: String,
    pub state: BreakerState,
    /// When the current state was entered, unix milliseconds.
    #[ts(type = "number")]
    pub state_since_ms: u64,
    /// Percent, or −1 below the minimum number of calls.
    pub failure_rate: f32,
    /// Percent, or −1 below the minimum number of calls.
    pub slow_call_rate: f32,
    pub buffered_calls: u32,
    pub failed_calls: u32,
    pub slow_calls: u32,
    pub slow_failed_calls: u32,
    pub successful_calls: u32,
    #[ts(type = "number")]
    pub not_permitted_calls: u64,
    /// The window behind the current metrics (HALF_OPEN, and an OPEN it led to, use a count window).
    pub window_type: SlidingWindowType,
    /// Calls or seconds the current window spans.
    pub window_size: u32,
    /// The effective minimum number of calls for the current window ("7 of 10 calls needed").
    pub minimum_number_of_calls: u32,
    /// The configured closed-state window and minimum, whatever the current state's window is
    /// (DISABLED and FORCED_OPEN record nothing: their window holds 0 calls, minimum 0).
    pub configured_window_type: SlidingWindowType,
    pub configured_window_size: u32,
    pub configured_minimum_number_of_calls: u32,
    /// When the state this breaker started from was saved by the last run (`None`: it started
    /// afresh, CLOSED and empty).
    #[ts(type = "number | null")]
    pub restored_from_ms: Option<u64>,
    /// A count window's outcomes, oldest first.
    pub calls: Vec<RecordedCall>,
    /// A time window's one-second buckets, oldest first.
    pub buckets: Vec<BucketSummary>,
    pub half_open: Option<HalfOpenProgress>,
    pub open: Option<OpenTiming>,
    pub failure_rate_threshold: f32,
    pub slow_call_rate_threshold: f32,
    #[ts(type = "number")]
    pub slow_call_duration_threshold_ms: u64,
}

/// What a breaker saves to start the next run from (issue 26: a restart no longer forgets that
/// Gemini was failing): its state and when it was entered, the window's outcomes, the calls it
/// refused, and its recent events for the panel's timeline. Times are unix milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedBreaker {
    pub state: BreakerState,
    pub since_ms: u64,
    /// A count window's outcomes, oldest first (a time window's are not kept: its seconds are
    /// this run's, and it starts empty).
    pub calls: Vec<RecordedCall>,
    pub not_permitted_calls: u64,
    pub events: Vec<BreakerEvent>,
    pub saved_at_ms: u64,
}
