//! The stack every Gemini call goes through, from the outside in (Resilience4j's default aspect
//! order, as in the seed design):
//!
//! `Retry( CircuitBreaker( RateLimiter( TimeLimiter( Bulkhead( call ) ) ) ) )`
//!
//! - **Retry** (backon, exponential backoff with jitter) retries only what can succeed on a second
//!   try; each attempt is one call through the breaker, and an open breaker stops the retries.
//!   A quota error's retry delay is the minimum wait; when it exceeds `max_wait` the call fails at
//!   once.
//! - **CircuitBreaker** ([`CircuitBreaker`]) decides first whether a call may run at all.
//! - **RateLimiter** (governor): `limit_for_period` calls per `limit_refresh_period`; a call that
//!   would wait longer than the time limiter's timeout is rejected as rate limited.
//! - **TimeLimiter**: `timeout_duration` around one attempt, waiting for a bulkhead slot included;
//!   the attempt is cancelled (its future dropped) when it fires, which the breaker records as a
//!   failure.
//! - **Bulkhead**: a semaphore of `max_concurrent_calls`; `max_wait_duration` 0 rejects at once
//!   when full. A caller that should queue instead (bulk import) asks for [`SlotPolicy::Wait`];
//!   its time limit then starts when it has a slot, not while it queues.
//!   The permit is held for the whole call, body included, and released on cancellation.

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Semaphore};
use ts_rs::TS;

use super::config::{InvalidSetting, RateLimiterConfig, ResilienceConfig};
use super::{BreakerEvent, BreakerSnapshot, CircuitBreaker, NotPermitted, Outcome};

/// How an error of the wrapped call counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The service's state: recorded by the breaker. `retry` when a second try can succeed;
    /// `min_delay` when the server said how long to wait.
    Failure { retry: bool, min_delay: Option<Duration> },
    /// The input's own fault: not recorded, never retried.
    Ignored,
}

/// What to do when every bulkhead slot is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotPolicy {
    /// Wait up to `bulkhead.max_wait_duration`, then reject (interactive calls).
    Configured,
    /// Wait for a slot however long it takes (a bulk import keeps K calls in flight).
    Wait,
}

/// Why a call through the stack failed.
#[derive(Debug, thiserror::Error)]
pub enum StackError<E> {
    /// The call ran (perhaps several times) and failed with its own error.
    #[error(transparent)]
    Call(E),
    /// The breaker rejected the call without running it.
    #[error(transparent)]
    CircuitOpen(NotPermitted),
    /// Every bulkhead slot was taken for longer than the call may wait.
    #[error("{max} Gemini calls are already running; try again when one finishes")]
    BulkheadFull { max: u32 },
    /// The rate limiter would have made the call wait longer than its timeout.
    #[error("the limit of {limit} Gemini calls per {period} is reached; try again in {wait}")]
    RateLimited { limit: u32, period: String, wait: String },
    /// The time limiter cancelled the attempt.
    #[error("Gemini did not answer within {}; try again, or raise time_limiter.timeout_duration in Settings", humantime::format_duration(*.0))]
    Timeout(Duration),
}

/// The bulkhead's numbers for the panel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct BulkheadSnapshot {
    pub max_concurrent_calls: u32,
    pub available_concurrent_calls: u32,
    #[ts(type = "number")]
    pub max_wait_ms: u64,
    #[ts(type = "number")]
    pub rejected_calls: u64,
}

/// The retry counters of Resilience4j's actuator, and a little more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct RetrySnapshot {
    pub max_attempts: u32,
    #[ts(type = "number")]
    pub successful_without_retry: u64,
    #[ts(type = "number")]
    pub successful_with_retry: u64,
    #[ts(type = "number")]
    pub failed_without_retry: u64,
    #[ts(type = "number")]
    pub failed_with_retry: u64,
    /// Retries made (attempts after the first).
    #[ts(type = "number")]
    pub retries: u64,
    #[ts(type = "number | null")]
    pub last_retry_delay_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct RateLimiterSnapshot {
    pub enabled: bool,
    pub limit_for_period: u32,
    #[ts(type = "number")]
    pub limit_refresh_period_ms: u64,
    #[ts(type = "number")]
    pub rejected_calls: u64,
}

/// Everything the live panel shows.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[ts(export)]
pub struct ResilienceSnapshot {
    pub breaker: BreakerSnapshot,
    pub bulkhead: BulkheadSnapshot,
    pub retry: RetrySnapshot,
    pub rate_limiter: RateLimiterSnapshot,
    /// The breaker's last events, oldest first.
    pub events: Vec<BreakerEvent>,
}

type Governor = governor::RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    governor::clock::DefaultClock,
    governor::middleware::NoOpMiddleware,
>;

/// The stack, shared by every caller (the window, the CLI, imports). Cheap to clone.
#[derive(Clone)]
pub struct ResilienceStack {
    shared: Arc<Shared>,
}

struct Shared {
    config: ResilienceConfig,
    breaker: CircuitBreaker,
    /// Bulkhead slots; a permit is held for a whole attempt.
    slots: Arc<Semaphore>,
    /// Present when the rate limiter is enabled.
    limiter: Option<Governor>,
    counters: Counters,
    /// Bumped on every change outside the breaker (slots, counters), so the panel's bridge can
    /// wake up without polling.
    changed: watch::Sender<u64>,
}

