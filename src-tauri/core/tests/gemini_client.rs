//! The real Gemini client against the fake Gemini server, over 127.0.0.1 only.

use std::time::{Duration, Instant};

use base64::Engine as _;
use fake_gemini::{products, validate, Behavior, FakeGemini, FakeOptions};
use pe_core::config::{ApiKey, GeminiConfig};
use pe_core::gemini::{GeminiClient, GeminiError, TimeoutKind, Usage};
use pe_core::{product, Coded, ErrorCode, ErrorReport};
use serde_json::json;

const KEY: &str = "test-key";
const MODEL: &str = "gemini-2.5-flash";

/// A JPEG header (SOI, SOF0 800×600) and some bytes: enough for the fake's token count.
const IMAGE: &[u8] =
    &[0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, 2, 88, 3, 32, 3, 0, 0, 0, 0xFF, 0xD9, 1, 2, 3, 4, 5, 6, 7, 8, 9];

async fn fake() -> FakeGemini {
    FakeGemini::start(FakeOptions::default()).await.expect("fake starts")
}

fn config(base_url: &str) -> GeminiConfig {
    GeminiConfig {
        base_url: base_url.to_string(),
        model: MODEL.into(),
        api_key: ApiKey::new(KEY),
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(1),
        read_timeout: Duration::from_secs(2),
        ..GeminiConfig::default()
    }
}

fn client(fake: &FakeGemini) -> GeminiClient {
    GeminiClient::new(&config(&fake.base_url())).unwrap()
}

async fn extract_err(client: &GeminiClient) -> GeminiError {
    match client.extract_product("image/jpeg", IMAGE).await {
        Ok(x) => panic!("expected an error, got {:?}", x.product),
        Err(e) => e,
    }
}

