//! The request the client sends per model family (golden bodies, key order, alias resolution),
//! and the answers and errors issue 11 added (truncated, blocked with usage, per-day quota,
//! FAILED_PRECONDITION, 408), against the fake Gemini on 127.0.0.1.
//!
//! The golden bodies in `tests/golden/` are also loaded by Google's own Python SDK
//! (`tests/sdk/check_fake.py`, `make test-sdk`). After a deliberate change to the request,
//! regenerate them with `UPDATE_GOLDEN=1 cargo test -p product-extractor-core --test gemini_wire`
//! and review the diff.

use std::path::PathBuf;
use std::time::Duration;

use fake_gemini::{validate, Behavior, FakeGemini, FakeOptions, FLASH_LATEST_TARGET};
use pe_core::config::{ApiKey, GeminiConfig, MediaResolution, Thinking};
use pe_core::gemini::{models, GeminiClient, GeminiError, Usage};
use pe_core::resilience::{ResilienceConfig, ResilienceStack, SlotPolicy, StackError};
use pe_core::{Coded, ErrorCode};

const KEY: &str = "test-key";

/// A JPEG header (SOI, SOF0 800×600) and some bytes: enough for the fake's token count.
const IMAGE: &[u8] =
    &[0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, 2, 88, 3, 32, 3, 0, 0, 0, 0xFF, 0xD9, 1, 2, 3, 4, 5, 6, 7, 8, 9];

/// The three golden models: a 2.5 Flash (budget), a 3 Flash (level), an unknown family (neither).
const GOLDEN: &[(&str, &str)] = &[
    ("gemini-2.5-flash", "request_gemini-2.5-flash.json"),
    ("gemini-3-flash-preview", "request_gemini-3-flash.json"),
    ("my-tuned-model", "request_unknown-model.json"),
];

fn config(base_url: &str, model: &str) -> GeminiConfig {
    GeminiConfig {
        base_url: base_url.to_string(),
        model: model.into(),
        api_key: ApiKey::new(KEY),
        timeout: Duration::from_secs(5),
        // The golden settings: thinking off (the default), 8192 output tokens (the default), the
        // temperature left to the family, and a media resolution, so every field shows.
        media_resolution: MediaResolution::Medium,
        ..GeminiConfig::default()
    }
}

fn golden_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(file)
}

/// Every model exists (an unknown one too); `models.get` tells what the fake knows.
async fn fake() -> FakeGemini {
    FakeGemini::start(FakeOptions { models: Vec::new(), ..FakeOptions::default() }).await.unwrap()
}

async fn extract_err(client: &GeminiClient) -> GeminiError {
    match client.extract_product("image/jpeg", IMAGE).await {
        Ok(x) => panic!("expected an error, got {:?}", x.product),
        Err(e) => e,
    }
}

#[tokio::test]
async fn golden_request_bodies_per_model_family() {
    let fake = fake().await;
    for (model, file) in GOLDEN {
        let client = GeminiClient::new(&config(&fake.base_url(), model)).unwrap();
        client.extract_product("image/jpeg", IMAGE).await.unwrap_or_else(|e| panic!("{model}: {e}"));
        let body = client.request_body_for(client.model_family().await, "image/jpeg", &[IMAGE]);
        let text = serde_json::to_string_pretty(&body).unwrap() + "\n";
        let path = golden_path(file);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let golden = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
        assert_eq!(text, golden, "{model}: the body differs from {} (bytes, key order included)", path.display());
        // What went over the wire is that body.
        let sent = fake.requests().into_iter().rev().find(|r| r.method == "POST").unwrap();
        assert_eq!(sent.body, serde_json::from_str::<serde_json::Value>(&golden).unwrap(), "{model}");
        validate::check_generate_request(golden.as_bytes()).unwrap();
    }
    let body = |file: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(golden_path(file)).unwrap()).unwrap()
    };
    let flash25 = &body(GOLDEN[0].1)["generationConfig"];
    assert_eq!(flash25["thinkingConfig"], serde_json::json!({"thinkingBudget": 0}));
    assert_eq!(flash25["temperature"], serde_json::json!(0.2));
    assert_eq!(flash25["maxOutputTokens"], 8192);
    assert_eq!(flash25["mediaResolution"], "MEDIA_RESOLUTION_MEDIUM");
    let flash3 = &body(GOLDEN[1].1)["generationConfig"];
    assert_eq!(flash3["thinkingConfig"], serde_json::json!({"thinkingLevel": "minimal"}));
    assert!(flash3.get("temperature").is_none(), "Gemini 3 keeps its default temperature: {flash3}");
    let unknown = &body(GOLDEN[2].1)["generationConfig"];
    assert!(unknown.get("thinkingConfig").is_none(), "an unknown family gets no thinking field: {unknown}");
    assert_eq!(unknown["temperature"], serde_json::json!(0.2));
}