#[derive(Default)]
struct Counters {
    bulkhead_rejected: AtomicU64,
    rate_rejected: AtomicU64,
    ok_first: AtomicU64,
    ok_retried: AtomicU64,
    failed_first: AtomicU64,
    failed_retried: AtomicU64,
    retries: AtomicU64,
    /// Milliseconds + 1 of the last retry delay (0 = none yet).
    last_delay: AtomicU64,
}

impl ResilienceStack {
    /// Builds the stack named `name` (the breaker's name) from validated settings.
    pub fn new(name: &str, config: ResilienceConfig) -> Result<Self, InvalidSetting> {
        config.validate()?;
        let breaker = CircuitBreaker::new(name, config.circuit_breaker.clone())?;
        let limiter = config.rate_limiter.enabled.then(|| governor_for(&config.rate_limiter));
        let slots = Arc::new(Semaphore::new(config.bulkhead.max_concurrent_calls as usize));
        Ok(Self {
            shared: Arc::new(Shared {
                config,
                breaker,
                slots,
                limiter,
                counters: Counters::default(),
                changed: watch::channel(0).0,
            }),
        })
    }

    pub fn config(&self) -> &ResilienceConfig {
        &self.shared.config
    }

    pub fn breaker(&self) -> &CircuitBreaker {
        &self.shared.breaker
    }

