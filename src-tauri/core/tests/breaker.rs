//! The circuit breaker against a table of Resilience4j's behaviour (rows 1–15, one test each), the
//! further behaviours the `resilience` module docs describe, and a property test that drives the
//! breaker and a deliberately naive reference model with random operations and compares state and
//! metrics after every step.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use pe_core::resilience::{
    BreakerEventKind, BreakerSnapshot, BreakerState, CallError, CircuitBreaker, CircuitBreakerConfig, ManualClock,
    NotPermitted, Outcome, Permit, RecordedCall, SlidingWindowType,
};
use proptest::prelude::*;

const MS: Duration = Duration::from_millis(1);

/// 2023-11-14T22:13:20Z, so event times are deterministic.
fn wall_start() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// Config A of the scenario table.
fn config_a() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        sliding_window_type: SlidingWindowType::CountBased,
        sliding_window_size: 20,
        minimum_number_of_calls: 10,
        failure_rate_threshold: 50.0,
        wait_duration_in_open_state: Duration::from_secs(5),
        permitted_number_of_calls_in_half_open_state: 5,
        ..CircuitBreakerConfig::default()
    }
}

struct Harness {
    cb: CircuitBreaker,
    clock: ManualClock,
}

impl Harness {
    fn new(config: CircuitBreakerConfig) -> Self {
        let clock = ManualClock::new();
        let cb = CircuitBreaker::with_clock("gemini", config, Arc::new(clock.clone()), wall_start()).unwrap();
        Self { cb, clock }
    }

    fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// One call taking `took`, recorded as a failure (`F`) or success (`S`).
    fn call(&self, kind: char, took: Duration) -> Result<(), NotPermitted> {
        let permit = self.cb.try_acquire()?;
        self.advance(took);
        match kind {
            'F' => permit.on_error(),
            'S' => permit.on_success(),
            other => panic!("unknown outcome {other}"),
        }
        Ok(())
    }

    fn run(&self, sequence: &str) {
        for kind in sequence.chars().filter(|c| !c.is_whitespace()) {
            self.call(kind, Duration::ZERO).expect("call permitted");
        }
    }

    fn snap(&self) -> BreakerSnapshot {
        self.cb.snapshot()
    }

    fn kinds(&self) -> Vec<BreakerEventKind> {
        self.cb.recent_events().into_iter().map(|e| e.kind).collect()
    }

    /// Tripped by failures at t = 0 (10 for config A, row 2).
    fn tripped(config: CircuitBreakerConfig) -> Self {
        let h = Self::new(config);
        while h.cb.state() == BreakerState::Closed {
            h.run("F");
        }
        assert_eq!(h.cb.state(), BreakerState::Open);
        h
    }

    /// Tripped, then the wait passed and the first request took the first probe permit.
    fn half_open(config: CircuitBreakerConfig) -> (Self, Permit) {
        let h = Self::tripped(config);
        h.advance(Duration::from_millis(5001));
        let probe = h.cb.try_acquire().expect("first probe admitted");
        assert_eq!(h.cb.state(), BreakerState::HalfOpen);
        (h, probe)
    }
}

fn round2(rate: f32) -> String {
    format!("{rate:.2}")
}

fn transition(from: BreakerState, to: BreakerState) -> BreakerEventKind {
    BreakerEventKind::StateTransition { from, to }
}

// ---------------------------------------------------------------------------------------------
// The scenario table, one test per row.

#[test]
fn breaker_row_01_nine_failures_stay_closed_below_minimum() {
    let h = Harness::new(config_a());
    h.run("FFFFFFFFF");
    let s = h.snap();
    assert_eq!(s.state, BreakerState::Closed);
    assert_eq!((s.buffered_calls, s.failed_calls), (9, 9));
    assert_eq!(s.failure_rate, -1.0);
}

#[test]
fn breaker_row_02_ten_failures_open_at_the_tenth() {
    let h = Harness::new(config_a());
    h.run("FFFFFFFFF");
    assert_eq!(h.cb.state(), BreakerState::Closed);
    h.run("F");
    let s = h.snap();
    assert_eq!(s.state, BreakerState::Open);
    assert_eq!(s.failure_rate, 100.0);
    let kinds = h.kinds();
    assert_eq!(
        kinds[kinds.len() - 3..],
        [
            BreakerEventKind::Error { slow: false },
            BreakerEventKind::FailureRateExceeded { rate: 100.0 },
            transition(BreakerState::Closed, BreakerState::Open),
        ]
    );
}

#[test]
fn breaker_row_03_rate_is_computed_over_the_window_with_ge() {
    let h = Harness::new(config_a());
    h.run("SSSSSS FFFF");
    assert_eq!((h.cb.state(), round2(h.snap().failure_rate)), (BreakerState::Closed, "40.00".into()));
    h.run("F");
    assert_eq!((h.cb.state(), round2(h.snap().failure_rate)), (BreakerState::Closed, "45.45".into()));
    h.run("F");
    assert_eq!((h.cb.state(), round2(h.snap().failure_rate)), (BreakerState::Open, "50.00".into()));
}

#[test]
fn breaker_row_04_open_rejects_and_counts_but_keeps_metrics() {
    let h = Harness::tripped(config_a());
    let err = h.cb.try_acquire().unwrap_err();
    assert_eq!(err.state, BreakerState::Open);
    let s = h.snap();
    assert_eq!(s.not_permitted_calls, 1);
    assert_eq!((s.buffered_calls, s.failed_calls), (10, 10));
    assert_eq!(h.kinds().last(), Some(&BreakerEventKind::NotPermitted));
}

