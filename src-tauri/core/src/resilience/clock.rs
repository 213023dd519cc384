//! Where the breaker's "now" comes from.
//!
//! Instants are `tokio::time::Instant`, so the default [`TokioClock`] follows
//! `tokio::time::pause()` / `advance()` in tests, and the automatic OPEN → HALF_OPEN timer sleeps on
//! the same clock it compares against. [`ManualClock`] is for synchronous tests: time moves only when
//! the test says so. (Timers always sleep on tokio's clock, so pair automatic transitions with
//! [`TokioClock`].)

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// A monotonic clock.
pub trait MonotonicClock: Send + Sync + 'static {
    fn now(&self) -> Instant;
}

/// tokio's clock: the real monotonic clock, or the paused test clock inside a paused runtime.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl MonotonicClock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that stands still until [`ManualClock::advance`] is called. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    /// Shared by all clones, so the test and the breaker see the same time.
    now: Arc<Mutex<Instant>>,
}

impl ManualClock {
    /// Starts at the current instant.
    pub fn new() -> Self {
        Self { now: Arc::new(Mutex::new(Instant::now())) }
    }

    /// Moves time forward.
    pub fn advance(&self, by: Duration) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl MonotonicClock for ManualClock {
    fn now(&self) -> Instant {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