    /// Wakes on every change outside the breaker; pair it with the breaker's snapshot watch.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.changed.subscribe()
    }

    pub fn snapshot(&self) -> ResilienceSnapshot {
        let s = &self.shared;
        let c = &s.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ResilienceSnapshot {
            breaker: s.breaker.snapshot(),
            bulkhead: BulkheadSnapshot {
                max_concurrent_calls: s.config.bulkhead.max_concurrent_calls,
                available_concurrent_calls: u32::try_from(s.slots.available_permits()).unwrap_or(u32::MAX),
                max_wait_ms: millis(s.config.bulkhead.max_wait_duration),
                rejected_calls: load(&c.bulkhead_rejected),
            },
            retry: RetrySnapshot {
                max_attempts: s.config.retry.max_attempts,
                successful_without_retry: load(&c.ok_first),
                successful_with_retry: load(&c.ok_retried),
                failed_without_retry: load(&c.failed_first),
                failed_with_retry: load(&c.failed_retried),
                retries: load(&c.retries),
                last_retry_delay_ms: load(&c.last_delay).checked_sub(1),
            },
            rate_limiter: RateLimiterSnapshot {
                enabled: s.config.rate_limiter.enabled,
                limit_for_period: s.config.rate_limiter.limit_for_period,
                limit_refresh_period_ms: millis(s.config.rate_limiter.limit_refresh_period),
                rejected_calls: load(&c.rate_rejected),
            },
            events: s.breaker.recent_events(),
        }
    }

    /// Runs `op` through every layer. `verdict` says how each of its errors counts.
    pub async fn call<T, E, F, Fut>(
        &self,
        policy: SlotPolicy,
        verdict: impl Fn(&E) -> Verdict,
        op: F,
    ) -> Result<T, StackError<E>>
    where
        E: std::fmt::Display,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let retry = &self.shared.config.retry;
        let attempts = AtomicU64::new(0);
        let backoff = ExponentialBuilder::default()
            .with_min_delay(retry.wait_duration)
            .with_max_delay(retry.max_wait)
            .with_factor(2.0)
            .with_jitter()
            .with_max_times(retry.max_attempts.saturating_sub(1) as usize);
        let (attempts_ref, verdict_ref, op_ref) = (&attempts, &verdict, &op);
        let result = (move || {
            attempts_ref.fetch_add(1, Ordering::Relaxed);
            self.attempt(policy, verdict_ref, op_ref)
        })
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(|e| self.retryable(e, &verdict))
        .adjust(|e, delay| {
            // The server's retry delay is the least we wait; too long a wait ends the retries.
            let min = match e {
                StackError::Call(inner) => match verdict(inner) {
                    Verdict::Failure { min_delay, .. } => min_delay,
                    Verdict::Ignored => None,
                },
                _ => None,
            };
            // `None` from backon means its attempts are used up.
            let wait = delay?.max(min.unwrap_or_default());
            (wait <= retry.max_wait).then_some(wait)
        })
        .notify(|_, delay| {
            let c = &self.shared.counters;
            c.retries.fetch_add(1, Ordering::Relaxed);
            c.last_delay.store(millis(delay).saturating_add(1), Ordering::Relaxed);
            self.bump();
        })
        .await;
        let retried = attempts.load(Ordering::Relaxed) > 1;
        let c = &self.shared.counters;
        let counter = match (&result, retried) {
            (Ok(_), false) => &c.ok_first,
            (Ok(_), true) => &c.ok_retried,
            (Err(_), false) => &c.failed_first,
            (Err(_), true) => &c.failed_retried,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.bump();
        result
    }

    /// Only what can succeed on a second try: the call's retryable failures and the time
    /// limiter's timeout. Never a breaker, bulkhead or rate-limiter rejection.
    fn retryable<E>(&self, e: &StackError<E>, verdict: &impl Fn(&E) -> Verdict) -> bool {
        match e {
            StackError::Call(inner) => matches!(verdict(inner), Verdict::Failure { retry: true, .. }),
            StackError::Timeout(_) => true,
            StackError::CircuitOpen(_) | StackError::BulkheadFull { .. } | StackError::RateLimited { .. } => false,
        }
    }

    /// One attempt: breaker permit, rate limiter, then the time-limited bulkhead and call.
    async fn attempt<T, E, F, Fut>(
        &self,
        policy: SlotPolicy,
        verdict: &impl Fn(&E) -> Verdict,
        op: &F,
    ) -> Result<T, StackError<E>>
    where
        E: std::fmt::Display,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let s = &self.shared;
        let permit = s.breaker.try_acquire().map_err(StackError::CircuitOpen)?;
        if let Err(e) = self.wait_for_rate().await {
            permit.finish(Outcome::Ignored(Some(e.to_string())));
            return Err(e);
        }
        let timeout = s.config.time_limiter.timeout_duration;
        // A caller that queues for a slot (bulk import) starts its clock once it has one.
        let queued_slot = match policy {
            SlotPolicy::Wait => Some(self.slot(policy).await?),
            SlotPolicy::Configured => None,
        };
        let limited = tokio::time::timeout(timeout, async {
            let _slot = match queued_slot {
                Some(slot) => slot,
                None => self.slot(policy).await?,
            };
            self.bump();
            op().await.map_err(StackError::Call)
        })
        .await;
        // The slot is free again; the change is announced by the retry's `notify` or, when no retry
        // follows, at the end of `call`, with no `.await` in between (one wake-up, not two).
        let result = limited.unwrap_or(Err(StackError::Timeout(timeout)));
        let outcome = match &result {
            Ok(_) => Outcome::Success,
            Err(StackError::Call(e)) => match verdict(e) {
                Verdict::Failure { .. } => Outcome::Failure(Some(e.to_string())),
                Verdict::Ignored => Outcome::Ignored(Some(e.to_string())),
            },
            Err(e @ StackError::Timeout(_)) => Outcome::Failure(Some(e.to_string())),
            Err(e) => Outcome::Ignored(Some(e.to_string())),
        };
        permit.finish(outcome);
        result
    }

    async fn slot<E>(&self, policy: SlotPolicy) -> Result<tokio::sync::OwnedSemaphorePermit, StackError<E>> {
        let s = &self.shared;
        let full = || {
            s.counters.bulkhead_rejected.fetch_add(1, Ordering::Relaxed);
            StackError::BulkheadFull { max: s.config.bulkhead.max_concurrent_calls }
        };
        let wait = s.config.bulkhead.max_wait_duration;
        match policy {
            SlotPolicy::Wait => s.slots.clone().acquire_owned().await.map_err(|_| full()),
            SlotPolicy::Configured if wait.is_zero() => s.slots.clone().try_acquire_owned().map_err(|_| full()),
            SlotPolicy::Configured => match tokio::time::timeout(wait, s.slots.clone().acquire_owned()).await {
                Ok(Ok(slot)) => Ok(slot),
                _ => Err(full()),
            },
        }
    }

    /// Waits for the rate limiter, unless that would take longer than the attempt's timeout.
    async fn wait_for_rate<E>(&self) -> Result<(), StackError<E>> {
        let s = &self.shared;
        let Some(limiter) = &s.limiter else {
            return Ok(());
        };
        let timeout = s.config.time_limiter.timeout_duration;
        loop {
            match limiter.check() {
                Ok(()) => return Ok(()),
                Err(not_until) => {
                    use governor::clock::Clock as _;
                    let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                    if wait > timeout {
                        s.counters.rate_rejected.fetch_add(1, Ordering::Relaxed);
                        self.bump();
                        let r = &s.config.rate_limiter;
                        return Err(StackError::RateLimited {
                            limit: r.limit_for_period,
                            period: humantime::format_duration(r.limit_refresh_period).to_string(),
                            wait: humantime::format_duration(Duration::from_secs(wait.as_secs() + 1)).to_string(),
                        });
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Wakes the watchers of [`ResilienceStack::changes`]. With none there is nobody to wake, and a
    /// new receiver starts with the current value marked as seen anyway, so the send is skipped.
    fn bump(&self) {
        let changed = &self.shared.changed;
        if changed.receiver_count() > 0 {
            changed.send_modify(|v| *v = v.wrapping_add(1));
        }
    }
}

fn governor_for(config: &RateLimiterConfig) -> Governor {
    let n = NonZeroU32::new(config.limit_for_period).unwrap_or(NonZeroU32::MIN);
    let per_cell = config.limit_refresh_period / n.get();
    let quota = governor::Quota::with_period(per_cell.max(Duration::from_nanos(1)))
        .unwrap_or_else(|| governor::Quota::per_second(n))
        .allow_burst(n);
    governor::RateLimiter::direct(quota)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
