//! The headless CLI: the real binary, no display, against the fake Gemini on 127.0.0.1.

#[path = "../src-tauri/core/tests/barcode_photos/mod.rs"]
mod barcode_photos;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use serde_json::{json, Value};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/product.jpg")
}

/// Runs the binary with a clean environment: no display, only the given Gemini settings.
async fn cli(data_dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    run(Command::new(env!("CARGO_BIN_EXE_product-extractor")), data_dir, env, args).await
}

/// [`cli`] as a user without privileges (`nobody`), so file permissions apply: root reads
/// everything. Run as root, it switches with `setpriv`; it fails loudly when it cannot.
async fn cli_unprivileged(data_dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    if !is_root() {
        return cli(data_dir, env, args).await;
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", env!("CARGO_BIN_EXE_product-extractor")]);
    run(cmd, data_dir, env, args).await
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Checks that `setpriv` really drops root here (or that we are not root), else panics: the
/// permission tests must never pass by running as root.
fn assert_can_run_unprivileged() {
    if !is_root() {
        return;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "id", "-u"])
        .output()
        .expect("setpriv (util-linux) is needed to run the permission tests as a non-root user");
    let uid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(out.status.success() && uid != "0", "cannot drop root for the permission tests: {out:?}");
}

/// [`cli`] with arguments that need not be UTF-8 (file names are bytes).
async fn cli_os(data_dir: &Path, env: &[(&str, &str)], args: &[&std::ffi::OsStr]) -> Output {
    run(Command::new(env!("CARGO_BIN_EXE_product-extractor")), data_dir, env, args).await
}

async fn run<S: AsRef<std::ffi::OsStr>>(mut cmd: Command, data_dir: &Path, env: &[(&str, &str)], args: &[S]) -> Output {
    cmd.args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GEMINI_BASE_URL")
        .env_remove("GEMINI_MODEL")
        .env("PRODUCT_EXTRACTOR_DATA_DIR", data_dir)
        // A keyring entry of the test's own, never the user's real one.
        .env("PRODUCT_EXTRACTOR_KEYRING_SERVICE", format!("product-extractor-test:{}", data_dir.display()));
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

/// `products show | delete | undelete | backup | restore` on a catalog with one saved product.
#[tokio::test(flavor = "multi_thread")]
async fn products_show_delete_undelete_backup_restore() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(dir.path(), &env, &["extract", "--save", fixture().to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let out = cli(dir.path(), &[], &["products", "show", "1", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let name = shown["product"]["saved"]["name"].as_str().unwrap().to_string();
    assert_eq!(shown["product"]["revision"], 1);
    assert!(shown["product"].get("thumbnail").is_none(), "no data URL on a terminal");
    assert_eq!(shown["history"][0]["source"], "review");
    let text = cli(dir.path(), &[], &["products", "show", "1"]).await;
    assert!(String::from_utf8_lossy(&text.stdout).contains("revision 1"), "{}", String::from_utf8_lossy(&text.stdout));
    let missing = cli(dir.path(), &[], &["products", "show", "99"]).await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("does not exist"));

    let backup = dir.path().join("before-delete.sqlite3");
    let out = cli(dir.path(), &[], &["products", "backup", backup.to_str().unwrap(), "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["backup"]["products"], 1);

    let out = cli(dir.path(), &[], &["products", "delete", "1"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("undelete 1"));
    let list = cli(dir.path(), &[], &["products", "list", "--json"]).await;
    assert_eq!(serde_json::from_slice::<Value>(&list.stdout).unwrap(), serde_json::json!([]));
    let again = cli(dir.path(), &[], &["products", "delete", "1"]).await;
    assert_eq!(again.status.code(), Some(1), "deleting twice is an error");
    let out = cli(dir.path(), &[], &["products", "undelete", "1"]).await;
    assert_eq!(out.status.code(), Some(0));
    let out = cli(dir.path(), &[], &["products", "delete", "1"]).await;
    assert_eq!(out.status.code(), Some(0));

    // Restore brings back the catalog as it was at the backup; a garbage file is refused.
    let garbage = dir.path().join("garbage.sqlite3");
    std::fs::write(&garbage, b"certainly not SQLite").unwrap();
    let refused = cli(dir.path(), &[], &["products", "restore", garbage.to_str().unwrap()]).await;
    assert_eq!(refused.status.code(), Some(1));
    let out = cli(dir.path(), &[], &["products", "restore", backup.to_str().unwrap(), "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let restored: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(restored["restore"]["products"], 1);
    assert!(std::path::Path::new(restored["restore"]["safety_backup"].as_str().unwrap()).exists());
    let list = cli(dir.path(), &[], &["products", "list", "--json"]).await;
    let rows: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows[0]["name"], name.as_str());
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

/// The data dir holds the catalog, the config and the logs: only this user's. An older install's
/// open data dir is tightened (and the log says so); a config others may change is refused.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn the_data_dir_catalog_and_logs_are_the_users_only_and_a_loose_config_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = cli(&data, &[], &["products", "list"]).await;
    assert!(out.status.success(), "{out:?}");
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("logs")), 0o700);
    assert_eq!(mode(&pe_core::catalog::Catalog::path_in(&data)), 0o600);
    let logs: Vec<PathBuf> = std::fs::read_dir(data.join("logs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!logs.is_empty());
    let mut text = String::new();
    for log in &logs {
        assert_eq!(mode(log), 0o600, "{}", log.display());
        text.push_str(&std::fs::read_to_string(log).unwrap());
    }
    assert!(text.contains("the data dir was open to other users") && text.contains("was=0755"), "{text}");

    let config = data.join("config.toml");
    std::fs::write(&config, "").unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = cli(&data, &[], &["products", "list"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("chmod 600 {}", config.display())), "{stderr}");
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
    // Four different photos: copies of one would be one photo, extracted once.
    let photos = photos(&dir.path().join("shoot"), 4, 40);
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

/// `n` distinct generated photos in `dir` (created), seeds from `seed`.
fn photos(dir: &Path, n: u64, seed: u64) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    (0..n)
        .map(|i| {
            let path = dir.join(format!("photo{i:02}.jpg"));
            std::fs::write(&path, fake_gemini::photos::sample_jpeg(seed + i, 320, 240, 85)).unwrap();
            path
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn extract_json_carries_the_cost_and_usage_sums_it_per_day_and_model() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("GEMINI_API_KEY", "test-key"),
        ("GEMINI_BASE_URL", &fake.base_url() as &str),
        ("GEMINI_MODEL", "gemini-2.5-flash-lite"),
    ];
    let files = photos(&dir.path().join("shoot"), 2, 40);
    let args: Vec<&str> = ["extract", "--json"].into_iter().chain(files.iter().map(|f| f.to_str().unwrap())).collect();
    let out = cli(&dir.path().join("data"), &env, &args).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    let costs: Vec<f64> = lines[..2].iter().map(|l| l["usage"]["cost_usd"].as_f64().unwrap()).collect();
    let input: u64 = lines[..2].iter().map(|l| l["usage"]["prompt_tokens"].as_u64().unwrap()).sum();
    let output: u64 = lines[..2].iter().map(|l| l["usage"]["output_tokens"].as_u64().unwrap()).sum();
    // $0.10 per million in, $0.40 per million out (the list price), nothing cached.
    let expected = (input as f64 * 0.10 + output as f64 * 0.40) / 1e6;
    let cost = &lines[2]["summary"]["cost"];
    assert_eq!((cost["input_tokens"].as_u64(), cost["output_tokens"].as_u64()), (Some(input), Some(output)));
    let usd = cost["usd"].as_f64().unwrap();
    assert!(
        (usd - expected).abs() < 1e-9 && (usd - costs.iter().sum::<f64>()).abs() < 1e-9,
        "{usd} {expected} {costs:?}"
    );

    let out = cli(&dir.path().join("data"), &[], &["usage", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!((&lines[0]["model"], &lines[0]["calls"]), (&Value::from("gemini-2.5-flash-lite"), &Value::from(2)));
    assert!(lines[0]["day"].as_str().is_some_and(|d| d.len() == 10));
    assert!((lines[0]["usd"].as_f64().unwrap() - usd).abs() < 1e-9);
    assert!((lines[1]["summary"]["cost"]["usd"].as_f64().unwrap() - usd).abs() < 1e-9);

    let out = cli(&dir.path().join("data"), &[], &["usage"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.contains("gemini-2.5-flash-lite") && l.contains("$0.000")), "{text}");
    let out = cli(&dir.path().join("data"), &[], &["usage", "--since", "3 December"]).await;
    assert_eq!(out.status.code(), Some(2));
    let out = cli(&dir.path().join("data"), &[], &["usage", "--json", "--since", "2999-01-01"]).await;
    assert_eq!(json_lines(&out).len(), 1, "nothing that late: only the summary");
}

#[tokio::test(flavor = "multi_thread")]
async fn import_prints_a_line_per_item_and_a_summary_and_a_second_run_resumes() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shoot = dir.path().join("shoot");
    let files = photos(&shoot.join("sub"), 4, 10);
    std::fs::write(shoot.join("notes.txt"), b"x").unwrap();
    std::fs::copy(&files[0], shoot.join("copy-of-first.jpg")).unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let data = dir.path().join("data");
    let out = cli(&data, &env, &["import", "--json", "--concurrency", "2", shoot.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 7, "{lines:?}");
    let summary = &lines[6]["summary"];
    assert_eq!(
        [&summary["ready"], &summary["saved"], &summary["failed"], &summary["skipped"], &summary["duplicates"]],
        [4, 0, 0, 2, 1]
    );
    assert_eq!(summary["breaker"]["state"], "CLOSED");
    // The default model is an alias, priced as the model that answered (its modelVersion).
    assert_eq!(summary["cost"]["unpriced_calls"], 0, "{summary}");
    assert!(summary["cost"]["usd"].as_f64().unwrap() > 0.0, "{summary}");
    assert!(summary["cost"]["input_tokens"].as_u64().unwrap() > 4 * 258);
    let ready: Vec<&Value> = lines.iter().filter(|l| l["state"] == "ready").collect();
    assert_eq!(ready.len(), 4);
    assert!(ready.iter().all(|l| l["usage"]["cost_usd"].as_f64().is_some_and(|usd| usd > 0.0)), "{ready:?}");
    for line in &ready {
        assert_eq!(line["ok"], true);
        // The folder is read in name order: copy-of-first.jpg comes before sub/photo00.jpg, which is
        // then the duplicate.
        let file = line["file"].as_str().unwrap();
        assert!(file.ends_with("shoot/copy-of-first.jpg") || file.contains("shoot/sub/photo0"), "{file}");
        assert!(!file.ends_with("photo00.jpg"), "{file}");
        assert!(line["product"]["name"].as_str().is_some_and(|n| !n.is_empty()));
        assert!(line["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        assert!(line["attempt_id"].as_i64().is_some() && line["photo_id"].as_i64().is_some());
        assert!(line.get("saved_product_id").is_none());
    }
    let skipped: Vec<&str> =
        lines.iter().filter(|l| l["state"] == "skipped").map(|l| l["skipped"]["reason"].as_str().unwrap()).collect();
    assert_eq!(skipped.len(), 2);
    assert!(skipped.contains(&"not_a_photo") && skipped.contains(&"already_queued"), "{skipped:?}");
    assert_eq!(fake.generate_count(), 4);

    // The fake proposes one of six products per photo; one has an invalid GTIN, which --save
    // refuses (like the review form): that item stays ready and its line says why.
    let invalid =
        ready.iter().filter(|l| l["flags"].as_array().unwrap().iter().any(|f| f["kind"] == "invalid")).count();

    // Again, with --save: nothing is sent again; the ready items are saved.
    let out = cli(&data, &env, &["import", "--save", shoot.to_str().unwrap()]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    let expected_code = if invalid == 0 { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(expected_code), "{text} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.lines().filter(|l| l.starts_with("saved ")).count(), 4 - invalid, "{text}");
    assert_eq!(text.lines().filter(|l| l.contains("[validation] not saved")).count(), invalid, "{text}");
    let last = text.lines().last().unwrap();
    assert!(last.starts_with(&format!("{} saved, {invalid} ready, 0 failed, 2 skipped (1 duplicates)", 4 - invalid)));
    assert_eq!(fake.generate_count(), 4, "a second run resumes, it does not start over");
    let out = cli(&data, &env, &["products", "list", "--json"]).await;
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap().as_array().unwrap().len(), 4 - invalid);

    // `import status` shows the queue, without a key.
    let out = cli(&data, &[], &["import", "status", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["counts"]["saved"], 4 - invalid);
    assert_eq!(status["total"], 6);
    assert_eq!(status["items"].as_array().unwrap().len(), 6);
    let out = cli(&data, &[], &["import", "status"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("6 items: 0 queued"));
}

#[tokio::test(flavor = "multi_thread")]
async fn import_stops_on_a_bad_key_with_exit_2_and_the_items_wait_for_a_good_one() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shoot = dir.path().join("shoot");
    photos(&shoot, 3, 50);
    let data = dir.path().join("data");
    let bad = [("GEMINI_API_KEY", "AIzaNOTTHEKEY-import-77"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(&data, &bad, &["import", "--json", "--concurrency", "1", shoot.to_str().unwrap()]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("API key"), "{stderr}");
    assert!(!stderr.contains("NOTTHEKEY") && !String::from_utf8_lossy(&out.stdout).contains("NOTTHEKEY"));
    assert_eq!(fake.generate_count(), 1, "stopped after the first rejection");
    let out = cli(&data, &[], &["import", "status", "--json"]).await;
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["counts"]["queued"], 3, "{status}");

    let good = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(&data, &good, &["import", "--save", "--json", shoot.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines.iter().filter(|l| l["state"] == "saved" && l["ok"] == true).count(), 3, "{lines:?}");
    assert!(lines.iter().all(|l| l.get("saved_product_id").is_none() || l["saved_product_id"].as_i64().is_some()));
    assert_eq!(lines.last().unwrap()["summary"]["saved"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn import_exits_1_when_an_item_fails_and_2_on_usage_errors() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shoot = dir.path().join("shoot");
    photos(&shoot, 1, 70);
    std::fs::write(shoot.join("zz-broken.jpg"), b"\xFF\xD8\xFF not a jpeg").unwrap();
    let data = dir.path().join("data");
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(&data, &env, &["import", shoot.to_str().unwrap()]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with("error ") && l.contains("[invalid_image]")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("ready ")), "{text}");

    let out = cli(&data, &[], &["import", shoot.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GEMINI_API_KEY"));
    let out = cli(&data, &env, &["import"]).await;
    assert_eq!(out.status.code(), Some(2), "no paths is a usage error");
    let out = cli(&data, &env, &["import", "--concurrency", "0", "x"]).await;
    assert_eq!(out.status.code(), Some(2));
}

/// One engine: `extract` goes through the queue. The same bytes twice make one request (the
/// stored proposal comes back); without `--save` the result waits in the queue as `ready`, where
/// `import status --json` lists it; `--force` asks again.
#[tokio::test(flavor = "multi_thread")]
async fn extract_twice_makes_one_request_and_leaves_a_ready_item() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let photo = fixture();
    let first = cli(dir.path(), &env, &["extract", "--json", photo.to_str().unwrap()]).await;
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    let second = cli(dir.path(), &env, &["extract", "--json", photo.to_str().unwrap()]).await;
    assert_eq!(second.status.code(), Some(0), "{}", String::from_utf8_lossy(&second.stderr));
    assert_eq!(fake.generate_count(), 1, "the same bytes are not sent twice");
    let (a, b) = (&json_lines(&first)[0], &json_lines(&second)[0]);
    assert_eq!((a["ok"].as_bool(), b["ok"].as_bool()), (Some(true), Some(true)));
    assert_eq!(a["product"], b["product"]);
    assert_eq!(a["attempt_id"], b["attempt_id"], "the stored proposal");
    assert_eq!(a["usage"], b["usage"]);
    assert_eq!(b["file"], photo.display().to_string());

    let status = cli(dir.path(), &env, &["import", "status", "--json"]).await;
    assert_eq!(status.status.code(), Some(0), "{}", String::from_utf8_lossy(&status.stderr));
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("\"ready\":1"), "the result waits in the queue for review: {text}");

    // A copy under another name is the same photo; --force asks Gemini again.
    let copy = dir.path().join("copy.jpg");
    std::fs::copy(&photo, &copy).unwrap();
    let out = cli(dir.path(), &env, &["extract", "--json", copy.to_str().unwrap()]).await;
    assert_eq!(json_lines(&out)[0]["attempt_id"], a["attempt_id"]);
    assert_eq!(fake.generate_count(), 1);
    let out = cli(dir.path(), &env, &["extract", "--json", "--force", photo.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_ne!(json_lines(&out)[0]["attempt_id"], a["attempt_id"]);
    assert_eq!(fake.generate_count(), 2);
}

/// While one process works the catalog's queue, `extract` in another hands it the files and
/// prints their results instead of failing with `conflict`.
#[tokio::test(flavor = "multi_thread")]
async fn extract_hands_its_files_to_a_running_import() {
    let fake =
        FakeGemini::start(FakeOptions { latency: std::time::Duration::from_millis(300), ..FakeOptions::default() })
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let shoot = dir.path().join("shoot");
    photos(&shoot, 30, 300);
    let dir_path = dir.path().to_path_buf();
    let env_owned: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let shoot_arg = shoot.to_str().unwrap().to_string();
    let import = tokio::spawn(async move {
        let env: Vec<(&str, &str)> = env_owned.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        cli(&dir_path, &env, &["import", "--json", "--concurrency", "2", &shoot_arg]).await
    });
    // The import holds the queue once it sends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while fake.generate_count() == 0 {
        assert!(std::time::Instant::now() < deadline, "the import never started");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let desk = photos(&dir.path().join("desk"), 1, 900);
    let out = cli(dir.path(), &env, &["extract", "--json", desk[0].to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("handed"), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["ok"], true, "{lines:?}");
    let import = import.await.unwrap();
    assert_eq!(import.status.code(), Some(0), "{}", String::from_utf8_lossy(&import.stderr));
    assert_eq!(fake.generate_count(), 31, "every photo once");
}

/// A failed answer that Gemini billed (cut off, blocked) carries its `"usage"` in the `--json`
/// line of `extract` and of `import`. FAILED_PRECONDITION stops an
/// import like a bad key (exit 2).
#[tokio::test(flavor = "multi_thread")]
async fn billed_failures_carry_usage_in_json_lines_and_failed_precondition_stops_an_import() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    fake.push(Behavior::ThinkingExhausted);
    let out = cli(&dir.path().join("a"), &env, &["extract", "--json", fixture().to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(1), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["error"]["kind"], "output_truncated", "{lines:?}");
    assert_eq!(lines[0]["usage"]["output_tokens"], 8192, "{lines:?}");
    assert_eq!(lines[0]["usage"]["thoughts_tokens"], 8192, "{lines:?}");

    let shoot = dir.path().join("shoot");
    photos(&shoot, 2, 90);
    fake.push(Behavior::NoCandidatesBlocked("PROHIBITED_CONTENT".into()));
    let out =
        cli(&dir.path().join("b"), &env, &["import", "--json", "--concurrency", "1", shoot.to_str().unwrap()]).await;
    let lines = json_lines(&out);
    let blocked = lines.iter().find(|l| l["error"]["kind"] == "blocked").unwrap_or_else(|| panic!("{lines:?}"));
    assert!(blocked["usage"]["prompt_tokens"].as_u64().unwrap() > 0, "{blocked}");
    assert!(lines.iter().any(|l| l["ok"] == true && l["usage"]["prompt_tokens"].as_u64().is_some()), "{lines:?}");

    fake.push(Behavior::FailedPrecondition);
    let out = cli(&dir.path().join("c"), &env, &["import", shoot.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(2), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Gemini is not available for this project or location"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs the binary with `stdin` piped in.
async fn cli_with_stdin(data_dir: &Path, env: &[(&str, &str)], args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_product-extractor"));
    cmd.args(args)
        .env_remove("DISPLAY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GEMINI_BASE_URL")
        .env("PRODUCT_EXTRACTOR_DATA_DIR", data_dir)
        .env("PRODUCT_EXTRACTOR_KEYRING_SERVICE", format!("product-extractor-test:{}", data_dir.display()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

/// The keyring tests need the real Secret Service `make test` starts (scripts/with-keyring).
fn require_secret_service() {
    assert!(
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some(),
        "no D-Bus session: run the tests under scripts/with-keyring (make test does), which starts a real Secret Service"
    );
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_key_lives_in_the_os_keyring_set_from_stdin_used_and_deleted() {
    require_secret_service();
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = cli_with_stdin(dir.path(), &[], &["key", "set"], "test-key\n").await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("OS keyring"), "{stdout}");
    assert!(!stdout.contains("test-key") && !stderr.contains("test-key"), "the key is never printed");

    let out = cli(dir.path(), &[], &["key", "status", "--json"]).await;
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["source"], "keyring", "{status}");
    let config = std::fs::read_to_string(dir.path().join("config.toml")).unwrap_or_default();
    assert!(!config.contains("test-key"), "the key is not in the config file: {config}");

    // The stored key is the one calls use.
    let env = [("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(dir.path(), &env, &["extract", "--json", fixture().to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));

    // GEMINI_API_KEY still overrides it.
    let out = cli(dir.path(), &[("GEMINI_API_KEY", "AIzaFROMTHEENVabcd")], &["key", "status"]).await;
    assert!(text(&out).0.contains("GEMINI_API_KEY"), "{:?}", text(&out));

    let out = cli(dir.path(), &[], &["key", "delete"]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let out = cli(dir.path(), &[], &["key", "status", "--json"]).await;
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["source"], "none", "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_in_the_config_file_moves_into_the_keyring_unless_the_user_chose_the_file() {
    require_secret_service();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[gemini]\nmodel = \"gemini-2.5-flash\"\napi_key = \"AIzaOLDVERSIONKEY1234\"\n").unwrap();
    let out = cli(dir.path(), &[], &["key", "status", "--json"]).await;
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&status["source"], &status["hint"]), (&json!("keyring"), &json!("••••1234")), "{status}");
    let after = std::fs::read_to_string(&config).unwrap();
    assert!(!after.contains("AIzaOLDVERSIONKEY1234"), "the key left the file: {after}");
    assert!(after.contains("gemini-2.5-flash"), "the rest of the file stays: {after}");

    // By explicit choice the key stays in the file, with a warning, and is not moved again.
    let out = cli_with_stdin(dir.path(), &[], &["key", "set", "--in-config-file"], "AIzaINTHEFILE5678\n").await;
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("plain text"), "{stderr}");
    let out = cli(dir.path(), &[], &["key", "status", "--json"]).await;
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&status["source"], &status["hint"]), (&json!("config_file"), &json!("••••5678")), "{status}");
    assert!(std::fs::read_to_string(&config).unwrap().contains("AIzaINTHEFILE5678"));
    cli(dir.path(), &[], &["key", "delete"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_keyring_key_set_says_what_to_do_instead() {
    let dir = tempfile::tempdir().unwrap();
    let nobus = [("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/product-extractor-test-bus")];
    let out = cli_with_stdin(dir.path(), &nobus, &["key", "set"], "AIzaNOWHERETOGO0000\n").await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("keyring") && stderr.contains("GEMINI_API_KEY"), "{stderr}");
    assert!(!std::fs::read_to_string(dir.path().join("config.toml")).unwrap_or_default().contains("NOWHERE"));
    // `key status` says so, and still works.
    let out = cli(dir.path(), &nobus, &["key", "status"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out).0.contains("keyring:"), "{:?}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_word_that_is_no_file_is_a_usage_error_not_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let out = cli(dir.path(), &[], &["improt", "photos/"]).await;
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    assert!(text(&out).1.contains("no such file, folder or command"), "{:?}", text(&out));
}

/// A lasting failure (a permanent 503 that opens the breaker for a minute): `import` says so on
/// stderr (not a terminal here) as the queue's state changes, gives up after `--give-up-after`
/// without progress with exit 3 and a summary saying why, and leaves the items queued.
#[tokio::test(flavor = "multi_thread")]
async fn import_gives_up_on_a_lasting_failure_with_exit_3_and_the_items_stay_queued() {
    let fake = FakeGemini::start(FakeOptions { default_behavior: Behavior::Unavailable, ..FakeOptions::default() })
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shoot = dir.path().join("shoot");
    photos(&shoot, 3, 90);
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("config.toml"),
        "[circuit_breaker]\nsliding_window_size = 2\nminimum_number_of_calls = 2\n\
         wait_duration_in_open_state = \"60s\"\n[retry]\nmax_attempts = 1\n",
    )
    .unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let args = ["import", "--json", "--concurrency", "1", "--give-up-after", "2s", shoot.to_str().unwrap()];
    let started = std::time::Instant::now();
    let out = cli(&data, &env, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "it ended long before the breaker's minute");
    assert!(
        stderr
            .lines()
            .any(|l| l
                .starts_with("paused: Gemini kept answering 5xx (overloaded or down) (circuit open) — next probe at ")),
        "{stderr}"
    );
    assert!(stderr.lines().any(|l| l.starts_with("stopped: gave up after 2s without progress")), "{stderr}");
    let lines = json_lines(&out);
    let summary = &lines.last().unwrap()["summary"];
    assert!(summary["gave_up"].as_str().unwrap().starts_with("gave up after 2s without progress"), "{summary}");
    assert_eq!(summary["queued"], 3, "{summary}");
    assert_eq!(summary["breaker"]["state"], "OPEN");
    assert_eq!(fake.generate_count(), 2, "the open breaker sent nothing more");
    let out = cli(&data, &[], &["import", "status", "--json"]).await;
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["counts"]["queued"], 3, "{status}");

    // The text summary says it too.
    let out = cli(&data, &env, &["import", "--give-up-after", "1s", shoot.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().last().unwrap().contains("; gave up after 1s without progress"), "{text}");
    let out = cli(&data, &env, &["import", "--give-up-after", "soon", shoot.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(2), "a duration that is not one is a usage error");
}

/// Paths that cannot be read, as a user without privileges: a folder or file given on the command
/// line is an error line and exit 1 (never "0 files" and exit 0); an unreadable subfolder is a
/// skip with the reason, and the rest of the folder is imported.
#[tokio::test(flavor = "multi_thread")]
async fn unreadable_paths_are_errors_when_given_and_skips_inside_a_folder() {
    use std::os::unix::fs::PermissionsExt;
    assert_can_run_unprivileged();
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    mode(root, 0o755);
    let shoot = root.join("shoot");
    photos(&shoot, 1, 110);
    photos(&shoot.join("private"), 1, 120);
    photos(&root.join("locked"), 1, 130);
    std::fs::copy(fixture(), root.join("secret.jpg")).unwrap();
    for p in [&shoot, &root.join("locked")] {
        for entry in std::fs::read_dir(p).unwrap() {
            mode(&entry.unwrap().path(), 0o644);
        }
        mode(p, 0o755);
    }
    mode(&shoot.join("private"), 0o000);
    mode(&root.join("locked"), 0o000);
    mode(&root.join("secret.jpg"), 0o000);
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    mode(&data, 0o777);
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let path = |p: &str| root.join(p).to_str().unwrap().to_string();

    for given in ["locked", "secret.jpg", "missing.jpg"] {
        let out = cli_unprivileged(&data, &env, &["extract", "--json", &path(given)]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "extract {given}: {stderr}");
        let lines = json_lines(&out);
        assert_eq!(lines[0]["ok"], false, "{given}: {lines:?}");
        assert_eq!(lines[0]["error"]["kind"], "io", "{given}: {lines:?}");
        assert!(lines[0]["error"]["message"].as_str().unwrap().contains(given), "{given}: {lines:?}");
        assert_eq!(lines.last().unwrap()["summary"]["failed"], 1, "{given}: {lines:?}");

        let out = cli_unprivileged(&data, &env, &["import", "--json", &path(given)]).await;
        assert_eq!(out.status.code(), Some(1), "import {given}: {}", String::from_utf8_lossy(&out.stderr));
        let lines = json_lines(&out);
        assert_eq!(lines[0]["ok"], false, "{given}: {lines:?}");
        assert_eq!(lines[0]["error"]["kind"], "io", "{given}: {lines:?}");
        let out = cli_unprivileged(&data, &env, &["import", &path(given)]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.lines().any(|l| l.starts_with("error ") && l.contains("[io]")), "{given}: {text}");
    }

    let out = cli_unprivileged(&data, &env, &["import", "--json", &path("shoot")]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    let private = lines.iter().find(|l| l["file"].as_str().is_some_and(|f| f.ends_with("shoot/private")));
    let private = private.unwrap_or_else(|| panic!("the locked subfolder is listed: {lines:?}"));
    assert_eq!(private["skipped"]["reason"], "unreadable", "{private}");
    assert!(private["skipped"]["message"].as_str().unwrap().contains("ermission denied"), "{private}");
    assert_eq!(lines.iter().filter(|l| l["state"] == "ready").count(), 1, "{lines:?}");
}

/// A file name that is not UTF-8 (any bytes but `/` and NUL are a name on Unix) extracts and
/// imports; the JSON line shows the name lossily and carries the exact bytes in hex
/// (`file_bytes`), which name the file again.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_name_that_is_not_utf8_extracts_and_imports_and_json_carries_its_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let data = dir.path().join("data");
    let name: &[u8] = b"caf\xe9-\xff\xfe.jpg";
    let shoot = dir.path().join("shoot");
    std::fs::create_dir_all(&shoot).unwrap();
    let odd = shoot.join(OsStr::from_bytes(name));
    std::fs::write(&odd, fake_gemini::photos::sample_jpeg(900, 320, 240, 85)).unwrap();
    // Another name with the same display text (both bytes show as U+FFFD): a different file.
    let twin = shoot.join(OsStr::from_bytes(b"caf\xe8-\xff\xfe.jpg"));
    std::fs::write(&twin, fake_gemini::photos::sample_jpeg(901, 320, 240, 85)).unwrap();
    let hex = |p: &Path| p.as_os_str().as_bytes().iter().map(|b| format!("{b:02x}")).collect::<String>();

    let out = cli_os(&data, &env, &[OsStr::new("extract"), OsStr::new("--json"), odd.as_os_str()]).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["ok"], true, "{lines:?}");
    assert_eq!(lines[0]["file"], odd.to_string_lossy().as_ref());
    assert_eq!(lines[0]["file_bytes"], hex(&odd), "{lines:?}");
    let keys: Vec<&String> = lines[0].as_object().unwrap().keys().take(3).collect();
    assert_eq!(keys, ["file", "file_bytes", "ok"], "the file comes first, as for every line");
    // A UTF-8 name has no file_bytes.
    let out = cli(&data, &env, &["extract", "--json", fixture().to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(json_lines(&out)[0].get("file_bytes").is_none());

    // A catalog of its own: every file extracted by the import itself.
    let data = dir.path().join("data-import");
    let out = cli_os(&data, &env, &[OsStr::new("import"), OsStr::new("--json"), shoot.as_os_str()]).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    let items: Vec<&Value> = lines.iter().filter(|l| l.get("item_id").is_some()).collect();
    assert_eq!(items.len(), 2, "{lines:?}");
    let mut bytes: Vec<&str> = items.iter().map(|l| l["file_bytes"].as_str().unwrap()).collect();
    bytes.sort_unstable();
    assert_eq!(bytes, [hex(&twin), hex(&odd)], "{lines:?}");
    for line in &items {
        assert_eq!(line["ok"], true, "{line}");
        assert!(matches!(line["state"].as_str(), Some("ready")), "{line}");
    }
    let hexed =
        |s: &str| (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect::<Vec<u8>>();
    for b in bytes {
        assert!(Path::new(OsStr::from_bytes(&hexed(b))).is_file(), "file_bytes names the file");
    }
    let out = cli(&data, &env, &["import", "status", "--json"]).await;
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let with_bytes = status["items"].as_array().unwrap().iter().filter(|i| i.get("file_bytes").is_some()).count();
    assert!(with_bytes >= 2, "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn extract_json_lines_carry_the_barcodes_read_and_show_tells_the_gtins_source() {
    use barcode_photos::{draw, finish, scene, Effects, Placement, Symbol, Symbology};
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    // Gemini reads another (valid) GTIN than the photo's EAN-13 4006381333931.
    fake.push(Behavior::Fixed(json!({"name": "Tomato soup", "gtin": "0036000291452"})));
    let dir = tempfile::tempdir().unwrap();
    let mut img = scene(3);
    draw(&mut img, &Symbol::new(Symbology::Ean13, "400638133393"), Placement::plain((768.0, 700.0)));
    let photo = dir.path().join("soup.png");
    finish(img, Effects::default(), 3).save(&photo).unwrap();
    let broken = dir.path().join("broken.jpg");
    std::fs::write(&broken, b"not an image at all").unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let args = ["extract", "--json", "--save", photo.to_str().unwrap(), broken.to_str().unwrap()];
    let out = cli(dir.path(), &env, &args).await;
    let lines = json_lines(&out);
    assert_eq!(lines[0]["barcodes"], json!(["4006381333931"]), "{lines:?}");
    assert_eq!(lines[0]["product"]["gtin"], "4006381333931");
    let flag = lines[0]["flags"].as_array().unwrap().iter().find(|f| f["kind"] == "barcode").unwrap();
    assert_eq!(flag["field"], "gtin");
    assert!(flag["message"].as_str().unwrap().contains("Gemini read 0036000291452"), "{flag}");
    assert!(lines[1].get("barcodes").is_none(), "a photo never prepared read nothing: {}", lines[1]);

    let out = cli(dir.path(), &[], &["products", "show", "1", "--json"]).await;
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["product"]["gtin_source"], "photo");
    let text = cli(dir.path(), &[], &["products", "show", "1"]).await;
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(text.contains("4006381333931 (from the photo's barcode)"), "{text}");
}

/// `import` groups a shoot into products by name (`[import] group_by`, default `stem`): a line
/// per product with `"files"` (its photos, `"file"` first), one request each; `products show
/// --json` lists the saved product's `"photos"`; `--group-by none` makes each photo its own.
#[tokio::test(flavor = "multi_thread")]
async fn import_groups_a_shoot_into_products_with_all_their_files() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shoot = dir.path().join("shoot");
    std::fs::create_dir_all(&shoot).unwrap();
    for (seed, name) in (500..).zip(["tea_back.jpg", "tea_front.jpg", "tea_2.jpg", "soap.jpg"]) {
        std::fs::write(shoot.join(name), fake_gemini::photos::sample_jpeg(seed, 320, 240, 85)).unwrap();
    }
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let data = dir.path().join("data");
    for name in ["Green tea", "Olive soap"] {
        fake.push(Behavior::Fixed(json!({"name": name})));
    }
    let out = cli(&data, &env, &["import", "--json", "--save", "--concurrency", "1", shoot.to_str().unwrap()]).await;
    let lines = json_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    let products: Vec<&Value> = lines.iter().filter(|l| l.get("state").is_some()).collect();
    assert_eq!(products.len(), 2, "{lines:?}");
    let tea = products.iter().find(|l| l.get("files").is_some()).unwrap();
    let files: Vec<&str> = tea["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert_eq!(files.len(), 3, "{tea}");
    assert!(
        files[0].ends_with("tea_front.jpg") && files[1].ends_with("tea_2.jpg") && files[2].ends_with("tea_back.jpg")
    );
    assert_eq!(tea["file"], files[0], "\"file\" is the first photo");
    assert_eq!(tea.as_object().unwrap().keys().next().map(String::as_str), Some("file"));
    assert!(products.iter().find(|l| l.get("files").is_none()).unwrap()["file"]
        .as_str()
        .unwrap()
        .ends_with("soap.jpg"));
    assert_eq!(fake.generate_count(), 2, "one request per product");

    let id = tea["saved_product_id"].as_i64().expect("saved").to_string();
    let show = cli(&data, &[], &["products", "show", &id, "--json"]).await;
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    let shown_files: Vec<&str> =
        shown["photos"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert_eq!(shown_files, files, "the saved product's photos, in order");

    // The same files, each its own product, in another data dir.
    let out =
        cli(&dir.path().join("none"), &env, &["import", "--json", "--group-by", "none", shoot.to_str().unwrap()]).await;
    assert_eq!(json_lines(&out).iter().filter(|l| l.get("state").is_some()).count(), 4);
    assert_eq!(fake.generate_count(), 6);
}

/// A disk too full for the import (here: a watermark of the whole disk, `[import]
/// min_free_disk_percent = 100`): `import` sends nothing, says which disk and how much is free and
/// what to do in a terminal, exits 1, and the photos stay queued for the next run.
#[tokio::test(flavor = "multi_thread")]
async fn import_on_a_full_disk_exits_1_says_so_and_keeps_the_photos_queued() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("config.toml"),
        "[import]\nmin_free_disk_bytes = 1000000000000000000\nmin_free_disk_percent = 100.0\n",
    )
    .unwrap();
    photos(&dir.path().join("shoot"), 3, 640);
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(&data, &env, &["import", dir.path().join("shoot").to_str().unwrap()]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("The disk holding the catalog ({})", data.display())), "{stderr}");
    assert!(stderr.contains("free, less than the"), "{stderr}");
    assert!(stderr.contains("then run the same command again: the photos stay queued"), "{stderr}");
    assert_eq!(fake.generate_count(), 0, "nothing is sent while the disk is too full");
    let status = cli(&data, &[], &["import", "status", "--json"]).await;
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["counts"]["queued"], 3, "{status}");
}

/// A shoot renamed in sequence (`photo-000.jpg` … `photo-011.jpg`, how many teams name files) is
/// twelve products, one request each, and the import says why: a stderr note and the summary's
/// `sequences` (before, the stem rule took the numbers for photo numbers of one product "photo"
/// and cut the twelve into two products of six).
#[tokio::test(flavor = "multi_thread")]
async fn import_says_a_numbered_sequence_is_one_product_a_photo() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shoot = dir.path().join("renamed");
    std::fs::create_dir_all(&shoot).unwrap();
    for i in 0..12u64 {
        std::fs::write(
            shoot.join(format!("photo-{i:03}.jpg")),
            fake_gemini::photos::sample_jpeg(700 + i, 320, 240, 85),
        )
        .unwrap();
    }
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(&dir.path().join("data"), &env, &["import", "--json", shoot.to_str().unwrap()]).await;
    let lines = json_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    let products: Vec<&Value> = lines.iter().filter(|l| l.get("state").is_some()).collect();
    assert_eq!(products.len(), 12, "{lines:?}");
    assert!(products.iter().all(|l| l.get("files").is_none()), "one photo each: {products:?}");
    assert_eq!(fake.generate_count(), 12, "one request per photo");
    let summary = &lines.last().unwrap()["summary"];
    let sequences = summary["sequences"].as_array().expect("the summary names the sequence");
    assert_eq!(sequences.len(), 1, "{summary}");
    assert_eq!(
        (&sequences[0]["first"], &sequences[0]["last"], &sequences[0]["photos"]),
        (&json!("photo-000.jpg"), &json!("photo-011.jpg"), &json!(12))
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("note: 12 photos named photo-000.jpg … photo-011.jpg look like a numbered sequence"),
        "{stderr}"
    );
    assert!(stderr.contains("group_by = \"folder\""), "it says how to change it: {stderr}");
}

/// `catalog check --json` against the real server (`scripts/with-postgres`): connects, migrates a
/// fresh database, prints the versions and the URL with its password masked; the password never
/// appears on stdout or stderr. Other commands refuse a server catalog with a clear message.
#[tokio::test(flavor = "multi_thread")]
async fn catalog_check_json_migrates_the_server_and_masks_the_password() {
    let url = pe_core::catalog::server::testing::fresh_database("cli_check").await;
    let password =
        pe_core::catalog::server::ServerUrl::parse(&url).unwrap().config().get_password().map(<[u8]>::to_vec);
    let password = String::from_utf8(password.expect("the test URL has a password")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = cli(dir.path(), &[], &["catalog", "check", "--catalog", &url, "--json"]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let check: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(check["schema_version"], json!(pe_core::catalog::server::SERVER_SCHEMA_VERSION));
    let all: Vec<u32> = (1..=pe_core::catalog::server::SERVER_SCHEMA_VERSION).collect();
    assert_eq!(check["applied"], json!(all));
    assert!(check["server_version"].as_str().unwrap().starts_with(char::is_numeric), "{check}");
    assert!(check["url"].as_str().unwrap().starts_with("postgres://pe_test:••••@127.0.0.1:"), "{check}");
    assert!(!stdout.contains(&password) && !stderr.contains(&password));

    // Again, from the environment: nothing to migrate.
    let out = cli(dir.path(), &[("PRODUCT_EXTRACTOR_CATALOG_URL", &url)], &["catalog", "check", "--json"]).await;
    let check: Value = serde_json::from_str(text(&out).0.trim()).unwrap();
    assert_eq!(check["applied"], json!([]));

    // A wrong password: exit 1, a typed error, no password anywhere.
    let wrong = url.replacen(&format!(":{password}@"), ":Wr0ng-pass@", 1);
    let out = cli(dir.path(), &[], &["catalog", "check", "--catalog", &wrong, "--json"]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let error: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(error["error"]["code"], "catalog", "{error}");
    assert!(stderr.contains("refused user pe_test"), "{stderr}");
    for shown in [&stdout, &stderr] {
        assert!(!shown.contains("Wr0ng-pass") && !shown.contains(&password), "{shown}");
    }

    // A SQLite file's backup of a server catalog is refused, with what to do.
    let file = dir.path().join("backup.sqlite3");
    let out =
        cli(dir.path(), &[("PRODUCT_EXTRACTOR_CATALOG_URL", &url)], &["products", "backup", file.to_str().unwrap()])
            .await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("does not support `products backup`") && stderr.contains("use the local catalog"),
        "{stderr}"
    );
    assert!(!stderr.contains(&password), "{stderr}");
    assert!(!file.exists());
    // Without a server URL, `catalog check` says what it needs.
    let out = cli(dir.path(), &[], &["catalog", "check"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("needs a server catalog"));
}

/// `catalog password` (the real Secret Service of `scripts/with-keyring`, the real server of
/// `scripts/with-postgres`): a URL without its password is refused with where to put one; a wrong
/// password is never saved; the right one is saved in the keyring and then opens the catalog;
/// status says where the password comes from; delete removes it. The password is never printed.
#[tokio::test(flavor = "multi_thread")]
async fn the_server_password_lives_in_the_keyring_checked_before_it_is_saved() {
    let url = pe_core::catalog::server::testing::fresh_database("cli_password").await;
    let password =
        pe_core::catalog::server::ServerUrl::parse(&url).unwrap().config().get_password().map(<[u8]>::to_vec);
    let password = String::from_utf8(password.expect("the test URL has a password")).unwrap();
    let bare = url.replacen(&format!(":{password}@"), "@", 1);
    assert_ne!(bare, url);
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let env: &[(&str, &str)] =
        &[("PRODUCT_EXTRACTOR_CATALOG_URL", &bare), ("HOME", home.path().to_str().unwrap()), ("PGPASSWORD", "")];
    let no_secret = |out: &Output| {
        let (stdout, stderr) = text(out);
        assert!(!stdout.contains(&password) && !stderr.contains(&password), "{stdout}{stderr}");
    };

    let out = cli(dir.path(), env, &["products", "list", "--json"]).await;
    no_secret(&out);
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    assert!(text(&out).1.contains("asks for a password and none was found") && text(&out).1.contains("keyring"));

    let out = cli_with_stdin(dir.path(), env, &["catalog", "password", "set"], "Wr0ng-pass\n").await;
    no_secret(&out);
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    assert!(text(&out).1.contains("refused user pe_test"), "{:?}", text(&out));
    let out = cli(dir.path(), env, &["catalog", "password", "status", "--json"]).await;
    let status: Value = serde_json::from_str(text(&out).0.trim()).unwrap();
    assert_eq!((status["saved"].clone(), status["source"].clone()), (json!(false), json!("none")), "{status}");

    let out = cli_with_stdin(dir.path(), env, &["catalog", "password", "set"], &format!("{password}\n")).await;
    no_secret(&out);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let out = cli(dir.path(), env, &["catalog", "password", "status", "--json"]).await;
    no_secret(&out);
    let status: Value = serde_json::from_str(text(&out).0.trim()).unwrap();
    assert_eq!((status["saved"].clone(), status["source"].clone()), (json!(true), json!("keyring")), "{status}");
    assert!(status["key"].as_str().unwrap().starts_with("pe_test@127.0.0.1:"), "{status}");
    let out = cli(dir.path(), env, &["products", "list", "--json"]).await;
    no_secret(&out);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));

    // The URL's own password comes first (and a wrong one there is named as the URL's).
    let wrong = url.replacen(&format!(":{password}@"), ":Wr0ng-pass@", 1);
    let out = cli(dir.path(), env, &["products", "list", "--catalog", &wrong]).await;
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    assert!(text(&out).1.contains("the one from the URL was used"), "{:?}", text(&out));

    let out = cli(dir.path(), env, &["catalog", "password", "delete"]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let out = cli(dir.path(), env, &["products", "list"]).await;
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    assert!(text(&out).1.contains("none was found"), "{:?}", text(&out));
}

/// `catalog copy` against the real server (`scripts/with-postgres`): a desktop's catalog (one photo
/// extracted and saved) copied to an empty database prints each table's count (JSON here), the
/// password never shown; copied back into a new file, `products search` finds the product there;
/// a second copy into the same database is refused with exit 1 and the code `conflict`.
#[tokio::test(flavor = "multi_thread")]
async fn catalog_copy_to_the_server_and_back_prints_the_counts() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(dir.path(), &env, &["extract", "--save", fixture().to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let local = dir.path().join("catalog.sqlite3");
    assert!(local.is_file(), "the data dir's catalog is {}", local.display());

    let url = pe_core::catalog::server::testing::fresh_database("cli_copy").await;
    let password =
        pe_core::catalog::server::ServerUrl::parse(&url).unwrap().config().get_password().map(<[u8]>::to_vec);
    let password = String::from_utf8(password.expect("the test URL has a password")).unwrap();
    let out =
        cli(dir.path(), &[], &["catalog", "copy", "--from", local.to_str().unwrap(), "--to", &url, "--json"]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    let counts: Vec<(String, u64)> = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["table"].as_str().unwrap().to_string(), t["rows"].as_u64().unwrap()))
        .collect();
    let count = |table: &str| counts.iter().find(|(t, _)| t == table).map(|(_, n)| *n);
    assert_eq!(counts.len(), pe_core::catalog::copy::TABLES.len(), "{report}");
    for table in ["photos", "attempts", "products", "product_revisions", "import_items"] {
        assert_eq!(count(table), Some(1), "{table}: {report}");
    }
    assert_eq!(count("batches"), Some(0), "{report}");
    assert!(report["to"].as_str().unwrap().starts_with("postgres://pe_test:••••@127.0.0.1:"), "{report}");
    assert!(!stdout.contains(&password) && !stderr.contains(&password), "{stdout}{stderr}");

    // Back into a new file, in text: a line per table; search works there.
    let back = dir.path().join("copied").join("back.sqlite3");
    let out = cli(dir.path(), &[], &["catalog", "copy", "--from", &url, "--to", back.to_str().unwrap()]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.lines().any(|l| l.starts_with("products ") && l.trim_end().ends_with(" 1")), "{stdout}");
    assert!(stdout.contains("row count checked"), "{stdout}");
    assert!(!stdout.contains(&password) && !stderr.contains(&password), "{stdout}{stderr}");
    let list = |catalog: PathBuf| {
        let dir = dir.path().to_path_buf();
        async move {
            let out = cli(&dir, &[], &["--catalog", catalog.to_str().unwrap(), "products", "list", "--json"]).await;
            assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        }
    };
    let rows = list(local.clone()).await;
    assert_eq!(list(back.clone()).await, rows);
    let name = rows[0]["name"].as_str().unwrap().to_string();
    let word: String = name.split_whitespace().next().unwrap().to_lowercase().chars().take(3).collect();
    let out = cli(dir.path(), &[], &["--catalog", back.to_str().unwrap(), "products", "search", &word, "--json"]).await;
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), rows, "search {word:?} in the copy");

    // The products commands work on the server catalog itself, as on the file.
    let on_server = |args: &'static [&'static str]| {
        let (dir, url) = (dir.path().to_path_buf(), url.clone());
        async move {
            let mut all = vec!["--catalog", url.as_str()];
            all.extend(args);
            let out = cli(&dir, &[], &all).await;
            let (stdout, stderr) = text(&out);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {stdout}{stderr}");
            stdout
        }
    };
    let listed: Value = serde_json::from_str(&on_server(&["products", "list", "--json"]).await).unwrap();
    assert_eq!(listed, rows, "products list on the server");
    let id = rows[0]["id"].as_i64().unwrap().to_string();
    let show = |catalog: String, id: String| {
        let dir = dir.path().to_path_buf();
        async move {
            let out = cli(&dir, &[], &["--catalog", &catalog, "products", "show", &id, "--json"]).await;
            assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        }
    };
    assert_eq!(show(url.clone(), id.clone()).await, show(local.to_str().unwrap().into(), id.clone()).await);
    let exported = on_server(&["products", "export", "--format", "jsonl"]).await;
    assert_eq!(exported.lines().count(), 1, "{exported}");
    assert!(exported.contains(&name), "{exported}");
    let out = cli(dir.path(), &[], &["--catalog", &url, "products", "delete", &id, "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(on_server(&["products", "list", "--json"]).await.trim(), "[]");
    let out = cli(dir.path(), &[], &["--catalog", &url, "products", "undelete", &id]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(serde_json::from_str::<Value>(&on_server(&["products", "list", "--json"]).await).unwrap(), rows);
    assert!(!exported.contains(&password));

    // The server now holds a catalog: a second copy is refused, saying what to do.
    let out =
        cli(dir.path(), &[], &["catalog", "copy", "--from", local.to_str().unwrap(), "--to", &url, "--json"]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let error: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(error["error"]["code"], "conflict", "{error}");
    assert!(stderr.contains("already holds a catalog") && stderr.contains("empty database"), "{stderr}");
    assert!(!stderr.contains(&password), "{stderr}");
    // A malformed end is a usage error.
    let out = cli(dir.path(), &[], &["catalog", "copy", "--from", "mysql://h/db", "--to", &url]).await;
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
}

/// `--catalog PATH` opens that SQLite file instead of the data dir's.
#[tokio::test(flavor = "multi_thread")]
async fn catalog_flag_with_a_path_opens_that_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("elsewhere.sqlite3");
    let out = cli(dir.path(), &[], &["products", "list", "--json", "--catalog", file.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert!(file.exists(), "the catalog was created at the given path");
}

/// What a terminal would act on: a control character other than the newline, a bidi override or
/// isolate, a zero-width character. None may reach a human's output as it is.
fn acting(c: char) -> bool {
    (c.is_control() && c != '\n') || pe_core::text::is_invisible(c)
}

/// Asserts that `out`'s stdout and stderr hold nothing a terminal would act on; returns both.
fn shown_safely(out: &Output) -> (String, String) {
    let (stdout, stderr) = text(out);
    for (name, stream) in [("stdout", &stdout), ("stderr", &stderr)] {
        let raw: Vec<char> = stream.chars().filter(|&c| acting(c)).collect();
        assert!(raw.is_empty(), "{name} holds {raw:?} as it is: {stream:?}");
    }
    (stdout, stderr)
}

/// Escape sequences and bidi overrides in a file's name, in Gemini's answer, in a product another
/// client wrote to the catalog (a colleague's desktop on a team catalog, an older version) and in
/// Gemini's error message never reach the terminal as they are: `extract`, `products list`,
/// `products show`, an error line and a usage error show them as visible escapes, each product
/// and file on its own line; `--json` carries them as serde writes them (issue 32).
#[tokio::test(flavor = "multi_thread")]
async fn escape_sequences_in_names_answers_and_errors_are_shown_not_run() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    // ESC[2J clears the screen, CR goes back to the line's start, U+202E reverses what follows.
    let photo = dir.path().join("shot\u{1b}[2J\r\u{202e}gpj.jpg");
    std::fs::copy(fixture(), &photo).unwrap();
    // Gemini's answer: the bidi and zero-width characters stay in the catalog (they are text), the
    // control characters do not (see the next test).
    fake.push(Behavior::Fixed(json!({
        "name": "Oat Drink \u{202e}1 gk\u{200b}",
        "brand": "Oat\u{2066}ly\u{2069}",
        "description": "Line one\nline two",
    })));
    let out = cli(dir.path(), &env, &["extract", "--save", photo.to_str().unwrap()]).await;
    let (stdout, stderr) = shown_safely(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let line = stdout.lines().next().unwrap();
    assert!(line.starts_with("ok    ") && line.contains("shot\\x1b[2J\\r\\u{202e}gpj.jpg: "), "{line}");
    assert!(line.contains("Oat Drink \\u{202e}1 gk\\u{200b} (Oat\\u{2066}ly\\u{2069})"), "{line}");

    // `--json` is unchanged: serde's escapes for control characters, the rest as it is.
    let out = cli(dir.path(), &env, &["products", "list", "--json"]).await;
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["name"], "Oat Drink \u{202e}1 gk\u{200b}");

    // Another client wrote the product: control characters in every field, a colleague's name.
    let catalog = pe_core::catalog::Catalog::open(&dir.path().join("catalog.sqlite3")).unwrap();
    let record = catalog.get_product(1).await.unwrap();
    let hostile = pe_core::product::Product {
        name: "Oat\u{1b}]0;owned\u{7}\u{1b}]8;;https://evil.example\u{1b}\\Drink\u{8}\u{8}\u{9b}31m".into(),
        brand: Some("Oat\rly".into()),
        color: Some("Bl\u{1b}[8mue".into()),
        description: Some("Line one\n\u{1b}[2Jline two\u{7f}".into()),
        attributes: vec![pe_core::product::Attribute { name: "Fla\u{1b}[5mvor".into(), value: "Van\u{0}illa".into() }],
        ..record.saved.clone()
    };
    catalog
        .update_product(pe_core::catalog::UpdateProduct {
            id: 1,
            expected_revision: record.revision,
            saved: hostile,
            attempt_id: None,
            source: pe_core::catalog::RevisionSource::Edit,
            saved_by: "mallory\u{1b}]0;pwned\u{7}".into(),
            saved_at: record.updated_at + 1,
        })
        .await
        .unwrap();
    drop(catalog);

    let out = cli(dir.path(), &env, &["products", "list"]).await;
    let (stdout, stderr) = shown_safely(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout.lines().count(), 1, "one product, one line: {stdout}");
    assert!(
        stdout.contains("Oat\\x1b]0;owned\\x07\\x1b]8;;https://evil.example\\x1b\\Drink\\x08\\x08\\u{9b}31m"),
        "{stdout}"
    );
    assert!(stdout.contains("Oat\\rly"), "{stdout}");

    let out = cli(dir.path(), &env, &["products", "show", "1"]).await;
    let (stdout, stderr) = shown_safely(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    for shown in [
        "#1 Oat\\x1b]0;owned\\x07",
        "  description  Line one\n               \\x1b[2Jline two\\x7f\n",
        "  color        Bl\\x1b[8mue\n",
        "  photo        ",
        "shot\\x1b[2J\\r\\u{202e}gpj.jpg\n",
        "  attribute    Fla\\x1b[5mvor: Van\\x00illa\n",
        "by mallory\\x1b]0;pwned\\x07",
    ] {
        assert!(stdout.contains(shown), "{shown:?} in {stdout}");
    }

    // Gemini's error message, on the file's error line.
    let other = dir.path().join("other\u{1b}[1A.jpg");
    std::fs::write(&other, fake_gemini::photos::sample_jpeg(321, 320, 240, 85)).unwrap();
    fake.push(Behavior::HttpError {
        code: 400,
        status: "INVALID_ARGUMENT".into(),
        message: "Bad\u{1b}[2J request\u{7}\r\u{202e}".into(),
    });
    let out = cli(dir.path(), &env, &["extract", other.to_str().unwrap()]).await;
    let (stdout, stderr) = shown_safely(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let line = stdout.lines().next().unwrap();
    assert!(line.starts_with("error ") && line.contains("other\\x1b[1A.jpg: ["), "{line}");
    assert!(line.contains("Bad\\x1b[2J request\\x07\\r\\u{202e}"), "{line}");

    // A usage error naming a file.
    let missing = dir.path().join("gone\u{1b}]0;title\u{7}.jpg");
    let out = cli(dir.path(), &env, &[missing.to_str().unwrap()]).await;
    let (stdout, stderr) = shown_safely(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("gone\\x1b]0;title\\x07.jpg"), "{stderr}");
}

/// A NUL (and the other control characters) in Gemini's answer never reaches the catalog: the
/// answer is saved without them, each field flagged; a desktop's catalog holding it copies to a
/// team server, and a team `extract --save` on the server saves it with its call recorded
/// (PostgreSQL's text cannot hold a NUL; issue 32).
#[tokio::test(flavor = "multi_thread")]
async fn a_nul_in_an_answer_is_removed_so_a_team_save_and_a_copy_to_the_server_go_through() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let answer = json!({
        "name": "Oat\u{0} Drink\u{1b}[2J",
        "brand": "Oat\u{0}ly",
        "description": "one\u{0}\ntwo",
        "attributes": [{"name": "Fla\u{0}vor", "value": "Vanilla\u{0}"}],
    });
    fake.push(Behavior::Fixed(answer.clone()));
    let out = cli(dir.path(), &env, &["extract", "--save", "--json", fixture().to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let line = &json_lines(&out)[0];
    assert_eq!(line["product"]["name"], "Oat Drink[2J", "{line}");
    assert_eq!(line["product"]["description"], "one\ntwo", "{line}");
    let flagged: Vec<&str> = line["flags"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "control_characters_removed")
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(flagged, ["name", "brand", "description", "attributes[0].name", "attributes[0].value"], "{line}");

    let url = pe_core::catalog::server::testing::fresh_database("cli_nul").await;
    let local = dir.path().join("catalog.sqlite3");
    let out = cli(dir.path(), &[], &["catalog", "copy", "--from", local.to_str().unwrap(), "--to", &url]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));

    let shot = dir.path().join("team.jpg");
    std::fs::write(&shot, fake_gemini::photos::sample_jpeg(4242, 320, 240, 85)).unwrap();
    fake.push(Behavior::Fixed(answer));
    let out = cli(dir.path(), &env, &["--catalog", &url, "extract", "--save", "--json", shot.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let line = &json_lines(&out)[0];
    assert_eq!(line["saved_product_id"], 2, "{line}");
    let out = cli(dir.path(), &[], &["--catalog", &url, "products", "list", "--json"]).await;
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = rows.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Oat Drink[2J", "Oat Drink[2J"], "{rows}");
    let out = cli(dir.path(), &[], &["--catalog", &url, "usage", "--json"]).await;
    let summary = json_lines(&out).pop().unwrap();
    assert_eq!(summary["summary"]["cost"]["calls"], 2, "both calls are in the cost meter: {summary}");
}
