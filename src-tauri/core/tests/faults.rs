//! The fault suite: the real Gemini client against servers on 127.0.0.1 that break in one way
//! each (see `fault_server`). Every case must end in its typed error within the configured
//! timeouts (bounds are generous: this checks that a call ends, not how fast), and the endless
//! bodies must be refused after a bounded number of bytes.

mod fault_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fault_server::{Fault, FaultServer};
use pe_core::config::{ApiKey, GeminiConfig};
use pe_core::gemini::{AnswerStage, GeminiClient, GeminiError, TimeoutKind};
use pe_core::resilience::{
    CircuitBreakerConfig, ResilienceConfig, ResilienceStack, RetryConfig, SlotPolicy, StackError, TimeLimiterConfig,
};
use pe_core::{Coded, ErrorCode};

/// A JPEG header and some bytes: the servers never look at it.
const IMAGE: &[u8] = &[0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, 2, 88, 3, 32, 3, 0, 0, 0, 0xFF, 0xD9];

const TIMEOUT: Duration = Duration::from_secs(3);
const READ_TIMEOUT: Duration = Duration::from_millis(800);
const LIMIT: u64 = 1_000_000;
/// What may sit in loopback socket buffers (both sides, autotuned) beyond what the client read.
const SOCKET_SLACK: u64 = 32 << 20;

fn config(base_url: &str) -> GeminiConfig {
    GeminiConfig {
        base_url: base_url.to_string(),
        api_key: ApiKey::new("test-key"),
        timeout: TIMEOUT,
        connect_timeout: Duration::from_secs(1),
        read_timeout: READ_TIMEOUT,
        max_response_bytes: LIMIT,
        // A model of a known family: no `models.get` lookup reaches the fault server first.
        model: "gemini-2.5-flash".into(),
        ..GeminiConfig::default()
    }
}

/// One call; the error and how long it took, which must be within the overall timeout (+ slack).
async fn fail(base_url: &str) -> GeminiError {
    let client = GeminiClient::new(&config(base_url)).unwrap();
    let started = Instant::now();
    let result = client.extract_product("image/jpeg", IMAGE).await;
    let took = started.elapsed();
    let e = match result {
        Ok(x) => panic!("expected an error, got {:?}", x.product),
        Err(e) => e,
    };
    assert!(took < TIMEOUT + Duration::from_secs(2), "{e:?} took {took:?}, past the timeout of {TIMEOUT:?}");
    e
}

async fn fail_with(fault: Fault) -> (GeminiError, FaultServer) {
    let server = FaultServer::start(fault).await;
    let e = fail(&server.base_url()).await;
    (e, server)
}

#[tokio::test]
async fn refused() {
    let e = fail(&fault_server::refused_base_url().await).await;
    assert_eq!(e.code(), ErrorCode::Network, "{e:?}");
    assert!(e.to_string().contains("refused"), "{e}");
}

#[tokio::test]
async fn accept_and_close() {
    let (e, server) = fail_with(Fault::AcceptAndClose).await;
    assert_eq!(e.code(), ErrorCode::Network, "{e:?}");
    assert!(e.to_string().contains("closed"), "{e}");
    assert!(server.requests() >= 1);
}

#[tokio::test]
async fn reset_mid_body() {
    let (e, server) = fail_with(Fault::ResetMidBody).await;
    assert_eq!(e.code(), ErrorCode::Network, "{e:?}");
    assert_eq!(server.body_bytes_written(), 1000);
}

#[tokio::test]
async fn headers_then_a_stalled_body_is_a_read_timeout_on_the_body() {
    let (e, _server) = fail_with(Fault::HeadersThenStall).await;
    assert!(matches!(e, GeminiError::Timeout { kind: TimeoutKind::Read, stage: AnswerStage::Body, .. }), "{e:?}");
    assert!(e.to_string().contains("stalled") && e.to_string().contains("read timeout"), "{e}");
}

