//! The circuit breaker state machine (see the module header in `resilience/mod.rs` for the
//! semantics and where they come from).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::clock::{MonotonicClock, TokioClock};
use super::config::SlidingWindowType;
use super::config::{CircuitBreakerConfig, InvalidSetting};
use super::snapshot::{
    BreakerEvent, BreakerEventKind, BreakerSnapshot, BreakerState, HalfOpenProgress, OpenTiming, SavedBreaker,
};
use super::window::{Evaluation, Metrics, RecordedCall};

/// How many events [`CircuitBreaker::recent_events`] keeps (Spring's actuator shows 100).
pub const RECENT_EVENTS: usize = 100;
/// Capacity of the live event channel; a subscriber that falls further behind sees `Lagged`.
const EVENT_CHANNEL_CAPACITY: usize = 256;

/// How a finished call counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Recorded as a success (slow if it took longer than the threshold).
    Success,
    /// Recorded as a failure, with an optional message for the event log.
    Failure(Option<String>),
    /// Not recorded at all (e.g. the photo's fault, not the service's); the permit is given back.
    Ignored(Option<String>),
}

/// A call was rejected without running.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct NotPermitted {
    /// The breaker's name.
    pub breaker: String,
    /// OPEN, HALF_OPEN (all probes in use) or FORCED_OPEN.
    pub state: BreakerState,
    /// For OPEN: the instant after which the next request becomes a probe.
    pub retry_at: Option<Instant>,
    /// `retry_at` on the wall clock, for messages like "calls are paused until 14:03:20".
    pub retry_at_wall: Option<SystemTime>,
    /// For OPEN: how long until then, as of the rejection.
    pub retry_in: Option<Duration>,
}

impl NotPermitted {
    /// `retry_at_wall` as unix milliseconds.
    pub fn retry_at_unix_ms(&self) -> Option<u64> {
        self.retry_at_wall.map(unix_ms)
    }

    fn describe(&self) -> String {
        let name = &self.breaker;
        match (self.state, self.retry_in) {
            (BreakerState::Open, Some(wait)) => {
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                format!("calls to {name} are paused: its circuit breaker is open; a probe is allowed in {secs}s")
            }
            (BreakerState::HalfOpen, _) => {
                format!("calls to {name} are paused: its circuit breaker is half-open and all probes are running")
            }
            (BreakerState::ForcedOpen, _) => format!("calls to {name} are paused: its circuit breaker was forced open"),
            (state, _) => format!("calls to {name} are not permitted: its circuit breaker is {state}"),
        }
    }
}

/// The result of [`CircuitBreaker::call`].
#[derive(Debug, thiserror::Error)]
pub enum CallError<E> {
    /// The breaker rejected the call; it did not run.
    #[error(transparent)]
    NotPermitted(NotPermitted),
    /// The call ran and failed.
    #[error(transparent)]
    Inner(E),
}

/// The requested manual transition does not exist in Resilience4j's table (e.g. CLOSED → HALF_OPEN,
/// METRICS_ONLY → OPEN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a circuit breaker cannot go from {from} to {to}")]
pub struct IllegalTransition {
    pub from: BreakerState,
    pub to: BreakerState,
}

/// A circuit breaker. Cloning is cheap and every clone is the same breaker.
#[derive(Clone)]
pub struct CircuitBreaker {
    shared: Arc<Shared>,
}

/// Permission to run one call. Finish it with [`Permit::on_success`], [`Permit::on_error`],
/// [`Permit::on_ignored`] or [`Permit::finish`]; dropping it unfinished (the call was cancelled)
/// gives the permit back like an ignored outcome, so a cancelled probe cannot wedge HALF_OPEN.
#[must_use = "a permit must be finished with on_success, on_error or on_ignored"]
pub struct Permit {
    shared: Arc<Shared>,
    started: Instant,
    /// The state epoch the permit was granted in; only a HALF_OPEN of the same epoch takes it back.
    epoch: u64,
    finished: bool,
}