#[test]
fn breaker_row_05_open_to_half_open_is_lazy_and_strictly_after_the_wait() {
    let h = Harness::tripped(config_a());
    let opened = h.snap().open.unwrap();
    assert_eq!(opened.probe_allowed_at_ms - opened.opened_at_ms, 5000);
    h.advance(Duration::from_millis(5000));
    let err = h.cb.try_acquire().expect_err("exactly +5.000 s is not after the wait");
    assert_eq!(err.state, BreakerState::Open);
    assert_eq!(err.retry_in, Some(Duration::ZERO));
    assert_eq!(err.retry_at_unix_ms(), Some(opened.probe_allowed_at_ms));
    h.advance(Duration::from_secs(1));
    assert_eq!(h.cb.state(), BreakerState::Open, "reading does not transition");
    let _probe = h.cb.try_acquire().expect("the call at +6 s is admitted");
    let s = h.snap();
    assert_eq!(s.state, BreakerState::HalfOpen);
    assert_eq!((s.buffered_calls, s.not_permitted_calls, s.failure_rate), (0, 0, -1.0));
    assert_eq!(h.kinds().last(), Some(&transition(BreakerState::Open, BreakerState::HalfOpen)));
}

#[test]
fn breaker_row_06_half_open_grants_exactly_n_permits() {
    let (h, probe) = Harness::half_open(config_a());
    probe.on_success();
    let s = h.snap();
    assert_eq!((s.state, s.buffered_calls, s.failure_rate), (BreakerState::HalfOpen, 1, -1.0));
    let _running: Vec<Permit> = (0..4).map(|_| h.cb.try_acquire().expect("permits 2..5")).collect();
    assert_eq!(h.snap().half_open.unwrap().permits_used, 5);
    let err = h.cb.try_acquire().expect_err("the 6th is rejected");
    assert_eq!(err.state, BreakerState::HalfOpen);
    let s = h.snap();
    assert_eq!((s.state, s.not_permitted_calls, s.buffered_calls), (BreakerState::HalfOpen, 1, 1));
}

#[test]
fn breaker_row_07_half_open_failures_reopen_after_n() {
    let (h, probe) = Harness::half_open(config_a());
    probe.on_error();
    for _ in 0..3 {
        h.call('F', Duration::ZERO).unwrap();
    }
    let s = h.snap();
    assert_eq!((s.state, s.buffered_calls, s.failure_rate), (BreakerState::HalfOpen, 4, -1.0));
    h.call('F', Duration::ZERO).unwrap();
    let s = h.snap();
    assert_eq!((s.state, s.buffered_calls, s.failed_calls), (BreakerState::Open, 5, 5));
    assert_eq!(s.failure_rate, 100.0);
    let kinds = h.kinds();
    assert_eq!(
        kinds[kinds.len() - 2..],
        [BreakerEventKind::Error { slow: false }, transition(BreakerState::HalfOpen, BreakerState::Open)],
        "HALF_OPEN → OPEN publishes no threshold event (as in Resilience4j)"
    );
}

#[test]
fn breaker_row_08_half_open_below_threshold_closes_with_fresh_metrics() {
    let (h, probe) = Harness::half_open(config_a());
    probe.on_error();
    h.call('F', Duration::ZERO).unwrap();
    h.call('S', Duration::ZERO).unwrap();
    h.call('S', Duration::ZERO).unwrap();
    assert_eq!(h.cb.state(), BreakerState::HalfOpen);
    h.call('S', Duration::ZERO).unwrap();
    let s = h.snap();
    assert_eq!(s.state, BreakerState::Closed, "40 % < 50 %");
    assert_eq!((s.buffered_calls, s.failed_calls, s.not_permitted_calls, s.failure_rate), (0, 0, 0, -1.0));
    assert_eq!(h.kinds().last(), Some(&transition(BreakerState::HalfOpen, BreakerState::Closed)));
}

#[test]
fn breaker_row_09_half_open_minimum_is_min_of_minimum_and_n() {
    let (h, probe) = Harness::half_open(CircuitBreakerConfig { minimum_number_of_calls: 2, ..config_a() });
    probe.on_success();
    assert_eq!(h.cb.state(), BreakerState::HalfOpen);
    h.call('S', Duration::ZERO).unwrap();
    assert_eq!(h.cb.state(), BreakerState::Closed);
}

#[test]
fn breaker_row_10_count_window_is_a_ring_not_a_running_total() {
    let h = Harness::new(CircuitBreakerConfig { sliding_window_size: 5, minimum_number_of_calls: 5, ..config_a() });
    let mut rates = Vec::new();
    for kind in "FFSSSSSSSSFFF".chars() {
        h.call(kind, Duration::ZERO).unwrap();
        rates.push((round2(h.snap().failure_rate), h.cb.state()));
    }
    let expect = |rate: &str, state| (rate.to_string(), state);
    let closed = BreakerState::Closed;
    assert_eq!(
        rates,
        vec![
            expect("-1.00", closed),
            expect("-1.00", closed),
            expect("-1.00", closed),
            expect("-1.00", closed),
            expect("40.00", closed),
            expect("20.00", closed),
            expect("0.00", closed),
            expect("0.00", closed),
            expect("0.00", closed),
            expect("0.00", closed),
            expect("20.00", closed),
            expect("40.00", closed),
            expect("60.00", BreakerState::Open),
        ]
    );
    use RecordedCall::{Failure as F, Success as S};
    assert_eq!(h.snap().calls, vec![S, S, F, F, F]);
}

#[test]
fn breaker_row_11_count_minimum_is_clamped_to_the_window() {
    let h = Harness::new(CircuitBreakerConfig { sliding_window_size: 5, minimum_number_of_calls: 10, ..config_a() });
    h.run("FFFF");
    assert_eq!((h.cb.state(), h.snap().failure_rate), (BreakerState::Closed, -1.0));
    h.run("F");
    assert_eq!(h.cb.state(), BreakerState::Open);
    assert_eq!(h.snap().minimum_number_of_calls, 5);
}

#[test]
fn breaker_row_12_time_window_drops_calls_older_than_n_seconds() {
    let h = Harness::new(CircuitBreakerConfig {
        sliding_window_type: SlidingWindowType::TimeBased,
        sliding_window_size: 5,
        ..config_a()
    });
    h.call('F', Duration::ZERO).unwrap();
    h.advance(Duration::from_millis(100));
    h.call('S', Duration::ZERO).unwrap();
    h.advance(Duration::from_millis(700));
    h.call('F', Duration::ZERO).unwrap();
    h.advance(Duration::from_millis(4000));
    let s = h.snap();
    assert_eq!((s.buffered_calls, s.failed_calls), (3, 2), "read at 4.8 s");
    assert_eq!(s.buckets.len(), 5);
    assert_eq!(s.buckets[0].calls, 3, "the oldest bucket holds second 0");
    assert!(s.calls.is_empty());
    h.advance(Duration::from_millis(1000));
    let s = h.snap();
    assert_eq!((s.buffered_calls, s.failed_calls), (0, 0), "read at 5.8 s");
    assert!(s.buckets.iter().all(|b| b.calls == 0));
}

