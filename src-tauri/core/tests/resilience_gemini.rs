//! The resilience stack around the real Gemini client, against the fake Gemini on 127.0.0.1, in
//! real time: the seed experiment of the issue (bad key opens, probes, good key closes), the
//! bulkhead's limit as the server sees it, quota retry delays, timeouts and network retries.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::{GeminiClient, GeminiError, GeminiExtraction};
use pe_core::resilience::{BreakerEventKind, BreakerState, ResilienceConfig, ResilienceStack, SlotPolicy, StackError};
use pe_core::{Coded, ErrorCode};

/// The fixture photo, prepared as the app would upload it.
fn jpeg() -> Arc<Vec<u8>> {
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/product.jpg")).unwrap();
    Arc::new(pe_core::intake::prepare_bytes(&bytes, &ImageConfig::default()).unwrap().jpeg)
}

async fn fake(default_behavior: Behavior) -> FakeGemini {
    FakeGemini::start(FakeOptions { default_behavior, ..FakeOptions::default() }).await.unwrap()
}

fn client(fake: &FakeGemini, key: &str) -> GeminiClient {
    GeminiClient::new(&GeminiConfig {
        base_url: fake.base_url(),
        api_key: ApiKey::new(key),
        timeout: Duration::from_secs(10),
        ..GeminiConfig::default()
    })
    .unwrap()
}

fn stack(cfg: ResilienceConfig) -> ResilienceStack {
    ResilienceStack::new("gemini", cfg).unwrap()
}

/// One photo through the stack.
async fn extract(
    stack: &ResilienceStack,
    client: &GeminiClient,
    jpeg: &[u8],
    policy: SlotPolicy,
) -> Result<GeminiExtraction, StackError<GeminiError>> {
    stack.call(policy, GeminiError::verdict, move || client.extract_product("image/jpeg", jpeg)).await
}

fn expect_auth(r: Result<GeminiExtraction, StackError<GeminiError>>) {
    match r {
        Err(StackError::Call(e)) => assert_eq!(e.code(), ErrorCode::GeminiAuth, "{e}"),
        other => panic!("expected a gemini_auth failure, got {other:?}"),
    }
}

fn expect_circuit_open(r: Result<GeminiExtraction, StackError<GeminiError>>) {
    match r {
        Err(StackError::CircuitOpen(np)) => {
            assert_eq!(np.breaker, "gemini");
            assert_eq!(np.state, BreakerState::Open);
            assert!(np.retry_at.is_some() && np.retry_in.is_some(), "{np:?}");
        }
        other => panic!("expected a circuit-open rejection, got {other:?}"),
    }
}

