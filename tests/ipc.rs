//! The Tauri commands through Tauri's mock runtime: the same `setup` the app uses, the real
//! capability-free IPC path, a real catalog file and the project's fake Gemini on 127.0.0.1.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_gemini::{FakeGemini, FakeOptions};
use product_extractor_lib::state::{AppState, Env, Paths};
use serde_json::{json, Value};
use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{get_ipc_response, mock_builder, mock_context, noop_assets, MockRuntime, INVOKE_KEY};
use tauri::webview::InvokeRequest;
use tauri::{App, Manager, WebviewWindow};

fn request(cmd: &str, body: Value) -> InvokeRequest {
    InvokeRequest {
        cmd: cmd.into(),
        callback: CallbackFn(0),
        error: CallbackFn(1),
        url: "tauri://localhost".parse().unwrap(),
        body: InvokeBody::Json(body),
        headers: Default::default(),
        invoke_key: INVOKE_KEY.to_string(),
    }
}

fn invoke(webview: &WebviewWindow<MockRuntime>, cmd: &str, body: Value) -> Result<Value, Value> {
    get_ipc_response(webview, request(cmd, body)).map(|b| b.deserialize::<Value>().unwrap())
}

/// The given variables, and a keyring entry of the test's own (never the user's real one).
fn env_of(pairs: &[(&str, &str)]) -> Env {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let service = format!(
        "product-extractor-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let mut pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    if !pairs.iter().any(|(k, _)| k == "PRODUCT_EXTRACTOR_KEYRING_SERVICE") {
        pairs.push(("PRODUCT_EXTRACTOR_KEYRING_SERVICE".into(), service));
    }
    Arc::new(move |key| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()))
}

fn app(data_dir: &Path, env: Env) -> (App<MockRuntime>, WebviewWindow<MockRuntime>) {
    let state = AppState::open(Paths::new(data_dir, None), env).unwrap();
    let app = product_extractor_lib::setup(mock_builder(), state).build(mock_context(noop_assets())).unwrap();
    let webview = tauri::WebviewWindowBuilder::new(&app, "main", Default::default()).build().unwrap();
    (app, webview)
}

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/product.jpg")
}

#[test]
fn status_without_a_key_still_works_and_never_shows_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    let status = invoke(&webview, "app_status", json!({})).unwrap();
    assert_eq!(
        (&status["api_key"]["configured"], &status["api_key"]["hint"], &status["api_key"]["source"]),
        (&json!(false), &json!(null), &json!("none"))
    );
    assert_eq!(status["demo"], json!(false));
    assert_eq!(status["model"], json!("gemini-flash-latest"));

    let (_app, webview) = app(dir.path(), env_of(&[("GEMINI_API_KEY", "AIzaSyVERYSECRETKEYabcd")]));
    let status = invoke(&webview, "app_status", json!({})).unwrap();
    assert_eq!(
        (&status["api_key"]["configured"], &status["api_key"]["hint"], &status["api_key"]["source"]),
        (&json!(true), &json!("••••abcd"), &json!("environment"))
    );
    let settings = invoke(&webview, "get_settings", json!({})).unwrap();
    assert!(!settings.to_string().contains("VERYSECRET"), "{settings}");
}

#[test]
fn settings_round_trip_and_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    let mut settings = invoke(&webview, "get_settings", json!({})).unwrap();
    settings["gemini"]["model"] = json!("gemini-2.5-flash");
    settings["gemini"]["read_timeout"] = json!("20s");
    let input = json!({"gemini": settings["gemini"], "image": settings["image"], "resilience": settings["resilience"], "prices": settings["pricing"]["rows"], "api_key": {"action": "set", "key": "my-secret-key-7890"}});
    let saved = invoke(&webview, "save_settings", json!({ "input": input })).unwrap();
    assert_eq!(saved["gemini"]["model"], "gemini-2.5-flash");
    assert_eq!(saved["gemini"]["read_timeout"], "20s");
    assert_eq!(saved["api_key"]["hint"], "••••7890");
    assert_eq!(saved["api_key"]["source"], "keyring", "{saved}");
    let on_disk = std::fs::read_to_string(dir.path().join("config.toml")).unwrap();
    assert!(on_disk.contains("gemini-2.5-flash") && on_disk.contains("read_timeout = \"20s\""), "{on_disk}");
    assert!(!on_disk.contains("my-secret-key"), "the key went into the keyring, not the file: {on_disk}");

    let mut bad = input.clone();
    bad["gemini"]["timeout"] = json!("soon");
    bad["api_key"] = json!({"action": "keep"});
    let err = invoke(&webview, "save_settings", json!({ "input": bad })).unwrap_err();
    assert_eq!(err["code"], "config");
    assert!(err["message"].as_str().unwrap().contains("gemini.timeout"), "{err}");

    let mut bad = input;
    bad["image"]["jpeg_quality"] = json!(0);
    bad["api_key"] = json!({"action": "clear"});
    let err = invoke(&webview, "save_settings", json!({ "input": bad })).unwrap_err();
    assert!(err["message"].as_str().unwrap().contains("image.jpeg_quality"), "{err}");
    // The failed save changed nothing.
    let status = invoke(&webview, "app_status", json!({})).unwrap();
    assert_eq!(status["api_key"]["configured"], true);
}

