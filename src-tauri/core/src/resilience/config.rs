//! The stack's settings, one struct per layer: Resilience4j's names in snake_case, the product's
//! seed values as defaults, durations as humantime strings (`"15s"`). A value out of range is an
//! [`InvalidSetting`] that names its key.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::error::{Coded, ErrorCode};

/// A setting out of range. `key` is the config file's name for it: `section.key`
/// (`bulkhead.max_concurrent_calls`), or the bare key when a [`CircuitBreakerConfig`] is checked
/// on its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting {key}: {message}")]
pub struct InvalidSetting {
    pub key: String,
    pub message: String,
}

impl InvalidSetting {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self { key: key.into(), message: message.into() }
    }

    /// The same error, its key prefixed with the section it belongs to.
    fn in_section(self, section: &str) -> Self {
        Self { key: format!("{section}.{}", self.key), ..self }
    }
}

impl Coded for InvalidSetting {
    fn code(&self) -> ErrorCode {
        ErrorCode::Config
    }
}

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
    /// The breaker's state, window and timeline are saved in the catalog and the next run starts
    /// from them (an OPEN breaker stays OPEN until its wait is over). Not Resilience4j's: off, a
    /// restart starts CLOSED and empty, as Resilience4j does.
    pub remember_across_restarts: bool,
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
            remember_across_restarts: true,
        }
    }
}

impl CircuitBreakerConfig {
    /// Checks the ranges Resilience4j's builder checks; the error names the key.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        let invalid = |key: &str, message: &str| Err(InvalidSetting::new(key, message));
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

/// `[bulkhead]`: how many Gemini calls run at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields, default)]
#[ts(export)]
pub struct BulkheadConfig {
    pub max_concurrent_calls: u32,
    /// How long a call may wait for a free slot; 0 rejects at once with `bulkhead_full`.
    #[serde(with = "humantime_serde")]
    #[ts(type = "string")]
    pub max_wait_duration: Duration,
}

impl Default for BulkheadConfig {
    fn default() -> Self {
        Self { max_concurrent_calls: 10, max_wait_duration: Duration::ZERO }
    }
}

/// `[time_limiter]`: the longest one attempt may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields, default)]
#[ts(export)]
pub struct TimeLimiterConfig {
    #[serde(with = "humantime_serde")]
    #[ts(type = "string")]
    pub timeout_duration: Duration,
}

impl Default for TimeLimiterConfig {
    fn default() -> Self {
        Self { timeout_duration: Duration::from_secs(30) }
    }
}

/// `[retry]`: attempts (the first call included) and the backoff between them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields, default)]
#[ts(export)]
pub struct RetryConfig {
    pub max_attempts: u32,
    /// The first backoff; it doubles (with jitter) for each further retry.
    #[serde(with = "humantime_serde")]
    #[ts(type = "string")]
    pub wait_duration: Duration,
    /// The longest wait between two attempts; a server asking for longer fails the call at once.
    #[serde(with = "humantime_serde")]
    #[ts(type = "string")]
    pub max_wait: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self { max_attempts: 3, wait_duration: Duration::from_millis(500), max_wait: Duration::from_secs(60) }
    }
}

/// `[rate_limiter]`: at most `limit_for_period` calls per `limit_refresh_period`, when enabled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields, default)]
#[ts(export)]
pub struct RateLimiterConfig {
    pub enabled: bool,
    pub limit_for_period: u32,
    #[serde(with = "humantime_serde")]
    #[ts(type = "string")]
    pub limit_refresh_period: Duration,
}

impl Default for RateLimiterConfig {
    fn default() -> Self {
        Self { enabled: false, limit_for_period: 10, limit_refresh_period: Duration::from_secs(60) }
    }
}

/// Every layer's settings; each is a top-level section of the config file.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ResilienceConfig {
    pub circuit_breaker: CircuitBreakerConfig,
    pub bulkhead: BulkheadConfig,
    pub time_limiter: TimeLimiterConfig,
    pub retry: RetryConfig,
    pub rate_limiter: RateLimiterConfig,
}

impl ResilienceConfig {
    /// Checks every layer; the error names the key.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        let invalid = |key: &str, message: &str| Err(InvalidSetting::new(key, message));
        self.circuit_breaker.validate().map_err(|e| e.in_section("circuit_breaker"))?;
        if self.bulkhead.max_concurrent_calls == 0 {
            return invalid("bulkhead.max_concurrent_calls", "must be at least 1");
        }
        if self.time_limiter.timeout_duration.is_zero() {
            return invalid("time_limiter.timeout_duration", "must be longer than zero");
        }
        if self.retry.max_attempts == 0 {
            return invalid("retry.max_attempts", "must be at least 1 (the first call counts)");
        }
        if self.rate_limiter.limit_for_period == 0 {
            return invalid("rate_limiter.limit_for_period", "must be at least 1");
        }
        if self.rate_limiter.limit_refresh_period.is_zero() {
            return invalid("rate_limiter.limit_refresh_period", "must be longer than zero");
        }
        Ok(())
    }
}