struct Shared {
    /// The breaker's name as events and snapshots show it ("gemini").
    name: String,
    /// Validated settings, fixed for the breaker's life.
    config: CircuitBreakerConfig,
    /// Where "now" comes from; tests inject a manual or paused clock.
    clock: Arc<dyn MonotonicClock>,
    /// The instant the breaker was created: second 0 of the time-based window's buckets and the
    /// anchor for converting instants to wall-clock time.
    origin: Instant,
    /// The wall-clock time at `origin`; every unix-ms time is computed from it, so logic never reads
    /// the system clock.
    wall_origin: SystemTime,
    /// The state machine. A std mutex: every critical section is short and none spans an `.await`.
    machine: Mutex<Machine>,
    /// Live events for subscribers (the UI bridge). Sending never blocks; nobody listening is fine.
    events: broadcast::Sender<BreakerEvent>,
    /// The latest snapshot, replaced after every change, for the panel.
    snapshot: watch::Sender<BreakerSnapshot>,
}

struct Machine {
    state: StateData,
    /// The current state's metrics. Replaced on entering any state but OPEN, which keeps the
    /// metrics that opened it.
    metrics: Metrics,
    /// Incremented on every state entry (also re-entering the same state, and reset), so permits,
    /// timers and late results can tell whether the state they knew is still current.
    epoch: u64,
    /// When the current state was entered.
    entered_at: Instant,
    /// The pending OPEN → HALF_OPEN or HALF_OPEN → OPEN timer task, aborted when the state changes.
    timer: Option<AbortHandle>,
    /// The last [`RECENT_EVENTS`] events, oldest first.
    recent: VecDeque<BreakerEvent>,
    /// When the state the breaker is in was saved by the last run, if it was restored from it
    /// (until the state changes).
    restored_from_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
enum StateData {
    Closed,
    Open {
        opened_at: Instant,
        retry_at: Instant,
    },
    HalfOpen {
        available: u32,
    },
    Disabled,
    ForcedOpen,
    /// Threshold events are published once per METRICS_ONLY period, as in Resilience4j.
    MetricsOnly {
        failure_reported: bool,
        slow_reported: bool,
    },
}

impl StateData {
    fn kind(&self) -> BreakerState {
        match self {
            Self::Closed => BreakerState::Closed,
            Self::Open { .. } => BreakerState::Open,
            Self::HalfOpen { .. } => BreakerState::HalfOpen,
            Self::Disabled => BreakerState::Disabled,
            Self::ForcedOpen => BreakerState::ForcedOpen,
            Self::MetricsOnly { .. } => BreakerState::MetricsOnly,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum TimerKind {
    OpenToHalfOpen,
    HalfOpenToOpen,
}

impl CircuitBreaker {
    /// A breaker on tokio's clock, with the system clock for wall-clock times.
    pub fn new(name: impl Into<String>, config: CircuitBreakerConfig) -> Result<Self, InvalidSetting> {
        Self::with_clock(name, config, Arc::new(TokioClock), SystemTime::now())
    }

    /// A breaker on the given clock. `wall_now` is the wall-clock time corresponding to the
    /// clock's current instant; event times are derived from it.
    pub fn with_clock(
        name: impl Into<String>,
        config: CircuitBreakerConfig,
        clock: Arc<dyn MonotonicClock>,
        wall_now: SystemTime,
    ) -> Result<Self, InvalidSetting> {
        config.validate()?;
        let origin = clock.now();
        let metrics = Metrics::for_closed(&config, 0);
        let machine = Machine {
            state: StateData::Closed,
            metrics,
            epoch: 0,
            entered_at: origin,
            timer: None,
            recent: VecDeque::with_capacity(RECENT_EVENTS),
            restored_from_ms: None,
        };
        let (events, _) = broadcast::channel(EVENT_CHANNEL_CAPACITY);
        let placeholder = BreakerSnapshot {
            name: String::new(),
            state: BreakerState::Closed,
            state_since_ms: 0,
            failure_rate: -1.0,
            slow_call_rate: -1.0,
            buffered_calls: 0,
            failed_calls: 0,
            slow_calls: 0,
            slow_failed_calls: 0,
            successful_calls: 0,
            not_permitted_calls: 0,
            window_type: config.sliding_window_type,
            window_size: 0,
            minimum_number_of_calls: 0,
            configured_window_type: config.sliding_window_type,
            configured_window_size: config.sliding_window_size,
            configured_minimum_number_of_calls: config.effective_minimum(),
            restored_from_ms: None,
            calls: Vec::new(),
            buckets: Vec::new(),
            half_open: None,
            open: None,
            failure_rate_threshold: 0.0,
            slow_call_rate_threshold: 0.0,
            slow_call_duration_threshold_ms: 0,
        };
        let (snapshot, _) = watch::channel(placeholder);
        let shared = Arc::new(Shared {
            name: name.into(),
            config,
            clock,
            origin,
            wall_origin: wall_now,
            machine: Mutex::new(machine),
            events,
            snapshot,
        });
        {
            let mut m = shared.lock();
            shared.publish_snapshot(&mut m, origin);
        }
        Ok(Self { shared })
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    pub fn config(&self) -> &CircuitBreakerConfig {
        &self.shared.config
    }

    /// Asks to run one call. In OPEN, the first request strictly after the wait moves the breaker to
    /// HALF_OPEN and takes the first probe permit. Every rejection counts as not permitted.
    pub fn try_acquire(&self) -> Result<Permit, NotPermitted> {
        let s = &self.shared;
        let now = s.clock.now();
        let mut m = s.lock();
        s.expire_half_open(&mut m, now);
        let state = m.state;
        let admitted = match state {
            StateData::Closed | StateData::Disabled | StateData::MetricsOnly { .. } => true,
            StateData::Open { retry_at, .. } if now > retry_at => {
                s.transition(&mut m, BreakerState::HalfOpen, now);
                s.take_probe(&mut m, now)
            }
            StateData::Open { .. } | StateData::ForcedOpen => false,
            StateData::HalfOpen { .. } => s.take_probe(&mut m, now),
        };
        if admitted {
            return Ok(Permit { shared: Arc::clone(s), started: now, epoch: m.epoch, finished: false });
        }
        m.metrics.not_permitted += 1;
        s.publish(&mut m, now, BreakerEventKind::NotPermitted, None, None);
        s.publish_snapshot(&mut m, now);
        let retry_at = match m.state {
            StateData::Open { retry_at, .. } => Some(retry_at),
            _ => None,
        };
        Err(NotPermitted {
            breaker: s.name.clone(),
            state: m.state.kind(),
            retry_at,
            retry_at_wall: retry_at.map(|at| s.wall(at)),
            retry_in: retry_at.map(|at| at.saturating_duration_since(now)),
        })
    }

    /// Runs `fut` under the breaker: rejected at once when not permitted, otherwise timed from the
    /// permit and recorded as `classify` says. Dropping the returned future releases the permit.
    pub async fn call<T, E, F>(
        &self,
        classify: impl FnOnce(&Result<T, E>) -> Outcome,
        fut: F,
    ) -> Result<T, CallError<E>>
    where
        F: Future<Output = Result<T, E>>,
    {
        let permit = self.try_acquire().map_err(CallError::NotPermitted)?;
        let result = fut.await;
        permit.finish(classify(&result));
        result.map_err(CallError::Inner)
    }

    /// What to save for the next run to start from (see [`SavedBreaker`]).
    pub fn saved(&self) -> SavedBreaker {
        let s = &self.shared;
        let now = s.clock.now();
        let m = s.lock();
        let since = match m.state {
            StateData::Open { opened_at, .. } => opened_at,
            _ => m.entered_at,
        };
        let count_window = m.metrics.window_type() == SlidingWindowType::CountBased;
        SavedBreaker {
            state: m.state.kind(),
            since_ms: s.unix_ms(since),
            calls: if count_window { m.metrics.calls() } else { Vec::new() },
            not_permitted_calls: m.metrics.not_permitted,
            events: m.recent.iter().cloned().collect(),
            saved_at_ms: s.unix_ms(now),
        }
    }

    /// Starts from what the last run saved, as Resilience4j would have gone on had the process not
    /// stopped: an OPEN breaker stays OPEN until its wait, counted from when it opened, is over (a
    /// wait already over makes the next request a probe); CLOSED and METRICS_ONLY take their
    /// count window's outcomes back (a time window starts empty: its seconds were the last
    /// run's); HALF_OPEN starts its probes afresh (their calls ended with the process); DISABLED
    /// and FORCED_OPEN, set by hand, stay. The saved events come back for the timeline, then a
    /// `restored` event. Meant for a breaker that has not been used yet.
    pub fn restore(&self, saved: &SavedBreaker) {
        let s = &self.shared;
        let now = s.clock.now();
        let mut m = s.lock();
        let age = Duration::from_millis(s.unix_ms(now).saturating_sub(saved.since_ms));
        // An age beyond what the monotonic clock can go back to is long over any wait.
        let since = now.checked_sub(age).unwrap_or_else(|| now - s.config.wait_duration_in_open_state);
        let at = if saved.state == BreakerState::HalfOpen { now } else { since };
        s.enter(&mut m, saved.state, at);
        let replay = matches!(saved.state, BreakerState::Closed | BreakerState::MetricsOnly | BreakerState::Open)
            && s.config.sliding_window_type == SlidingWindowType::CountBased;
        if replay {
            let second = s.second(now);
            for call in &saved.calls {
                let _ = m.metrics.record(*call, second);
            }
        }
        m.metrics.not_permitted = saved.not_permitted_calls;
        m.recent = saved.events.iter().rev().take(RECENT_EVENTS - 1).rev().cloned().collect();
        s.publish(&mut m, now, BreakerEventKind::Restored { saved_at_ms: saved.saved_at_ms }, None, None);
        m.restored_from_ms = Some(saved.saved_at_ms);
        tracing::info!(breaker = %s.name, state = %saved.state, "circuit breaker restored from the last run");
        s.publish_snapshot(&mut m, now);
    }

    /// The current state. Reading never transitions: a lazy OPEN whose wait has passed still reads
    /// OPEN until the next request.
    pub fn state(&self) -> BreakerState {
        self.shared.lock().state.kind()
    }

    /// The metrics as of now (a time window drops the seconds that aged out).
    pub fn snapshot(&self) -> BreakerSnapshot {
        let s = &self.shared;
        let now = s.clock.now();
        let mut m = s.lock();
        s.build_snapshot(&mut m, now)
    }

    /// The snapshot published after every change.
    pub fn snapshot_watch(&self) -> watch::Receiver<BreakerSnapshot> {
        let s = &self.shared;
        let now = s.clock.now();
        // Snapshots are only built while someone watches (see `publish_snapshot`), so with nobody
        // watching the value may be stale: refresh it first. Both happen under the machine lock,
        // so no change can slip in between and every change after this one is published.
        let mut m = s.lock();
        if s.snapshot.receiver_count() == 0 {
            let snapshot = s.build_snapshot(&mut m, now);
            s.snapshot.send_replace(snapshot);
        }
        s.snapshot.subscribe()
    }

    /// Live events from now on.
    pub fn subscribe_events(&self) -> broadcast::Receiver<BreakerEvent> {
        self.shared.events.subscribe()
    }

    /// The last [`RECENT_EVENTS`] events, oldest first.
    pub fn recent_events(&self) -> Vec<BreakerEvent> {
        self.shared.lock().recent.iter().cloned().collect()
    }

    /// The metrics in the shape of Spring Boot's `/actuator/circuitbreakers` entry.
    pub fn actuator_json(&self) -> serde_json::Value {
        let snap = self.snapshot();
        serde_json::json!({
            "failureRate": java_percent(snap.failure_rate),
            "failureRateThreshold": java_percent(snap.failure_rate_threshold),
            "slowCallRate": java_percent(snap.slow_call_rate),
            "slowCallRateThreshold": java_percent(snap.slow_call_rate_threshold),
            "bufferedCalls": snap.buffered_calls,
            "failedCalls": snap.failed_calls,
            "slowCalls": snap.slow_calls,
            "slowFailedCalls": snap.slow_failed_calls,
            "notPermittedCalls": snap.not_permitted_calls,
            "state": snap.state.as_actuator(),
        })
    }

    /// The recent events in the shape of Spring Boot's `/actuator/circuitbreakerevents`
    /// (Resilience4j's `CircuitBreakerEventDTO`: name, type, creation time, and the message,
    /// duration or transition the type carries), oldest first.
    pub fn actuator_events_json(&self) -> serde_json::Value {
        let events: Vec<serde_json::Value> = self
            .recent_events()
            .into_iter()
            .map(|event| {
                let created = chrono::DateTime::from_timestamp_millis(i64::try_from(event.time_ms).unwrap_or(0))
                    .unwrap_or_default()
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                let kind = match &event.kind {
                    BreakerEventKind::Success { .. } => "SUCCESS",
                    BreakerEventKind::Error { .. } => "ERROR",
                    BreakerEventKind::IgnoredError => "IGNORED_ERROR",
                    BreakerEventKind::NotPermitted => "NOT_PERMITTED",
                    BreakerEventKind::StateTransition { .. } => "STATE_TRANSITION",
                    BreakerEventKind::Reset => "RESET",
                    BreakerEventKind::FailureRateExceeded { .. } => "FAILURE_RATE_EXCEEDED",
                    BreakerEventKind::SlowCallRateExceeded { .. } => "SLOW_CALL_RATE_EXCEEDED",
                    BreakerEventKind::ForcedOpen => "FORCED_OPEN",
                    BreakerEventKind::Disabled => "DISABLED",
                    BreakerEventKind::Restored { .. } => "RESTORED",
                };
                let mut dto = serde_json::json!({
                    "circuitBreakerName": event.breaker,
                    "type": kind,
                    "creationTime": created,
                });
                if let Some(ms) = event.duration_ms {
                    dto["durationInMs"] = ms.into();
                }
                if let Some(message) = &event.message {
                    dto["errorMessage"] = message.clone().into();
                }
                if let BreakerEventKind::StateTransition { from, to } = &event.kind {
                    dto["stateTransition"] = format!("{}_TO_{}", from.as_actuator(), to.as_actuator()).into();
                }
                dto
            })
            .collect();
        serde_json::json!({ "circuitBreakerEvents": events })
    }

    /// CLOSED with fresh metrics. Always allowed.
    pub fn transition_to_closed(&self) {
        self.manual(BreakerState::Closed).expect("every state may go to CLOSED");
    }

    /// OPEN, keeping the current metrics and starting the wait. Not allowed from METRICS_ONLY.
    pub fn transition_to_open(&self) -> Result<(), IllegalTransition> {
        self.manual(BreakerState::Open)
    }

    /// HALF_OPEN with fresh probe permits. Not allowed from CLOSED or METRICS_ONLY.
    pub fn transition_to_half_open(&self) -> Result<(), IllegalTransition> {
        self.manual(BreakerState::HalfOpen)
    }

    /// DISABLED: everything passes, nothing is recorded. Always allowed.
    pub fn transition_to_disabled(&self) {
        self.manual(BreakerState::Disabled).expect("every state may go to DISABLED");
    }

    /// FORCED_OPEN: everything is rejected. Always allowed.
    pub fn transition_to_forced_open(&self) {
        self.manual(BreakerState::ForcedOpen).expect("every state may go to FORCED_OPEN");
    }

    /// METRICS_ONLY: records and reports, never transitions by itself. Always allowed.
    pub fn transition_to_metrics_only(&self) {
        self.manual(BreakerState::MetricsOnly).expect("every state may go to METRICS_ONLY");
    }

    /// Back to CLOSED with fresh metrics: a state_transition event (unless already CLOSED), then reset.
    pub fn reset(&self) {
        let s = &self.shared;
        let now = s.clock.now();
        let mut m = s.lock();
        let from = m.state.kind();
        s.enter(&mut m, BreakerState::Closed, now);
        if from != BreakerState::Closed {
            s.publish(&mut m, now, BreakerEventKind::StateTransition { from, to: BreakerState::Closed }, None, None);
        }
        s.publish(&mut m, now, BreakerEventKind::Reset, None, None);
        tracing::info!(breaker = %s.name, %from, "circuit breaker reset");
        s.publish_snapshot(&mut m, now);
    }

    fn manual(&self, to: BreakerState) -> Result<(), IllegalTransition> {
        let s = &self.shared;
        let now = s.clock.now();
        let mut m = s.lock();
        let from = m.state.kind();
        let illegal = matches!(
            (from, to),
            (BreakerState::Closed, BreakerState::HalfOpen)
                | (BreakerState::MetricsOnly, BreakerState::Open)
                | (BreakerState::MetricsOnly, BreakerState::HalfOpen)
        );
        if illegal {
            return Err(IllegalTransition { from, to });
        }
        s.transition(&mut m, to, now);
        Ok(())
    }
}

impl std::fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitBreaker").field("name", &self.shared.name).field("state", &self.state()).finish()
    }
}

impl Permit {
    /// When the call started; its duration (for "slow") runs from here to the finish.
    pub fn started_at(&self) -> Instant {
        self.started
    }

    pub fn on_success(self) {
        self.finish(Outcome::Success);
    }

    /// Records a failure.
    pub fn on_error(self) {
        self.finish(Outcome::Failure(None));
    }

    /// Records nothing and gives a half-open permit back.
    pub fn on_ignored(self) {
        self.finish(Outcome::Ignored(None));
    }

    pub fn finish(mut self, outcome: Outcome) {
        self.finished = true;
        self.shared.complete(self.epoch, self.started, outcome);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.complete(self.epoch, self.started, Outcome::Ignored(Some("cancelled".into())));
        }
    }
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit").field("breaker", &self.shared.name).field("epoch", &self.epoch).finish()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Machine> {
        self.machine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whole seconds since the breaker's creation: the time window's bucket numbers.
    fn second(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_secs()
    }

    fn wall(&self, at: Instant) -> SystemTime {
        if at >= self.origin {
            self.wall_origin + (at - self.origin)
        } else {
            self.wall_origin - (self.origin - at)
        }
    }

    fn unix_ms(&self, at: Instant) -> u64 {
        unix_ms(self.wall(at))
    }

    /// Takes one half-open permit if any is left.
    fn take_probe(&self, m: &mut Machine, now: Instant) -> bool {
        let StateData::HalfOpen { available } = &mut m.state else { return false };
        if *available == 0 {
            return false;
        }
        *available -= 1;
        self.publish_snapshot(m, now);
        true
    }

    /// A finished call: record it (or give its permit back) and evaluate.
    fn complete(self: &Arc<Self>, epoch: u64, started: Instant, outcome: Outcome) {
        let now = self.clock.now();
        let duration = now.saturating_duration_since(started);
        let duration_ms = Some(duration.as_millis() as u64);
        let mut m = self.lock();
        self.expire_half_open(&mut m, now);
        let (failed, message) = match outcome {
            Outcome::Ignored(message) => {
                let current_epoch = m.epoch;
                if let StateData::HalfOpen { available } = &mut m.state {
                    if current_epoch == epoch {
                        *available += 1;
                    }
                }
                self.publish(&mut m, now, BreakerEventKind::IgnoredError, duration_ms, message);
                self.publish_snapshot(&mut m, now);
                return;
            }
            Outcome::Success => (false, None),
            Outcome::Failure(message) => (true, message),
        };
        let slow = duration > self.config.slow_call_duration_threshold;
        let kind = if failed { BreakerEventKind::Error { slow } } else { BreakerEventKind::Success { slow } };
        self.publish(&mut m, now, kind, duration_ms, message);
        self.record(&mut m, RecordedCall::new(failed, slow), now);
        self.publish_snapshot(&mut m, now);
    }

    /// Records an outcome into the current state's metrics, whatever state admitted the call (as
    /// Resilience4j does: a call admitted while CLOSED that ends after the breaker opened still
    /// counts, in the OPEN state's metrics).
    fn record(self: &Arc<Self>, m: &mut Machine, outcome: RecordedCall, now: Instant) {
        let second = self.second(now);
        match m.state {
            StateData::Disabled | StateData::ForcedOpen => {}
            StateData::Open { .. } => {
                m.metrics.record(outcome, second);
            }
            StateData::Closed => {
                if let Evaluation::Exceeded { failure_rate, slow_call_rate } = m.metrics.record(outcome, second) {
                    self.publish_exceeded(m, now, failure_rate, slow_call_rate);
                    self.transition(m, BreakerState::Open, now);
                }
            }
            StateData::HalfOpen { .. } => match m.metrics.record(outcome, second) {
                Evaluation::BelowMinimum => {}
                Evaluation::Exceeded { .. } => self.transition(m, BreakerState::Open, now),
                Evaluation::BelowThresholds => self.transition(m, BreakerState::Closed, now),
            },
            StateData::MetricsOnly { failure_reported, slow_reported } => {
                if let Evaluation::Exceeded { failure_rate, slow_call_rate } = m.metrics.record(outcome, second) {
                    let failure = failure_rate && !failure_reported;
                    let slow = slow_call_rate && !slow_reported;
                    m.state = StateData::MetricsOnly {
                        failure_reported: failure_reported || failure,
                        slow_reported: slow_reported || slow,
                    };
                    self.publish_exceeded(m, now, failure, slow);
                }
            }
        }
    }

    fn publish_exceeded(&self, m: &mut Machine, now: Instant, failure: bool, slow: bool) {
        let second = self.second(now);
        if failure {
            let rate = m.metrics.failure_rate(second);
            self.publish(m, now, BreakerEventKind::FailureRateExceeded { rate }, None, None);
        }
        if slow {
            let rate = m.metrics.slow_call_rate(second);
            self.publish(m, now, BreakerEventKind::SlowCallRateExceeded { rate }, None, None);
        }
    }

    /// HALF_OPEN past max_wait_duration_in_half_open_state goes back to OPEN, as of the moment it
    /// expired (what the timer would have done). Checked lazily on every request and result.
    fn expire_half_open(self: &Arc<Self>, m: &mut Machine, now: Instant) {
        let max_wait = self.config.max_wait_duration_in_half_open_state;
        if max_wait.is_zero() || !matches!(m.state, StateData::HalfOpen { .. }) {
            return;
        }
        let expired_at = m.entered_at + max_wait;
        if now >= expired_at {
            self.transition(m, BreakerState::Open, expired_at);
        }
    }

    /// Enters `to` at `at` and publishes the transition (nothing when `to` is the current state,
    /// which is re-entered silently, as in Resilience4j).
    fn transition(self: &Arc<Self>, m: &mut Machine, to: BreakerState, at: Instant) {
        let from = m.state.kind();
        self.enter(m, to, at);
        if from != to {
            tracing::info!(breaker = %self.name, %from, %to, "circuit breaker state transition");
            self.publish(m, at, BreakerEventKind::StateTransition { from, to }, None, None);
            match to {
                BreakerState::ForcedOpen => self.publish(m, at, BreakerEventKind::ForcedOpen, None, None),
                BreakerState::Disabled => self.publish(m, at, BreakerEventKind::Disabled, None, None),
                _ => {}
            }
        }
        self.publish_snapshot(m, at);
    }

    /// Replaces the state (and, except for OPEN, the metrics) and arms the state's timer.
    fn enter(self: &Arc<Self>, m: &mut Machine, to: BreakerState, at: Instant) {
        if let Some(timer) = m.timer.take() {
            timer.abort();
        }
        m.epoch += 1;
        m.entered_at = at;
        m.restored_from_ms = None;
        let config = &self.config;
        let second = self.second(at);
        let (state, metrics) = match to {
            BreakerState::Closed => (StateData::Closed, Some(Metrics::for_closed(config, second))),
            BreakerState::Open => {
                let retry_at = at + config.wait_duration_in_open_state;
                (StateData::Open { opened_at: at, retry_at }, None)
            }
            BreakerState::HalfOpen => (
                StateData::HalfOpen { available: config.permitted_number_of_calls_in_half_open_state },
                Some(Metrics::for_half_open(config)),
            ),
            BreakerState::Disabled => (StateData::Disabled, Some(Metrics::empty(config))),
            BreakerState::ForcedOpen => (StateData::ForcedOpen, Some(Metrics::empty(config))),
            BreakerState::MetricsOnly => (
                StateData::MetricsOnly { failure_reported: false, slow_reported: false },
                Some(Metrics::for_closed(config, second)),
            ),
        };
        m.state = state;
        if let Some(metrics) = metrics {
            m.metrics = metrics;
        }
        match state {
            StateData::Open { retry_at, .. } if config.automatic_transition_from_open_to_half_open_enabled => {
                self.arm_timer(m, retry_at, TimerKind::OpenToHalfOpen);
            }
            StateData::HalfOpen { .. } if !config.max_wait_duration_in_half_open_state.is_zero() => {
                self.arm_timer(m, at + config.max_wait_duration_in_half_open_state, TimerKind::HalfOpenToOpen);
            }
            _ => {}
        }
    }

    /// Spawns a timer task on the current tokio runtime, if there is one. The task holds only a weak
    /// reference and is aborted when the state changes or the breaker is dropped, so it never keeps
    /// a breaker alive or acts on a state that is gone.
    fn arm_timer(self: &Arc<Self>, m: &mut Machine, deadline: Instant, kind: TimerKind) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let weak: Weak<Shared> = Arc::downgrade(self);
        let epoch = m.epoch;
        let task = runtime.spawn(async move {
            tokio::time::sleep_until(deadline).await;
            if let Some(shared) = weak.upgrade() {
                shared.on_timer(epoch, kind);
            }
        });
        m.timer = Some(task.abort_handle());
    }