#[test]
fn settings_edit_the_gemini_request_and_the_price_rows_and_keep_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    let settings = invoke(&webview, "get_settings", json!({})).unwrap();
    let g = &settings["gemini"];
    assert_eq!(
        (&g["thinking"], &g["max_output_tokens"], &g["temperature"], &g["media_resolution"]),
        (&json!("off"), &json!(8192), &Value::Null, &json!("model_default"))
    );
    assert_eq!(settings["pricing"]["rows"], json!([]));
    // The default alias has no price row: "price unknown" until an answer names a priced model.
    assert_eq!(settings["pricing"]["model_price"], Value::Null);
    // The budget is the usage panel's; a Save in Settings keeps it.
    invoke(&webview, "set_daily_budget", json!({"usd": 3.0})).unwrap();

    let mut input = json!({"gemini": settings["gemini"], "image": settings["image"], "resilience": settings["resilience"],
        "prices": [{"model": " my-model ", "price": {"input_per_million": 1.0, "output_per_million": 2.0, "batch_discount": 0.4}}],
        "api_key": {"action": "keep"}});
    input["gemini"]["model"] = json!("gemini-2.5-flash-lite");
    input["gemini"]["thinking"] = json!("low");
    input["gemini"]["max_output_tokens"] = json!(4096);
    input["gemini"]["temperature"] = json!(0.5);
    input["gemini"]["media_resolution"] = json!("low");
    let saved = invoke(&webview, "save_settings", json!({ "input": input.clone() })).unwrap();
    let g = &saved["gemini"];
    assert_eq!(
        (&g["thinking"], &g["max_output_tokens"], &g["temperature"], &g["media_resolution"]),
        (&json!("low"), &json!(4096), &json!(0.5), &json!("low"))
    );
    assert_eq!(saved["pricing"]["rows"][0]["model"], "my-model", "the id is trimmed");
    assert_eq!(saved["pricing"]["rows"][0]["price"]["batch_discount"], 0.4);
    let lite = &saved["pricing"]["model_price"];
    assert_eq!(
        (&lite["model"], &lite["price"]["input_per_million"], &lite["user"]),
        (&json!("gemini-2.5-flash-lite"), &json!(0.1), &json!(false))
    );
    let file = std::fs::read_to_string(dir.path().join("config.toml")).unwrap();
    for line in [
        "thinking = \"low\"",
        "max_output_tokens = 4096",
        "temperature = 0.5",
        "media_resolution = \"low\"",
        "[pricing.my-model]",
        "batch_discount = 0.4",
        "daily_budget_usd = 3.0",
    ] {
        assert!(file.contains(line), "{line} in {file}");
    }
    let report = invoke(&webview, "usage_report", json!({})).unwrap();
    assert_eq!(report["daily_budget_usd"], 3.0);
    let mine = report["prices"].as_array().unwrap().iter().find(|r| r["model"] == "my-model").unwrap();
    assert_eq!(mine["user"], true, "the pipeline prices with the saved rows");

    // The user's row is the price of the model it names; a model with none is "price unknown".
    input["gemini"]["model"] = json!("my-model");
    let saved = invoke(&webview, "save_settings", json!({ "input": input.clone() })).unwrap();
    assert_eq!(
        (&saved["pricing"]["model_price"]["model"], &saved["pricing"]["model_price"]["user"]),
        (&json!("my-model"), &json!(true))
    );
    input["gemini"]["model"] = json!("gemini-9-ultra");
    let saved = invoke(&webview, "save_settings", json!({ "input": input.clone() })).unwrap();
    assert_eq!(saved["pricing"]["model_price"], Value::Null);

    // Each bad value is refused with the key it names, and nothing is saved.
    let cases = [
        ("/gemini/temperature", json!(2.5), "gemini.temperature"),
        ("/gemini/max_output_tokens", json!(0), "gemini.max_output_tokens"),
        ("/prices/0/price/input_per_million", json!(-1), "pricing.\"my-model\".input_per_million"),
        ("/prices/0/price/batch_discount", json!(1.5), "pricing.\"my-model\".batch_discount"),
        ("/prices/0/model", json!("  "), "pricing"),
    ];
    for (pointer, value, key) in cases {
        let mut bad = input.clone();
        *bad.pointer_mut(pointer).unwrap() = value;
        let err = invoke(&webview, "save_settings", json!({ "input": bad })).unwrap_err();
        assert_eq!(err["code"], "config", "{pointer}: {err}");
        assert!(err["message"].as_str().unwrap().contains(key), "{pointer}: {err}");
    }
    let mut twice = input.clone();
    let row = twice["prices"][0].clone();
    twice["prices"].as_array_mut().unwrap().push(row);
    let err = invoke(&webview, "save_settings", json!({ "input": twice })).unwrap_err();
    assert!(err["message"].as_str().unwrap().contains("two price rows"), "{err}");
    let mut unknown = input;
    unknown["gemini"]["thinking"] = json!("lots");
    assert!(invoke(&webview, "save_settings", json!({ "input": unknown })).is_err());
    let after = invoke(&webview, "get_settings", json!({})).unwrap();
    assert_eq!(after["gemini"]["model"], "gemini-9-ultra");
    assert_eq!(after["gemini"]["temperature"], 0.5);
}

#[test]
fn validate_product_flags_without_dropping() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    let flags = invoke(
        &webview,
        "validate_product",
        json!({"product": {"name": "Oats", "gtin": "4006381333932", "price": {"amount": 2.5, "currency": "EUR"}}}),
    )
    .unwrap();
    assert_eq!(flags, json!([{"field": "gtin", "kind": "invalid", "message": "the check digit should be 1, not 2"}]));
}

