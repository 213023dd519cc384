//! The Extract view in the real window, every test on both catalog backends: this computer's
//! SQLite file, and a team catalog on the throwaway PostgreSQL server (`scripts/with-postgres`).
//! A scenario is one `async fn(Backend, base port)`; `on_both_backends!` makes a test of it for
//! each backend, each with ports of its own (`base` … `base + 3`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use fantoccini::Locator;
use serde_json::json;

use super::{
    app_command, connect, drop_files, pairs, products_on, screenshot, start_driver, thumbnails_load, wait_for,
    wait_gone, wait_text, App, Backend,
};

/// A test of `scenario` on each backend: `$sqlite` on this computer's catalog file with ports from
/// `$sqlite_base`, `$team` on a team catalog (a fresh database) with ports from `$team_base`.
macro_rules! on_both_backends {
    ($scenario:ident: $sqlite:ident @ $sqlite_base:literal, $team:ident @ $team_base:literal) => {
        #[tokio::test(flavor = "multi_thread")]
        #[ignore = "needs a display, tauri-driver and WebKitWebDriver: make test-e2e"]
        async fn $sqlite() {
            $scenario(Backend::Sqlite, $sqlite_base).await;
        }

        #[tokio::test(flavor = "multi_thread")]
        #[ignore = "needs a display, tauri-driver, WebKitWebDriver and PostgreSQL: make test-e2e"]
        async fn $team() {
            // A short label: PostgreSQL cuts names at 63 bytes, and the pid and a counter follow.
            $scenario(Backend::team("e2e_extract").await, $team_base).await;
        }
    };
}

on_both_backends!(newcomer: newcomer_on_sqlite @ 4500, newcomer_on_a_team_catalog @ 4510);
on_both_backends!(
    pending_reviews_survive_a_restart:
    pending_reviews_survive_a_restart_on_sqlite @ 4520,
    pending_reviews_survive_a_restart_on_a_team_catalog @ 4530
);
on_both_backends!(
    breaker_opens_then_probes_and_closes:
    breaker_opens_then_probes_and_closes_on_sqlite @ 4540,
    breaker_opens_then_probes_and_closes_on_a_team_catalog @ 4550
);
on_both_backends!(
    photos_handed_over_show_cards_live:
    photos_handed_over_show_cards_live_on_sqlite @ 4560,
    photos_handed_over_show_cards_live_on_a_team_catalog @ 4570
);
on_both_backends!(
    a_waiting_card_says_why_and_goes_on_once_fixed:
    a_waiting_card_says_why_and_goes_on_once_fixed_on_sqlite @ 4580,
    a_waiting_card_says_why_and_goes_on_once_fixed_on_a_team_catalog @ 4590
);

/// The `n`th pair of ports from `base`.
fn ports(base: u16, n: u16) -> (u16, u16) {
    (base + 2 * n, base + 2 * n + 1)
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A copy of a fixture under another name in `dir` (new bytes are not needed: a name is a card).
fn copy_of(dir: &Path, fixture_name: &str, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy(fixture(fixture_name), &path).unwrap();
    path
}

/// A generated photo of its own bytes (`seed`) in `dir`.
fn generated(dir: &Path, name: &str, seed: u64) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, fake_gemini::photos::sample_jpeg(seed, 480, 360, 85)).unwrap();
    path
}