/// reqwest's read timeout covers the whole wait for the headers, trickled or not.
#[tokio::test]
async fn trickled_headers_are_slow_headers_not_a_stalled_body() {
    let (e, _server) = fail_with(Fault::TrickledHeaders(Duration::from_millis(100))).await;
    assert!(matches!(e, GeminiError::Timeout { kind: TimeoutKind::Read, stage: AnswerStage::Headers, .. }), "{e:?}");
    assert!(e.to_string().contains("slow headers"), "{e}");
    assert!(!e.to_string().contains("stalled") && !e.to_string().contains("stopped"), "{e}");
}

/// With a read timeout longer than the overall one, the overall timeout names the same stage.
#[tokio::test]
async fn trickled_headers_past_the_overall_timeout() {
    let server = FaultServer::start(Fault::TrickledHeaders(Duration::from_millis(100))).await;
    let cfg = GeminiConfig {
        read_timeout: Duration::from_secs(10),
        timeout: Duration::from_secs(1),
        ..config(&server.base_url())
    };
    let e = GeminiClient::new(&cfg).unwrap().extract_product("image/jpeg", IMAGE).await.unwrap_err();
    assert!(matches!(e, GeminiError::Timeout { kind: TimeoutKind::Overall, stage: AnswerStage::Headers, .. }), "{e:?}");
    assert!(e.to_string().contains("slow headers") && e.to_string().contains("overall timeout"), "{e}");
}

#[tokio::test]
async fn trickled_body_ends_at_the_overall_timeout() {
    let (e, server) = fail_with(Fault::TrickledBody(Duration::from_millis(100))).await;
    assert!(matches!(e, GeminiError::Timeout { kind: TimeoutKind::Overall, stage: AnswerStage::Body, .. }), "{e:?}");
    assert!(e.to_string().contains("body was still arriving"), "{e}");
    assert!(server.body_bytes_written() > 0);
}

/// An endless body is refused as `response_too_large`, having read a bounded number of bytes.
async fn endless(fault: Fault) {
    let (e, server) = fail_with(fault).await;
    assert!(matches!(e, GeminiError::ResponseTooLarge { limit: LIMIT, status: 200, .. }), "{e:?}");
    assert_eq!(e.code(), ErrorCode::ResponseTooLarge);
    assert!(e.to_string().contains("1 MB") && e.to_string().contains("max_response_bytes"), "{e}");
    assert!(!e.is_retryable());
    // The server stops writing once the client has gone (its write fails: the connection is
    // closed): what it wrote is the client's limit plus what the socket buffers held, never the
    // endless rest.
    tokio::time::timeout(Duration::from_secs(10), server.connections_ended(1))
        .await
        .expect("the connection is closed: the server's writes fail");
    let written = server.body_bytes_written();
    assert!(written < LIMIT + SOCKET_SLACK, "{written} bytes written: the client kept reading");
}

#[tokio::test]
async fn endless_chunked_body() {
    endless(Fault::EndlessChunked).await;
}

#[tokio::test]
async fn endless_close_delimited_body() {
    endless(Fault::EndlessCloseDelimited).await;
}

#[tokio::test]
async fn huge_content_length_is_refused_before_reading() {
    let (e, _server) = fail_with(Fault::HugeContentLength).await;
    assert!(matches!(e, GeminiError::ResponseTooLarge { .. }), "{e:?}");
    let detail = pe_core::ErrorReport::from_error(&e).detail.unwrap();
    assert!(detail.contains("Content-Length"), "{detail}");
    endless(Fault::HugeContentLength).await;
}

#[tokio::test]
async fn an_answer_just_under_the_limit_is_read() {
    let text = serde_json::to_string(&serde_json::json!({"name": "Mug", "description": "x".repeat(900_000)})).unwrap();
    let body = serde_json::json!({"candidates": [{"content": {"parts": [{"text": text}]}, "finishReason": "STOP"}]})
        .to_string();
    assert!((body.len() as u64) < LIMIT);
    let server = FaultServer::start(Fault::Answer { status: 200, content_type: "application/json", body }).await;
    let client = GeminiClient::new(&config(&server.base_url())).unwrap();
    let x = client.extract_product("image/jpeg", IMAGE).await.unwrap();
    assert_eq!(x.product.name, "Mug");
}