fn expected_name(image: &[u8]) -> String {
    products::product_for_image(image)["name"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn plain_answer_with_usage_and_a_request_the_fake_accepts() {
    let fake = fake().await;
    let client = client(&fake);
    assert_eq!(client.model(), MODEL);
    let x = client.extract_product("image/jpeg", IMAGE).await.unwrap();
    assert_eq!(x.product.name, expected_name(IMAGE));
    assert!(x.raw_response.contains("\"candidates\""));
    assert_eq!(x.model_version.as_deref(), Some(MODEL));
    assert_eq!(x.finish_reason.as_deref(), Some("STOP"));
    // 800×600 is two 768 tiles wide, one high: 2 × 258 image tokens plus the text.
    assert!(x.usage.prompt_tokens > 516, "{:?}", x.usage);
    assert!(x.usage.output_tokens > x.usage.thoughts_tokens && x.usage.thoughts_tokens > 0, "{:?}", x.usage);
    assert_eq!(x.usage.total_tokens, x.usage.prompt_tokens + x.usage.output_tokens);
    assert!(x.latency > Duration::ZERO);

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1beta/models/gemini-2.5-flash:generateContent"));
    assert!(r.had_key_header, "key goes in the header");
    assert!(!r.had_key_query, "key never in the URL");
    assert_eq!(r.query, None);
    assert!(!r.body.to_string().contains(KEY));
    let parts = &r.body["contents"][0]["parts"];
    assert_eq!(r.body["contents"][0]["role"], "user");
    assert_eq!(parts[0]["inlineData"]["mimeType"], "image/jpeg");
    assert_eq!(parts[0]["inlineData"]["data"], base64::engine::general_purpose::STANDARD.encode(IMAGE));
    assert!(parts[1]["text"].is_string());
    assert!(r.body["systemInstruction"]["parts"][0]["text"].as_str().unwrap().contains("uncertain_fields"));
    let config = &r.body["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(config["responseJsonSchema"], product::response_json_schema());
    // The fake accepted it (a 200 came back), and its validator agrees on the exact bytes.
    let body = serde_json::to_vec(&client.request_body("image/jpeg", IMAGE)).unwrap();
    validate::check_generate_request(&body).expect("no unknown fields");
    assert_eq!(fake.generate_count(), 1);
    fake.shutdown().await;
}

#[tokio::test]
async fn every_success_shape() {
    let fake = fake().await;
    let client = client(&fake);
    let fixed = json!({"name": "  Fixed Thing ", "brand": "", "gtin": "4006-3813-33931", "extra": {"ignored": true}});
    let cases = [
        (Behavior::Product, expected_name(IMAGE)),
        (Behavior::Fenced, expected_name(IMAGE)),
        (Behavior::Prose, expected_name(IMAGE)),
        (Behavior::ThoughtParts, expected_name(IMAGE)),
        (Behavior::Slow(Duration::from_millis(50)), expected_name(IMAGE)),
        (Behavior::Fixed(fixed), "Fixed Thing".to_string()),
    ];
    for (behavior, name) in cases {
        fake.push(behavior.clone());
        let x = client.extract_product("image/jpeg", IMAGE).await.unwrap_or_else(|e| panic!("{behavior:?}: {e}"));
        assert_eq!(x.product.name, name, "{behavior:?}");
        assert_ne!(x.usage, Usage::default(), "{behavior:?}");
    }
    // Fixed: normalized, not validated.
    fake.push(Behavior::Fixed(json!({"name": "X", "brand": " ", "gtin": "4006-3813-33932"})));
    let p = client.extract_product("image/jpeg", IMAGE).await.unwrap().product;
    assert_eq!((p.brand, p.gtin.as_deref()), (None, Some("4006381333932")));
}

#[tokio::test]
async fn demo_products_vary_by_image_and_fit_the_schema() {
    let fake = fake().await;
    let client = client(&fake);
    let mut names = std::collections::BTreeSet::new();
    for i in 0u8..12 {
        let image = [IMAGE, &[i, i.wrapping_mul(7)]].concat();
        let x = client.extract_product("image/png", &image).await.unwrap();
        assert_eq!(x.product.name, expected_name(&image));
        names.insert(x.product.name);
    }
    assert!(names.len() >= 3, "{names:?}");
}

struct ErrorCase {
    behavior: Behavior,
    code: ErrorCode,
    status: Option<u16>,
    needle: &'static str,
}

fn error_cases() -> Vec<ErrorCase> {
    let case = |behavior, code, status, needle| ErrorCase { behavior, code, status, needle };
    let http = |code: u16, status: &str, message: &str| Behavior::HttpError {
        code,
        status: status.into(),
        message: message.into(),
    };
    vec![
        case(
            Behavior::Quota { retry_delay: Duration::from_secs(26) },
            ErrorCode::GeminiQuota,
            Some(429),
            "Gemini's quota is used up; try again in 26 s.",
        ),
        case(
            Behavior::Unavailable,
            ErrorCode::GeminiUnavailable,
            Some(503),
            "Gemini is overloaded (503); try again in a minute.",
        ),
        case(Behavior::Internal, ErrorCode::GeminiUnavailable, Some(500), "(500); try again in a minute"),
        case(Behavior::DeadlineExceeded, ErrorCode::GeminiUnavailable, Some(504), "(504); try again in a minute"),
        case(http(502, "UNAVAILABLE", "Bad gateway"), ErrorCode::GeminiUnavailable, Some(502), "(502)"),
        case(Behavior::InvalidImage, ErrorCode::GeminiBadRequest, Some(400), "Provided image is not valid"),
        case(
            http(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."),
            ErrorCode::GeminiAuth,
            Some(401),
            "API key",
        ),
        case(
            http(403, "PERMISSION_DENIED", "Your API key was reported as leaked. Please use another API key."),
            ErrorCode::GeminiAuth,
            Some(403),
            "leaked",
        ),
        case(http(409, "ABORTED", "Conflict"), ErrorCode::GeminiApiError, Some(409), "HTTP 409"),
        case(http(418, "UNKNOWN", "teapot"), ErrorCode::GeminiApiError, Some(418), "HTTP 418"),
        case(
            Behavior::NoCandidatesBlocked("PROHIBITED_CONTENT".into()),
            ErrorCode::Blocked,
            Some(200),
            "PROHIBITED_CONTENT",
        ),
        case(Behavior::FinishSafety, ErrorCode::Blocked, Some(200), "SAFETY"),
        case(Behavior::Garbage, ErrorCode::UnparsableOutput, Some(200), "no JSON object"),
        case(Behavior::NoParts, ErrorCode::UnparsableOutput, Some(200), "no text"),
        case(Behavior::MaxTokensTruncated, ErrorCode::OutputTruncated, Some(200), "cut off at 8192 output tokens"),
        case(
            Behavior::ThinkingExhausted,
            ErrorCode::OutputTruncated,
            Some(200),
            "raise gemini.max_output_tokens or lower gemini.thinking",
        ),
        case(Behavior::FinishReason("MODEL_ARMOR".into()), ErrorCode::Blocked, Some(200), "Model Armor"),
        case(Behavior::FinishReason("SPII".into()), ErrorCode::Blocked, Some(200), "sensitive personal information"),
        case(
            Behavior::NoCandidatesBlocked("JAILBREAK".into()),
            ErrorCode::Blocked,
            Some(200),
            "a suspected jailbreak attempt: JAILBREAK",
        ),
        case(
            Behavior::FinishReason("SOMETHING_NEW".into()),
            ErrorCode::UnparsableOutput,
            Some(200),
            "Gemini stopped: SOMETHING_NEW",
        ),
        case(Behavior::DailyQuota, ErrorCode::GeminiQuota, Some(429), "daily quota for this model is used up"),
        case(
            Behavior::FailedPrecondition,
            ErrorCode::GeminiNotAvailable,
            Some(400),
            "Gemini is not available for this project or location",
        ),
        case(Behavior::RequestTimeout, ErrorCode::GeminiUnavailable, Some(408), "(408)"),
    ]
}

#[tokio::test]
async fn every_error_status_and_answer_maps_to_its_kind() {
    let fake = fake().await;
    let client = client(&fake);
    for case in error_cases() {
        fake.push(case.behavior.clone());
        let e = extract_err(&client).await;
        let label = format!("{:?} → {e} / {e:?}", case.behavior);
        assert_eq!(e.code(), case.code, "{label}");
        assert_eq!(e.http_status(), case.status, "{label}");
        assert!(e.to_string().contains(case.needle), "{label}");
        assert!(e.raw_response().is_some_and(|r| !r.is_empty()), "{label}");
    }
    // Scripted behaviors were consumed in order; the default answers again.
    assert!(client.extract_product("image/jpeg", IMAGE).await.is_ok());
}

#[tokio::test]
async fn quota_retry_delay_is_parsed() {
    let fake = fake().await;
    let client = client(&fake);
    fake.push(Behavior::Quota { retry_delay: Duration::from_millis(47_170) });
    let e = extract_err(&client).await;
    assert_eq!(e.retry_after(), Some(Duration::from_millis(47_170)));
    assert_eq!(e.to_string(), "Gemini's quota is used up; try again in 48 s.");
    assert!(e.is_retryable());
    let report = ErrorReport::from_error(&e);
    assert_eq!(report.code, ErrorCode::GeminiQuota);
    assert!(report.detail.unwrap().starts_with("HTTP 429 RESOURCE_EXHAUSTED: You exceeded your current quota"));
}

/// A per-day quota resets at the next midnight Pacific time of the caller's clock, not of the
/// machine's: the client reads no wall clock of its own.
#[tokio::test]
async fn a_per_day_quota_resets_by_the_callers_clock() {
    let fake = fake().await;
    fake.push(Behavior::DailyQuota);
    // 2030-03-10T09:30:00Z is 01:30 PST, before the clocks go forward at 02:00 that night: the
    // next midnight is PDT, 07:00 UTC on the 11th.
    let now = 1_899_365_400_000;
    let client = client(&fake).with_clock(std::sync::Arc::new(move || now));
    let e = extract_err(&client).await;
    assert_eq!(e.quota_resets_at(), Some(pe_core::gemini::next_pacific_midnight(now)));
    assert_eq!(e.quota_resets_at(), Some(1_899_442_800_000), "2030-03-11T07:00:00Z: midnight PDT");
}

#[tokio::test]
async fn invalid_key_is_gemini_auth() {
    let fake = fake().await;
    let mut cfg = config(&fake.base_url());
    cfg.api_key = ApiKey::new("wrong-key-123456");
    let client = GeminiClient::new(&cfg).unwrap();
    let e = extract_err(&client).await;
    assert_eq!(e.code(), ErrorCode::GeminiAuth);
    assert_eq!(e.http_status(), Some(400));
    assert_eq!(e.to_string(), "Gemini rejected the API key — open Settings and enter a valid key.");
    assert!(e.raw_response().unwrap().contains("API_KEY_INVALID"));
    assert!(!e.is_retryable());
    let e = client.list_models().await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::GeminiAuth);
}

#[tokio::test]
async fn no_key_configured_means_no_request_at_all() {
    let fake = fake().await;
    let mut cfg = config(&fake.base_url());
    cfg.api_key = None;
    let client = GeminiClient::new(&cfg).unwrap();
    let e = extract_err(&client).await;
    assert!(matches!(e, GeminiError::MissingKey), "{e:?}");
    assert_eq!(e.code(), ErrorCode::GeminiAuth);
    assert!(e.to_string().contains("open Settings"));
    assert_eq!(client.list_models().await.unwrap_err().code(), ErrorCode::GeminiAuth);
    assert!(fake.requests().is_empty());
    assert_eq!(fake.generate_count(), 0);
    // The fake itself answers a key-less request like the real API: 403 PERMISSION_DENIED.
    let url = format!("{}/v1beta/models/{MODEL}:generateContent", fake.base_url());
    let r = reqwest::Client::new().post(&url).body("{}").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["status"], "PERMISSION_DENIED");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("Method doesn't allow unregistered callers"));
}

#[tokio::test]
async fn unknown_model_is_not_found() {
    let fake = fake().await;
    let mut cfg = config(&fake.base_url());
    cfg.model = "gemini-2.0-flash".into();
    let e = extract_err(&GeminiClient::new(&cfg).unwrap()).await;
    assert_eq!(e.code(), ErrorCode::GeminiNotFound);
    assert_eq!(e.http_status(), Some(404));
    assert!(e.to_string().contains("\"gemini-2.0-flash\""), "{e}");
    assert!(ErrorReport::from_error(&e).detail.unwrap().contains("is not found for API version v1beta"));
}

#[tokio::test]
async fn unsupported_mime_type_is_a_bad_request() {
    let fake = fake().await;
    let e = client(&fake).extract_product("image/jpg", IMAGE).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::GeminiBadRequest);
    assert!(e.to_string().contains("Unsupported MIME type: image/jpg"), "{e}");
}