/// Polls until `cond` holds, for at most `limit`.
async fn wait_until(limit: Duration, what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn seed_experiment_bad_key_opens_probes_fail_good_key_closes() {
    let fake = fake(Behavior::Product).await;
    let jpeg = jpeg();
    let bad = client(&fake, "bad-key");
    let good = client(&fake, "test-key");
    let wait = Duration::from_millis(500);
    let mut cfg = ResilienceConfig::default();
    cfg.circuit_breaker.wait_duration_in_open_state = wait;
    // The seed values; retries stay on (an auth failure is never retried).
    assert_eq!(cfg.retry.max_attempts, 3);
    let seed = &cfg.circuit_breaker;
    assert_eq!(
        (
            seed.sliding_window_size,
            seed.minimum_number_of_calls,
            seed.failure_rate_threshold,
            seed.permitted_number_of_calls_in_half_open_state
        ),
        (20, 10, 50.0, 5)
    );
    let stack = stack(cfg);
    let breaker = stack.breaker();

    // 1. Bad key: the first 10 calls fail, each with exactly one request; the 10th opens it.
    for i in 1..=10u32 {
        expect_auth(extract(&stack, &bad, &jpeg, SlotPolicy::Configured).await);
        assert_eq!(fake.generate_count(), i as usize, "auth failures are not retried");
        let b = breaker.snapshot();
        assert_eq!((b.buffered_calls, b.failed_calls), (i, i), "after call {i}");
        if i < 10 {
            assert_eq!(b.state, BreakerState::Closed, "after call {i}");
            assert_eq!(b.failure_rate, -1.0, "below the minimum after call {i}");
        }
    }
    let b = breaker.snapshot();
    assert_eq!(b.state, BreakerState::Open);
    assert_eq!(b.failure_rate, 100.0);
    assert_eq!(b.not_permitted_calls, 0);
    assert!(b.open.is_some() && b.half_open.is_none());
    let r = stack.snapshot().retry;
    assert_eq!((r.failed_without_retry, r.failed_with_retry, r.retries), (10, 0, 0));

    // 2. Further calls are rejected at once; no request reaches the server; OPEN keeps its metrics.
    for n in 1..=3u64 {
        let started = Instant::now();
        expect_circuit_open(extract(&stack, &good, &jpeg, SlotPolicy::Configured).await);
        assert!(started.elapsed() < Duration::from_millis(100), "a rejection is immediate");
        assert_eq!(fake.generate_count(), 10);
        let b = breaker.snapshot();
        assert_eq!(b.state, BreakerState::Open);
        assert_eq!((b.buffered_calls, b.failed_calls, b.not_permitted_calls), (10, 10, n));
    }

    // 3. After the wait the next call is a probe (HALF_OPEN); 5 failing probes send it back to OPEN.
    tokio::time::sleep(wait + Duration::from_millis(100)).await;
    assert_eq!(breaker.state(), BreakerState::Open, "the move to HALF_OPEN is lazy");
    for i in 1..=5u32 {
        expect_auth(extract(&stack, &bad, &jpeg, SlotPolicy::Configured).await);
        assert_eq!(fake.generate_count(), 10 + i as usize);
        let b = breaker.snapshot();
        assert_eq!((b.buffered_calls, b.failed_calls), (i, i), "probe {i}");
        if i < 5 {
            assert_eq!(b.state, BreakerState::HalfOpen, "after probe {i}");
            assert_eq!(b.window_size, 5);
            let progress = b.half_open.expect("half-open progress");
            assert_eq!((progress.permits_used, progress.permits_permitted), (i, 5));
            assert_eq!(b.not_permitted_calls, 0, "HALF_OPEN starts fresh metrics");
        } else {
            assert_eq!(b.state, BreakerState::Open, "the 5th failing probe reopens it");
            assert_eq!(b.failure_rate, 100.0);
        }
    }
    expect_circuit_open(extract(&stack, &good, &jpeg, SlotPolicy::Configured).await);
    assert_eq!(fake.generate_count(), 15);
    let b = breaker.snapshot();
    assert_eq!((b.state, b.buffered_calls, b.failed_calls, b.not_permitted_calls), (BreakerState::Open, 5, 5, 1));

    // 4. Wait again; 5 succeeding probes with the good key close it, with fresh metrics.
    tokio::time::sleep(wait + Duration::from_millis(100)).await;
    for i in 1..=5u32 {
        let got = extract(&stack, &good, &jpeg, SlotPolicy::Configured).await.unwrap();
        assert!(!got.product.name.is_empty());
        assert_eq!(fake.generate_count(), 15 + i as usize);
        let b = breaker.snapshot();
        if i < 5 {
            assert_eq!(b.state, BreakerState::HalfOpen, "after good probe {i}");
            assert_eq!((b.buffered_calls, b.successful_calls, b.failed_calls), (i, i, 0));
        } else {
            assert_eq!(b.state, BreakerState::Closed);
            assert_eq!(
                (b.buffered_calls, b.failed_calls, b.successful_calls, b.not_permitted_calls),
                (0, 0, 0, 0),
                "CLOSED starts fresh metrics"
            );
            assert_eq!(b.failure_rate, -1.0);
            assert_eq!((b.window_size, b.minimum_number_of_calls), (20, 10));
            assert!(b.open.is_none() && b.half_open.is_none());
        }
    }

    // The event log: every transition in order, and failure_rate_exceeded just before CLOSED→OPEN.
    let events = breaker.recent_events();
    let transitions: Vec<(BreakerState, BreakerState)> = events
        .iter()
        .filter_map(|e| match e.kind {
            BreakerEventKind::StateTransition { from, to } => Some((from, to)),
            _ => None,
        })
        .collect();
    use BreakerState::{Closed, HalfOpen, Open};
    assert_eq!(transitions, [(Closed, Open), (Open, HalfOpen), (HalfOpen, Open), (Open, HalfOpen), (HalfOpen, Closed)]);
    let opened = events
        .iter()
        .position(|e| e.kind == BreakerEventKind::StateTransition { from: Closed, to: Open })
        .expect("CLOSED→OPEN");
    assert!(opened > 0);
    assert_eq!(events[opened - 1].kind, BreakerEventKind::FailureRateExceeded { rate: 100.0 });
    assert!(events.iter().all(|e| e.breaker == "gemini"));
    let rejected = events.iter().filter(|e| e.kind == BreakerEventKind::NotPermitted).count();
    assert_eq!(rejected, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_most_k_requests_in_flight_and_the_next_is_bulkhead_full() {
    const K: u32 = 3;
    let fake = fake(Behavior::Slow(Duration::from_millis(400))).await;
    let jpeg = jpeg();
    let good = client(&fake, "test-key");
    let mut cfg = ResilienceConfig::default();
    cfg.bulkhead.max_concurrent_calls = K;
    assert_eq!(cfg.bulkhead.max_wait_duration, Duration::ZERO);
    let stack = stack(cfg);

    let spawn = |policy: SlotPolicy| {
        let (stack, client, jpeg) = (stack.clone(), good.clone(), jpeg.clone());
        tokio::spawn(async move { extract(&stack, &client, &jpeg, policy).await })
    };

    // K slow calls take every slot; the server sees all K.
    let running: Vec<_> = (0..K).map(|_| spawn(SlotPolicy::Configured)).collect();
    wait_until(Duration::from_secs(3), "K requests at the server", || fake.generate_count() == K as usize).await;
    assert_eq!(stack.snapshot().bulkhead.available_concurrent_calls, 0);

    // The K+1th immediate call is rejected without reaching the server.
    let started = Instant::now();
    match extract(&stack, &good, &jpeg, SlotPolicy::Configured).await {
        Err(StackError::BulkheadFull { max }) => assert_eq!(max, K),
        other => panic!("expected bulkhead_full, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_millis(100), "bulkhead_full is immediate");
    assert_eq!(fake.generate_count(), K as usize);
    assert_eq!(stack.snapshot().bulkhead.rejected_calls, 1);

    for task in running {
        task.await.unwrap().unwrap();
    }
    assert_eq!(fake.max_in_flight(), K as usize);
    let snap = stack.snapshot();
    assert_eq!(snap.bulkhead.available_concurrent_calls, K);
    // The rejection is not the service's fault: only the K successes are recorded.
    assert_eq!((snap.breaker.buffered_calls, snap.breaker.successful_calls), (K, K));
    assert_eq!(snap.retry.failed_without_retry, 1);

    // A burst of queued calls all succeed, never more than K at the server at once.
    fake.set_default(Behavior::Slow(Duration::from_millis(150)));
    let burst: Vec<_> = (0..12).map(|_| spawn(SlotPolicy::Wait)).collect();
    for task in burst {
        task.await.unwrap().unwrap();
    }
    assert_eq!(fake.generate_count(), K as usize + 12);
    assert_eq!(fake.max_in_flight(), K as usize);
    let snap = stack.snapshot();
    assert_eq!(snap.bulkhead.rejected_calls, 1);
    assert_eq!(snap.bulkhead.available_concurrent_calls, K);
    assert_eq!(snap.retry.successful_without_retry, u64::from(K) + 12);
}

#[tokio::test]
async fn quota_retry_delay_is_honoured_over_http() {
    let fake = fake(Behavior::Product).await;
    let jpeg = jpeg();
    let good = client(&fake, "test-key");
    let retry_delay = Duration::from_secs(1);

    // The server's delay (1 s) is longer than the backoff (500 ms): the retry waits for it.
    let s = stack(ResilienceConfig::default());
    fake.push(Behavior::Quota { retry_delay });
    let started = Instant::now();
    let got = extract(&s, &good, &jpeg, SlotPolicy::Configured).await.unwrap();
    let took = started.elapsed();
    assert!(took >= retry_delay, "the retry came after {took:?}");
    assert!(!got.product.name.is_empty());
    assert_eq!(fake.generate_count(), 2);
    let snap = s.snapshot();
    assert_eq!((snap.retry.successful_with_retry, snap.retry.retries), (1, 1));
    assert!(snap.retry.last_retry_delay_ms.unwrap() >= 1000, "{:?}", snap.retry.last_retry_delay_ms);
    assert_eq!((snap.breaker.buffered_calls, snap.breaker.failed_calls), (2, 1));

    // With max_wait below the server's delay, the same quota fails at once.
    let mut cfg = ResilienceConfig::default();
    cfg.retry.max_wait = Duration::from_millis(500);
    let s = stack(cfg);
    fake.push(Behavior::Quota { retry_delay });
    let started = Instant::now();
    match extract(&s, &good, &jpeg, SlotPolicy::Configured).await {
        Err(StackError::Call(e)) => {
            assert_eq!(e.code(), ErrorCode::GeminiQuota, "{e}");
            assert_eq!(e.retry_after(), Some(retry_delay));
            assert_eq!(e.http_status(), Some(429));
        }
        other => panic!("expected gemini_quota, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_millis(400), "no wait: {:?}", started.elapsed());
    assert_eq!(fake.generate_count(), 3, "one request only");
    let snap = s.snapshot();
    assert_eq!((snap.retry.failed_without_retry, snap.retry.retries), (1, 0));
    assert_eq!((snap.breaker.buffered_calls, snap.breaker.failed_calls), (1, 1));
}

#[tokio::test]
async fn timeouts_count_as_slow_failures_and_network_errors_are_retried() {
    let fake = fake(Behavior::Product).await;
    let jpeg = jpeg();
    let good = client(&fake, "test-key");
    let timeout = Duration::from_millis(300);
    let mut cfg = ResilienceConfig::default();
    cfg.time_limiter.timeout_duration = timeout;
    cfg.retry.max_attempts = 2;
    cfg.retry.wait_duration = Duration::from_millis(50);
    cfg.circuit_breaker.slow_call_duration_threshold = Duration::from_millis(250);
    let s = stack(cfg);

    // Both attempts hang: the time limiter cancels each, and the retry gives up after 2.
    fake.push(Behavior::Hang);
    fake.push(Behavior::Hang);
    let started = Instant::now();
    match extract(&s, &good, &jpeg, SlotPolicy::Configured).await {
        Err(StackError::Timeout(after)) => assert_eq!(after, timeout),
        other => panic!("expected the time limiter's timeout, got {other:?}"),
    }
    let took = started.elapsed();
    assert!(took >= 2 * timeout && took < Duration::from_secs(2), "took {took:?}");
    assert_eq!(fake.generate_count(), 2);
    let snap = s.snapshot();
    let b = &snap.breaker;
    assert_eq!((b.buffered_calls, b.failed_calls, b.slow_calls, b.slow_failed_calls), (2, 2, 2, 2));
    assert_eq!((snap.retry.failed_with_retry, snap.retry.retries), (1, 1));

    // The connection closes without an answer: a network error, retried; the 2nd attempt succeeds.
    fake.push(Behavior::CloseConnection);
    let got = extract(&s, &good, &jpeg, SlotPolicy::Configured).await.unwrap();
    assert!(!got.product.name.is_empty());
    assert_eq!(fake.generate_count(), 4);
    let snap = s.snapshot();
    assert_eq!((snap.breaker.buffered_calls, snap.breaker.failed_calls, snap.breaker.successful_calls), (4, 3, 1));
    assert_eq!((snap.retry.successful_with_retry, snap.retry.retries), (1, 2));
    let network = snap
        .events
        .iter()
        .rev()
        .find(|e| matches!(e.kind, BreakerEventKind::Error { .. }))
        .and_then(|e| e.message.clone())
        .unwrap_or_default();
    assert!(network.starts_with("Could not reach Gemini"), "the failure was a network error: {network}");
}
