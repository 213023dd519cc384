//! Sliding windows and the rates computed from them, after Resilience4j's
//! `FixedSizeSlidingWindowMetrics`, `SlidingTimeWindowMetrics` and `CircuitBreakerMetrics`.
//!
//! Both windows keep the individual outcomes (a ring of calls, or a ring of one-second buckets) and
//! subtract what falls out, so an old burst of failures ages out instead of lingering in a running
//! total.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::config::{CircuitBreakerConfig, SlidingWindowType};

/// One recorded call, as the panel draws it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum RecordedCall {
    Success,
    Failure,
    SlowSuccess,
    SlowFailure,
}

impl RecordedCall {
    pub fn new(failed: bool, slow: bool) -> Self {
        match (failed, slow) {
            (false, false) => Self::Success,
            (true, false) => Self::Failure,
            (false, true) => Self::SlowSuccess,
            (true, true) => Self::SlowFailure,
        }
    }

    pub fn is_failure(self) -> bool {
        matches!(self, Self::Failure | Self::SlowFailure)
    }

    pub fn is_slow(self) -> bool {
        matches!(self, Self::SlowSuccess | Self::SlowFailure)
    }
}

/// The calls of one second of a time-based window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct BucketSummary {
    pub calls: u32,
    pub failed: u32,
    pub slow: u32,
    pub slow_failed: u32,
}

impl BucketSummary {
    fn add(&mut self, outcome: RecordedCall) {
        self.calls += 1;
        self.failed += u32::from(outcome.is_failure());
        self.slow += u32::from(outcome.is_slow());
        self.slow_failed += u32::from(outcome == RecordedCall::SlowFailure);
    }

    fn remove(&mut self, other: &BucketSummary) {
        self.calls -= other.calls;
        self.failed -= other.failed;
        self.slow -= other.slow;
        self.slow_failed -= other.slow_failed;
    }
}

/// What a recorded call means for the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evaluation {
    /// Fewer buffered calls than the minimum: rates are −1, nothing may transition.
    BelowMinimum,
    BelowThresholds,
    /// At least one rate is >= its threshold.
    Exceeded {
        failure_rate: bool,
        slow_call_rate: bool,
    },
}

/// A count-based ring of the last `capacity` outcomes.
#[derive(Debug, Clone)]
struct CountWindow {
    capacity: usize,
    ring: VecDeque<RecordedCall>,
}

/// A time-based ring of one-second buckets; bucket `s % size` holds second `s`.
#[derive(Debug, Clone)]
struct TimeWindow {
    buckets: Vec<BucketSummary>,
    /// The newest second the buckets describe; older seconds are cleared as time moves on.
    head_second: u64,
}

#[derive(Debug, Clone)]
enum Window {
    Count(CountWindow),
    Time(TimeWindow),
}

/// A window plus the counters that go with it: one state's metrics.
#[derive(Debug, Clone)]
pub(crate) struct Metrics {
    window: Window,
    /// Running sums of the outcomes currently in the window (kept in step with the ring).
    totals: BucketSummary,
    /// The effective minimum number of calls for this window.
    minimum: u32,
    /// Calls rejected while these metrics were current.
    pub(crate) not_permitted: u64,
    failure_rate_threshold: f32,
    slow_call_rate_threshold: f32,
}

impl Metrics {
    /// The closed-state (and metrics-only) window as configured. `now_second` is the current second
    /// on the breaker's time axis.
    pub(crate) fn for_closed(config: &CircuitBreakerConfig, now_second: u64) -> Self {
        let size = config.sliding_window_size as usize;
        let window = match config.sliding_window_type {
            SlidingWindowType::CountBased => Window::Count(CountWindow { capacity: size, ring: VecDeque::new() }),
            SlidingWindowType::TimeBased => {
                Window::Time(TimeWindow { buckets: vec![BucketSummary::default(); size], head_second: now_second })
            }
        };
        Self::new(window, config.effective_minimum(), config)
    }

    /// The half-open window: a count window of N = permitted calls, minimum min(minimum, N).
    pub(crate) fn for_half_open(config: &CircuitBreakerConfig) -> Self {
        let n = config.permitted_number_of_calls_in_half_open_state;
        let window = Window::Count(CountWindow { capacity: n as usize, ring: VecDeque::new() });
        Self::new(window, config.minimum_number_of_calls.min(n), config)
    }

    /// DISABLED and FORCED_OPEN: a window that holds nothing, so rates read −1.
    pub(crate) fn empty(config: &CircuitBreakerConfig) -> Self {
        Self::new(Window::Count(CountWindow { capacity: 0, ring: VecDeque::new() }), 0, config)
    }

    fn new(window: Window, minimum: u32, config: &CircuitBreakerConfig) -> Self {
        Self {
            window,
            totals: BucketSummary::default(),
            minimum,
            not_permitted: 0,
            failure_rate_threshold: config.failure_rate_threshold,
            slow_call_rate_threshold: config.slow_call_rate_threshold,
        }
    }

    /// Adds one outcome (pushing out the oldest) and evaluates the thresholds.
    pub(crate) fn record(&mut self, outcome: RecordedCall, now_second: u64) -> Evaluation {
        match &mut self.window {
            Window::Count(w) => {
                if w.capacity == 0 {
                    return self.evaluate(now_second);
                }
                if w.ring.len() == w.capacity {
                    if let Some(oldest) = w.ring.pop_front() {
                        let mut gone = BucketSummary::default();
                        gone.add(oldest);
                        self.totals.remove(&gone);
                    }
                }
                w.ring.push_back(outcome);
                self.totals.add(outcome);
            }
            Window::Time(w) => {
                w.roll_to(now_second, &mut self.totals);
                let index = (now_second % w.buckets.len() as u64) as usize;
                w.buckets[index].add(outcome);
                self.totals.add(outcome);
            }
        }
        self.evaluate(now_second)
    }

