//! The circuit breaker's settings: Resilience4j's names in snake_case, the product's seed values as
//! defaults, durations as humantime strings (`"15s"`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::config::ConfigError;

/// How the closed-state window is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum SlidingWindowType {
    /// The last `sliding_window_size` calls (a ring of outcomes).
    #[default]
    CountBased,
    /// The calls of the last `sliding_window_size` seconds (one bucket per second).
    TimeBased,
}

/// Settings of one circuit breaker. `validate()` before use; [`super::CircuitBreaker::new`] does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields, default)]
#[ts(export)]
pub struct CircuitBreakerConfig {
    pub sliding_window_type: SlidingWindowType,
    /// Calls (count_based) or seconds (time_based) in the closed-state window.
    pub sliding_window_size: u32,
    /// Rates read −1 and nothing trips below this many buffered calls. For count_based the
    /// effective minimum is min(this, window size).
    pub minimum_number_of_calls: u32,
    /// Percent in (0, 100]; the breaker opens when the failure rate is >= this.
    pub failure_rate_threshold: f32,
    /// Percent in (0, 100]; the breaker opens when the slow-call rate is >= this.
    pub slow_call_rate_threshold: f32,
    /// A call is slow when it takes strictly longer than this.
    #[serde(with = "humantime_serde")]
    #[ts(type = "string")]
    pub slow_call_duration_threshold: Duration,
    /// How long OPEN rejects everything before a probe is allowed (strictly after it).
    #[serde(with = "humantime_serde")]
    #[ts(type = "string")]
    pub wait_duration_in_open_state: Duration,
    /// Probes allowed in HALF_OPEN; also the size of the half-open window.
    pub permitted_number_of_calls_in_half_open_state: u32,
    /// When true a timer moves OPEN to HALF_OPEN as the wait ends; otherwise the next request does.
    /// The timer is a task on the tokio runtime current when the breaker opens; without a runtime
    /// the move stays lazy.
    pub automatic_transition_from_open_to_half_open_enabled: bool,
    /// When non-zero, a HALF_OPEN that has not decided within this time goes back to OPEN.
    #[serde(with = "humantime_serde")]
    #[ts(type = "string")]
    pub max_wait_duration_in_half_open_state: Duration,
}

impl Default for CircuitBreakerConfig {
    /// The product's seed values (not Resilience4j's defaults, which are sized for servers).
    fn default() -> Self {
        Self {
            sliding_window_type: SlidingWindowType::CountBased,
            sliding_window_size: 20,
            minimum_number_of_calls: 10,
            failure_rate_threshold: 50.0,
            slow_call_rate_threshold: 100.0,
            slow_call_duration_threshold: Duration::from_secs(60),
            wait_duration_in_open_state: Duration::from_secs(15),
            permitted_number_of_calls_in_half_open_state: 5,
            automatic_transition_from_open_to_half_open_enabled: false,
            max_wait_duration_in_half_open_state: Duration::ZERO,
        }
    }
}

impl CircuitBreakerConfig {
    /// Checks the ranges Resilience4j's builder checks; the error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: &str| Err(ConfigError::Invalid { key: key.into(), message: message.into() });
        for (key, value) in [
            ("failure_rate_threshold", self.failure_rate_threshold),
            ("slow_call_rate_threshold", self.slow_call_rate_threshold),
        ] {
            // Written so that NaN fails too.
            if !(value > 0.0 && value <= 100.0) {
                return invalid(key, "must be a percentage greater than 0 and at most 100");
            }
        }
        if self.sliding_window_size == 0 {
            return invalid("sliding_window_size", "must be at least 1");
        }
        if self.minimum_number_of_calls == 0 {
            return invalid("minimum_number_of_calls", "must be at least 1");
        }
        if self.permitted_number_of_calls_in_half_open_state == 0 {
            return invalid("permitted_number_of_calls_in_half_open_state", "must be at least 1");
        }
        if self.wait_duration_in_open_state < Duration::from_millis(1) {
            return invalid("wait_duration_in_open_state", "must be at least 1ms");
        }
        if self.slow_call_duration_threshold.is_zero() {
            return invalid("slow_call_duration_threshold", "must be longer than zero");
        }
        Ok(())
    }

    /// The minimum number of calls that applies to the closed-state window.
    pub(crate) fn effective_minimum(&self) -> u32 {
        match self.sliding_window_type {
            SlidingWindowType::CountBased => self.minimum_number_of_calls.min(self.sliding_window_size),
            SlidingWindowType::TimeBased => self.minimum_number_of_calls,
        }
    }
}