/// Drops `paths` as the Extract view does and waits until the first card's item is ready; returns
/// its item id.
fn extract_ready(webview: &WebviewWindow<MockRuntime>, paths: Value) -> Value {
    let rows = invoke(webview, "extract_photos", json!({ "paths": paths })).unwrap();
    let id = rows[0]["id"].clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let item = invoke(webview, "import_item", json!({ "id": id })).unwrap();
        match item["row"]["state"].as_str() {
            Some("ready") => return id,
            Some("queued" | "preparing" | "extracting") => {}
            other => panic!("the item ended {other:?}: {item}"),
        }
        assert!(Instant::now() < deadline, "the dropped photo was not extracted");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn demo_mode_extract_review_save_list() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    let status = invoke(&webview, "set_demo_mode", json!({"enabled": true})).unwrap();
    assert_eq!(status["demo"], true);
    assert_eq!(status["api_key"]["source"], "demo");
    assert!(status["base_url"].as_str().unwrap().starts_with("http://127.0.0.1:"), "{status}");

    let cards = invoke(&webview, "extract_photos", json!({"paths": [fixture()]})).unwrap();
    assert_eq!(cards.as_array().unwrap().len(), 1, "{cards}");
    assert_eq!(cards[0]["file_name"], "product.jpg");
    assert_eq!(cards[0]["origin"], "interactive");

    // Nothing is in the catalog until Save.
    let item = extract_ready(&webview, json!([fixture()]));
    assert_eq!(item, cards[0]["id"], "the same photo dropped again is the same card");
    // The configured alias is priced as the model that answered for it, in Settings as in the
    // cost meter (not "price unknown").
    let settings = invoke(&webview, "get_settings", json!({})).unwrap();
    assert_eq!(settings["gemini"]["model"], "gemini-flash-latest", "{settings}");
    assert_eq!(settings["pricing"]["model_price"]["model"], "gemini-3-flash-preview", "{settings}");
    let empty = invoke(&webview, "query_products", json!({"query": {}})).unwrap();
    assert_eq!(empty, json!({"total": 0, "total_capped": false, "rows": []}));

    let invalid =
        invoke(&webview, "import_save_item", json!({"id": item, "product": {"name": "X", "gtin": "123"}})).unwrap_err();
    assert_eq!(invalid["code"], "validation");
    assert!(invalid["message"].as_str().unwrap().contains("gtin"), "{invalid}");
    assert_eq!(invalid["data"]["kind"], "validation", "{invalid}");
    assert_eq!(invalid["data"]["flags"][0]["field"], "gtin", "{invalid}");

    let saved = invoke(
        &webview,
        "import_save_item",
        json!({"id": item, "product": {"name": "Reviewed Name", "brand": "Acme"}}),
    )
    .unwrap();
    assert_eq!(saved["saved"]["name"], "Reviewed Name");
    assert_ne!(saved["proposed"], Value::Null, "the proposal is kept beside what was saved");

    let list = invoke(&webview, "query_products", json!({"query": {"text": "review", "limit": 50}})).unwrap();
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(list["rows"][0]["name"], "Reviewed Name");
    // The row names its photo by hash, and the thumbnail protocol serves that photo's thumbnail.
    let sha256 = list["rows"][0]["photo_sha256"].as_str().unwrap().to_string();
    assert!(list["rows"][0].get("thumbnail").is_none(), "a page carries no image: {list}");
    let thumb = thumbnail_request(&webview, "GET", &format!("/{sha256}"));
    assert_eq!(thumb.status(), 200);
    assert_eq!(thumb.headers()["content-type"], "image/jpeg");
    assert_eq!(thumb.headers()["x-content-type-options"], "nosniff");
    assert!(thumb.headers()["cache-control"].to_str().unwrap().contains("immutable"));
    let picture = image::load_from_memory_with_format(thumb.body(), image::ImageFormat::Jpeg).unwrap();
    assert!(picture.width() > 0 && picture.width() <= 512, "a thumbnail: {}", picture.width());
    for (method, path, code) in [
        ("POST", format!("/{sha256}"), 405),
        ("GET", format!("/{}", sha256.to_uppercase()), 404),
        ("GET", format!("/{}", "0".repeat(64)), 404),
        ("GET", "/../catalog.sqlite3".into(), 404),
        ("GET", "/".into(), 404),
    ] {
        let answer = thumbnail_request(&webview, method, &path);
        assert_eq!(answer.status(), code, "{method} {path}");
        assert!(answer.body().is_empty() && answer.headers()["cache-control"] == "no-store", "{method} {path}");
    }
    let one = invoke(&webview, "get_product", json!({"id": saved["id"]})).unwrap();
    assert_eq!(one["saved"]["brand"], "Acme");
    let missing = invoke(&webview, "get_product", json!({"id": 999_999})).unwrap_err();
    assert_eq!(missing["code"], "not_found");

    let preview = invoke(&webview, "preview_photo", json!({"file": fixture()})).unwrap();
    assert!(preview.as_str().unwrap().starts_with("data:image/jpeg;base64,"));

    let status = invoke(&webview, "set_demo_mode", json!({"enabled": false})).unwrap();
    assert_eq!(status["demo"], false);
    assert_eq!(status["api_key"]["configured"], false);
}

/// What the window's `thumb:` protocol answers to `method path` (on Linux the webview asks for
/// `thumb://localhost/<sha256>`).
fn thumbnail_request(
    webview: &WebviewWindow<MockRuntime>,
    method: &str,
    path: &str,
) -> tauri::http::Response<std::borrow::Cow<'static, [u8]>> {
    let request = tauri::http::Request::builder()
        .method(method)
        .uri(format!("{}://localhost{path}", product_extractor_lib::thumbnails::THUMBNAIL_SCHEME))
        .body(Vec::new())
        .unwrap();
    let state = webview.state::<AppState>();
    tauri::async_runtime::block_on(product_extractor_lib::thumbnails::respond(&state, &request))
}