    fn on_timer(self: &Arc<Self>, epoch: u64, kind: TimerKind) {
        let now = self.clock.now();
        let mut m = self.lock();
        if m.epoch != epoch {
            return;
        }
        // This task is finishing; do not let the transition abort it.
        m.timer = None;
        let state = m.state;
        match (kind, state) {
            (TimerKind::OpenToHalfOpen, StateData::Open { .. }) => self.transition(&mut m, BreakerState::HalfOpen, now),
            (TimerKind::HalfOpenToOpen, StateData::HalfOpen { .. }) => self.transition(&mut m, BreakerState::Open, now),
            _ => {}
        }
    }

    /// Adds an event to the log and the live channel, unless Resilience4j would suppress it: while
    /// DISABLED or FORCED_OPEN only transitions, resets and the state's own event are published.
    fn publish(
        &self,
        m: &mut Machine,
        at: Instant,
        kind: BreakerEventKind,
        duration_ms: Option<u64>,
        message: Option<String>,
    ) {
        let quiet = matches!(m.state, StateData::Disabled | StateData::ForcedOpen);
        if quiet && !kind.force_publish() {
            return;
        }
        let event = BreakerEvent { breaker: self.name.clone(), time_ms: self.unix_ms(at), kind, duration_ms, message };
        tracing::debug!(breaker = %self.name, event = ?event.kind, "circuit breaker event");
        if m.recent.len() == RECENT_EVENTS {
            m.recent.pop_front();
        }
        // Cloned only for live subscribers; an error only means the last one just left.
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(event.clone());
        }
        m.recent.push_back(event);
    }