#[tokio::test]
async fn non_json_200() {
    let body = "<html><body>Welcome to the hotel Wi-Fi</body></html>".to_string();
    let (e, _server) = fail_with(Fault::Answer { status: 200, content_type: "text/html", body }).await;
    assert_eq!(e.code(), ErrorCode::UnparsableOutput, "{e:?}");
    assert_eq!(e.http_status(), Some(200));
}

#[tokio::test]
async fn a_200_that_fits_no_schema() {
    for body in [
        r#"{"candidates": [{"content": {"parts": [{"text": "{\"colour\": \"red\"}"}]}, "finishReason": "STOP"}]}"#,
        r#"{"candidates": "many"}"#,
        r#"[1, 2, 3]"#,
    ] {
        let fault = Fault::Answer { status: 200, content_type: "application/json", body: body.into() };
        let (e, _server) = fail_with(fault).await;
        assert_eq!(e.code(), ErrorCode::UnparsableOutput, "{body}: {e:?}");
    }
}

/// A stack that opens after 4 failed calls and retries once, quickly.
fn storm_stack() -> ResilienceStack {
    let cfg = ResilienceConfig {
        circuit_breaker: CircuitBreakerConfig {
            sliding_window_size: 4,
            minimum_number_of_calls: 4,
            wait_duration_in_open_state: Duration::from_secs(60),
            ..CircuitBreakerConfig::default()
        },
        retry: RetryConfig {
            max_attempts: 2,
            wait_duration: Duration::from_millis(10),
            max_wait: Duration::from_secs(1),
        },
        time_limiter: TimeLimiterConfig { timeout_duration: TIMEOUT },
        ..ResilienceConfig::default()
    };
    ResilienceStack::new("gemini", cfg).unwrap()
}

/// Ten calls into a storm of `status`: typed errors, then the breaker's rejections, all in time;
/// the server saw only the calls the breaker let through.
async fn storm(status: u16, body: &str, code: ErrorCode) -> (ResilienceStack, Vec<StackError<GeminiError>>) {
    let server =
        FaultServer::start(Fault::Answer { status, content_type: "application/json", body: body.into() }).await;
    let client = Arc::new(GeminiClient::new(&config(&server.base_url())).unwrap());
    let stack = storm_stack();
    let started = Instant::now();
    let mut errors = Vec::new();
    for _ in 0..10 {
        let c = client.clone();
        let r = stack
            .call(SlotPolicy::Configured, GeminiError::verdict, move || {
                let c = c.clone();
                async move { c.extract_product("image/jpeg", IMAGE).await }
            })
            .await;
        errors.push(r.expect_err("a storm never succeeds"));
    }
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let kinds: Vec<ErrorCode> = errors
        .iter()
        .map(|e| match e {
            StackError::Call(e) => e.code(),
            StackError::CircuitOpen(_) => ErrorCode::CircuitOpen,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let calls = kinds.iter().filter(|k| **k == code).count();
    assert_eq!(calls, 2, "two calls (of two attempts each) open a window of 4: {kinds:?}");
    assert!(kinds[2..].iter().all(|k| *k == ErrorCode::CircuitOpen), "{kinds:?}");
    assert_eq!(server.requests(), 4, "the open breaker sends nothing");
    (stack, errors)
}

#[tokio::test]
async fn storm_of_503() {
    let body = r#"{"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}"#;
    storm(503, body, ErrorCode::GeminiUnavailable).await;
}

#[tokio::test]
async fn storm_of_429() {
    let body = r#"{"error": {"code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}]}}"#;
    storm(429, body, ErrorCode::GeminiQuota).await;
}
