//! The resilience stack's layers and their order, on tokio's paused clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pe_core::resilience::{
    BreakerState, CircuitBreakerConfig, ResilienceConfig, ResilienceStack, SlotPolicy, StackError, Verdict,
};

#[derive(Debug, Clone, PartialEq)]
enum Fail {
    /// A 503: the service's state, worth another try.
    Overloaded,
    /// A 429 asking to wait.
    Quota(Duration),
    /// A bad key: the service's state, retrying cannot help.
    Auth,
    /// The photo's own fault.
    BadPhoto,
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

fn verdict(e: &Fail) -> Verdict {
    match e {
        Fail::Overloaded => Verdict::Failure { retry: true, min_delay: None },
        Fail::Quota(d) => Verdict::Failure { retry: true, min_delay: Some(*d) },
        Fail::Auth => Verdict::Failure { retry: false, min_delay: None },
        Fail::BadPhoto => Verdict::Ignored,
    }
}

fn config() -> ResilienceConfig {
    let mut c = ResilienceConfig {
        circuit_breaker: CircuitBreakerConfig {
            sliding_window_size: 10,
            minimum_number_of_calls: 4,
            slow_call_duration_threshold: Duration::from_secs(10),
            ..CircuitBreakerConfig::default()
        },
        ..ResilienceConfig::default()
    };
    c.retry.wait_duration = Duration::from_millis(100);
    c
}

fn stack(c: ResilienceConfig) -> ResilienceStack {
    ResilienceStack::new("gemini", c).unwrap()
}

/// An operation that fails with the scripted errors, in order, then succeeds.
type Op = std::pin::Pin<Box<dyn std::future::Future<Output = Result<u32, Fail>> + Send>>;

fn scripted(fails: Vec<Fail>) -> (Arc<AtomicU32>, impl Fn() -> Op) {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let op = move || {
        let n = counter.fetch_add(1, Ordering::SeqCst) as usize;
        let result = fails.get(n).cloned().map_or(Ok(n as u32), Err);
        Box::pin(async move { result }) as Op
    };
    (calls, op)
}

#[tokio::test(start_paused = true)]
async fn retryable_failures_are_retried_and_each_attempt_is_one_breaker_call() {
    let s = stack(config());
    let (calls, op) = scripted(vec![Fail::Overloaded, Fail::Overloaded]);
    let got = s.call(SlotPolicy::Configured, verdict, op).await.unwrap();
    assert_eq!(got, 2);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let snap = s.snapshot();
    assert_eq!((snap.breaker.buffered_calls, snap.breaker.failed_calls), (3, 2));
    assert_eq!((snap.retry.successful_with_retry, snap.retry.retries), (1, 2));
    assert!(snap.retry.last_retry_delay_ms.is_some());
}

#[tokio::test(start_paused = true)]
async fn retries_stop_after_max_attempts() {
    let s = stack(config());
    let (calls, op) = scripted(vec![Fail::Overloaded; 5]);
    let err = s.call(SlotPolicy::Configured, verdict, op).await.unwrap_err();
    assert!(matches!(err, StackError::Call(Fail::Overloaded)), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "max_attempts counts the first call");
    assert_eq!(s.snapshot().retry.failed_with_retry, 1);
}

#[tokio::test(start_paused = true)]
async fn auth_is_a_failure_but_never_retried_and_photo_faults_are_ignored() {
    let s = stack(config());
    let (calls, op) = scripted(vec![Fail::Auth]);
    assert!(matches!(s.call(SlotPolicy::Configured, verdict, op).await, Err(StackError::Call(Fail::Auth))));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let (calls, op) = scripted(vec![Fail::BadPhoto]);
    assert!(matches!(s.call(SlotPolicy::Configured, verdict, op).await, Err(StackError::Call(Fail::BadPhoto))));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let snap = s.snapshot();
    assert_eq!((snap.breaker.buffered_calls, snap.breaker.failed_calls), (1, 1), "the bad photo is not recorded");
    assert_eq!(snap.retry.failed_without_retry, 2);
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_rejects_without_calling_and_stops_retries() {
    let s = stack(config());
    s.breaker().transition_to_forced_open();
    let (calls, op) = scripted(vec![]);
    let err = s.call(SlotPolicy::Configured, verdict, op).await.unwrap_err();
    assert!(matches!(err, StackError::CircuitOpen(_)), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(s.snapshot().breaker.not_permitted_calls, 1);

    // Four failures open it (minimum 4, 100 % >= 50 %); the retry of the 4th finds it open.
    let s = stack(config());
    let (_, op) = scripted(vec![Fail::Overloaded; 3]);
    assert!(s.call(SlotPolicy::Configured, verdict, op).await.is_err());
    let (calls, op) = scripted(vec![Fail::Overloaded; 3]);
    let err = s.call(SlotPolicy::Configured, verdict, op).await.unwrap_err();
    assert!(matches!(err, StackError::CircuitOpen(_)), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the retry after the 4th failure was rejected");
    assert_eq!(s.breaker().state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn the_servers_retry_delay_is_the_minimum_wait_and_too_long_fails_at_once() {
    let s = stack(config());
    let (calls, op) = scripted(vec![Fail::Quota(Duration::from_secs(26))]);
    let started = tokio::time::Instant::now();
    assert_eq!(s.call(SlotPolicy::Configured, verdict, op).await.unwrap(), 1);
    assert!(started.elapsed() >= Duration::from_secs(26), "{:?}", started.elapsed());
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let mut c = config();
    c.retry.max_wait = Duration::from_secs(10);
    let s = stack(c);
    let (calls, op) = scripted(vec![Fail::Quota(Duration::from_secs(26))]);
    let started = tokio::time::Instant::now();
    assert!(matches!(s.call(SlotPolicy::Configured, verdict, op).await, Err(StackError::Call(Fail::Quota(_)))));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn the_time_limiter_cancels_and_the_breaker_records_a_slow_failure() {
    let mut c = config();
    c.retry.max_attempts = 1;
    c.time_limiter.timeout_duration = Duration::from_secs(30);
    let s = stack(c);
    let err = s
        .call(SlotPolicy::Configured, verdict, || async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, Fail>(0)
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StackError::Timeout(d) if d == Duration::from_secs(30)), "{err:?}");
    let snap = s.snapshot();
    assert_eq!((snap.breaker.failed_calls, snap.breaker.slow_failed_calls), (1, 1));
    assert_eq!(snap.bulkhead.available_concurrent_calls, 10, "the cancelled call gave its slot back");
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_rejects_at_once_unless_the_caller_queues() {
    let mut c = config();
    c.bulkhead.max_concurrent_calls = 2;
    let s = stack(c);
    let gate = Arc::new(tokio::sync::Notify::new());
    let mut running = Vec::new();
    for _ in 0..2 {
        let (s, gate) = (s.clone(), gate.clone());
        running.push(tokio::spawn(async move {
            s.call(SlotPolicy::Configured, verdict, || {
                let gate = gate.clone();
                async move {
                    gate.notified().await;
                    Ok::<_, Fail>(1)
                }
            })
            .await
        }));
    }
    tokio::task::yield_now().await;
    assert_eq!(s.snapshot().bulkhead.available_concurrent_calls, 0);
    let (calls, op) = scripted(vec![]);
    let err = s.call(SlotPolicy::Configured, verdict, op).await.unwrap_err();
    assert!(matches!(err, StackError::BulkheadFull { max: 2 }), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "rejected, not retried");
    assert_eq!(s.snapshot().bulkhead.rejected_calls, 1);

    // A queued caller waits for a slot instead.
    let queued = {
        let s = s.clone();
        tokio::spawn(async move {
            let (_, op) = scripted(vec![]);
            s.call(SlotPolicy::Wait, verdict, op).await
        })
    };
    tokio::task::yield_now().await;
    assert!(!queued.is_finished());
    gate.notify_waiters();
    for r in running {
        r.await.unwrap().unwrap();
    }
    queued.await.unwrap().unwrap();
    let snap = s.snapshot();
    assert_eq!(snap.bulkhead.available_concurrent_calls, 2);
    assert_eq!(snap.breaker.buffered_calls, 3, "the rejection was not recorded");
}

#[tokio::test]
async fn the_rate_limiter_rejects_what_would_wait_longer_than_the_timeout() {
    let mut c = config();
    c.rate_limiter.enabled = true;
    c.rate_limiter.limit_for_period = 2;
    c.rate_limiter.limit_refresh_period = Duration::from_secs(600);
    c.time_limiter.timeout_duration = Duration::from_secs(5);
    let s = stack(c);
    for _ in 0..2 {
        let (_, op) = scripted(vec![]);
        s.call(SlotPolicy::Configured, verdict, op).await.unwrap();
    }
    let (calls, op) = scripted(vec![]);
    let err = s.call(SlotPolicy::Configured, verdict, op).await.unwrap_err();
    assert!(matches!(err, StackError::RateLimited { limit: 2, .. }), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(s.snapshot().rate_limiter.rejected_calls, 1);
}

#[test]
fn config_errors_name_the_key() {
    let mut c = ResilienceConfig::default();
    c.bulkhead.max_concurrent_calls = 0;
    assert!(ResilienceStack::new("g", c).err().unwrap().to_string().contains("bulkhead.max_concurrent_calls"));
    let mut c = ResilienceConfig::default();
    c.retry.max_attempts = 0;
    assert!(ResilienceStack::new("g", c).err().unwrap().to_string().contains("retry.max_attempts"));
}

/// Snapshots and change bumps are skipped while nobody watches; a watcher that arrives later still
/// starts from the latest snapshot, and watchers see every change from then on.
#[tokio::test(start_paused = true)]
async fn watchers_see_the_latest_state_even_when_nobody_watched_before() {
    let s = stack(config());
    let (_, op) = scripted(vec![Fail::Auth, Fail::Auth]);
    for _ in 0..2 {
        let _ = s.call(SlotPolicy::Configured, verdict, &op).await;
    }
    let mut breaker = s.breaker().snapshot_watch();
    assert_eq!(*breaker.borrow(), s.breaker().snapshot(), "refreshed on subscribing");
    assert_eq!(breaker.borrow().failed_calls, 2);
    let mut changes = s.changes();
    assert!(!breaker.has_changed().unwrap() && !changes.has_changed().unwrap());

    s.call(SlotPolicy::Configured, verdict, &op).await.unwrap();
    assert!(breaker.has_changed().unwrap() && changes.has_changed().unwrap());
    assert_eq!(*breaker.borrow_and_update(), s.breaker().snapshot());
    assert_eq!(breaker.borrow().buffered_calls, 3);
    changes.borrow_and_update();

    // A second watcher does not wake the first, and both follow the next change.
    let mut second = s.breaker().snapshot_watch();
    assert!(!breaker.has_changed().unwrap());
    s.breaker().transition_to_forced_open();
    assert!(breaker.has_changed().unwrap() && second.has_changed().unwrap());
    assert_eq!(second.borrow_and_update().state, BreakerState::ForcedOpen);

    // With every watcher gone and back, the value is current again.
    drop((breaker, second));
    s.breaker().reset();
    assert_eq!(s.breaker().snapshot_watch().borrow().state, BreakerState::Closed);
}