#[tokio::test]
async fn the_fake_rejects_unknown_fields_and_accepts_the_legacy_query_key() {
    let fake = fake().await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1beta/models/{MODEL}:generateContent", fake.base_url());
    let client = client(&fake);
    let good = serde_json::to_value(client.request_body("image/jpeg", IMAGE)).unwrap();

    let mut bad = good.clone();
    bad["generationConfig"]["responseFormat"] = json!("json");
    let r = http.post(&url).header("x-goog-api-key", KEY).json(&bad).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "Invalid JSON payload received. Unknown name \"responseFormat\" at 'generation_config': Cannot find field."
    );

    let mut bad = good.clone();
    bad["contents"][0]["parts"][0]["inline_data"] = bad["contents"][0]["parts"][0]["inlineData"].take();
    bad["contents"][0]["parts"][0].as_object_mut().unwrap().remove("inlineData");
    bad["contents"][0]["parts"][0]["inline_data"]["data"] = json!("@@not base64@@");
    let r = http.post(&url).header("x-goog-api-key", KEY).json(&bad).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().await.unwrap().contains("Base64 decoding failed"));

    let r = http.post(&url).header("x-goog-api-key", KEY).body("{not json").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);

    // `?key=` works like the real API, and is recorded (redacted) so tests can catch it.
    let r = http.post(format!("{url}?key={KEY}")).json(&good).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let last = fake.requests().pop().unwrap();
    assert!(last.had_key_query && !last.had_key_header);
    assert_eq!(last.query.as_deref(), Some("key=[redacted]"));
    assert!(!format!("{:?}", fake.requests()).contains(KEY));

    // Unknown paths answer 404.
    let r = http.get(format!("{}/v1/whatever", fake.base_url())).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