#[tokio::test]
async fn schema_keys_keep_the_rust_field_order_on_the_wire() {
    let client = GeminiClient::new(&config("http://127.0.0.1:9", "gemini-2.5-flash")).unwrap();
    let bytes = serde_json::to_vec(&client.request_body("image/jpeg", IMAGE)).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let schema_at = text.find("\"responseJsonSchema\"").unwrap();
    let properties_at = schema_at + text[schema_at..].find("\"properties\":{").unwrap() + "\"properties\":{".len();
    assert!(
        text[properties_at..].starts_with("\"name\":"),
        "name is the first property: {}",
        &text[properties_at..][..80]
    );
    // Every field of the product in declaration order (PRODUCT_FIELDS is that order).
    let mut at = properties_at;
    for field in pe_core::product::PRODUCT_FIELDS {
        let key = format!("\"{}\":", field.key.as_str());
        let found = text[at..].find(&key).unwrap_or_else(|| panic!("{} after byte {at}", field.key.as_str()));
        at += found + key.len();
    }
}

#[tokio::test]
async fn an_alias_is_resolved_once_per_client_through_models_get() {
    let fake = fake().await;
    let client = GeminiClient::new(&config(&fake.base_url(), "gemini-flash-latest")).unwrap();
    // Before the lookup, the alias names no family: no thinking field.
    assert!(client.request_body("image/jpeg", IMAGE).generation_config.thinking_config.is_none());
    let calls: Vec<_> = (0..4).map(|_| client.extract_product("image/jpeg", IMAGE)).collect();
    for result in futures_util::future::join_all(calls).await {
        result.unwrap();
    }
    client.extract_product("image/jpeg", IMAGE).await.unwrap();
    let requests = fake.requests();
    let lookups: Vec<_> = requests.iter().filter(|r| r.method == "GET").collect();
    assert_eq!(lookups.len(), 1, "one models.get for five calls: {requests:?}");
    assert_eq!(lookups[0].path, "/v1beta/models/gemini-flash-latest");
    assert!(lookups[0].had_key_header && !lookups[0].had_key_query);
    assert_eq!(client.model_family().await.map(|f| f.prefix), models::family_of(FLASH_LATEST_TARGET).map(|f| f.prefix));
    for sent in requests.iter().filter(|r| r.method == "POST") {
        assert_eq!(sent.path, "/v1beta/models/gemini-flash-latest:generateContent");
        let config = &sent.body["generationConfig"];
        assert_eq!(config["thinkingConfig"], serde_json::json!({"thinkingLevel": "minimal"}), "{config}");
        assert!(config.get("temperature").is_none());
    }
}