    /// The sums over the window as of `now_second` (a time window drops seconds that aged out).
    pub(crate) fn totals(&mut self, now_second: u64) -> BucketSummary {
        if let Window::Time(w) = &mut self.window {
            w.roll_to(now_second, &mut self.totals);
        }
        self.totals
    }

    pub(crate) fn minimum(&self) -> u32 {
        self.minimum
    }

    /// How many calls (count_based) or seconds (time_based) the window spans.
    pub(crate) fn size(&self) -> u32 {
        match &self.window {
            Window::Count(w) => w.capacity as u32,
            Window::Time(w) => w.buckets.len() as u32,
        }
    }

    pub(crate) fn window_type(&self) -> SlidingWindowType {
        match self.window {
            Window::Count(_) => SlidingWindowType::CountBased,
            Window::Time(_) => SlidingWindowType::TimeBased,
        }
    }

    /// Failure rate in percent, or −1 below the minimum number of calls.
    pub(crate) fn failure_rate(&mut self, now_second: u64) -> f32 {
        let totals = self.totals(now_second);
        self.rate(totals.failed, totals.calls)
    }

    /// Slow-call rate in percent, or −1 below the minimum number of calls.
    pub(crate) fn slow_call_rate(&mut self, now_second: u64) -> f32 {
        let totals = self.totals(now_second);
        self.rate(totals.slow, totals.calls)
    }

    fn rate(&self, part: u32, calls: u32) -> f32 {
        if calls == 0 || calls < self.minimum {
            return -1.0;
        }
        part as f32 * 100.0 / calls as f32
    }

    fn evaluate(&mut self, now_second: u64) -> Evaluation {
        let failure_rate = self.failure_rate(now_second);
        let slow_call_rate = self.slow_call_rate(now_second);
        if failure_rate == -1.0 || slow_call_rate == -1.0 {
            return Evaluation::BelowMinimum;
        }
        let failure = failure_rate >= self.failure_rate_threshold;
        let slow = slow_call_rate >= self.slow_call_rate_threshold;
        if failure || slow {
            Evaluation::Exceeded { failure_rate: failure, slow_call_rate: slow }
        } else {
            Evaluation::BelowThresholds
        }
    }

    /// The count window's outcomes, oldest first (empty for a time window).
    pub(crate) fn calls(&self) -> Vec<RecordedCall> {
        match &self.window {
            Window::Count(w) => w.ring.iter().copied().collect(),
            Window::Time(_) => Vec::new(),
        }
    }

    /// The time window's buckets, oldest second first (empty for a count window).
    pub(crate) fn buckets(&mut self, now_second: u64) -> Vec<BucketSummary> {
        self.totals(now_second);
        match &self.window {
            Window::Count(_) => Vec::new(),
            Window::Time(w) => {
                let n = w.buckets.len() as u64;
                (1..=n).map(|k| w.buckets[((w.head_second + k) % n) as usize]).collect()
            }
        }
    }
}

impl TimeWindow {
    /// Moves the head to `now_second`, clearing every bucket whose second left the window.
    fn roll_to(&mut self, now_second: u64, totals: &mut BucketSummary) {
        if now_second <= self.head_second {
            return;
        }
        let n = self.buckets.len() as u64;
        let steps = (now_second - self.head_second).min(n);
        for second in now_second + 1 - steps..=now_second {
            let bucket = &mut self.buckets[(second % n) as usize];
            totals.remove(bucket);
            *bucket = BucketSummary::default();
        }
        self.head_second = now_second;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(window_type: SlidingWindowType, size: u32, minimum: u32) -> CircuitBreakerConfig {
        CircuitBreakerConfig {
            sliding_window_type: window_type,
            sliding_window_size: size,
            minimum_number_of_calls: minimum,
            ..Default::default()
        }
    }

    #[test]
    fn breaker_count_window_is_a_ring() {
        let mut m = Metrics::for_closed(&config(SlidingWindowType::CountBased, 3, 1), 0);
        for o in [RecordedCall::Failure, RecordedCall::Failure, RecordedCall::Success, RecordedCall::Success] {
            m.record(o, 0);
        }
        assert_eq!(m.calls(), vec![RecordedCall::Failure, RecordedCall::Success, RecordedCall::Success]);
        assert_eq!(m.totals(0), BucketSummary { calls: 3, failed: 1, slow: 0, slow_failed: 0 });
    }

    #[test]
    fn breaker_time_window_drops_old_seconds() {
        let mut m = Metrics::for_closed(&config(SlidingWindowType::TimeBased, 3, 1), 10);
        m.record(RecordedCall::SlowFailure, 10);
        m.record(RecordedCall::Success, 11);
        m.record(RecordedCall::Failure, 12);
        assert_eq!(m.totals(12).calls, 3);
        assert_eq!(m.totals(13), BucketSummary { calls: 2, failed: 1, slow: 0, slow_failed: 0 });
        assert_eq!(m.buckets(13).iter().map(|b| b.calls).collect::<Vec<_>>(), vec![1, 1, 0]);
        assert_eq!(m.totals(100).calls, 0);
    }
}