/// The proposal of the first attempt for `photo_id`, once there is one.
fn wait_for_proposal(app: &App<MockRuntime>, photo_id: i64) -> pe_core::product::Product {
    let state = app.state::<AppState>();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let attempts = tauri::async_runtime::block_on(state.catalog().attempts(photo_id)).unwrap_or_default();
        if let Some(a) = attempts.first() {
            return a.proposal.clone().unwrap_or_else(|| panic!("the attempt failed: {a:?}"));
        }
        assert!(Instant::now() < deadline, "no extraction attempt was recorded for photo {photo_id}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The demo tells the truth: its own sample photo extracts to what the photo shows, and any
/// other photo to an answer that says, in the name and description the review shows, that the
/// demo invented it.
#[test]
fn demo_mode_reads_its_sample_photo_and_says_when_it_invents() {
    let dir = tempfile::tempdir().unwrap();
    let (app, webview) = app(dir.path(), env_of(&[]));
    invoke(&webview, "set_demo_mode", json!({"enabled": true})).unwrap();

    invoke(&webview, "extract_photos", json!({"paths": [fixture()], "onEvent": "__CHANNEL__:7"})).unwrap();
    let sample = wait_for_proposal(&app, 1);
    assert_eq!((sample.name.as_str(), sample.brand.as_deref()), ("Crunchy Oat Bars", Some("ACME")));
    assert_eq!(sample.gtin.as_deref(), Some("4006381333931"));
    let net = sample.net_content.as_ref().map(|n| (n.value, n.unit.as_str()));
    assert_eq!(net, Some((210.0, "g")));
    assert!(sample.validate().is_empty(), "{:?}", sample.validate());

    let mine = dir.path().join("my-photo.jpg");
    std::fs::write(&mine, fake_gemini::photos::sample_jpeg(4242, 640, 480, 85)).unwrap();
    invoke(&webview, "extract_photos", json!({"paths": [mine], "onEvent": "__CHANNEL__:8"})).unwrap();
    let invented = wait_for_proposal(&app, 2);
    assert!(invented.name.ends_with("(invented by the demo)"), "{invented:?}");
    let description = invented.description.unwrap_or_default();
    assert!(description.starts_with("Invented by the demo: this photo is not one of the demo's sample photos"));
}

#[test]
fn test_connection_against_the_fake() {
    let dir = tempfile::tempdir().unwrap();
    let fake = tauri::async_runtime::block_on(FakeGemini::start(FakeOptions::default())).unwrap();
    let base_url = fake.base_url();
    let (_app, webview) = app(dir.path(), env_of(&[("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &base_url)]));
    let check = invoke(&webview, "test_connection", json!({})).unwrap();
    assert!(check["models"].as_array().unwrap().iter().any(|m| m.as_str().unwrap().contains("gemini")), "{check}");

    let (_app, webview) = app(dir.path(), env_of(&[("GEMINI_API_KEY", "wrong-key"), ("GEMINI_BASE_URL", &base_url)]));
    let err = invoke(&webview, "test_connection", json!({})).unwrap_err();
    assert_eq!(err["code"], "gemini_auth");
    assert!(!err.to_string().contains("wrong-key"), "{err}");
}

#[test]
fn breaker_snapshot_controls_and_a_resilience_change_resets_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    let snap = invoke(&webview, "resilience_snapshot", json!({})).unwrap();
    assert_eq!(snap["breaker"]["name"], "gemini");
    assert_eq!(snap["breaker"]["state"], "closed");
    assert_eq!(snap["bulkhead"]["max_concurrent_calls"], 10);
    assert_eq!(snap["retry"]["max_attempts"], 3);

    let snap = invoke(&webview, "breaker_control", json!({"action": "force_open"})).unwrap();
    assert_eq!(snap["breaker"]["state"], "forced_open");
    let err = invoke(&webview, "breaker_control", json!({"action": "explode"})).unwrap_err();
    assert!(err.to_string().contains("explode"), "{err}");

    // Saving Settings without touching the resilience sections keeps the breaker as it is...
    let settings = invoke(&webview, "get_settings", json!({})).unwrap();
    assert_eq!(settings["resilience"]["circuit_breaker"]["wait_duration_in_open_state"], "15s");
    let mut input = json!({"gemini": settings["gemini"], "image": settings["image"], "resilience": settings["resilience"], "prices": settings["pricing"]["rows"], "api_key": {"action": "keep"}});
    invoke(&webview, "save_settings", json!({ "input": input.clone() })).unwrap();
    assert_eq!(invoke(&webview, "resilience_snapshot", json!({})).unwrap()["breaker"]["state"], "forced_open");

    // ...changing them builds a fresh one, as Resilience4j does when its config changes.
    input["resilience"]["bulkhead"]["max_concurrent_calls"] = json!(4);
    input["resilience"]["circuit_breaker"]["wait_duration_in_open_state"] = json!("30s");
    let saved = invoke(&webview, "save_settings", json!({ "input": input.clone() })).unwrap();
    assert_eq!(saved["resilience"]["circuit_breaker"]["wait_duration_in_open_state"], "30s");
    let snap = invoke(&webview, "resilience_snapshot", json!({})).unwrap();
    assert_eq!(snap["breaker"]["state"], "closed");
    assert_eq!(snap["bulkhead"]["max_concurrent_calls"], 4);
    let on_disk = std::fs::read_to_string(dir.path().join("config.toml")).unwrap();
    assert!(
        on_disk.contains("[circuit_breaker]") && on_disk.contains("wait_duration_in_open_state = \"30s\""),
        "{on_disk}"
    );

    input["resilience"]["circuit_breaker"]["failure_rate_threshold"] = json!(150.0);
    let err = invoke(&webview, "save_settings", json!({ "input": input.clone() })).unwrap_err();
    assert!(err["message"].as_str().unwrap().contains("circuit_breaker.failure_rate_threshold"), "{err}");

    input["resilience"]["circuit_breaker"]["failure_rate_threshold"] = json!(50.0);
    input["resilience"]["retry"]["wait_duration"] = json!("15 parsecs");
    let err = invoke(&webview, "save_settings", json!({ "input": input })).unwrap_err();
    assert_eq!(err["code"], "config");
    assert!(err["message"].as_str().unwrap().contains("retry.wait_duration"), "{err}");
}

/// An import a previous session left unfinished (two photos queued, one of them mid-call when the
/// app died) is resumed when the app starts, without anyone asking.
#[test]
fn the_app_resumes_an_unfinished_import_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let fake = tauri::async_runtime::block_on(FakeGemini::start(FakeOptions::default())).unwrap();
    let base_url = fake.base_url();
    let env = env_of(&[("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &base_url)]);
    let photos = dir.path().join("photos");
    std::fs::create_dir_all(&photos).unwrap();
    for i in 0..2 {
        let jpeg = fake_gemini::photos::sample_jpeg(900 + i, 320, 240, 85);
        std::fs::write(photos.join(format!("p{i}.jpg")), jpeg).unwrap();
    }
    {
        let state = AppState::open(Paths::new(dir.path(), None), env.clone()).unwrap();
        tauri::async_runtime::block_on(async {
            let options = pe_core::import::ImportOptions { autostart: false, ..Default::default() };
            let queue = pe_core::import::ImportQueue::open(state.pipeline(), options).await.unwrap();
            queue.enqueue(vec![photos.clone()], Default::default()).await.unwrap();
            state
                .catalog()
                .with_connection(|c| Ok(c.execute("UPDATE import_items SET state = 'preparing' WHERE id = 1", [])?))
                .await
                .unwrap();
        });
    } // the session ends without finishing

    let (app, _webview) = app(dir.path(), env);
    let state = app.state::<AppState>();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let queue = tauri::async_runtime::block_on(state.import_queue()).unwrap();
        let progress = queue.progress().borrow().clone();
        // Finished means nothing is waiting and no worker holds an item. A progress can show both
        // items ready while the last worker still holds its slot (`in_flight` 1, so `Running`):
        // wait for the status, not for the count.
        if progress.status == pe_core::import::ImportStatus::Finished {
            assert_eq!(progress.counts.ready, 2, "{progress:?}");
            break;
        }
        assert!(Instant::now() < deadline, "the import did not resume: {progress:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(fake.generate_count(), 2);
}

/// The catalog view's commands: edit over a revision (and the conflict when it is stale), the
/// history with its diff, delete and undo, duplicate, facets, export and backup to files.
#[test]
fn catalog_edit_history_delete_duplicate_export_backup() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    invoke(&webview, "set_demo_mode", json!({"enabled": true})).unwrap();
    let item = extract_ready(&webview, json!([fixture()]));
    let saved = invoke(
        &webview,
        "import_save_item",
        json!({"id": item, "product": {"name": "Granola", "category": "Breakfast"}}),
    )
    .unwrap();
    let id = saved["id"].clone();
    assert_eq!(saved["revision"], 1);

    // An edit over revision 1 makes revision 2; a second edit still based on 1 is refused.
    let edit = |revision: u64, name: &str| {
        invoke(
            &webview,
            "update_product",
            json!({"input": {"id": id, "expected_revision": revision, "product": {"name": name, "category": "Breakfast"}, "attempt_id": null}}),
        )
    };
    let edited = edit(1, "Granola Honey").unwrap();
    assert_eq!((edited["revision"].as_u64(), edited["saved"]["name"].as_str()), (Some(2), Some("Granola Honey")));
    let stale = edit(1, "Someone else's name").unwrap_err();
    assert_eq!(stale["code"], "revision_conflict", "{stale}");
    let invalid = invoke(
        &webview,
        "update_product",
        json!({"input": {"id": id, "expected_revision": 2, "product": {"name": "X", "gtin": "123", "uncertain_fields": ["brand"]}, "attempt_id": null}}),
    )
    .unwrap_err();
    assert_eq!(invalid["code"], "validation");
    // The refusal carries the product's flags as data: the invalid one, and the unsure one too.
    let flags: Vec<(&str, &str)> = invalid["data"]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["field"].as_str().unwrap(), f["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(flags, [("gtin", "invalid"), ("brand", "uncertain")], "{invalid}");
    let stale_has_no_data = edit(1, "Again").unwrap_err();
    assert_eq!(stale_has_no_data.get("data"), None, "{stale_has_no_data}");

    let history = invoke(&webview, "product_history", json!({"id": id})).unwrap();
    assert_eq!(history.as_array().unwrap().len(), 2, "{history}");
    assert_eq!(history[0]["revision"], 2);
    assert_eq!(history[0]["source"], "edit");
    assert_eq!(history[0]["changes"][0], json!({"field": "name", "before": "Granola", "after": "Granola Honey"}));

    let facets = invoke(&webview, "catalog_facets", json!({})).unwrap();
    assert_eq!(facets["categories"][0], json!({"value": "Breakfast", "count": 1}));

    // Delete hides it; undo brings it back; a duplicate is a new product of the same photo.
    invoke(&webview, "delete_product", json!({"id": id})).unwrap();
    assert_eq!(invoke(&webview, "query_products", json!({"query": {}})).unwrap()["total"], 0);
    assert_eq!(invoke(&webview, "query_products", json!({"query": {"text": "gran"}})).unwrap()["total"], 0);
    invoke(&webview, "undelete_product", json!({"id": id})).unwrap();
    assert_eq!(invoke(&webview, "query_products", json!({"query": {"text": "gran"}})).unwrap()["total"], 1);
    let copy = invoke(&webview, "duplicate_product", json!({"id": id})).unwrap();
    assert_eq!(copy["duplicate_of"], id);
    assert_eq!(copy["photo_id"], saved["photo_id"]);
    assert_eq!(invoke(&webview, "query_products", json!({"query": {}})).unwrap()["total"], 2);

    let out = dir.path().join("shop.csv");
    let summary =
        invoke(&webview, "export_catalog", json!({"format": "shopify", "path": out.to_string_lossy()})).unwrap();
    assert_eq!(summary["rows"], 2);
    assert!(std::fs::read_to_string(&out).unwrap().contains("Granola Honey"));

    let backup_path = dir.path().join("backup.sqlite3");
    let backup = invoke(&webview, "backup_catalog", json!({"path": backup_path.to_string_lossy()})).unwrap();
    assert_eq!(backup["products"], 2);
    invoke(&webview, "delete_product", json!({"id": copy["id"]})).unwrap();
    let restored = invoke(&webview, "restore_catalog", json!({"path": backup_path.to_string_lossy()})).unwrap();
    assert_eq!(restored["products"], 2, "{restored}");
    assert_eq!(invoke(&webview, "query_products", json!({"query": {}})).unwrap()["total"], 2);
}

#[test]
fn take_fields_merges_a_reextract_like_the_diff_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    let saved = json!({"name": "Oat", "brand": "Oatly", "attributes": [{"name": "Flavor", "value": "Plain"}]});
    let proposal = json!({"name": "Oat Drink", "attributes": [{"name": "Flavor", "value": "Vanilla"}, {"name": "Flavor", "value": "Oat"}]});
    let merged = invoke(
        &webview,
        "take_fields",
        json!({"saved": saved, "proposal": proposal, "fields": ["name", "attributes.Flavor"]}),
    )
    .unwrap();
    assert_eq!(merged["name"], "Oat Drink");
    assert_eq!(merged["brand"], "Oatly");
    assert_eq!(
        merged["attributes"],
        json!([{"name": "Flavor", "value": "Vanilla"}, {"name": "Flavor", "value": "Oat"}])
    );
    let unknown =
        invoke(&webview, "take_fields", json!({"saved": saved, "proposal": proposal, "fields": ["nope"]})).unwrap_err();
    assert_eq!(unknown["code"], "validation", "{unknown}");
}

/// The UI calls commands only through `ui/src/bindings/commands.ts`: it must hold every
/// registered command with its argument keys, exactly as the registry generates it now.
#[test]
fn the_generated_command_wrappers_hold_every_registered_command() {
    use product_extractor_lib::bindings::{camel_case, config, generated_files};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/src/bindings/commands.ts");
    let on_disk = std::fs::read_to_string(&path).unwrap();
    let specs = product_extractor_lib::commands::registry(&config());
    assert!(specs.len() > 30, "{} commands", specs.len());
    for spec in &specs {
        let keys: Vec<String> = spec.args.iter().map(|a| camel_case(a.name)).collect();
        let call = if keys.is_empty() {
            format!("(\"{}\"),", spec.name)
        } else {
            format!("(\"{}\", {{ {} }}),", spec.name, keys.join(", "))
        };
        assert!(on_disk.contains(&call), "{} is not in {} as {call}", spec.name, path.display());
        assert!(on_disk.contains(&format!("  \"{}\",\n", spec.name)), "{} is not in COMMAND_NAMES", spec.name);
    }
    let (_, generated) = generated_files().into_iter().find(|(file, _)| *file == "commands.ts").unwrap();
    assert_eq!(on_disk, generated, "{} is stale: run `cargo test` and commit it", path.display());
}

/// A photo dropped on Extract and not reviewed yet is still there after the app closes: the
/// Extract view's cards come back from the queue.
#[test]
fn a_pending_review_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let item = {
        let (_app, webview) = app(dir.path(), env_of(&[]));
        invoke(&webview, "set_demo_mode", json!({"enabled": true})).unwrap();
        extract_ready(&webview, json!([fixture()]))
    };
    let (_app, webview) = app(dir.path(), env_of(&[]));
    let pending = invoke(&webview, "extract_pending", json!({})).unwrap();
    assert_eq!(pending.as_array().unwrap().len(), 1, "{pending}");
    assert_eq!((&pending[0]["id"], pending[0]["state"].as_str()), (&item, Some("ready")));
    let detail = invoke(&webview, "import_item", json!({ "id": item })).unwrap();
    assert!(detail["proposal"]["name"].as_str().is_some_and(|n| !n.is_empty()), "{detail}");
    // Discarding it is the end of the card.
    invoke(&webview, "import_discard_item", json!({ "id": item })).unwrap();
    assert_eq!(invoke(&webview, "extract_pending", json!({})).unwrap(), json!([]));
}

#[test]
fn the_cost_meter_reports_spend_and_sets_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let fake = tauri::async_runtime::block_on(FakeGemini::start(FakeOptions::default())).unwrap();
    let base_url = fake.base_url();
    let env = [
        ("GEMINI_API_KEY", "test-key"),
        ("GEMINI_BASE_URL", &base_url as &str),
        ("GEMINI_MODEL", "gemini-2.5-flash-lite"),
    ];
    let (_app, webview) = app(dir.path(), env_of(&env));
    let report = invoke(&webview, "usage_report", json!({})).unwrap();
    assert_eq!(
        (&report["days"], &report["spent_today"]["calls"], &report["daily_budget_usd"]),
        (&json!([]), &json!(0), &Value::Null)
    );
    let lite = report["prices"].as_array().unwrap().iter().find(|r| r["model"] == "gemini-2.5-flash-lite").unwrap();
    assert_eq!((&lite["price"]["input_per_million"], &lite["user"]), (&json!(0.1), &json!(false)));

    // Before any call: the image-token rule for a prepared photo.
    let estimate = invoke(&webview, "estimate_photos", json!({"photos": 1000})).unwrap();
    assert_eq!(estimate["per_call"]["measured_calls"], 0);
    assert!(estimate["per_call"]["tokens"]["input"].as_u64().unwrap() > 4 * 258, "{estimate}");
    assert_eq!((&estimate["products"], &estimate["photos"]), (&json!(1000), &json!(1000)));
    assert!(estimate["usd"].as_f64().unwrap() > 0.1, "{estimate}");

    let item = extract_ready(&webview, json!([fixture()]));
    let detail = invoke(&webview, "import_item", json!({"id": item})).unwrap();
    let cost = detail["attempt"]["cost_usd"].as_f64().unwrap();
    assert!(cost > 0.0, "{detail}");
    let photo = invoke(&webview, "photo_cost", json!({"photoId": detail["row"]["photo_id"]})).unwrap();
    assert_eq!((&photo["calls"], photo["usd"].as_f64().unwrap()), (&json!(1), cost));
    let report = invoke(&webview, "usage_report", json!({})).unwrap();
    assert_eq!(report["days"][0]["day"], report["today"]);
    assert_eq!(report["days"][0]["model"], "gemini-2.5-flash-lite");
    assert_eq!(report["spent_today"]["usd"].as_f64().unwrap(), cost);
    let estimate = invoke(&webview, "estimate_photos", json!({"photos": 2})).unwrap();
    assert_eq!(estimate["per_call"]["measured_calls"], 1, "now from the catalog's own call");

    let report = invoke(&webview, "set_daily_budget", json!({"usd": 2.5})).unwrap();
    assert_eq!(report["daily_budget_usd"], 2.5);
    let file = std::fs::read_to_string(dir.path().join("config.toml")).unwrap();
    assert!(file.contains("[pricing]") && file.contains("daily_budget_usd = 2.5"), "{file}");
    let err = invoke(&webview, "set_daily_budget", json!({"usd": -1})).unwrap_err();
    assert_eq!(err["code"], "config");
    assert!(err["message"].as_str().unwrap().contains("pricing.daily_budget_usd"), "{err}");
    let report = invoke(&webview, "set_daily_budget", json!({"usd": null})).unwrap();
    assert_eq!(report["daily_budget_usd"], Value::Null);
}

/// The demo's product of two photos through the commands the review uses: imported as one item
/// with both photos and the barcode on the second, each photo's thumbnail, the second moved to a
/// product of its own and back (nothing extracted), extracted again when asked, saved with both
/// photos, which `product_photos` lists in order.
#[test]
fn a_product_of_two_photos_is_split_merged_and_saved_through_ipc() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    invoke(&webview, "set_demo_mode", json!({"enabled": true})).unwrap();
    let shoot = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-shoot");
    let report = invoke(&webview, "import_paths", json!({"paths": [shoot], "batch": false})).unwrap();
    assert_eq!(report["queued"], 1, "{report}");
    let ready = |webview: &WebviewWindow<MockRuntime>, id: &Value| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let item = invoke(webview, "import_item", json!({ "id": id })).unwrap();
            if item["row"]["state"] == "ready" {
                return item;
            }
            assert!(std::time::Instant::now() < deadline, "never ready: {item}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let rows = invoke(&webview, "import_items", json!({"offset": 0, "limit": 10, "states": null})).unwrap();
    let id = rows["rows"][0]["id"].clone();
    let item = ready(&webview, &id);
    let names: Vec<&str> =
        item["photos"].as_array().unwrap().iter().map(|p| p["file_name"].as_str().unwrap()).collect();
    assert_eq!(names, ["oat-bars_front.jpg", "oat-bars_back.jpg"]);
    assert_eq!(item["barcodes"][0]["photo"], 1);
    // Each photo of the product is named by hash, and the thumbnail protocol serves it.
    for photo in item["photos"].as_array().unwrap() {
        let sha256 = photo["photo_sha256"].as_str().unwrap();
        let thumb = thumbnail_request(&webview, "GET", &format!("/{sha256}"));
        assert_eq!((thumb.status().as_u16(), thumb.body().starts_with(&[0xFF, 0xD8])), (200, true), "{photo}");
    }

    // The back to a product of its own, then back into the first: nothing is extracted.
    let changed = invoke(&webview, "import_move_photo", json!({"from": id, "index": 1, "to": null})).unwrap();
    let back = changed[1].clone();
    let front = invoke(&webview, "import_item", json!({ "id": id })).unwrap();
    assert_eq!(
        (front["row"]["state"].as_str(), front["row"]["last_error"]["code"].as_str()),
        (Some("failed"), Some("regrouped"))
    );
    invoke(&webview, "import_move_photo", json!({"from": back, "index": 0, "to": id})).unwrap();
    let merged = invoke(&webview, "import_item", json!({ "id": back })).unwrap();
    assert_eq!(merged["row"]["state"], "skipped");
    let refused = invoke(&webview, "import_move_photo", json!({"from": back, "index": 0, "to": null})).unwrap_err();
    assert_eq!(refused["code"], "conflict", "{refused}");

    // Asked: extracted again with both photos, saved, and the product has them in order.
    invoke(&webview, "import_force", json!({ "id": id })).unwrap();
    let item = ready(&webview, &id);
    assert_eq!(item["photos"].as_array().unwrap().len(), 2);
    let saved = invoke(&webview, "import_save_item", json!({"id": id, "product": item["proposal"]})).unwrap();
    let photos = invoke(&webview, "product_photos", json!({"id": saved["id"]})).unwrap();
    let paths: Vec<&str> = photos.as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert!(paths[0].ends_with("oat-bars_front.jpg") && paths[1].ends_with("oat-bars_back.jpg"), "{paths:?}");
    assert_eq!(saved["gtin_source"], "photo");
}

/// Settings › Catalog against the real server (`scripts/with-postgres`) and the real Secret
/// Service (`scripts/with-keyring`): Test says where the password came from and changes nothing;
/// Use this catalog refuses a URL with a password in it and a wrong password (nothing written),
/// then saves the right one in the keyring (not in the config file) and the URL in the config;
/// the next Test finds the password in the keyring; Use this computer's catalog takes it back.
#[test]
fn settings_choose_a_team_catalog_and_keep_its_password_in_the_keyring() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = rt.block_on(pe_core::catalog::server::testing::fresh_database("ipc_choose"));
    let password =
        pe_core::catalog::server::ServerUrl::parse(&url).unwrap().config().get_password().map(<[u8]>::to_vec);
    let password = String::from_utf8(password.expect("the test URL has a password")).unwrap();
    let bare = url.replacen(&format!(":{password}@"), "@", 1);
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[("HOME", home.path().to_str().unwrap())]));
    let code = |e: &Value| e["code"].as_str().unwrap_or_default().to_string();
    let message = |e: &Value| e["message"].as_str().unwrap_or_default().to_string();

    let e = invoke(&webview, "test_catalog", json!({"url": bare, "password": null})).unwrap_err();
    assert!(message(&e).contains("none was found"), "{e}");
    let e = invoke(&webview, "test_catalog", json!({"url": bare, "password": "Wr0ng-pass"})).unwrap_err();
    assert_eq!(code(&e), "catalog", "{e}");
    assert!(message(&e).contains("refused user pe_test"), "{e}");
    let check = invoke(&webview, "test_catalog", json!({"url": bare, "password": password})).unwrap();
    assert_eq!(check["password_source"], json!("the password typed here"), "{check}");
    assert_eq!(check["schema_version"], json!(0), "Test migrates nothing: {check}");

    let e = invoke(&webview, "choose_catalog", json!({"url": url, "password": null})).unwrap_err();
    assert!(message(&e).contains("take the password out of the URL"), "{e}");
    assert!(!e.to_string().contains(&password), "{e}");
    let e = invoke(&webview, "choose_catalog", json!({"url": bare, "password": "Wr0ng-pass"})).unwrap_err();
    assert!(message(&e).contains("refused user pe_test"), "{e}");
    let status = invoke(&webview, "app_status", json!({})).unwrap();
    assert_eq!(status["catalog_setting"], json!(null), "nothing written: {status}");

    let status = invoke(&webview, "choose_catalog", json!({"url": bare, "password": password})).unwrap();
    assert_eq!(status["catalog_setting"], json!(bare), "{status}");
    assert_eq!(status["catalog_on_server"], json!(false), "the open catalog stays until a restart");
    let config = std::fs::read_to_string(status["config_path"].as_str().unwrap()).unwrap();
    assert!(config.contains(&bare) && !config.contains(&password), "{config}");
    let check = invoke(&webview, "test_catalog", json!({"url": bare, "password": null})).unwrap();
    assert_eq!(check["password_source"], json!("this computer's keyring"), "{check}");

    let status = invoke(&webview, "choose_catalog", json!({"url": null, "password": null})).unwrap();
    assert_eq!(status["catalog_setting"], json!(null), "{status}");
}

/// Waits until `import_progress` says `kind`; returns that progress.
fn wait_for_status(webview: &WebviewWindow<MockRuntime>, kind: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let progress = invoke(webview, "import_progress", json!({})).unwrap();
        if progress["status"]["kind"] == kind {
            return progress;
        }
        assert!(Instant::now() < deadline, "the queue never said {kind}: {progress}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A photo dropped without a key waits, the queue stopped for the key, and no call is counted
/// (nothing reached Gemini); turning the demo on fixes the cause, and the photo is extracted
/// without anyone pressing Resume.
#[test]
fn a_photo_stopped_for_the_key_goes_on_once_the_demo_is_on_and_no_call_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, webview) = app(dir.path(), env_of(&[]));
    let rows = invoke(&webview, "extract_photos", json!({"paths": [fixture()]})).unwrap();
    let id = rows[0]["id"].clone();
    let stopped = wait_for_status(&webview, "stopped");
    assert_eq!(stopped["status"]["code"], "gemini_auth", "{stopped}");
    assert!(stopped["status"]["message"].as_str().unwrap().contains("No Gemini API key"), "{stopped}");
    let item = invoke(&webview, "import_item", json!({ "id": id })).unwrap();
    assert_eq!(item["row"]["state"], "queued", "it waits, it does not fail: {item}");
    let report = invoke(&webview, "usage_report", json!({})).unwrap();
    assert_eq!((&report["spent_today"]["calls"], &report["days"]), (&json!(0), &json!([])), "{report}");
    // The demo's shoot waits too: one product of two photos, which the estimate counts as one
    // call carrying two photos (not as "1 waiting photo").
    let shoot = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-shoot");
    let queued = invoke(&webview, "import_paths", json!({"paths": [shoot], "batch": false})).unwrap();
    assert_eq!(queued["queued"], 1, "{queued}");
    let estimate = invoke(&webview, "estimate_photos", json!({"photos": null})).unwrap();
    assert_eq!((&estimate["products"], &estimate["photos"]), (&json!(2), &json!(3)), "{estimate}");
    let one = invoke(&webview, "estimate_photos", json!({"photos": 1})).unwrap();
    let image_tokens = |e: &Value| e["tokens"]["input"].as_u64().unwrap();
    assert!(image_tokens(&estimate) > 2 * image_tokens(&one), "the second photo's image adds: {estimate} {one}");

    invoke(&webview, "set_demo_mode", json!({"enabled": true})).unwrap();
    wait_for_status(&webview, "finished");
    let item = invoke(&webview, "import_item", json!({ "id": id })).unwrap();
    assert_eq!(item["row"]["state"], "ready", "{item}");
    let report = invoke(&webview, "usage_report", json!({})).unwrap();
    assert_eq!(report["spent_today"]["calls"], 2, "the photo and the shoot's product: {report}");
    // What the Import view says was spent covers every item it lists (both drops), as Usage does
    // (its sum follows the recorded calls, a moment after the items' states on a loaded machine).
    let deadline = Instant::now() + Duration::from_secs(30);
    let progress = loop {
        let progress = invoke(&webview, "import_progress", json!({})).unwrap();
        if progress["queue_cost"]["calls"] == 2 {
            break progress;
        }
        assert!(Instant::now() < deadline, "the Import view never counted both calls: {progress}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(progress["queue_cost"]["usd"], report["spent_today"]["usd"], "{progress} {report}");
}

/// The breaker across a restart (issue 26): forced open in one run, the next run of the app on
/// the same data dir starts FORCED_OPEN, says it was restored, and its timeline holds the
/// transition from before the restart.
#[test]
fn the_breaker_is_as_the_last_run_left_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_app, webview) = app(dir.path(), env_of(&[]));
        // The window opens its queue at start (the mock runtime runs no setup hook): the breaker
        // is restored then, and saved from then on.
        invoke(&webview, "import_progress", json!({})).unwrap();
        let snap = invoke(&webview, "breaker_control", json!({"action": "force_open"})).unwrap();
        assert_eq!(snap["breaker"]["state"], "forced_open");
        // Saved at once: a change of state is not coalesced (the app saves from its start).
        let deadline = Instant::now() + Duration::from_secs(10);
        let catalog = pe_core::catalog::Catalog::open(&pe_core::catalog::Catalog::path_in(dir.path())).unwrap();
        while tauri::async_runtime::block_on(catalog.saved_breaker("gemini")).unwrap().map(|s| s.state)
            != Some(pe_core::resilience::BreakerState::ForcedOpen)
        {
            assert!(Instant::now() < deadline, "the forced-open breaker was never saved");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let (_app, webview) = app(dir.path(), env_of(&[]));
    invoke(&webview, "import_progress", json!({})).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let snap = loop {
        let snap = invoke(&webview, "resilience_snapshot", json!({})).unwrap();
        if snap["breaker"]["restored_from_ms"].is_number() {
            break snap;
        }
        assert!(Instant::now() < deadline, "the breaker was not restored: {snap}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(snap["breaker"]["state"], "forced_open", "{snap}");
    let transitions: Vec<&Value> =
        snap["events"].as_array().unwrap().iter().filter(|e| e["kind"]["type"] == "state_transition").collect();
    assert!(transitions.iter().any(|e| e["kind"]["to"] == "forced_open"), "{snap}");
    assert_eq!(snap["events"].as_array().unwrap().last().unwrap()["kind"]["type"], "restored", "{snap}");
}

/// curl's status for `url` (000 when nothing answers).
fn curl_status(args: &[&str]) -> String {
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "60"])
        .args(args)
        .output()
        .expect("curl is installed (make deps)");
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn settings_turn_the_windows_http_api_on_and_off_and_its_photos_are_the_windows_items() {
    let dir = tempfile::tempdir().unwrap();
    let fake = tauri::async_runtime::block_on(FakeGemini::start(FakeOptions::default())).unwrap();
    let base_url = fake.base_url();
    let env = env_of(&[("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &base_url)]);
    let (_app, webview) = app(dir.path(), env.clone());
    let settings = invoke(&webview, "get_settings", json!({})).unwrap();
    assert_eq!(settings["http_api"]["with_window"], false);
    assert_eq!(settings["http_api"]["status"]["state"], "off");
    let input = |on: bool, listen: &str| {
        json!({"gemini": settings["gemini"], "image": settings["image"], "resilience": settings["resilience"],
               "prices": settings["pricing"]["rows"], "api_key": {"action": "keep"},
               "http_api": {"with_window": on, "listen": listen}})
    };
    let bad = invoke(&webview, "save_settings", json!({ "input": input(true, "localhost") })).unwrap_err();
    assert!(bad["message"].as_str().unwrap().contains("server.listen"), "{bad}");
    let saved = invoke(&webview, "save_settings", json!({ "input": input(true, "127.0.0.1:0") })).unwrap();
    let status = &saved["http_api"]["status"];
    assert_eq!(status["state"], "serving", "{saved}");
    let url = status["url"].as_str().unwrap().to_string();
    assert_eq!(curl_status(&[&format!("{url}/actuator/health")]), "200");
    // A photo sent over HTTP is one of the window's items, waiting for review in Extract.
    let photo = format!("image=@{}", fixture().display());
    assert_eq!(curl_status(&["-F", &photo, &format!("{url}/api/products/extract")]), "200");
    let pending = invoke(&webview, "extract_pending", json!({})).unwrap();
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");
    assert_eq!(fake.generate_count(), 1);
    // A new token (`serve token set` while the window runs) is taken at the next save.
    let keyring = product_extractor_lib::secrets::Keyring::from_env(&*env);
    let bearer = |token: &str| format!("Authorization: Bearer {token}");
    let health = |saved: &Value| format!("{}/actuator/health", saved["http_api"]["status"]["url"].as_str().unwrap());
    keyring.set_api_token("first-token-0123456789abcdef").unwrap();
    let saved = invoke(&webview, "save_settings", json!({ "input": input(true, "127.0.0.1:0") })).unwrap();
    assert_eq!(curl_status(&[&health(&saved)]), "401");
    assert_eq!(curl_status(&["-H", &bearer("first-token-0123456789abcdef"), &health(&saved)]), "200");
    keyring.set_api_token("second-token-0123456789abcdef").unwrap();
    let saved = invoke(&webview, "save_settings", json!({ "input": input(true, "127.0.0.1:0") })).unwrap();
    assert_eq!(curl_status(&["-H", &bearer("first-token-0123456789abcdef"), &health(&saved)]), "401");
    assert_eq!(curl_status(&["-H", &bearer("second-token-0123456789abcdef"), &health(&saved)]), "200");
    keyring.delete_api_token().unwrap();
    // Off: the port no longer answers.
    let saved = invoke(&webview, "save_settings", json!({ "input": input(false, "127.0.0.1:0") })).unwrap();
    assert_eq!(saved["http_api"]["status"]["state"], "off");
    assert_eq!(curl_status(&[&format!("{url}/actuator/health")]), "000");
    // Beyond loopback without a token: refused, and Settings say why.
    let saved = invoke(&webview, "save_settings", json!({ "input": input(true, "0.0.0.0:0") })).unwrap();
    assert_eq!(saved["http_api"]["status"]["state"], "failed");
    assert!(saved["http_api"]["status"]["message"].as_str().unwrap().contains("not a loopback address"), "{saved}");
}