#[test]
fn breaker_row_13_slow_calls_trip_on_the_slow_rate() {
    let config = CircuitBreakerConfig {
        slow_call_duration_threshold: Duration::from_secs(4),
        slow_call_rate_threshold: 50.0,
        minimum_number_of_calls: 5,
        ..config_a()
    };
    let h = Harness::new(config.clone());
    let long = Duration::from_secs(5);
    let short = Duration::from_millis(100);
    for (kind, took) in [('F', long), ('S', long), ('F', short), ('S', short)] {
        h.call(kind, took).unwrap();
    }
    assert_eq!(h.cb.state(), BreakerState::Closed);
    h.call('S', long).unwrap();
    let s = h.snap();
    assert_eq!(s.state, BreakerState::Open);
    assert_eq!((round2(s.slow_call_rate), round2(s.failure_rate)), ("60.00".into(), "40.00".into()));
    assert_eq!((s.slow_calls, s.slow_failed_calls, s.failed_calls, s.successful_calls), (3, 1, 2, 3));
    let kinds = h.kinds();
    assert_eq!(
        kinds[kinds.len() - 3..],
        [
            BreakerEventKind::Success { slow: true },
            BreakerEventKind::SlowCallRateExceeded { rate: 60.0 },
            transition(BreakerState::Closed, BreakerState::Open),
        ]
    );

    // Exactly the threshold is not slow; one millisecond more is.
    let h = Harness::new(config);
    h.call('S', Duration::from_millis(4000)).unwrap();
    assert_eq!(h.snap().slow_calls, 0);
    h.call('S', Duration::from_millis(4001)).unwrap();
    assert_eq!(h.snap().slow_calls, 1);
    assert_eq!(h.snap().calls, vec![RecordedCall::Success, RecordedCall::SlowSuccess]);
}

#[test]
fn breaker_row_14_forced_open_rejects_everything_and_stays() {
    let h = Harness::new(config_a());
    h.cb.transition_to_forced_open();
    assert_eq!(h.cb.try_acquire().unwrap_err().state, BreakerState::ForcedOpen);
    h.advance(Duration::from_secs(6));
    assert!(h.cb.try_acquire().is_err());
    let s = h.snap();
    assert_eq!((s.state, s.not_permitted_calls), (BreakerState::ForcedOpen, 2));
    // FORCED_OPEN's own window holds nothing (as Resilience4j's), but what the panel calls the
    // configuration stays the configuration: a window of 20 calls, a minimum of 10.
    assert_eq!((s.window_size, s.minimum_number_of_calls), (0, 0));
    assert_eq!(
        (s.configured_window_type, s.configured_window_size, s.configured_minimum_number_of_calls),
        (SlidingWindowType::CountBased, 20, 10)
    );
    assert_eq!(
        h.kinds(),
        vec![transition(BreakerState::Closed, BreakerState::ForcedOpen), BreakerEventKind::ForcedOpen],
        "per-call events are not published while FORCED_OPEN (Resilience4j)"
    );
}

/// A restart `after` the save: a breaker on a new clock whose wall time is that much later,
/// restored from what the old one saved (through its JSON, as the catalog keeps it).
fn restarted(saved: &pe_core::resilience::SavedBreaker, config: CircuitBreakerConfig, after: Duration) -> Harness {
    let json = serde_json::to_string(saved).unwrap();
    let saved: pe_core::resilience::SavedBreaker = serde_json::from_str(&json).unwrap();
    let clock = ManualClock::new();
    let wall = SystemTime::UNIX_EPOCH + Duration::from_millis(saved.saved_at_ms) + after;
    let cb = CircuitBreaker::with_clock("gemini", config, Arc::new(clock.clone()), wall).unwrap();
    cb.restore(&saved);
    Harness { cb, clock }
}

#[test]
fn an_open_breaker_stays_open_across_a_restart_until_its_wait_is_over() {
    let h = Harness::tripped(config_a());
    h.advance(Duration::from_secs(2));
    let saved = h.cb.saved();
    assert_eq!(saved.state, BreakerState::Open);
    // Restarted 1 s later: 3 s after it opened, 2 s of the 5 s wait are left.
    let r = restarted(&saved, config_a(), Duration::from_secs(1));
    assert_eq!(r.cb.state(), BreakerState::Open);
    let refused = r.cb.try_acquire().unwrap_err();
    assert_eq!(refused.retry_in, Some(Duration::from_secs(2)), "the wait counts from when it opened");
    let s = r.snap();
    assert_eq!(s.restored_from_ms, Some(saved.saved_at_ms));
    assert_eq!((s.buffered_calls, s.failed_calls), (10, 10), "the window that opened it comes back");
    // The timeline: the transitions from before the restart, then the restore.
    let kinds = r.kinds();
    assert!(kinds.contains(&transition(BreakerState::Closed, BreakerState::Open)), "{kinds:?}");
    assert!(matches!(kinds.last(), Some(BreakerEventKind::NotPermitted)), "{kinds:?}");
    assert!(kinds.iter().any(|k| matches!(k, BreakerEventKind::Restored { .. })), "{kinds:?}");
    // After the wait, the next request is a probe, as without the restart.
    r.advance(Duration::from_secs(2) + MS);
    let probe = r.cb.try_acquire().expect("a probe after the wait");
    assert_eq!(r.cb.state(), BreakerState::HalfOpen);
    assert_eq!(r.snap().restored_from_ms, None, "a new state is this run's own");
    probe.on_success();
}