#[tokio::test]
async fn a_failing_lookup_does_not_block_extraction() {
    let fake = fake().await;
    fake.fail_models_get(true);
    let client = GeminiClient::new(&config(&fake.base_url(), "gemini-flash-latest")).unwrap();
    client.extract_product("image/jpeg", IMAGE).await.unwrap();
    client.extract_product("image/jpeg", IMAGE).await.unwrap();
    let requests = fake.requests();
    assert_eq!(requests.iter().filter(|r| r.method == "GET").count(), 1, "looked up once, not again within the minute");
    for sent in requests.iter().filter(|r| r.method == "POST") {
        assert!(sent.body["generationConfig"].get("thinkingConfig").is_none(), "{}", sent.body["generationConfig"]);
    }
    assert_eq!(client.model_family().await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_waited_on_a_failing_lookup_do_not_each_look_again() {
    let fake = fake().await;
    fake.fail_models_get(true);
    fake.set_latency(std::time::Duration::from_millis(200));
    let client = GeminiClient::new(&config(&fake.base_url(), "gemini-flash-latest")).unwrap();
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.extract_product("image/jpeg", IMAGE).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    let lookups = fake.requests().iter().filter(|r| r.method == "GET").count();
    assert_eq!(lookups, 1, "the five calls waited on one lookup, and none asked again when it failed");
}

#[tokio::test]
async fn each_thinking_setting_is_accepted_by_each_family() {
    let fake = fake().await;
    let settings =
        [Thinking::Off, Thinking::Minimal, Thinking::Low, Thinking::Medium, Thinking::High, Thinking::ModelDefault];
    for model in [
        "gemini-2.5-flash",
        "gemini-2.5-flash-lite",
        "gemini-2.5-pro",
        "gemini-3-flash-preview",
        "gemini-3-pro-preview",
    ] {
        for thinking in settings {
            let client = GeminiClient::new(&GeminiConfig { thinking, ..config(&fake.base_url(), model) }).unwrap();
            client.extract_product("image/jpeg", IMAGE).await.unwrap_or_else(|e| panic!("{model} {thinking:?}: {e}"));
        }
    }
    // An explicit temperature is sent to Gemini 3 too.
    let cfg = GeminiConfig { temperature: Some(0.7), ..config(&fake.base_url(), "gemini-3-flash-preview") };
    let body = GeminiClient::new(&cfg).unwrap().request_body("image/jpeg", IMAGE);
    assert_eq!(body.generation_config.temperature, Some(0.7));
}

/// A JPEG header (SOI, SOF0) of this size: all the fake reads of a photo to count its tokens.
fn jpeg_header(width: u16, height: u16) -> Vec<u8> {
    let ([w1, w0], [h1, h0]) = (width.to_be_bytes(), height.to_be_bytes());
    vec![0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, h1, h0, w1, w0, 3, 0, 0, 0, 0xFF, 0xD9]
}

/// `[gemini] media_resolution` reaches the fake as `generationConfig.mediaResolution`, and the
/// `promptTokenCount` the client reads back changes as Google documents it per model family
/// (gemini-api.md, "Media resolution"). With `--nocapture` it prints the table in BENCHMARKS.md.
#[tokio::test]
async fn each_media_resolution_bills_the_documented_image_tokens() {
    let fake = fake().await;
    let (prepared, raw) = (jpeg_header(1536, 1152), jpeg_header(4000, 3000));
    let settings =
        [MediaResolution::ModelDefault, MediaResolution::Low, MediaResolution::Medium, MediaResolution::High];
    // Image tokens per setting, in that order: 2.5 by the tile rule when unset (2×2 and 6×4
    // tiles of 258), else the enum's counts; Gemini 3 by level whatever the size (high unset).
    let cases: &[(&str, &[u8], [u32; 4])] = &[
        ("gemini-2.5-flash-lite", &prepared, [1032, 64, 256, 256]),
        ("gemini-2.5-flash", &prepared, [1032, 64, 256, 256]),
        ("gemini-2.5-flash", &raw, [6192, 64, 256, 256]),
        ("gemini-2.5-pro", &prepared, [1032, 64, 256, 256]),
        ("gemini-3-flash-preview", &prepared, [1120, 280, 560, 1120]),
        ("gemini-3-flash-preview", &raw, [1120, 280, 560, 1120]),
        ("gemini-flash-latest", &prepared, [1120, 280, 560, 1120]),
    ];
    // The text (system instruction, prompt, schema) costs the same in every request.
    let mut text_tokens = None;
    println!("| model | photo | model_default | low | medium | high |");
    for (model, image, expected) in cases {
        let mut row = Vec::new();
        for (setting, image_tokens) in settings.iter().zip(expected) {
            let cfg = GeminiConfig { media_resolution: *setting, ..config(&fake.base_url(), model) };
            let client = GeminiClient::new(&cfg).unwrap();
            let answer = client.extract_product("image/jpeg", image).await.unwrap_or_else(|e| panic!("{model}: {e}"));
            let sent = fake.requests().into_iter().rev().find(|r| r.method == "POST").unwrap();
            assert_eq!(
                sent.body["generationConfig"].get("mediaResolution").and_then(|v| v.as_str()),
                models::media_resolution_wire(*setting),
                "{model} {setting:?}"
            );
            let prompt = answer.usage.prompt_tokens;
            let text = *text_tokens.get_or_insert(prompt - image_tokens);
            assert_eq!(prompt, text + image_tokens, "{model} {setting:?}: {prompt} in = {text} text + image tokens");
            row.push(prompt - text);
        }
        let photo =
            if image.len() == prepared.len() && *image == prepared.as_slice() { "1536×1152" } else { "4000×3000" };
        println!("| {model} | {photo} | {} |", row.iter().map(u32::to_string).collect::<Vec<_>>().join(" | "));
    }
}

#[tokio::test]
async fn the_fake_refuses_what_the_api_refuses() {
    let fake = fake().await;
    let post = |model: &str, thinking: serde_json::Value| {
        let client = GeminiClient::new(&config(&fake.base_url(), model)).unwrap();
        let mut body = serde_json::to_value(client.request_body("image/jpeg", IMAGE)).unwrap();
        body["generationConfig"]["thinkingConfig"] = thinking;
        let url = format!("{}/v1beta/models/{model}:generateContent", fake.base_url());
        async move {
            let answer =
                reqwest::Client::new().post(url).header("x-goog-api-key", KEY).json(&body).send().await.unwrap();
            (answer.status().as_u16(), answer.text().await.unwrap())
        }
    };
    let both = serde_json::json!({"thinkingBudget": 0, "thinkingLevel": "minimal"});
    let (status, text) = post("gemini-2.5-flash", both).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("both set"), "{text}");
    let (status, text) = post("gemini-2.5-flash", serde_json::json!({"thinkingLevel": "minimal"})).await;
    assert_eq!(status, 400, "{text}");
    let (status, text) = post("gemini-2.5-pro", serde_json::json!({"thinkingBudget": 0})).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("only works in thinking mode"), "{text}");
}