#[tokio::test]
async fn list_models_for_test_connection() {
    let fake = fake().await;
    let models = client(&fake).list_models().await.unwrap();
    assert!(models.contains(&"gemini-flash-latest".to_string()), "{models:?}");
    assert!(models.contains(&MODEL.to_string()));
    let r = fake.requests().pop().unwrap();
    assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/v1beta/models"));
    assert!(r.had_key_header && !r.had_key_query);
    assert_eq!(fake.generate_count(), 0);
}

#[tokio::test]
async fn read_timeout_when_the_body_stalls() {
    let fake = fake().await;
    let mut cfg = config(&fake.base_url());
    cfg.read_timeout = Duration::from_millis(300);
    let client = GeminiClient::new(&cfg).unwrap();
    fake.push(Behavior::StallBody);
    let started = Instant::now();
    let e = extract_err(&client).await;
    assert!(matches!(e, GeminiError::Timeout { kind: TimeoutKind::Read, .. }), "{e:?}");
    assert_eq!(e.code(), ErrorCode::Timeout);
    assert!(e.to_string().contains("read timeout"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    fake.shutdown().await;
}

#[tokio::test]
async fn overall_timeout_when_the_server_hangs() {
    let fake = fake().await;
    let mut cfg = config(&fake.base_url());
    cfg.timeout = Duration::from_millis(500);
    cfg.read_timeout = Duration::from_secs(5);
    let client = GeminiClient::new(&cfg).unwrap();
    fake.push(Behavior::Hang);
    let started = Instant::now();
    let e = extract_err(&client).await;
    assert!(matches!(e, GeminiError::Timeout { kind: TimeoutKind::Overall, .. }), "{e:?}");
    assert!(e.to_string().contains("overall timeout"), "{e}");
    assert!(e.to_string().contains("500 ms"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(2));
    // A slow answer that fits in the overall timeout succeeds.
    fake.push(Behavior::Slow(Duration::from_millis(100)));
    assert!(client.extract_product("image/jpeg", IMAGE).await.is_ok());
    fake.shutdown().await;
}

#[tokio::test]
async fn a_hanging_server_with_a_shorter_read_timeout_is_a_read_timeout() {
    let fake = fake().await;
    let mut cfg = config(&fake.base_url());
    cfg.read_timeout = Duration::from_millis(300);
    fake.push(Behavior::Hang);
    let e = extract_err(&GeminiClient::new(&cfg).unwrap()).await;
    assert!(matches!(e, GeminiError::Timeout { kind: TimeoutKind::Read, .. }), "{e:?}");
}

/// A loopback listener whose accept queue is full: the kernel drops further SYNs, so connecting
/// hangs until the connect timeout (Linux drops; other systems may refuse instead).
fn listener_with_full_backlog() -> (tokio::net::TcpListener, Vec<std::net::TcpStream>, std::net::SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..8 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => fillers.push(s),
            Err(_) => break, // full
        }
    }
    (listener, fillers, addr)
}

#[tokio::test]
async fn connect_timeout_on_a_full_accept_queue() {
    let (_listener, _fillers, addr) = listener_with_full_backlog();
    let mut cfg = config(&format!("http://{addr}"));
    cfg.connect_timeout = Duration::from_millis(300);
    let client = GeminiClient::new(&cfg).unwrap();
    let started = Instant::now();
    let e = extract_err(&client).await;
    if cfg!(target_os = "linux") {
        assert!(matches!(e, GeminiError::Timeout { kind: TimeoutKind::Connect, .. }), "{e:?}");
        assert!(e.to_string().contains("connect timeout"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(2));
    } else {
        assert!(matches!(e.code(), ErrorCode::Timeout | ErrorCode::Network), "{e:?}");
    }
}

#[tokio::test]
async fn network_errors() {
    // The server closes the connection without answering.
    let fake = fake().await;
    fake.push(Behavior::CloseConnection);
    let e = extract_err(&client(&fake)).await;
    assert_eq!(e.code(), ErrorCode::Network, "{e:?}");
    assert!(e.to_string().contains("closed"), "{e}");
    assert_eq!(e.http_status(), None);
    assert!(e.is_retryable());

    // Nothing listens on the port.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let client = GeminiClient::new(&config(&format!("http://127.0.0.1:{port}"))).unwrap();
    let e = extract_err(&client).await;
    assert_eq!(e.code(), ErrorCode::Network, "{e:?}");
    assert!(e.to_string().contains("refused"), "{e}");
    assert!(ErrorReport::from_error(&e).detail.is_some());
}

#[tokio::test]
async fn concurrent_calls_share_one_client() {
    let fake = fake().await;
    fake.set_latency(Duration::from_millis(200));
    let client = client(&fake);
    let calls: Vec<_> = (0..3u8)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.extract_product("image/jpeg", &[IMAGE, &[i]].concat()).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(fake.max_in_flight(), 3);
    assert_eq!(fake.generate_count(), 3);
}

#[tokio::test]
async fn invalid_settings_are_config_errors() {
    for (base, model) in [
        ("not a url", MODEL),
        ("ftp://127.0.0.1", MODEL),
        ("http://127.0.0.1:1", "a/b"),
        ("http://generativelanguage.googleapis.com", MODEL),
        ("http://10.0.0.7:8080", MODEL),
    ] {
        let mut cfg = config(base);
        cfg.model = model.into();
        let e = GeminiClient::new(&cfg).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Config, "{base} {model}: {e}");
    }
}

/// Runs every error path with a distinctive key and checks it shows up nowhere.
#[tokio::test]
async fn the_key_never_appears_in_any_error() {
    const SECRET: &str = "AIzaSyDISTINCTIVE-secret-KEY-7f3c9e";
    let opts = FakeOptions { api_keys: vec![SECRET.into()], ..FakeOptions::default() };
    let fake = FakeGemini::start(opts).await.unwrap();
    let mut cfg = config(&fake.base_url());
    cfg.api_key = ApiKey::new(SECRET);
    cfg.read_timeout = Duration::from_millis(300);
    let client = GeminiClient::new(&cfg).unwrap();
    assert!(!format!("{client:?}").contains(SECRET));

    let mut errors = Vec::new();
    let mut behaviors: Vec<Behavior> = error_cases().into_iter().map(|c| c.behavior).collect();
    behaviors.extend([
        Behavior::StallBody,
        Behavior::CloseConnection,
        Behavior::Hang,
        // A server that echoes the key back: the client scrubs it.
        Behavior::HttpError { code: 400, status: "INVALID_ARGUMENT".into(), message: format!("bad key {SECRET}") },
        Behavior::Fixed(json!({"brand": SECRET})),
    ]);
    for b in behaviors {
        fake.push(b);
        errors.push(extract_err(&client).await);
    }
    // A wrong key, an unknown model, a closed port, a full accept queue, an overall timeout.
    let mut wrong = cfg.clone();
    wrong.api_key = ApiKey::new(format!("{SECRET}-wrong"));
    errors.push(extract_err(&GeminiClient::new(&wrong).unwrap()).await);
    errors.push(GeminiClient::new(&wrong).unwrap().list_models().await.unwrap_err());
    let mut model = cfg.clone();
    model.model = "no-such-model".into();
    errors.push(extract_err(&GeminiClient::new(&model).unwrap()).await);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut closed = cfg.clone();
    closed.base_url = format!("http://127.0.0.1:{port}");
    errors.push(extract_err(&GeminiClient::new(&closed).unwrap()).await);
    let (_listener, _fillers, addr) = listener_with_full_backlog();
    let mut full = cfg.clone();
    full.base_url = format!("http://{addr}");
    full.connect_timeout = Duration::from_millis(200);
    errors.push(extract_err(&GeminiClient::new(&full).unwrap()).await);
    let mut overall = cfg.clone();
    overall.timeout = Duration::from_millis(300);
    overall.read_timeout = Duration::from_secs(5);
    fake.push(Behavior::Hang);
    errors.push(extract_err(&GeminiClient::new(&overall).unwrap()).await);
    let mut bad_key = cfg.clone();
    bad_key.api_key = ApiKey::new(format!("{SECRET}\u{7}"));
    if let Err(e) = GeminiClient::new(&bad_key) {
        errors.push(e);
    }

    let codes: std::collections::BTreeSet<&str> = errors.iter().map(|e| e.code().as_str()).collect();
    for code in [
        "gemini_auth",
        "gemini_bad_request",
        "gemini_not_found",
        "gemini_quota",
        "gemini_unavailable",
        "gemini_api_error",
        "timeout",
        "network",
        "blocked",
        "unparsable_output",
        "config",
    ] {
        assert!(codes.contains(code), "{code} not exercised: {codes:?}");
    }
    for e in &errors {
        let report = ErrorReport::from_error(e);
        let all =
            format!("{e} | {e:?} | {report:?} | {:?} | {}", e.raw_response(), serde_json::to_string(&report).unwrap());
        assert!(!all.contains(SECRET), "key leaked: {all}");
        assert!(!all.contains("DISTINCTIVE"), "key leaked: {all}");
    }
    assert!(!format!("{:?}", fake.requests()).contains(SECRET));
    fake.shutdown().await;
}