#[test]
fn an_open_breaker_restarted_after_its_wait_lets_the_next_call_probe() {
    let h = Harness::tripped(config_a());
    let saved = h.cb.saved();
    let r = restarted(&saved, config_a(), Duration::from_secs(60));
    assert_eq!(r.cb.state(), BreakerState::Open, "reading never transitions");
    r.advance(MS);
    let probe = r.cb.try_acquire().expect("the wait is long over: a probe");
    assert_eq!(r.cb.state(), BreakerState::HalfOpen);
    probe.on_success();
}

#[test]
fn a_closed_breaker_keeps_its_window_across_a_restart() {
    let h = Harness::new(config_a());
    h.run("SSSSFFFF F");
    let saved = h.cb.saved();
    assert_eq!((saved.state, saved.calls.len()), (BreakerState::Closed, 9));
    let r = restarted(&saved, config_a(), Duration::from_secs(30));
    let s = r.snap();
    assert_eq!((s.state, s.buffered_calls, s.failed_calls), (BreakerState::Closed, 9, 5));
    // The tenth call reaches the minimum: 6 failures of 10 ≥ 50 %, OPEN — as without the restart.
    r.run("F");
    assert_eq!(r.cb.state(), BreakerState::Open);
}

#[test]
fn a_forced_open_breaker_stays_forced_open_across_a_restart() {
    let h = Harness::new(config_a());
    h.cb.transition_to_forced_open();
    let r = restarted(&h.cb.saved(), config_a(), Duration::from_secs(3600));
    assert_eq!(r.cb.state(), BreakerState::ForcedOpen);
    assert!(r.cb.try_acquire().is_err());
}

#[test]
fn breaker_row_15_reset_from_open() {
    let h = Harness::tripped(config_a());
    h.cb.reset();
    let s = h.snap();
    assert_eq!(s.state, BreakerState::Closed);
    assert_eq!((s.buffered_calls, s.failed_calls, s.not_permitted_calls, s.failure_rate), (0, 0, 0, -1.0));
    let kinds = h.kinds();
    assert_eq!(
        kinds[kinds.len() - 2..],
        [transition(BreakerState::Open, BreakerState::Closed), BreakerEventKind::Reset]
    );
    // Reset while CLOSED publishes only the reset.
    let before = h.kinds().len();
    h.cb.reset();
    assert_eq!(h.kinds()[before..], [BreakerEventKind::Reset]);
}

// ---------------------------------------------------------------------------------------------
// Further behaviours (see the `resilience` module docs).