#[tokio::test]
async fn truncated_and_blocked_answers_carry_their_billed_usage() {
    let fake = fake().await;
    let cfg = GeminiConfig { max_output_tokens: 1000, ..config(&fake.base_url(), "gemini-2.5-flash") };
    let client = GeminiClient::new(&cfg).unwrap();

    fake.push(Behavior::ThinkingExhausted);
    let e = extract_err(&client).await;
    assert_eq!(e.code(), ErrorCode::OutputTruncated);
    assert_eq!(
        e.to_string(),
        "Gemini's answer was cut off at 1000 output tokens; raise gemini.max_output_tokens or lower gemini.thinking."
    );
    let usage = *e.billed_usage().expect("a truncated answer is billed");
    assert_eq!((usage.output_tokens, usage.thoughts_tokens), (1000, 1000), "{usage:?}");
    assert!(usage.prompt_tokens > 516 && usage.total_tokens == usage.prompt_tokens + 1000, "{usage:?}");
    assert_eq!(e.verdict(), pe_core::resilience::Verdict::Ignored);

    for behavior in
        [Behavior::NoCandidatesBlocked("SAFETY".into()), Behavior::FinishReason("PROHIBITED_CONTENT".into())]
    {
        fake.push(behavior.clone());
        let e = extract_err(&client).await;
        assert_eq!(e.code(), ErrorCode::Blocked, "{behavior:?}");
        let usage: Usage = *e.billed_usage().unwrap_or_else(|| panic!("{behavior:?} is billed"));
        assert!(usage.prompt_tokens > 516 && usage.total_tokens >= usage.prompt_tokens, "{behavior:?}: {usage:?}");
    }
    // An error status is not a billed answer.
    fake.push(Behavior::Unavailable);
    assert_eq!(extract_err(&client).await.billed_usage(), None);
}

fn stack(max_attempts: u32) -> ResilienceStack {
    let mut cfg = ResilienceConfig::default();
    cfg.retry.max_attempts = max_attempts;
    cfg.retry.wait_duration = Duration::from_millis(10);
    ResilienceStack::new("gemini", cfg).unwrap()
}

async fn through_stack(stack: &ResilienceStack, client: &GeminiClient) -> Result<(), GeminiError> {
    match stack.call(SlotPolicy::Configured, GeminiError::verdict, || client.extract_product("image/jpeg", IMAGE)).await
    {
        Ok(_) => Ok(()),
        Err(StackError::Call(e)) => Err(e),
        Err(other) => panic!("the stack rejected the call: {other:?}"),
    }
}

#[tokio::test]
async fn per_day_quota_and_failed_precondition_are_not_retried_408_is() {
    let fake = fake().await;
    let client = GeminiClient::new(&config(&fake.base_url(), "gemini-2.5-flash")).unwrap();
    let stack = stack(3);

    fake.push(Behavior::DailyQuota);
    let e = through_stack(&stack, &client).await.unwrap_err();
    assert_eq!(fake.generate_count(), 1, "a per-day quota is not retried, despite its RetryInfo");
    assert_eq!(e.code(), ErrorCode::GeminiQuota);
    let resets = e.quota_resets_at().expect("per day");
    let now = chrono::Utc::now().timestamp_millis();
    assert!(resets > now && resets <= now + 24 * 3_600_000, "{resets} vs {now}");
    assert_eq!(pe_core::gemini::next_pacific_midnight(now), resets, "the next midnight Pacific time");

    fake.push(Behavior::FailedPrecondition);
    let e = through_stack(&stack, &client).await.unwrap_err();
    assert_eq!(fake.generate_count(), 2, "FAILED_PRECONDITION is not retried");
    assert_eq!(e.code(), ErrorCode::GeminiNotAvailable);
    let failed = stack.breaker().snapshot().failed_calls;
    assert_eq!(failed, 2, "both count as service failures for the breaker");

    fake.push(Behavior::RequestTimeout);
    through_stack(&stack, &client).await.expect("408 is retried, and the second try answers");
    assert_eq!(fake.generate_count(), 4);
}