    /// Publishes the snapshot to the watchers. With none, building it (and waking nobody) is skipped
    /// on this hot path; [`CircuitBreaker::snapshot_watch`] refreshes the value before a new watcher
    /// subscribes. Called with the machine locked, as `snapshot_watch` subscribes, so a new watcher
    /// never misses a change.
    fn publish_snapshot(&self, m: &mut Machine, now: Instant) {
        if self.snapshot.receiver_count() == 0 {
            return;
        }
        let snapshot = self.build_snapshot(m, now);
        self.snapshot.send_replace(snapshot);
    }

    fn build_snapshot(&self, m: &mut Machine, now: Instant) -> BreakerSnapshot {
        let second = self.second(now);
        let totals = m.metrics.totals(second);
        let config = &self.config;
        BreakerSnapshot {
            name: self.name.clone(),
            state: m.state.kind(),
            state_since_ms: self.unix_ms(m.entered_at),
            failure_rate: m.metrics.failure_rate(second),
            slow_call_rate: m.metrics.slow_call_rate(second),
            buffered_calls: totals.calls,
            failed_calls: totals.failed,
            slow_calls: totals.slow,
            slow_failed_calls: totals.slow_failed,
            successful_calls: totals.calls - totals.failed,
            not_permitted_calls: m.metrics.not_permitted,
            window_type: m.metrics.window_type(),
            window_size: m.metrics.size(),
            minimum_number_of_calls: m.metrics.minimum(),
            configured_window_type: config.sliding_window_type,
            configured_window_size: config.sliding_window_size,
            configured_minimum_number_of_calls: config.effective_minimum(),
            restored_from_ms: m.restored_from_ms,
            calls: m.metrics.calls(),
            buckets: m.metrics.buckets(second),
            half_open: match m.state {
                StateData::HalfOpen { available } => {
                    let permitted = config.permitted_number_of_calls_in_half_open_state;
                    Some(HalfOpenProgress {
                        permits_used: permitted.saturating_sub(available),
                        permits_permitted: permitted,
                    })
                }
                _ => None,
            },
            open: match m.state {
                StateData::Open { opened_at, retry_at } => Some(OpenTiming {
                    opened_at_ms: self.unix_ms(opened_at),
                    probe_allowed_at_ms: self.unix_ms(retry_at),
                }),
                _ => None,
            },
            failure_rate_threshold: config.failure_rate_threshold,
            slow_call_rate_threshold: config.slow_call_rate_threshold,
            slow_call_duration_threshold_ms: config.slow_call_duration_threshold.as_millis() as u64,
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let machine = self.machine.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(timer) = machine.timer.take() {
            timer.abort();
        }
    }
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// A percentage as Spring's actuator prints a Java float: `-1.0%`, `50.0%`, `45.454544%`.
fn java_percent(value: f32) -> String {
    if value.fract() == 0.0 {
        format!("{value:.1}%")
    } else {
        format!("{value}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_java_percent_matches_actuator() {
        assert_eq!(java_percent(-1.0), "-1.0%");
        assert_eq!(java_percent(50.0), "50.0%");
        assert_eq!(java_percent(100.0), "100.0%");
        assert_eq!(java_percent(5.0 * 100.0 / 11.0), "45.454544%");
    }
}