#[test]
fn breaker_cancelled_probe_releases_its_permit() {
    let (h, probe) =
        Harness::half_open(CircuitBreakerConfig { permitted_number_of_calls_in_half_open_state: 1, ..config_a() });
    assert!(h.cb.try_acquire().is_err(), "the only probe is in use");
    drop(probe);
    let s = h.snap();
    assert_eq!((s.state, s.buffered_calls, s.half_open.unwrap().permits_used), (BreakerState::HalfOpen, 0, 0));
    let event = h.cb.recent_events().pop().unwrap();
    assert_eq!((event.kind, event.message.as_deref()), (BreakerEventKind::IgnoredError, Some("cancelled")));
    h.call('S', Duration::ZERO).expect("a new probe is admitted, not stuck");
    assert_eq!(h.cb.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn breaker_call_future_dropped_by_a_timeout_releases_its_permit() {
    let (h, probe) =
        Harness::half_open(CircuitBreakerConfig { permitted_number_of_calls_in_half_open_state: 1, ..config_a() });
    drop(probe);
    let never = std::future::pending::<Result<(), std::io::Error>>();
    let timed_out = tokio::time::timeout(Duration::from_secs(1), h.cb.call(|_| Outcome::Success, never)).await;
    assert!(timed_out.is_err());
    assert_eq!(h.snap().half_open.unwrap().permits_used, 0);
    let ok = h.cb.call(|_: &Result<u8, std::io::Error>| Outcome::Success, async { Ok(7) }).await.unwrap();
    assert_eq!((ok, h.cb.state()), (7, BreakerState::Closed));
}

#[tokio::test]
async fn breaker_call_classifies_and_rejects() {
    let h = Harness::tripped(config_a());
    let rejected = h.cb.call(|_: &Result<(), std::io::Error>| Outcome::Success, async { Ok(()) }).await;
    assert!(matches!(rejected, Err(CallError::NotPermitted(NotPermitted { state: BreakerState::Open, .. }))));
    h.cb.reset();
    let failed =
        h.cb.call(
            |r: &Result<(), String>| match r {
                Ok(()) => Outcome::Success,
                Err(e) => Outcome::Failure(Some(e.clone())),
            },
            async { Err("503 overloaded".to_string()) },
        )
        .await;
    assert!(matches!(failed, Err(CallError::Inner(ref e)) if e == "503 overloaded"));
    let event = h.cb.recent_events().pop().unwrap();
    assert_eq!(
        (event.kind, event.message.as_deref()),
        (BreakerEventKind::Error { slow: false }, Some("503 overloaded"))
    );
    assert_eq!(h.snap().failed_calls, 1);
}

#[test]
fn breaker_ignored_outcome_gives_its_permit_back_and_records_nothing() {
    let (h, probe) =
        Harness::half_open(CircuitBreakerConfig { permitted_number_of_calls_in_half_open_state: 1, ..config_a() });
    probe.finish(Outcome::Ignored(Some("invalid image".into())));
    let s = h.snap();
    assert_eq!((s.state, s.buffered_calls, s.not_permitted_calls), (BreakerState::HalfOpen, 0, 0));
    assert!(h.cb.try_acquire().is_ok());

    let closed = Harness::new(config_a());
    closed.cb.try_acquire().unwrap().on_ignored();
    assert_eq!(closed.snap().buffered_calls, 0);
    assert_eq!(closed.kinds(), vec![BreakerEventKind::IgnoredError]);
}

#[test]
fn breaker_permit_of_an_earlier_half_open_is_not_given_to_a_later_one() {
    let config = CircuitBreakerConfig { permitted_number_of_calls_in_half_open_state: 1, ..config_a() };
    let (h, stale) = Harness::half_open(config);
    h.cb.transition_to_open().unwrap();
    h.advance(Duration::from_millis(5001));
    let _probe = h.cb.try_acquire().unwrap();
    stale.on_ignored();
    assert!(h.cb.try_acquire().is_err(), "still exactly one permit in the new HALF_OPEN");
}

#[test]
fn breaker_max_wait_in_half_open_goes_back_to_open() {
    let config = CircuitBreakerConfig { max_wait_duration_in_half_open_state: Duration::from_secs(10), ..config_a() };
    let (h, _probe) = Harness::half_open(config);
    let entered = h.snap().state_since_ms;
    h.advance(Duration::from_millis(9999));
    assert!(h.cb.try_acquire().is_ok(), "not yet expired");
    h.advance(MS);
    let err = h.cb.try_acquire().expect_err("expired: OPEN again");
    assert_eq!(err.state, BreakerState::Open);
    let s = h.snap();
    let open = s.open.unwrap();
    assert_eq!(open.opened_at_ms, entered + 10_000, "opened as of the expiry");
    assert_eq!(open.probe_allowed_at_ms, entered + 15_000);
    assert_eq!(s.not_permitted_calls, 1);
    let kinds = h.kinds();
    assert_eq!(
        kinds[kinds.len() - 2..],
        [transition(BreakerState::HalfOpen, BreakerState::Open), BreakerEventKind::NotPermitted]
    );
}

#[tokio::test(start_paused = true)]
async fn breaker_automatic_transition_uses_a_timer() {
    let config = CircuitBreakerConfig { automatic_transition_from_open_to_half_open_enabled: true, ..config_a() };
    let cb = CircuitBreaker::new("gemini", config).unwrap();
    let mut watch = cb.snapshot_watch();
    for _ in 0..10 {
        cb.try_acquire().unwrap().on_error();
    }
    assert_eq!(cb.state(), BreakerState::Open);
    tokio::time::sleep(Duration::from_millis(4999)).await;
    assert_eq!(cb.state(), BreakerState::Open);
    tokio::time::sleep(MS).await;
    tokio::task::yield_now().await;
    assert_eq!(cb.state(), BreakerState::HalfOpen, "no request needed");
    assert_eq!(watch.borrow_and_update().state, BreakerState::HalfOpen);

    // Leaving OPEN before the wait cancels the timer.
    cb.transition_to_open().unwrap();
    cb.reset();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(cb.state(), BreakerState::Closed);

    // The timer holds no strong reference: dropping the breaker drops it at once.
    cb.transition_to_open().unwrap();
    drop(cb);
    assert!(watch.has_changed().is_err(), "the breaker is gone although its timer was pending");
}

#[tokio::test(start_paused = true)]
async fn breaker_max_wait_in_half_open_also_fires_as_a_timer() {
    let config = CircuitBreakerConfig { max_wait_duration_in_half_open_state: Duration::from_secs(10), ..config_a() };
    let cb = CircuitBreaker::new("gemini", config).unwrap();
    cb.transition_to_open().unwrap();
    cb.transition_to_half_open().unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    tokio::task::yield_now().await;
    assert_eq!(cb.state(), BreakerState::Open);
}

#[test]
fn breaker_metrics_only_records_but_never_transitions() {
    let h = Harness::new(config_a());
    h.cb.transition_to_metrics_only();
    h.run("FFFFFFFFFFFFFFFFFFFFFFFF");
    let s = h.snap();
    assert_eq!((s.state, s.buffered_calls, s.failure_rate), (BreakerState::MetricsOnly, 20, 100.0));
    let exceeded = h.kinds().iter().filter(|k| matches!(k, BreakerEventKind::FailureRateExceeded { .. })).count();
    assert_eq!(exceeded, 1, "reported once per METRICS_ONLY period");
    assert_eq!(h.cb.transition_to_open().unwrap_err().from, BreakerState::MetricsOnly);
}

#[test]
fn breaker_disabled_passes_everything_and_records_nothing() {
    let h = Harness::new(config_a());
    h.cb.transition_to_disabled();
    h.run("FFFFFFFFFFFFFFFFFFFFFFFF");
    let s = h.snap();
    assert_eq!((s.state, s.buffered_calls, s.failed_calls, s.failure_rate), (BreakerState::Disabled, 0, 0, -1.0));
    assert_eq!(h.kinds(), vec![transition(BreakerState::Closed, BreakerState::Disabled), BreakerEventKind::Disabled]);
}

#[test]
fn breaker_late_result_after_open_is_recorded_without_a_transition() {
    let h = Harness::new(config_a());
    let slow_call = h.cb.try_acquire().unwrap();
    h.run("FFFFFFFFFF");
    assert_eq!(h.cb.state(), BreakerState::Open);
    slow_call.on_success();
    let s = h.snap();
    assert_eq!((s.state, s.buffered_calls, s.failed_calls, s.successful_calls), (BreakerState::Open, 11, 10, 1));
    assert_eq!(h.kinds().last(), Some(&BreakerEventKind::Success { slow: false }));
}

#[test]
fn breaker_moving_to_the_current_state_publishes_nothing() {
    let h = Harness::new(config_a());
    h.cb.transition_to_closed();
    assert!(h.kinds().is_empty());
    h.cb.transition_to_forced_open();
    let count = h.kinds().len();
    h.cb.transition_to_forced_open();
    assert_eq!(h.kinds().len(), count);
    assert_eq!(h.cb.transition_to_half_open(), Ok(()), "FORCED_OPEN → HALF_OPEN exists");
    let fresh = Harness::new(config_a());
    let err = fresh.cb.transition_to_half_open().unwrap_err();
    assert_eq!((err.from, err.to), (BreakerState::Closed, BreakerState::HalfOpen));
}

#[test]
fn breaker_events_are_timestamped_and_streamed() {
    let h = Harness::new(config_a());
    let mut live = h.cb.subscribe_events();
    let mut watch = h.cb.snapshot_watch();
    h.advance(Duration::from_millis(1500));
    h.call('F', Duration::from_millis(250)).unwrap();
    let event = live.try_recv().unwrap();
    assert_eq!(event.breaker, "gemini");
    assert_eq!(event.time_ms, 1_700_000_000_000 + 1750);
    assert_eq!(event.duration_ms, Some(250));
    assert!(watch.has_changed().unwrap());
    assert_eq!(watch.borrow_and_update().failed_calls, 1);
    let json = serde_json::to_value(&event).unwrap();
    assert_eq!(json["kind"], serde_json::json!({"type": "error", "slow": false}));

    for _ in 0..150 {
        h.call('S', Duration::ZERO).unwrap();
    }
    assert_eq!(h.cb.recent_events().len(), 100);
}

#[test]
fn breaker_actuator_json_matches_spring() {
    let h = Harness::new(config_a());
    assert_eq!(
        h.cb.actuator_json(),
        serde_json::json!({
            "failureRate": "-1.0%", "failureRateThreshold": "50.0%",
            "slowCallRate": "-1.0%", "slowCallRateThreshold": "100.0%",
            "bufferedCalls": 0, "failedCalls": 0, "slowCalls": 0, "slowFailedCalls": 0,
            "notPermittedCalls": 0, "state": "CLOSED"
        })
    );
    let h = Harness::tripped(config_a());
    assert_eq!(h.cb.actuator_json()["state"], "OPEN");
    assert_eq!(h.cb.actuator_json()["failureRate"], "100.0%");
}

#[test]
fn breaker_not_permitted_message_says_when_probes_resume() {
    let h = Harness::tripped(config_a());
    h.advance(Duration::from_millis(2500));
    let err = h.cb.try_acquire().unwrap_err();
    assert_eq!(err.retry_in, Some(Duration::from_millis(2500)));
    assert_eq!(err.retry_at_wall, Some(wall_start() + Duration::from_secs(5)));
    assert_eq!(err.to_string(), "calls to gemini are paused: its circuit breaker is open; a probe is allowed in 3s");
}

#[test]
fn breaker_config_defaults_parse_and_validation_names_keys() {
    let config: CircuitBreakerConfig = toml::from_str("").unwrap();
    assert_eq!(config, CircuitBreakerConfig::default());
    assert_eq!(config.sliding_window_size, 20);
    assert_eq!(config.wait_duration_in_open_state, Duration::from_secs(15));
    assert_eq!(config.slow_call_duration_threshold, Duration::from_secs(60));
    assert_eq!(config.max_wait_duration_in_half_open_state, Duration::ZERO);

    let parsed: CircuitBreakerConfig = toml::from_str(
        "sliding_window_type = \"time_based\"\nfailure_rate_threshold = 25\nwait_duration_in_open_state = \"1m 30s\"",
    )
    .unwrap();
    assert_eq!(parsed.sliding_window_type, SlidingWindowType::TimeBased);
    assert_eq!(parsed.failure_rate_threshold, 25.0);
    assert_eq!(parsed.wait_duration_in_open_state, Duration::from_secs(90));
    let unknown = toml::from_str::<CircuitBreakerConfig>("failure_rate = 50").unwrap_err();
    assert!(unknown.to_string().contains("failure_rate"), "{unknown}");

    let key_of = |config: CircuitBreakerConfig| match config.validate() {
        Err(pe_core::resilience::InvalidSetting { key, .. }) => key,
        other => panic!("expected an invalid key, got {other:?}"),
    };
    let d = CircuitBreakerConfig::default;
    assert_eq!(key_of(CircuitBreakerConfig { failure_rate_threshold: 0.0, ..d() }), "failure_rate_threshold");
    assert_eq!(key_of(CircuitBreakerConfig { failure_rate_threshold: 100.5, ..d() }), "failure_rate_threshold");
    assert_eq!(key_of(CircuitBreakerConfig { failure_rate_threshold: f32::NAN, ..d() }), "failure_rate_threshold");
    assert_eq!(key_of(CircuitBreakerConfig { slow_call_rate_threshold: -1.0, ..d() }), "slow_call_rate_threshold");
    assert_eq!(key_of(CircuitBreakerConfig { sliding_window_size: 0, ..d() }), "sliding_window_size");
    assert_eq!(key_of(CircuitBreakerConfig { minimum_number_of_calls: 0, ..d() }), "minimum_number_of_calls");
    assert_eq!(
        key_of(CircuitBreakerConfig { permitted_number_of_calls_in_half_open_state: 0, ..d() }),
        "permitted_number_of_calls_in_half_open_state"
    );
    assert_eq!(
        key_of(CircuitBreakerConfig { wait_duration_in_open_state: Duration::ZERO, ..d() }),
        "wait_duration_in_open_state"
    );
    assert!(CircuitBreakerConfig { failure_rate_threshold: 100.0, ..d() }.validate().is_ok());
    assert!(CircuitBreaker::new("x", CircuitBreakerConfig { sliding_window_size: 0, ..d() }).is_err());
}

// ---------------------------------------------------------------------------------------------
// Property test: the breaker against a naive reference model.

/// A deliberately simple model of the semantics: outcomes in a plain Vec, filtered on every read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ModelWindow {
    /// Keep the last n calls.
    Count(usize),
    /// Keep calls whose second is within the last n seconds.
    Time(u64),
}

#[derive(Debug)]
struct Model {
    config: CircuitBreakerConfig,
    state: BreakerState,
    epoch: u64,
    entered_ms: u64,
    retry_at_ms: u64,
    available: u32,
    /// (second recorded, failed, slow), oldest first.
    calls: Vec<(u64, bool, bool)>,
    window: ModelWindow,
    minimum: u32,
    not_permitted: u64,
}

impl Model {
    fn new(config: CircuitBreakerConfig) -> Self {
        let mut model = Self {
            config,
            state: BreakerState::Closed,
            epoch: 0,
            entered_ms: 0,
            retry_at_ms: 0,
            available: 0,
            calls: Vec::new(),
            window: ModelWindow::Count(0),
            minimum: 0,
            not_permitted: 0,
        };
        model.fresh_closed();
        model
    }

    fn fresh(&mut self, window: ModelWindow, minimum: u32) {
        self.calls.clear();
        self.window = window;
        self.minimum = minimum;
        self.not_permitted = 0;
    }

    fn fresh_closed(&mut self) {
        let size = self.config.sliding_window_size;
        match self.config.sliding_window_type {
            SlidingWindowType::CountBased => {
                self.fresh(ModelWindow::Count(size as usize), self.config.minimum_number_of_calls.min(size))
            }
            SlidingWindowType::TimeBased => {
                self.fresh(ModelWindow::Time(u64::from(size)), self.config.minimum_number_of_calls)
            }
        }
    }

    fn enter(&mut self, to: BreakerState, at_ms: u64) {
        self.epoch += 1;
        self.entered_ms = at_ms;
        self.state = to;
        let n = self.config.permitted_number_of_calls_in_half_open_state;
        match to {
            BreakerState::Closed | BreakerState::MetricsOnly => self.fresh_closed(),
            BreakerState::Open => self.retry_at_ms = at_ms + self.config.wait_duration_in_open_state.as_millis() as u64,
            BreakerState::HalfOpen => {
                self.available = n;
                self.fresh(ModelWindow::Count(n as usize), self.config.minimum_number_of_calls.min(n));
            }
            BreakerState::Disabled | BreakerState::ForcedOpen => self.fresh(ModelWindow::Count(0), 0),
        }
    }

    fn visible(&self, now_ms: u64) -> Vec<(u64, bool, bool)> {
        match self.window {
            ModelWindow::Count(n) => self.calls[self.calls.len().saturating_sub(n)..].to_vec(),
            ModelWindow::Time(n) => self.calls.iter().copied().filter(|c| c.0 + n > now_ms / 1000).collect(),
        }
    }

    fn rates(&self, now_ms: u64) -> (f32, f32) {
        let calls = self.visible(now_ms);
        let total = calls.len() as u32;
        if total == 0 || total < self.minimum {
            return (-1.0, -1.0);
        }
        let failed = calls.iter().filter(|c| c.1).count() as f32;
        let slow = calls.iter().filter(|c| c.2).count() as f32;
        (failed * 100.0 / total as f32, slow * 100.0 / total as f32)
    }

    fn expire(&mut self, now_ms: u64) {
        let max_wait = self.config.max_wait_duration_in_half_open_state.as_millis() as u64;
        if self.state == BreakerState::HalfOpen && max_wait > 0 && now_ms >= self.entered_ms + max_wait {
            self.enter(BreakerState::Open, self.entered_ms + max_wait);
        }
    }

    /// Some(epoch) when admitted.
    fn acquire(&mut self, now_ms: u64) -> Option<u64> {
        self.expire(now_ms);
        if self.state == BreakerState::Open && now_ms > self.retry_at_ms {
            self.enter(BreakerState::HalfOpen, now_ms);
        }
        let admitted = match self.state {
            BreakerState::Closed | BreakerState::Disabled | BreakerState::MetricsOnly => true,
            BreakerState::HalfOpen if self.available > 0 => {
                self.available -= 1;
                true
            }
            _ => false,
        };
        if admitted {
            Some(self.epoch)
        } else {
            self.not_permitted += 1;
            None
        }
    }

    /// outcome: 0 success, 1 failure, 2 ignored or cancelled.
    fn complete(&mut self, epoch: u64, started_ms: u64, now_ms: u64, outcome: u8) {
        self.expire(now_ms);
        if outcome >= 2 {
            if self.state == BreakerState::HalfOpen && epoch == self.epoch {
                self.available += 1;
            }
            return;
        }
        if matches!(self.state, BreakerState::Disabled | BreakerState::ForcedOpen) {
            return;
        }
        let slow = now_ms - started_ms > self.config.slow_call_duration_threshold.as_millis() as u64;
        if self.window != ModelWindow::Count(0) {
            self.calls.push((now_ms / 1000, outcome == 1, slow));
        }
        let (failure_rate, slow_rate) = self.rates(now_ms);
        if failure_rate < 0.0 {
            return;
        }
        let exceeded =
            failure_rate >= self.config.failure_rate_threshold || slow_rate >= self.config.slow_call_rate_threshold;
        match (self.state, exceeded) {
            (BreakerState::Closed | BreakerState::HalfOpen, true) => self.enter(BreakerState::Open, now_ms),
            (BreakerState::HalfOpen, false) => self.enter(BreakerState::Closed, now_ms),
            _ => {}
        }
    }

    fn manual(&mut self, to: BreakerState, now_ms: u64) -> bool {
        let illegal = matches!(
            (self.state, to),
            (BreakerState::Closed, BreakerState::HalfOpen)
                | (BreakerState::MetricsOnly, BreakerState::Open | BreakerState::HalfOpen)
        );
        if !illegal {
            self.enter(to, now_ms);
        }
        !illegal
    }

    fn check(&self, snap: &BreakerSnapshot, now_ms: u64) -> Result<(), TestCaseError> {
        let calls = self.visible(now_ms);
        let (failure_rate, slow_rate) = self.rates(now_ms);
        let count = |f: fn(&(u64, bool, bool)) -> bool| calls.iter().filter(|c| f(c)).count() as u32;
        prop_assert_eq!(snap.state, self.state);
        prop_assert_eq!(snap.failure_rate, failure_rate);
        prop_assert_eq!(snap.slow_call_rate, slow_rate);
        prop_assert_eq!(snap.buffered_calls, calls.len() as u32);
        prop_assert_eq!(snap.failed_calls, count(|c| c.1));
        prop_assert_eq!(snap.slow_calls, count(|c| c.2));
        prop_assert_eq!(snap.slow_failed_calls, count(|c| c.1 && c.2));
        prop_assert_eq!(snap.successful_calls, count(|c| !c.1));
        prop_assert_eq!(snap.not_permitted_calls, self.not_permitted);
        prop_assert_eq!(snap.minimum_number_of_calls, self.minimum);
        let permits = snap.half_open.map(|h| h.permits_used);
        let expected = (self.state == BreakerState::HalfOpen)
            .then(|| self.config.permitted_number_of_calls_in_half_open_state - self.available);
        prop_assert_eq!(permits, expected);
        if let ModelWindow::Count(_) = self.window {
            let outcomes: Vec<RecordedCall> = calls
                .iter()
                .map(|&(_, failed, slow)| match (failed, slow) {
                    (false, false) => RecordedCall::Success,
                    (true, false) => RecordedCall::Failure,
                    (false, true) => RecordedCall::SlowSuccess,
                    (true, true) => RecordedCall::SlowFailure,
                })
                .collect();
            prop_assert_eq!(&snap.calls, &outcomes);
        } else {
            let total: u32 = snap.buckets.iter().map(|b| b.calls).sum();
            prop_assert_eq!(total, calls.len() as u32);
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Acquire, take `took_ms`, finish with outcome (0 S, 1 F, 2 ignored).
    Call {
        outcome: u8,
        took_ms: u64,
    },
    /// Acquire and keep the permit running.
    Begin,
    /// Finish a running permit (0 S, 1 F, 2 ignored, 3 dropped = cancelled).
    End {
        index: usize,
        outcome: u8,
    },
    Advance {
        ms: u64,
    },
    Reset,
    Transition {
        to: u8,
    },
}

/// Milliseconds, mostly on a 250 ms grid so that durations and waits often land exactly on the
/// thresholds (where `>` versus `>=` matters), sometimes anywhere.
fn millis(max: u64) -> impl Strategy<Value = u64> {
    prop_oneof![3 => (0..=max / 250).prop_map(|k| k * 250), 1 => 0..=max]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, millis(1500)).prop_map(|(outcome, took_ms)| Op::Call { outcome, took_ms }),
        2 => Just(Op::Begin),
        3 => (any::<usize>(), 0u8..4).prop_map(|(index, outcome)| Op::End { index, outcome }),
        3 => millis(4000).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Reset),
        1 => (0u8..6).prop_map(|to| Op::Transition { to }),
    ]
}