fn card(file: &str) -> String {
    format!(r#"[data-testid="job-card"][data-file="{file}"]"#)
}

fn card_in(status: &str, file: &str) -> String {
    format!(r#"[data-testid="job-card"][data-status="{status}"][data-file="{file}"]"#)
}

/// A newcomer's first minutes: no key, demo mode, a dropped photo and a broken one, review, save,
/// the list, Settings, and the breaker forced open while a photo waits.
async fn newcomer(backend: Backend, base: u16) {
    let name = |step: &str| format!("{}-newcomer-{step}", backend.label());
    let data_dir = tempfile::tempdir().unwrap();
    let env = backend.env(&[]);
    let driver = start_driver(data_dir.path(), ports(base, 0), &pairs(&env));
    let c = connect(&driver).await;
    let long = Duration::from_secs(30);

    // The window holds only the capabilities it uses: a core window API it never calls is refused.
    let refused = c
        .execute_async(
            r#"const done = arguments[0];
               window.__TAURI_INTERNALS__.invoke('plugin:window|set_title', { label: 'main', value: 'pwned' })
                 .then(() => done('allowed'), (e) => done(String(e)));"#,
            vec![],
        )
        .await
        .unwrap();
    assert!(refused.as_str().unwrap().contains("not allowed"), "{refused}");

    // No key: the banner offers the demo and says where a key comes from.
    let demo = wait_for(&c, "#demo-button", long).await;
    wait_text(&c, ".banner.nokey", "Google AI Studio", long).await;
    screenshot(&c, &name("0-no-key")).await;
    demo.click().await.unwrap();
    screenshot(&c, &name("1-demo-on")).await;

    // A dropped photo and a broken one: the broken one fails alone.
    let broken = data_dir.path().join("broken.jpg");
    std::fs::write(&broken, b"this is not a photo").unwrap();
    drop_files(&c, &[&fixture("product.jpg"), &broken]).await;
    let ready = wait_for(&c, &card_in("ready", "product.jpg"), long).await;
    wait_for(&c, &card_in("failed", "broken.jpg"), long).await;
    // The prepared photo's card shows its thumbnail; the broken one has none.
    thumbnails_load(&c, r#"[data-testid="job-card"] img"#, 1, long).await;
    // A long name is cut on the card; the whole of it is the card's tooltip.
    let title = c.find(Locator::Css(&format!("{} .card-main", card("product.jpg")))).await.unwrap();
    assert!(title.attr("title").await.unwrap().unwrap_or_default().contains("Crunchy Oat Bars"));
    screenshot(&c, &name("2-cards")).await;

    // Review: the form holds Gemini's proposal; edit the name and save.
    ready.click().await.unwrap();
    wait_for(&c, "#review", long).await;
    let field = wait_for(&c, "#field-name", long).await;
    let proposed = field.prop("value").await.unwrap().unwrap_or_default();
    assert_eq!(proposed, "Crunchy Oat Bars", "the demo reads its own sample photo");
    field.clear().await.unwrap();
    field.send_keys("E2E Reviewed Granola").await.unwrap();
    // The reviewer types the GTIN printed on the box (the demo proposed the same digits).
    let gtin = wait_for(&c, "#field-gtin", long).await;
    gtin.clear().await.unwrap();
    gtin.send_keys("4006381333931").await.unwrap();
    // The proposal fills the form (three attributes), so the raw toggle is below the fold of the
    // form's scrolling pane: scroll to it, as the reviewer would.
    let raw = wait_for(&c, "#raw-toggle", long).await;
    c.execute("arguments[0].scrollIntoView({block: 'center'});", vec![serde_json::to_value(&raw).unwrap()])
        .await
        .unwrap();
    raw.click().await.unwrap();
    wait_text(&c, "#raw-json", "candidates", long).await;
    screenshot(&c, &name("3-review")).await;
    wait_for(&c, "#save-product:not([disabled])", long).await.click().await.unwrap();
    wait_for(&c, &card_in("saved", "product.jpg"), long).await;
    screenshot(&c, &name("4-saved")).await;

    // The product list shows what was saved.
    wait_for(&c, "#nav-products", long).await.click().await.unwrap();
    wait_text(&c, r#"[data-testid="product-row"]"#, "E2E Reviewed Granola", long).await;
    // Backups: a file's are the window's; a team catalog's are its server's, and the window says
    // so instead of offering what the app would refuse.
    let offers_backup = c
        .execute(
            "return [...document.querySelectorAll('.products .actions button')].some(b => b.textContent.includes('Back up'))",
            vec![],
        )
        .await
        .unwrap();
    if matches!(backend, Backend::Team(_)) {
        assert_eq!(offers_backup, serde_json::json!(false), "a team catalog offers no file backup");
        wait_text(&c, "#team-backup-note", "backed up on its server", long).await;
    } else {
        assert_eq!(offers_backup, serde_json::json!(true), "a catalog file can be backed up");
    }
    screenshot(&c, &name("5-products")).await;

    // Settings: the key field is masked, and in demo mode no real key is configured.
    wait_for(&c, "#nav-settings", long).await.click().await.unwrap();
    let key = wait_for(&c, "#settings-api-key", long).await;
    assert_eq!(key.attr("type").await.unwrap().as_deref(), Some("password"));
    // The Gemini request's settings and the price of the model: the alias is priced as the model
    // that answered it, not "price unknown".
    wait_for(&c, "#settings-thinking", long).await;
    wait_for(&c, "#settings-media-resolution", long).await;
    let price = wait_text(&c, "#settings-model-price", "Saved model", long).await;
    assert!(!price.contains("price unknown"), "{price}");
    screenshot(&c, &name("6-settings")).await;

    // The live breaker panel: the demo's call was a success; forcing it open shows at once (the
    // configured window stays as configured). A photo dropped meanwhile waits in the queue and
    // says why; back to normal, it goes on by itself.
    wait_for(&c, "#nav-status", long).await.click().await.unwrap();
    wait_text(&c, "#breaker-state", "CLOSED", long).await;
    wait_for(&c, r#"#breaker-badge[data-state="closed"]"#, long).await;
    wait_for(&c, "#breaker-force-open", long).await.click().await.unwrap();
    wait_text(&c, "#breaker-state", "FORCED_OPEN", long).await;
    wait_for(&c, r#"#breaker-badge[data-state="forced_open"]"#, long).await;
    wait_text(&c, "#breaker-config-minimum", "10", long).await;
    wait_text(&c, "#breaker-config-window", "20 calls", long).await;
    wait_for(&c, "#nav-extract", long).await.click().await.unwrap();
    let second = copy_of(data_dir.path(), "label.png", "second.png");
    drop_files(&c, &[&second]).await;
    wait_text(&c, &card("second.png"), "Paused: calls to Gemini are held", long).await;
    wait_text(&c, &format!("{} .failure", card("second.png")), "Open Gemini status", long).await;
    screenshot(&c, &name("7-circuit-open-card")).await;
    wait_for(&c, "#nav-status", long).await.click().await.unwrap();
    wait_text(&c, "#breaker-events", "CLOSED → FORCED_OPEN", long).await;
    wait_text(&c, "#breaker-panel", "notPermittedCalls", long).await;
    screenshot(&c, &name("8-breaker-panel")).await;
    wait_for(&c, "#breaker-normal", long).await.click().await.unwrap();
    wait_text(&c, "#breaker-state", "CLOSED", long).await;
    wait_for(&c, "#nav-extract", long).await.click().await.unwrap();
    wait_for(&c, &card_in("ready", "second.png"), long).await;
    c.close().await.unwrap();
    drop(driver);

    // The log says when the window showed its first data, and no transaction was nested.
    let log = super::last_log_lines(&data_dir.path().join("logs"), 100_000);
    assert!(log.contains("the window is interactive"), "{log}");
    assert!(!log.contains("transaction in progress"), "{log}");

    // And the catalog agrees, read through the headless CLI.
    let rows = products_on(&backend, data_dir.path());
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["name"], "E2E Reviewed Granola");
}

/// Photos dropped on Extract and not reviewed yet are all still there after the app is closed
/// and started again on the same data dir: every card opens (not only the last), the tab's badge
/// counts them all, and one can be saved then.
async fn pending_reviews_survive_a_restart(backend: Backend, base: u16) {
    let name = |step: &str| format!("{}-pending-{step}", backend.label());
    let data_dir = tempfile::tempdir().unwrap();
    let long = Duration::from_secs(30);
    let env = backend.env(&[]);
    let files = ["product.jpg", "label.png", "shelf.jpg"];
    {
        let driver = start_driver(data_dir.path(), ports(base, 0), &pairs(&env));
        let c = connect(&driver).await;
        wait_for(&c, "#demo-button", long).await.click().await.unwrap();
        wait_for(&c, r#".banner.demo"#, long).await;
        let shelf = generated(data_dir.path(), "shelf.jpg", 4242);
        drop_files(&c, &[&fixture("product.jpg"), &fixture("label.png"), &shelf]).await;
        for file in files {
            wait_for(&c, &card_in("ready", file), long).await;
        }
        c.close().await.unwrap();
    }

    let driver = start_driver(data_dir.path(), ports(base, 1), &pairs(&env));
    let c = connect(&driver).await;
    for file in files {
        wait_for(&c, &card_in("ready", file), long).await;
    }
    wait_text(&c, ".extract .summary", "3 to review", long).await;
    wait_text(&c, "#nav-extract .count", "3", long).await;
    screenshot(&c, &name("1-after-restart")).await;
    // Each card opens its review, the first and the second as well as the last.
    for file in files {
        wait_for(&c, &format!("{} .card-main", card_in("ready", file)), long).await.click().await.unwrap();
        wait_for(&c, "#review", long).await;
        let field = wait_for(&c, "#field-name", long).await;
        assert!(field.prop("value").await.unwrap().is_some_and(|v| !v.is_empty()), "{file}: a proposal");
        wait_for(&c, r#"#review button[aria-label="Close (Esc)"]"#, long).await.click().await.unwrap();
        wait_gone(&c, "#review", long).await;
    }
    wait_for(&c, &format!("{} .card-main", card_in("ready", "product.jpg")), long).await.click().await.unwrap();
    wait_for(&c, "#review", long).await;
    let field = wait_for(&c, "#field-name", long).await;
    field.clear().await.unwrap();
    field.send_keys("Reviewed After Restart").await.unwrap();
    let gtin = wait_for(&c, "#field-gtin", long).await;
    gtin.clear().await.unwrap();
    gtin.send_keys("4006381333931").await.unwrap();
    wait_for(&c, "#save-product:not([disabled])", long).await.click().await.unwrap();
    wait_for(&c, &card_in("saved", "product.jpg"), long).await;
    c.close().await.unwrap();
    drop(driver);

    let rows = products_on(&backend, data_dir.path());
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["name"], "Reviewed After Restart");
}

/// The breaker panel in the real window against a failing, then recovering, fake Gemini:
/// CLOSED → OPEN (badge and panel) → a restart of the app, after which it is still OPEN with its
/// timeline from before (issue 26) → probe due → HALF_OPEN while the probe runs → CLOSED.
async fn breaker_opens_then_probes_and_closes(backend: Backend, base: u16) {
    let name = |step: &str| format!("{}-breaker-{step}", backend.label());
    let fake = FakeGemini::start(FakeOptions { default_behavior: Behavior::Unavailable, ..FakeOptions::default() })
        .await
        .unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        data_dir.path().join("config.toml"),
        "[circuit_breaker]\nsliding_window_size = 2\nminimum_number_of_calls = 2\n\
         wait_duration_in_open_state = \"45s\"\npermitted_number_of_calls_in_half_open_state = 1\n\
         [retry]\nmax_attempts = 1\n",
    )
    .unwrap();
    let base_url = fake.base_url();
    let env = backend.env(&[("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", &base_url)]);
    let long = Duration::from_secs(30);
    let copy = |file: &str| copy_of(data_dir.path(), "product.jpg", file);
    {
        let driver = start_driver(data_dir.path(), ports(base, 0), &pairs(&env));
        let c = connect(&driver).await;
        wait_for(&c, r#"#breaker-badge[data-state="closed"]"#, long).await;
        wait_for(&c, "#nav-status", long).await.click().await.unwrap();
        wait_text(&c, "#breaker-state", "CLOSED", long).await;

        // Two failures with a window of two: OPEN, shown live without any click.
        let (a, b) = (copy("a.jpg"), copy("b.jpg"));
        drop_files(&c, &[&a, &b]).await;
        wait_for(&c, r#"#breaker-badge[data-state="open"]"#, long).await;
        // A drop shows the Extract view; the badge is one click from the panel.
        wait_for(&c, "#breaker-badge", long).await.click().await.unwrap();
        wait_text(&c, "#breaker-state", "OPEN", long).await;
        wait_text(&c, "#breaker-events", "CLOSED → OPEN", long).await;
        screenshot(&c, &name("1-open")).await;
        c.close().await.unwrap();
    }

    // The app restarts within the breaker's wait: still OPEN, restored, with its timeline.
    let driver = start_driver(data_dir.path(), ports(base, 1), &pairs(&env));
    let c = connect(&driver).await;
    wait_for(&c, r#"#breaker-badge[data-state="open"]"#, long).await;
    wait_for(&c, "#nav-status", long).await.click().await.unwrap();
    wait_text(&c, "#breaker-state", "OPEN", long).await;
    wait_text(&c, "#breaker-restored", "Restored from the last run", long).await;
    wait_text(&c, "#breaker-events", "CLOSED → OPEN", long).await;
    wait_text(&c, "#breaker-events", "RESTORED", long).await;
    // Still OPEN until the wait that started before the restart is over.
    wait_text(&c, "#breaker-countdown", "next probe allowed at", long).await;
    screenshot(&c, &name("2-open-after-a-restart")).await;

    // Gemini recovers (slowly, so the probe can be seen); once the wait is over, the queue's
    // waiting photos (the two that failed) probe by themselves. The wait is 45 s so that a restart
    // on a loaded machine (a cold WebKit start, a launch retried by `connect`) still falls inside
    // it: with 12 s, a slow restart met a wait already over, a probe already failed, and no
    // "Restored" any more.
    fake.set_default(Behavior::Slow(Duration::from_millis(2500)));
    wait_for(&c, r#"#breaker-badge[data-state="half_open"]"#, Duration::from_secs(75)).await;
    wait_for(&c, "#breaker-badge", long).await.click().await.unwrap();
    wait_text(&c, "#breaker-state", "HALF_OPEN", long).await;
    // The two failures, then the one probe HALF_OPEN permits: nothing was sent while it was OPEN,
    // before or after the restart.
    assert_eq!(fake.generate_count(), 3, "no request reached Gemini while the breaker was open");
    screenshot(&c, &name("3-half-open")).await;
    wait_for(&c, r#"#breaker-badge[data-state="closed"]"#, long).await;
    wait_text(&c, "#breaker-events", "HALF_OPEN → CLOSED", long).await;
    screenshot(&c, &name("4-closed")).await;
    c.close().await.unwrap();
}

/// Photos reach the window from outside it, and their cards move live: a second launch ("Open
/// with") hands its photo over, `extract` in another shell hands its file to the window (and
/// says so) and prints the result, and a terminal's `import` shows in the open Import view as it
/// goes. Gemini answers slowly, so each card is seen extracting before it is ready.
async fn photos_handed_over_show_cards_live(backend: Backend, base: u16) {
    let name = |step: &str| format!("{}-handover-{step}", backend.label());
    let fake =
        FakeGemini::start(FakeOptions { latency: Duration::from_secs(3), ..FakeOptions::default() }).await.unwrap();
    let base_url = fake.base_url();
    let env = backend.env(&[
        ("GEMINI_API_KEY", "test-key"),
        ("GEMINI_BASE_URL", &base_url),
        // A model id, not an alias: nothing to resolve at the slow fake before the first call.
        ("GEMINI_MODEL", "gemini-2.5-flash"),
    ]);
    let data_dir = tempfile::tempdir().unwrap();
    let driver = start_driver(data_dir.path(), ports(base, 0), &pairs(&env));
    let c = connect(&driver).await;
    let long = Duration::from_secs(60);
    wait_for(&c, r#"#breaker-badge[data-state="closed"]"#, long).await;
    wait_for(&c, "#add-photos", long).await;

    // A second launch with a photo: it hands the photo to this window and exits.
    let opened = generated(data_dir.path(), "opened-with.jpg", 5151);
    let mut second = App(app_command(data_dir.path(), &pairs(&env)).arg(&opened).spawn().unwrap());
    let deadline = Instant::now() + long;
    let status = loop {
        if let Some(status) = second.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the second launch did not hand over and exit");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "{status:?}");
    wait_for(&c, &card_in("extracting", "opened-with.jpg"), long).await;
    screenshot(&c, &name("1-opened-with-extracting")).await;
    wait_for(&c, &card_in("ready", "opened-with.jpg"), long).await;

    // `extract` in another shell: the window works the file, the shell prints its result.
    let handed = generated(data_dir.path(), "from-a-shell.jpg", 5252);
    let mut extract = cli(data_dir.path(), &env);
    extract.args(["extract", "--json"]).arg(&handed);
    let running = tokio::task::spawn_blocking(move || extract.output().unwrap());
    wait_for(&c, &card_in("extracting", "from-a-shell.jpg"), long).await;
    let out = running.await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "extract failed: {stderr}");
    assert!(stderr.contains("the files are handed to it"), "extract says it handed its file over: {stderr}");
    let line: serde_json::Value = serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(line["ok"], json!(true), "{line}");
    wait_for(&c, &card_in("ready", "from-a-shell.jpg"), long).await;
    screenshot(&c, &name("2-cards")).await;

    // A terminal's import while the Import view is open: its rows arrive and finish there, live.
    wait_for(&c, "#nav-import", long).await.click().await.unwrap();
    let folder = data_dir.path().join("terminal-import");
    std::fs::create_dir_all(&folder).unwrap();
    generated(&folder, "t1.jpg", 5353);
    generated(&folder, "t2.jpg", 5454);
    let mut import = cli(data_dir.path(), &env);
    import.args(["import", "--group-by", "none"]).arg(&folder);
    let running = tokio::task::spawn_blocking(move || import.output().unwrap());
    for file in ["t1.jpg", "t2.jpg"] {
        wait_for(&c, &format!(r#"[data-testid="import-row"][data-file="{file}"]"#), long).await;
    }
    for file in ["t1.jpg", "t2.jpg"] {
        wait_for(&c, &format!(r#"[data-testid="import-row"][data-file="{file}"][data-state="ready"]"#), long).await;
    }
    wait_text(&c, "#import-done", "4 of 4 done", long).await;
    screenshot(&c, &name("3-terminal-import")).await;
    let out = running.await.unwrap();
    assert!(out.status.success(), "import failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fake.generate_count(), 4, "each photo once");
    c.close().await.unwrap();
}

/// The command line on the window's data dir and catalog, with `env`, its output captured.
fn cli(data_dir: &Path, env: &[(String, String)]) -> Command {
    let mut command = app_command(data_dir, &pairs(env));
    command.env_remove("DISPLAY").stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// A card that waits says why and offers what fixes it, and goes on by itself once fixed: a
/// photo dropped without a key goes on when the demo is turned on (no Resume); a photo dropped
/// once today's budget is spent says so (not "Preparing…"), the Import view agrees (no ETA, no
/// Pause), and raising the budget lets it go on.
async fn a_waiting_card_says_why_and_goes_on_once_fixed(backend: Backend, base: u16) {
    let name = |step: &str| format!("{}-waiting-{step}", backend.label());
    let data_dir = tempfile::tempdir().unwrap();
    let env = backend.env(&[]);
    let driver = start_driver(data_dir.path(), ports(base, 0), &pairs(&env));
    let c = connect(&driver).await;
    let long = Duration::from_secs(30);

    // No key: the card waits, says so, and offers Settings.
    wait_for(&c, "#demo-button", long).await;
    let first = copy_of(data_dir.path(), "product.jpg", "first.jpg");
    drop_files(&c, &[&first]).await;
    wait_text(&c, &card("first.jpg"), "No Gemini API key", long).await;
    wait_text(&c, &format!("{} .failure", card("first.jpg")), "Open Settings", long).await;
    screenshot(&c, &name("1-no-key")).await;
    // The demo fixes the cause: the card goes on without Resume.
    wait_for(&c, "#demo-button", long).await.click().await.unwrap();
    wait_for(&c, &card_in("ready", "first.jpg"), long).await;

    // Today's spend is over a budget of a millionth of a dollar: the next photo waits and says so.
    let set_budget = |usd: serde_json::Value| {
        c.execute_async(
            r#"const [usd, done] = arguments;
               window.__TAURI_INTERNALS__.invoke('set_daily_budget', { usd })
                 .then(() => done('ok'), (e) => done('err: ' + JSON.stringify(e)));"#,
            vec![usd],
        )
    };
    assert_eq!(set_budget(json!(0.000001)).await.unwrap(), json!("ok"));
    let second = copy_of(data_dir.path(), "label.png", "second.png");
    drop_files(&c, &[&second]).await;
    let text = wait_text(&c, &card("second.png"), "budget", long).await;
    assert!(text.contains("Today's Gemini budget"), "{text}");
    assert!(!text.contains("Preparing"), "a held card says why it waits, not Preparing…: {text}");
    wait_text(&c, &format!("{} .failure", card("second.png")), "Open Settings", long).await;
    screenshot(&c, &name("2-budget-card")).await;
    wait_for(&c, "#nav-import", long).await.click().await.unwrap();
    wait_text(&c, "#import-status", "budget", long).await;
    wait_for(&c, "#import-open-settings", long).await;
    assert!(c.find(Locator::Css("#import-pause")).await.is_err(), "no Pause while nothing is sent");
    let numbers = wait_text(&c, ".numbers", "done", long).await;
    assert!(!numbers.contains("left"), "no ETA while the budget holds: {numbers}");
    assert!(numbers.contains("spent"), "the view says what its items cost: {numbers}");
    screenshot(&c, &name("3-budget-import-view")).await;
    // Settings' usage panel says the budget is already passed, and draws today's spend as one
    // day's bar on a money scale.
    wait_for(&c, "#nav-settings", long).await.click().await.unwrap();
    let warning = wait_for(&c, "#usage-budget-warning", long).await;
    c.execute("arguments[0].scrollIntoView({block: 'center'});", vec![serde_json::to_value(&warning).unwrap()])
        .await
        .unwrap();
    let today = wait_text(&c, "#usage-today", "daily budget", long).await;
    assert!(today.contains(" of a $"), "{today}");
    wait_text(&c, "#usage-budget-warning", "already over this budget", long).await;
    screenshot(&c, &name("4-usage-over-budget")).await;

    // A higher budget (none): the photo goes on by itself.
    wait_for(&c, "#nav-extract", long).await.click().await.unwrap();
    assert_eq!(set_budget(json!(null)).await.unwrap(), json!("ok"));
    wait_for(&c, &card_in("ready", "second.png"), long).await;
    screenshot(&c, &name("5-going-on")).await;
    c.close().await.unwrap();
}
