//! The headless CLI: the real binary, no display, against the fake Gemini on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pe_core::fake_gemini::{Behavior, FakeGemini, FakeOptions};
use serde_json::Value;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/product.jpg")
}

/// Runs the binary with a clean environment: no display, only the given Gemini settings.
async fn cli(data_dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_product-extractor"));
    cmd.args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GEMINI_BASE_URL")
        .env_remove("GEMINI_MODEL")
        .env("PRODUCT_EXTRACTOR_DATA_DIR", data_dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn extract_json_one_line_per_file_and_exit_1_when_one_fails() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.jpg");
    std::fs::write(&broken, b"not an image at all").unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out =
        cli(dir.path(), &env, &["extract", "--json", fixture().to_str().unwrap(), broken.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(1), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 3, "{lines:?}");
    let summary = &lines[2]["summary"];
    assert_eq!(
        (summary["files"].as_u64(), summary["ok"].as_u64(), summary["failed"].as_u64()),
        (Some(2), Some(1), Some(1))
    );
    assert_eq!(summary["breaker"]["state"], "CLOSED");
    assert_eq!(summary["breaker"]["bufferedCalls"], 1, "the broken photo never reached the breaker");
    assert_eq!(lines[0]["ok"], true);
    assert_eq!(lines[0]["file"], fixture().display().to_string());
    assert!(lines[0]["product"]["name"].as_str().is_some_and(|n| !n.is_empty()));
    assert!(lines[0]["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(lines[0]["usage"]["output_tokens"].as_u64().is_some());
    assert_eq!(lines[1]["ok"], false);
    assert_eq!(lines[1]["error"]["kind"], "invalid_image");
    assert!(lines[1]["error"]["message"].as_str().unwrap().len() > 10);
    // The broken photo never reached the network.
    assert_eq!(fake.generate_count(), 1);
    // Without --save nothing is in the catalog.
    let out = cli(dir.path(), &env, &["products", "list", "--json"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn extract_save_then_products_list() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(dir.path(), &env, &["extract", "--save", fixture().to_str().unwrap()]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text} {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("ok "), "{text}");
    assert!(text.contains("saved as #1"), "{text}");

    let out = cli(dir.path(), &env, &["products", "list", "--json"]).await;
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["id"], 1);
    let out = cli(dir.path(), &env, &["products", "list"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("#1"));

    // Search finds it by a lower-case prefix of its name's first word, in the list's shape.
    let name = rows[0]["name"].as_str().unwrap().to_string();
    let word: String = name.split_whitespace().next().unwrap().to_lowercase().chars().take(3).collect();
    let out = cli(dir.path(), &env, &["products", "search", &word, "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found, rows, "search {word:?}");
    let out = cli(dir.path(), &env, &["products", "search", "zzzz-nothing\"("]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "No product matches.");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_key_is_a_typed_failure_that_never_prints_the_key() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    fake.push(Behavior::Product);
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "AIzaNOTTHEKEY-distinctive-42"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(dir.path(), &env, &["extract", "--json", fixture().to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["error"]["kind"], "gemini_auth");
    let everything = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!everything.contains("NOTTHEKEY"), "{everything}");
    let logs = std::fs::read_dir(dir.path().join("logs")).unwrap();
    for log in logs {
        let text = std::fs::read_to_string(log.unwrap().path()).unwrap();
        assert!(!text.contains("NOTTHEKEY"), "the key leaked into the log: {text}");
    }
    // Nor is it in the URL the server saw.
    assert!(fake.requests().iter().all(|r| !r.query.as_deref().unwrap_or("").contains("key")));
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_and_config_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = cli(dir.path(), &[], &["extract", fixture().to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GEMINI_API_KEY"));

    let out = cli(dir.path(), &[], &["extract"]).await;
    assert_eq!(out.status.code(), Some(2), "no files is a usage error");

    let out = cli(dir.path(), &[], &["frobnicate"]).await;
    assert_eq!(out.status.code(), Some(2));

    let config = dir.path().join("custom.toml");
    std::fs::write(&config, "[gemini]\nmodle = \"typo\"\n").unwrap();
    let out =
        cli(dir.path(), &[("GEMINI_API_KEY", "k")], &["--config", config.to_str().unwrap(), "products", "list"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("modle"), "{}", String::from_utf8_lossy(&out.stderr));

    let out = cli(dir.path(), &[], &["--help"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("extract"));
}

#[tokio::test(flavor = "multi_thread")]
async fn breaker_prints_the_actuator_shape() {
    let dir = tempfile::tempdir().unwrap();
    let out = cli(dir.path(), &[], &["breaker", "--json"]).await;
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gemini = &v["circuitBreakers"]["gemini"];
    assert_eq!(gemini["state"], "CLOSED");
    assert_eq!(gemini["failureRate"], "-1.0%");
    assert_eq!(gemini["failureRateThreshold"], "50.0%");
    assert_eq!(gemini["notPermittedCalls"], 0);
    let out = cli(dir.path(), &[], &["breaker"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("circuit breaker gemini: CLOSED"));
}

/// Gemini keeps failing: retries, then the breaker opens and the remaining files are refused
/// without a call, each line saying so.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_gemini_opens_the_breaker_for_the_rest_of_the_batch() {
    let fake = FakeGemini::start(FakeOptions { default_behavior: Behavior::Unavailable, ..FakeOptions::default() })
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[circuit_breaker]\nminimum_number_of_calls = 4\nsliding_window_size = 4\n[retry]\nmax_attempts = 2\nwait_duration = \"10ms\"\n[bulkhead]\nmax_concurrent_calls = 1\n",
    )
    .unwrap();
    let photos: Vec<PathBuf> = (0..4)
        .map(|i| {
            let p = dir.path().join(format!("p{i}.jpg"));
            std::fs::copy(fixture(), &p).unwrap();
            p
        })
        .collect();
    let mut args = vec!["--config", config.to_str().unwrap(), "extract", "--json"];
    args.extend(photos.iter().map(|p| p.to_str().unwrap()));
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(dir.path(), &env, &args).await;
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    let kinds: Vec<&str> = lines[..4].iter().map(|l| l["error"]["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["gemini_unavailable", "gemini_unavailable", "circuit_open", "circuit_open"], "{lines:?}");
    assert!(lines[2]["error"]["message"].as_str().unwrap().contains("paused until"), "{lines:?}");
    assert_eq!(fake.generate_count(), 4, "two files, two attempts each, then no more calls");
    assert_eq!(lines[4]["summary"]["breaker"]["state"], "OPEN");
    assert_eq!(lines[4]["summary"]["breaker"]["notPermittedCalls"], 2);
}