fn config(window_type: SlidingWindowType) -> impl Strategy<Value = CircuitBreakerConfig> {
    (
        1u32..8,
        1u32..10,
        prop::sample::select(vec![25.0f32, 50.0, 75.0, 100.0]),
        prop::sample::select(vec![50.0f32, 100.0]),
        prop::sample::select(vec![250u64, 500, 750]),
        prop::sample::select(vec![500u64, 1000, 2000, 3000]),
        1u32..5,
        prop::sample::select(vec![0u64, 1000, 3000]),
    )
        .prop_map(move |(size, minimum, failure, slow_rate, slow_ms, wait_ms, n, max_wait_ms)| {
            CircuitBreakerConfig {
                sliding_window_type: window_type,
                sliding_window_size: size,
                minimum_number_of_calls: minimum,
                failure_rate_threshold: failure,
                slow_call_rate_threshold: slow_rate,
                slow_call_duration_threshold: Duration::from_millis(slow_ms),
                wait_duration_in_open_state: Duration::from_millis(wait_ms),
                permitted_number_of_calls_in_half_open_state: n,
                automatic_transition_from_open_to_half_open_enabled: false,
                max_wait_duration_in_half_open_state: Duration::from_millis(max_wait_ms),
                remember_across_restarts: false,
            }
        })
}

