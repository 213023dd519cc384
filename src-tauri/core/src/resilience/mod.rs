//! Resilience for calls to Gemini: a circuit breaker with Resilience4j's exact semantics.
//!
//! Why our own: no Rust crate has these semantics (tower-resilience keeps a running total instead
//! of a sliding window and closes half-open after N successes; recloser and failsafe do not limit
//! half-open calls). The semantics are read off Resilience4j 2.x (`CircuitBreakerStateMachine`,
//! `CircuitBreakerMetrics`, `FixedSizeSlidingWindowMetrics`, `SlidingTimeWindowMetrics`); the
//! tests in `tests/breaker.rs` pin them down scenario by scenario. In short:
//!
//! - **Windows** keep individual outcomes: count_based is a ring of the last N calls, time_based a
//!   ring of N one-second buckets. Rates are −1 while buffered calls < minimum_number_of_calls
//!   (clamped to the window size for count_based only). failure rate = failed × 100 / buffered; a
//!   call is slow when its duration is strictly greater than the threshold; a slow failure counts in
//!   both rates.
//! - **CLOSED** trips to OPEN when either rate is >= its threshold; the failure_rate_exceeded /
//!   slow_call_rate_exceeded event comes before the state_transition event.
//! - **OPEN** keeps the metrics that opened it, rejects (and counts) every call, and moves to
//!   HALF_OPEN lazily inside the first request made strictly after opened_at + wait (or by a timer
//!   when automatic transition is on). Results of calls admitted earlier are still recorded.
//! - **HALF_OPEN** has fresh metrics: a count window of N = permitted calls, minimum
//!   min(minimum_number_of_calls, N), exactly N permits. After each result: below the minimum stay,
//!   a rate >= threshold goes OPEN, otherwise CLOSED. An ignored or cancelled call gives its permit
//!   back. A non-zero max_wait_duration_in_half_open_state sends it back to OPEN when it expires.
//! - **DISABLED** passes everything and records nothing; **FORCED_OPEN** rejects and counts
//!   everything; **METRICS_ONLY** records but never transitions. Entering any state but OPEN, or a
//!   reset, starts fresh metrics. Moving to the current state publishes nothing.
//!
//! Time is injected ([`MonotonicClock`]); tests step through "wait 15 s, then half-open" in microseconds with
//! [`ManualClock`] or tokio's paused clock.
//!
//! The breaker is one layer of [`ResilienceStack`] (`stack.rs`): Retry, CircuitBreaker,
//! RateLimiter, TimeLimiter, Bulkhead, from the outside in. The app and the CLI share one stack.
//!
//! Files: `config.rs` (every layer's settings, [`ResilienceConfig`], and [`InvalidSetting`], the
//! error for a value out of range), `window.rs` (sliding windows and rates), `breaker.rs` (the state
//! machine, permits, events), `snapshot.rs` (what the UI reads), `clock.rs`, `stack.rs` (the layers
//! around the breaker). The module depends on `crate::error` only; `crate::config` holds a
//! [`ResilienceConfig`] and wraps [`InvalidSetting`], never the other way round.

mod breaker;
mod clock;
mod config;
mod snapshot;
mod stack;
mod window;

pub use breaker::{CallError, CircuitBreaker, IllegalTransition, NotPermitted, Outcome, Permit, RECENT_EVENTS};
pub use clock::{ManualClock, MonotonicClock, TokioClock};
pub use config::{
    BulkheadConfig, CircuitBreakerConfig, InvalidSetting, RateLimiterConfig, ResilienceConfig, RetryConfig,
    SlidingWindowType, TimeLimiterConfig,
};
pub use snapshot::{
    BreakerEvent, BreakerEventKind, BreakerSnapshot, BreakerState, HalfOpenProgress, OpenTiming, SavedBreaker,
};
pub use stack::{
    BulkheadSnapshot, RateLimiterSnapshot, ResilienceSnapshot, ResilienceStack, RetrySnapshot, SlotPolicy, StackError,
    Verdict,
};
pub use window::{BucketSummary, RecordedCall};