const STATES: [BreakerState; 6] = [
    BreakerState::Closed,
    BreakerState::Open,
    BreakerState::HalfOpen,
    BreakerState::Disabled,
    BreakerState::ForcedOpen,
    BreakerState::MetricsOnly,
];

fn run_against_model(config: CircuitBreakerConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let h = Harness::new(config.clone());
    let mut model = Model::new(config);
    let mut now_ms = 0u64;
    let mut running: Vec<(Permit, u64, u64)> = Vec::new();
    for op in ops {
        match op {
            Op::Call { outcome, took_ms } => {
                let admitted = h.cb.try_acquire();
                let expected = model.acquire(now_ms);
                prop_assert_eq!(admitted.is_ok(), expected.is_some(), "admission at {} ms", now_ms);
                model.check(&h.snap(), now_ms)?;
                if let (Ok(permit), Some(epoch)) = (admitted, expected) {
                    h.advance(Duration::from_millis(took_ms));
                    let started = now_ms;
                    now_ms += took_ms;
                    finish(permit, outcome);
                    model.complete(epoch, started, now_ms, outcome);
                }
            }
            Op::Begin => {
                let admitted = h.cb.try_acquire();
                let expected = model.acquire(now_ms);
                prop_assert_eq!(admitted.is_ok(), expected.is_some(), "admission at {} ms", now_ms);
                if let (Ok(permit), Some(epoch)) = (admitted, expected) {
                    running.push((permit, epoch, now_ms));
                }
            }
            Op::End { index, outcome } => {
                if !running.is_empty() {
                    let (permit, epoch, started) = running.remove(index % running.len());
                    finish(permit, outcome);
                    model.complete(epoch, started, now_ms, outcome.min(2));
                }
            }
            Op::Advance { ms } => {
                h.advance(Duration::from_millis(ms));
                now_ms += ms;
            }
            Op::Reset => {
                h.cb.reset();
                model.enter(BreakerState::Closed, now_ms);
            }
            Op::Transition { to } => {
                let to = STATES[usize::from(to)];
                let done = match to {
                    BreakerState::Closed => {
                        h.cb.transition_to_closed();
                        true
                    }
                    BreakerState::Open => h.cb.transition_to_open().is_ok(),
                    BreakerState::HalfOpen => h.cb.transition_to_half_open().is_ok(),
                    BreakerState::Disabled => {
                        h.cb.transition_to_disabled();
                        true
                    }
                    BreakerState::ForcedOpen => {
                        h.cb.transition_to_forced_open();
                        true
                    }
                    BreakerState::MetricsOnly => {
                        h.cb.transition_to_metrics_only();
                        true
                    }
                };
                prop_assert_eq!(done, model.manual(to, now_ms));
            }
        }
        model.check(&h.snap(), now_ms)?;
    }
    Ok(())
}

fn finish(permit: Permit, outcome: u8) {
    match outcome {
        0 => permit.on_success(),
        1 => permit.on_error(),
        2 => permit.on_ignored(),
        _ => drop(permit),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn breaker_matches_reference_model_count_based(
        config in config(SlidingWindowType::CountBased),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        run_against_model(config, ops)?;
    }

    #[test]
    fn breaker_matches_reference_model_time_based(
        config in config(SlidingWindowType::TimeBased),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        run_against_model(config, ops)?;
    }
}
