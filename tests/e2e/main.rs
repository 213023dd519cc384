//! The real window under Xvfb, driven through tauri-driver + WebKitWebDriver.
//!
//! Ignored by default (it needs a display, `tauri-driver` and `WebKitWebDriver`); `make test`
//! runs it under `xvfb-run` with `--ignored`. The app starts with an empty data dir and no key,
//! so this is exactly a newcomer's first minutes: demo mode, a dropped photo, review, save, list.
//! Screenshots land in `target/e2e/`.
//!
//! `extract_view` holds every test of the Extract view, each run on both catalog backends: this
//! computer's SQLite file and a team catalog on the throwaway PostgreSQL server
//! (`scripts/with-postgres`), so a view that works on one and not the other cannot pass.

mod extract_view;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

/// Each test has its own pair of ports (tauri-driver, then WebKitWebDriver), so a driver still
/// shutting down from the previous test can never answer the next one. The Extract view's tests
/// take theirs from `extract_view`'s bases (4500 and up).
const CATALOG_PORTS: (u16, u16) = (4448, 4449);
const IMPORT_PORTS: (u16, u16) = (4450, 4451);
const SHOOT_PORTS: (u16, u16) = (4460, 4461);
const TEAM_PORTS: (u16, u16) = (4462, 4463);
const HTTP_API_PORTS: (u16, u16) = (4464, 4465);

/// The catalog a window works on: this computer's SQLite file in its data dir, or a team catalog
/// (a fresh database on the throwaway PostgreSQL server of `scripts/with-postgres`).
#[derive(Debug, Clone)]
enum Backend {
    Sqlite,
    Team(String),
}

impl Backend {
    /// A team catalog in a database of its own, named after `label`.
    async fn team(label: &str) -> Self {
        Backend::Team(pe_core::catalog::server::testing::fresh_database(label).await)
    }

    /// What a screenshot's name starts with.
    fn label(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Team(_) => "team",
        }
    }

    /// `env` with the variable that chooses this catalog (none for the SQLite file).
    fn env(&self, env: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut all: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if let Backend::Team(url) = self {
            all.push(("PRODUCT_EXTRACTOR_CATALOG_URL".into(), url.clone()));
        }
        all
    }
}

/// Borrowed pairs, as [`start_driver`] and [`app_command`] take them.
fn pairs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// tauri-driver (its port, and the data dir its app runs on), stopped with SIGTERM so it also
/// stops WebKitWebDriver.
struct Driver(Child, u16, PathBuf);

impl Drop for Driver {
    /// WebKitWebDriver ends the app after its session is closed, but after it has answered the
    /// close: stopping it at once can leave the app running (seen on a loaded machine), and the
    /// next window on the data dir would hand its launch to that one. So the app is given time to
    /// go first; one still there after that (a test that failed mid-session) is stopped.
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(if std::thread::panicking() { 0 } else { 15 });
        while app_running_on(&self.2).is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").arg("-TERM").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
        if let Some(pid) = app_running_on(&self.2) {
            eprintln!("the app (pid {pid}) outlived its WebDriver session: stopping it");
            let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        }
    }
}

/// tauri-driver on `ports`, whose app inherits `env` (e.g. a Gemini base URL and key).
fn start_driver(data_dir: &Path, ports: (u16, u16), env: &[(&str, &str)]) -> Driver {
    let (port, native_port) = ports;
    *DATA_DIR.lock().unwrap() = Some(data_dir.to_path_buf());
    let mut command = Command::new("tauri-driver");
    command
        .args(["--port", &port.to_string(), "--native-port", &native_port.to_string()])
        .args(["--native-driver", "/usr/bin/WebKitWebDriver"])
        .env("PRODUCT_EXTRACTOR_DATA_DIR", data_dir)
        .env("PRODUCT_EXTRACTOR_KEYRING_SERVICE", format!("product-extractor-test:{}", data_dir.display()))
        .env_remove("GEMINI_API_KEY")
        .env_remove("GEMINI_BASE_URL");
    for (k, v) in env {
        command.env(k, v);
    }
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("tauri-driver must be installed (cargo install tauri-driver --locked)");
    let driver = Driver(child, port, data_dir.to_path_buf());
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "tauri-driver did not listen on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    driver
}

/// A WebDriver session with the app; a session that fails while the drivers are still starting
/// is tried again, up to three times.
async fn connect(driver: &Driver) -> Client {
    let app = env!("CARGO_BIN_EXE_product-extractor");
    // A window of the same data dir still closing (the previous session's) would take the new
    // launch's paths over D-Bus and the new one would exit: wait until it is gone.
    let data_dir = DATA_DIR.lock().unwrap().clone();
    if let Some(data_dir) = data_dir {
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(pid) = app_running_on(&data_dir) {
            assert!(Instant::now() < deadline, "the previous window (pid {pid}) did not exit");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut caps = serde_json::Map::new();
    caps.insert("browserName".into(), json!("wry"));
    caps.insert("tauri:options".into(), json!({ "application": app }));
    let url = format!("http://127.0.0.1:{}", driver.1);
    let mut last_error = None;
    for _ in 0..3 {
        let mut builder = ClientBuilder::native();
        builder.capabilities(caps.clone());
        match tokio::time::timeout(Duration::from_secs(60), builder.connect(&url)).await {
            Ok(Ok(client)) => return client,
            Ok(Err(e)) => last_error = Some(e.to_string()),
            Err(_) => last_error = Some("no session within 60 s (did the app start?)".into()),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("no WebDriver session with the app: {last_error:?}");
}

/// The pid of a process of the app's binary whose `PRODUCT_EXTRACTOR_DATA_DIR` is `data_dir`.
fn app_running_on(data_dir: &Path) -> Option<u32> {
    let app = std::fs::canonicalize(env!("CARGO_BIN_EXE_product-extractor")).ok()?;
    let wanted = format!("PRODUCT_EXTRACTOR_DATA_DIR={}", data_dir.display());
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        if std::fs::read_link(entry.path().join("exe")).ok()? != app {
            return None;
        }
        let environ = std::fs::read(entry.path().join("environ")).ok()?;
        environ.split(|b| *b == 0).any(|var| var == wanted.as_bytes()).then_some(pid)
    })
}

/// Polls until `css` matches an element, up to `timeout`.
async fn wait_for(c: &Client, css: &str, timeout: Duration) -> fantoccini::elements::Element {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(el) = c.find(Locator::Css(css)).await {
            return el;
        }
        if Instant::now() > deadline {
            let shot = screenshot(c, "timeout").await;
            let body = page_source(c).await;
            panic!("no element matched {css} within {timeout:?}; screenshot {shot:?}; page:\n{body}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the text of an element matching `css` contains `needle`. Reads `innerText`:
/// WebKitWebDriver's own element text drops the text of grid cells inside a button.
async fn wait_text(c: &Client, css: &str, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    let script = "return Array.from(document.querySelectorAll(arguments[0]), (e) => e.innerText);";
    loop {
        let texts = c.execute(script, vec![json!(css)]).await.unwrap_or_default();
        for text in texts.as_array().into_iter().flatten().filter_map(|t| t.as_str()) {
            if text.contains(needle) {
                return text.to_string();
            }
        }
        if Instant::now() > deadline {
            let shot = screenshot(c, "timeout").await;
            let body = page_source(c).await;
            panic!("no {css} contained {needle:?} within {timeout:?}; screenshot {shot:?}; page:\n{body}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until no element matches `css`.
async fn wait_gone(c: &Client, css: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while c.find(Locator::Css(css)).await.is_ok() {
        assert!(Instant::now() < deadline, "{css} is still there after {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether the text of an element matching `css` comes to contain `needle` within `timeout`.
async fn shows_text(c: &Client, css: &str, needle: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let script = "return Array.from(document.querySelectorAll(arguments[0]), (e) => e.innerText);";
    while Instant::now() < deadline {
        let texts = c.execute(script, vec![json!(css)]).await.unwrap_or_default();
        if texts.as_array().into_iter().flatten().filter_map(|t| t.as_str()).any(|t| t.contains(needle)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Writes a screenshot under target/e2e after two animation frames (WebKit otherwise returns the
/// previous frame).
async fn screenshot(c: &Client, name: &str) -> PathBuf {
    let frames = c.execute_async(
        "const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done(1)));",
        vec![],
    );
    let _ = tokio::time::timeout(Duration::from_secs(5), frames).await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.png"));
    if let Ok(Ok(png)) = tokio::time::timeout(Duration::from_secs(10), c.screenshot()).await {
        std::fs::write(&path, png).unwrap();
    }
    path
}

/// The data dir of the app the current test drives, for the failure report's log lines.
static DATA_DIR: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// What a failure report shows of the app: the page's text (what a user sees; not its HTML,
/// whose inline SVG and styles hide the text), whether the app still runs, and its last log lines.
async fn page_source(c: &Client) -> String {
    const PAGE_CHARS: usize = 6000;
    let text = c.execute("return document.body ? document.body.innerText : '(no body)';", vec![]);
    let page = match tokio::time::timeout(Duration::from_secs(10), text).await {
        Ok(Ok(value)) => {
            let text = value.as_str().unwrap_or_default().to_string();
            match text.char_indices().nth(PAGE_CHARS) {
                Some((cut, _)) => format!("{}… (cut at {PAGE_CHARS} characters)", &text[..cut]),
                None => text,
            }
        }
        Ok(Err(e)) => format!("(the page did not answer: {e})"),
        Err(_) => "(the page did not answer within 10 s: its main thread is busy or hung)".into(),
    };
    let running = Command::new("pgrep")
        .args(["-f", env!("CARGO_BIN_EXE_product-extractor")])
        .output()
        .map(|out| if out.stdout.is_empty() { "no" } else { "yes" })
        .unwrap_or("unknown");
    let logs = DATA_DIR.lock().unwrap().clone().map(|dir| last_log_lines(&dir.join("logs"), 60)).unwrap_or_default();
    format!("{page}\n--- the app still runs: {running}\n--- its last log lines:\n{logs}")
}

/// The last `n` lines of the newest log file in `dir` (the app writes one a day).
fn last_log_lines(dir: &Path, n: usize) -> String {
    let newest = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .max_by_key(|entry| entry.metadata().and_then(|m| m.modified()).ok());
    let Some(entry) = newest else { return format!("(no log file in {})", dir.display()) };
    let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Emits the event a real OS drop produces; the page's drag-drop listener handles it exactly as
/// it handles a real drop.
async fn drop_files(c: &Client, paths: &[&Path]) {
    // The window registers its drop listener after it first renders: a drop before that is lost.
    wait_for(c, r#".shell[data-drop-ready="true"]"#, Duration::from_secs(30)).await;
    let paths: Vec<String> = paths.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let result = c
        .execute_async(
            r#"const [paths, done] = arguments;
               window.__TAURI_INTERNALS__.invoke('plugin:event|emit', { event: 'tauri://drag-drop',
                   payload: { paths, position: { x: 200, y: 200 } } })
                 .then(() => done('ok'), (e) => done('err: ' + JSON.stringify(e)));"#,
            vec![json!(paths)],
        )
        .await
        .unwrap();
    assert_eq!(result, json!("ok"));
}

/// Seeds the catalog in `data_dir` with `names` (brand and category vary), each on its own photo.
async fn seed_catalog(data_dir: &Path, names: &[(&str, &str, &str)]) {
    use pe_core::catalog::{Catalog, NewPhoto, SaveProduct};
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/product.jpg");
    let prepared = pe_core::intake::prepare_file(&fixture, &pe_core::config::ImageConfig::default()).unwrap();
    let path = Catalog::path_in(data_dir);
    let catalog = tokio::task::spawn_blocking(move || Catalog::open(&path)).await.unwrap().unwrap();
    for (n, (name, brand, category)) in names.iter().enumerate() {
        let photo_id = catalog
            .record_photo(NewPhoto {
                sha256: format!("{n:064x}"),
                original_path: fixture.to_string_lossy().into_owned(),
                original_path_bytes: None,
                file_bytes: 1,
                width: prepared.original_width,
                height: prepared.original_height,
                format: "jpeg".into(),
                thumbnail_jpeg: prepared.thumbnail_jpeg.clone(),
                seen_at: 1_764_000_000_000 + n as i64,
            })
            .await
            .unwrap();
        let mut product = pe_core::product::Product { name: (*name).into(), ..Default::default() };
        product.brand = Some((*brand).into());
        product.category = Some((*category).into());
        catalog
            .save_product(SaveProduct {
                photo_id,
                attempt_id: None,
                saved: product,
                saved_at: 1_764_000_000_000 + n as i64,
                saved_by: "seed".into(),
            })
            .await
            .unwrap();
    }
}

/// Waits until the first `at_least` images matching `css` have loaded from the app's thumbnail
/// protocol (`thumb:`, by photo hash, allowed by the CSP); every one of them must come from it.
async fn thumbnails_load(c: &Client, css: &str, at_least: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let thumbs = c
            .execute(
                "return [...document.querySelectorAll(arguments[0])]
                   .map((i) => [i.getAttribute('src'), i.complete && i.naturalWidth > 0]);",
                vec![json!(css)],
            )
            .await
            .unwrap();
        let thumbs: Vec<(String, bool)> = serde_json::from_value(thumbs).unwrap();
        assert!(thumbs.iter().all(|(src, _)| src.starts_with("thumb://localhost/")), "{css}: {thumbs:?}");
        if thumbs.len() >= at_least && thumbs.iter().take(at_least).all(|(_, loaded)| *loaded) {
            return;
        }
        assert!(Instant::now() < deadline, "{css}: the thumbnails did not load: {thumbs:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Catalog staff at work: search as they type, open a product, fix a field, see the history
/// entry, delete and undo, and export what they see.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a display, tauri-driver and WebKitWebDriver: make test-e2e"]
async fn catalog_search_edit_history_export() {
    let data_dir = tempfile::tempdir().unwrap();
    let mut names = vec![
        ("Crunchy Granola Honey", "Nordic Oats", "Breakfast"),
        ("Oat Drink Barista", "Oatly", "Drinks"),
        ("Crème Fraîche 30%", "Arla", "Dairy"),
    ];
    let fillers: Vec<String> = (0..60).map(|i| format!("Pantry Item {i:02}")).collect();
    for filler in &fillers {
        names.push((filler.as_str(), "House Brand", "Pantry"));
    }
    seed_catalog(data_dir.path(), &names).await;
    let driver = start_driver(data_dir.path(), CATALOG_PORTS, &[]);
    let c = connect(&driver).await;
    let long = Duration::from_secs(30);

    wait_for(&c, "#nav-products", long).await.click().await.unwrap();
    wait_text(&c, "#catalog-count", "63 products", long).await;
    // Virtualized: far fewer rows in the DOM than products.
    let rendered = c.find_all(Locator::Css(r#"[data-testid="product-row"]"#)).await.unwrap().len();
    assert!(rendered > 0 && rendered < 63, "{rendered} rows rendered");
    // Each row on screen loads its thumbnail from the app's own protocol, by its photo's hash,
    // through the CSP: the page of rows carried no image.
    thumbnails_load(&c, r#"[data-testid="product-row"] img"#, 5, long).await;

    // Search as you type: a prefix, any case, accents folded.
    let search = wait_for(&c, "#catalog-search", long).await;
    search.send_keys("GRAN").await.unwrap();
    wait_text(&c, "#catalog-count", "1 matching", long).await;
    wait_text(&c, r#"[data-testid="product-row"]"#, "Crunchy Granola Honey", long).await;
    search.clear().await.unwrap();
    search.send_keys("creme").await.unwrap();
    wait_text(&c, r#"[data-testid="product-row"]"#, "Crème Fraîche", long).await;
    screenshot(&c, "catalog-1-search").await;
    search.clear().await.unwrap();
    search.send_keys("oat").await.unwrap();
    wait_text(&c, "#catalog-count", "2 matching", long).await;

    // Open the drink, fix its name, save: revision 2, and the history says what changed.
    wait_text(&c, r#"[data-testid="product-row"]"#, "Oat Drink Barista", long).await;
    let row =
        c.find(Locator::XPath(r#"//button[@data-testid="product-row"][contains(., "Oat Drink")]"#)).await.unwrap();
    row.click().await.unwrap();
    let name = wait_for(&c, "#field-name", long).await;
    name.clear().await.unwrap();
    name.send_keys("Oat Drink Barista Edition").await.unwrap();
    // Undo brings the old name back; redo the edit.
    wait_for(&c, "#undo-edit:not([disabled])", long).await.click().await.unwrap();
    wait_for_value(&c, "#field-name", "Oat Drink Barista", long).await;
    wait_for(&c, "#redo-edit:not([disabled])", long).await.click().await.unwrap();
    wait_for_value(&c, "#field-name", "Oat Drink Barista Edition", long).await;
    // An invalid GTIN blocks Save with the reason in place.
    let gtin = wait_for(&c, "#field-gtin", long).await;
    gtin.send_keys("4006381333932").await.unwrap();
    wait_text(&c, "#product-detail", "check digit", long).await;
    wait_for(&c, "#save-edit[disabled]", long).await;
    gtin.clear().await.unwrap();
    gtin.send_keys("4006381333931").await.unwrap();
    wait_for(&c, "#save-edit:not([disabled])", long).await.click().await.unwrap();
    wait_text(&c, "#detail-revision", "revision 2", long).await;
    wait_for(&c, "#tab-history", long).await.click().await.unwrap();
    wait_text(&c, r#"[data-revision="2"]"#, "Oat Drink Barista Edition", long).await;
    wait_text(&c, r#"[data-revision="2"]"#, "GTIN", long).await;
    screenshot(&c, "catalog-2-history").await;

    // Delete it, then undo from the notice.
    wait_for(&c, "#delete-product", long).await.click().await.unwrap();
    wait_text(&c, "#catalog-count", "1 matching", long).await;
    wait_for(&c, "#undo-delete", long).await.click().await.unwrap();
    wait_text(&c, "#catalog-count", "2 matching", long).await;

    // Export through the same command the Export menu calls after its save dialog (the native
    // GTK dialog itself is outside what WebDriver can drive).
    let out = data_dir.path().join("shop.csv");
    let exported = c
        .execute_async(
            r#"const [path, done] = arguments;
               window.__TAURI_INTERNALS__.invoke('export_catalog', { format: 'shopify', path })
                 .then((s) => done(s), (e) => done('err: ' + JSON.stringify(e)));"#,
            vec![json!(out.to_string_lossy())],
        )
        .await
        .unwrap();
    assert_eq!(exported["rows"], 63, "{exported}");
    let csv = std::fs::read_to_string(&out).unwrap();
    assert!(csv.contains("Oat Drink Barista Edition"), "{csv}");
    assert!(csv.contains("4006381333931"));
    c.close().await.unwrap();
}

/// A team catalog on the real PostgreSQL server (`scripts/with-postgres`): the window opens it,
/// Settings says so, and what another desktop saves shows in the list within a second; an editor
/// with unsaved edits says who saved which revision and reloads on request.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a display, tauri-driver, WebKitWebDriver and PostgreSQL: make test-e2e"]
async fn a_team_catalog_shows_what_another_desktop_saves() {
    use pe_core::catalog::server::CatalogUrl;
    use pe_core::catalog::{Catalog, RevisionSource, UpdateProduct};
    let data_dir = tempfile::tempdir().unwrap();
    seed_catalog(
        data_dir.path(),
        &[
            ("Crunchy Granola Honey", "Nordic Oats", "Breakfast"),
            ("Oat Drink Barista", "Oatly", "Drinks"),
            ("Listener check", "House Brand", "Misc"),
        ],
    )
    .await;
    let url = pe_core::catalog::server::testing::fresh_database("e2e_team").await;
    let server = CatalogUrl::parse(&url).unwrap();
    let no_env = |_: &str| None;
    let local = CatalogUrl::Sqlite(Catalog::path_in(data_dir.path()));
    pe_core::catalog::copy::copy_catalog(&local, &server, &no_env).await.unwrap();
    // Bob's desktop, on the same server.
    let bob = Catalog::open_url_with(&server, &no_env, None).await.unwrap();
    let edit = |id: i64, expected: u32, name: &str| {
        let bob = bob.clone();
        let name = name.to_string();
        async move {
            let mut saved = bob.get_product(id).await.unwrap().saved;
            saved.name = name;
            bob.update_product(UpdateProduct {
                id,
                expected_revision: expected,
                saved,
                attempt_id: None,
                source: RevisionSource::Edit,
                saved_by: "bob".into(),
                saved_at: 1_765_000_000_000,
            })
            .await
            .unwrap()
        }
    };

    // Both desktops' Geminis answer slowly: their import items stay in flight while we look.
    let slow =
        || fake_gemini::FakeOptions { latency: Duration::from_secs(3600), ..fake_gemini::FakeOptions::default() };
    let window_fake = fake_gemini::FakeGemini::start(slow()).await.unwrap();
    let window_gemini = window_fake.base_url();
    let driver = start_driver(
        data_dir.path(),
        TEAM_PORTS,
        &[
            ("PRODUCT_EXTRACTOR_CATALOG_URL", &url),
            ("GEMINI_BASE_URL", &window_gemini),
            ("GEMINI_API_KEY", "test-key"),
            // A model id, not an alias: nothing to resolve at the slow fake before the first call.
            ("GEMINI_MODEL", "gemini-2.5-flash"),
        ],
    );
    let c = connect(&driver).await;
    let long = Duration::from_secs(30);
    wait_for(&c, "#nav-settings", long).await.click().await.unwrap();
    let open = wait_text(&c, "#catalog-open", "team catalog", long).await;
    assert!(open.contains("postgres://pe_test:••••@127.0.0.1:"), "{open}");
    wait_for(&c, "#nav-products", long).await.click().await.unwrap();
    wait_text(&c, "#catalog-count", "3 products", long).await;
    wait_text(&c, r#"[data-testid="product-row"]"#, "Oat Drink Barista", long).await;
    // The thumbnails come from the server, by hash, through the same protocol.
    thumbnails_load(&c, r#"[data-testid="product-row"] img"#, 2, long).await;
    // The window's listener is on the server once one of bob's saves shows in the list: until
    // then (the app still starting it), bob saves again.
    let mut revision = 1;
    loop {
        let name = format!("Listener check {revision}");
        edit(3, revision, &name).await;
        revision += 1;
        if shows_text(&c, r#"[data-testid="product-row"]"#, &name, Duration::from_secs(3)).await {
            break;
        }
        assert!(revision < 10, "the window never heard bob's saves");
    }

    // Bob renames the drink: the list here shows it within a second.
    let saved_at = std::time::Instant::now();
    edit(2, 1, "Oat Drink (bob's edit)").await;
    wait_text(&c, r#"[data-testid="product-row"]"#, "Oat Drink (bob's edit)", Duration::from_secs(2)).await;
    let shown_after = saved_at.elapsed();
    assert!(shown_after < Duration::from_secs(1), "shown after {shown_after:?}");
    eprintln!("bob's save showed in the list after {shown_after:?}");

    // Open the granola, start an edit without saving; bob saves it meanwhile.
    let row = c.find(Locator::XPath(r#"//button[@data-testid="product-row"][contains(., "Granola")]"#)).await.unwrap();
    row.click().await.unwrap();
    let name = wait_for(&c, "#field-name", long).await;
    // The photo's path says which computer it is on.
    let host = pe_core::catalog::local_host().expect("a host name");
    wait_text(&c, "#detail-path", &format!("{host}: "), long).await;
    name.send_keys(" (mine)").await.unwrap();
    edit(1, 1, "Granola, bob's name").await;
    let banner = wait_text(&c, "#remote-change", "Changed by bob at revision 2", Duration::from_secs(5)).await;
    assert!(banner.contains("unsaved edits"), "{banner}");
    screenshot(&c, "team-1-changed-elsewhere").await;
    wait_for(&c, "#remote-reload", long).await.click().await.unwrap();
    wait_for_value(&c, "#field-name", "Granola, bob's name", long).await;
    wait_text(&c, "#detail-revision", "revision 2", long).await;
    // Without unsaved edits, bob's next save simply shows, saying who saved it.
    edit(1, 2, "Granola, bob again").await;
    wait_for_value(&c, "#field-name", "Granola, bob again", Duration::from_secs(5)).await;
    wait_text(&c, "#detail-revision", "revision 3", long).await;
    wait_for(&c, r#"button[aria-label="Close (Esc)"]"#, long).await.click().await.unwrap();

    // Bob's desktop imports a folder of a shared drive into the team's queue; the window lists
    // the same folder (a desktop opens only files it listed itself: issue 32) and takes its part
    // too, and its Import view says which desktop works which photo.
    let bob_fake = fake_gemini::FakeGemini::start(slow()).await.unwrap();
    let bob_queue = team_desktop(&url, "bob@studio-2 #2", &bob_fake.base_url()).await;
    let shoot = data_dir.path().join("team-shoot");
    std::fs::create_dir_all(&shoot).unwrap();
    for i in 0..12u64 {
        std::fs::write(shoot.join(format!("t{i:02}.jpg")), fake_gemini::photos::sample_jpeg(900 + i, 320, 240, 85))
            .unwrap();
    }
    bob_queue.enqueue(vec![shoot.clone()], pe_core::import::EnqueueOptions::default()).await.unwrap();
    let listed = c
        .execute_async(
            r#"const [paths, done] = arguments;
               window.__TAURI_INTERNALS__.invoke('import_paths', { paths, batch: false })
                 .then((r) => done(r), (e) => done('err: ' + JSON.stringify(e)));"#,
            vec![json!([shoot])],
        )
        .await
        .unwrap();
    assert!(listed.get("unchanged").is_some(), "the window listed the folder: {listed}");
    let deadline = Instant::now() + long;
    while bob_fake.generate_count() == 0 || window_fake.generate_count() == 0 {
        if Instant::now() >= deadline {
            let rows = bob_queue.items(0, 100, None).await.unwrap().rows;
            panic!(
                "both desktops send: bob {}, the window {}; bob's queue {:?}: {rows:?}",
                bob_fake.generate_count(),
                window_fake.generate_count(),
                bob_queue.progress().borrow().status
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_for(&c, "#nav-import", long).await.click().await.unwrap();
    let bobs = wait_text(&c, r#"[data-testid="worked-by"]"#, "bob@studio-2", long).await;
    assert!(!bobs.contains('#'), "the process number is left out: {bobs}");
    let deadline = Instant::now() + long;
    loop {
        let script =
            r#"return Array.from(document.querySelectorAll('[data-testid="worked-by"]'), (e) => e.textContent);"#;
        let shown: Vec<String> = serde_json::from_value(c.execute(script, vec![]).await.unwrap()).unwrap();
        if shown.iter().any(|t| t.starts_with("bob@studio-2"))
            && shown.iter().any(|t| t.contains(&format!("@{host} (queued on studio-2)")))
        {
            break;
        }
        assert!(Instant::now() < deadline, "the Import view shows both desktops at work: {shown:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    screenshot(&c, "team-2-import-by-desktop").await;

    // The server goes away: a banner says since when and for how long, the Products view keeps its
    // rows (read-only) and says so, and the Import view waits; once it is back, all goes on.
    let outage = Outage::begin();
    let banner = wait_text(&c, "#server-away", "cannot be reached since", long).await;
    assert!(banner.contains("Imports wait"), "{banner}");
    wait_text(&c, "#import-status", "Waiting for the team catalog", long).await;
    wait_for(&c, "#nav-products", long).await.click().await.unwrap();
    wait_for(&c, "#catalog-server-away", long).await;
    wait_text(&c, r#"[data-testid="product-row"]"#, "Oat Drink (bob's edit)", long).await;
    wait_text(&c, "#server-away", "for ", long).await;
    screenshot(&c, "team-3-server-away").await;
    drop(outage);
    wait_gone(&c, "#server-away", Duration::from_secs(60)).await;
    wait_gone(&c, "#catalog-server-away", long).await;
    // Live again: bob's next save shows.
    edit(2, 2, "Oat Drink, after the outage").await;
    wait_text(&c, r#"[data-testid="product-row"]"#, "Oat Drink, after the outage", long).await;
    c.close().await.unwrap();
}

/// The throwaway PostgreSQL server (`scripts/with-postgres`) stopped until this is dropped: it is
/// started again also when the test fails, so the tests after it have their server.
struct Outage(String);

impl Outage {
    fn begin() -> Self {
        let script = std::env::var("PRODUCT_EXTRACTOR_TEST_PG_SERVER")
            .expect("PRODUCT_EXTRACTOR_TEST_PG_SERVER (scripts/with-postgres) stops and starts the test server");
        let outage = Outage(script);
        outage.run("stop");
        outage
    }

    fn run(&self, what: &str) {
        let status = std::process::Command::new(&self.0).arg(what).status().unwrap();
        assert!(status.success(), "{} {what}: {status:?}", self.0);
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        self.run("start");
    }
}

/// Another desktop of a team, in this process: an import queue on the server under its own name,
/// with its own Gemini (`base_url`).
async fn team_desktop(url: &str, name: &str, base_url: &str) -> pe_core::import::ImportQueue {
    use pe_core::catalog::server::{ServerCatalog, ServerUrl};
    let no_env = |_: &str| None;
    let server = ServerCatalog::connect_with(&ServerUrl::parse(url).unwrap(), &no_env, None).await.unwrap();
    let key =
        pe_core::catalog::desktop_key::DesktopKey::from_secret(pe_core::catalog::server::desktop_host(name).as_bytes());
    let catalog = pe_core::catalog::Catalog::on_server(server.with_desktop(name).with_desktop_key(key));
    let config = pe_core::config::GeminiConfig {
        base_url: base_url.into(),
        api_key: pe_core::config::ApiKey::new("test-key"),
        model: "gemini-2.5-flash".into(),
        ..pe_core::config::GeminiConfig::default()
    };
    let mut resilience = pe_core::resilience::ResilienceConfig::default();
    resilience.bulkhead.max_concurrent_calls = 2;
    let stack = pe_core::resilience::ResilienceStack::new("gemini", resilience).unwrap();
    let client = pe_core::gemini::GeminiClient::new(&config).unwrap();
    let pipeline = pe_core::pipeline::Pipeline::new(
        client,
        stack,
        catalog,
        pe_core::config::ImageConfig::default(),
        pe_core::pipeline::system_clock(),
    );
    pe_core::import::ImportQueue::open(pipeline, pe_core::import::ImportOptions::default()).await.unwrap()
}

/// Waits until the input matched by `css` holds exactly `value`.
async fn wait_for_value(c: &Client, css: &str, value: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let current = wait_for(c, css, timeout).await.prop("value").await.unwrap().unwrap_or_default();
        if current == value {
            return;
        }
        assert!(Instant::now() < deadline, "{css} is {current:?}, not {value:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A folder dropped on the window becomes an import: progress reaches 100 %, the ready items are
/// reviewed with the keyboard alone, and what was accepted is in the catalog.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a display, tauri-driver and WebKitWebDriver: make test-e2e"]
async fn import_a_dropped_folder_and_review_with_the_keyboard() {
    let data_dir = tempfile::tempdir().unwrap();
    let shoot = data_dir.path().join("shoot");
    std::fs::create_dir_all(shoot.join("day2")).unwrap();
    const PHOTOS: u64 = 40;
    for i in 0..PHOTOS {
        let dir = if i % 3 == 0 { shoot.join("day2") } else { shoot.clone() };
        let photo = fake_gemini::photos::sample_jpeg(100 + i, 640, 480, 85);
        std::fs::write(dir.join(format!("photo{i}.jpg")), photo).unwrap();
    }
    std::fs::write(shoot.join("notes.txt"), b"not a photo").unwrap();
    let driver = start_driver(data_dir.path(), IMPORT_PORTS, &[]);
    let c = connect(&driver).await;
    let long = Duration::from_secs(120);

    wait_for(&c, "#demo-button", long).await.click().await.unwrap();
    wait_for(&c, r#"#breaker-badge[data-state="closed"]"#, long).await;
    drop_files(&c, &[&shoot]).await;
    // A folder goes to the import queue, whatever view it was dropped on. While it runs, the
    // window answers IPC as fast as ever: 200 round trips, timed in the page.
    wait_for(&c, r#"#import-status[data-status="running"]"#, long).await;
    let latency = c
        .execute_async(
            r#"const done = arguments[0];
               const invoke = window.__TAURI_INTERNALS__.invoke;
               const times = [];
               (async () => {
                 const before = (await invoke('import_progress')).status.kind;
                 for (let i = 0; i < 200; i++) {
                   const t = performance.now();
                   await invoke('import_progress');
                   times.push(performance.now() - t);
                 }
                 const after = await invoke('import_progress');
                 times.sort((a, b) => a - b);
                 done({ before, after: after.status.kind, done: after.done, total: after.total,
                        p50: times[99], p99: times[197], max: times[199] });
               })().catch((e) => done('err: ' + e));"#,
            vec![],
        )
        .await
        .unwrap();
    eprintln!("IPC round trip while importing (import_progress, 200 calls): {latency}");
    assert_eq!(latency["before"], "running", "{latency}");
    wait_for(&c, r#"#import-status[data-status="finished"]"#, long).await;
    wait_text(&c, "#import-done", "100%", long).await;
    wait_for(&c, r#"[data-testid="import-row"][data-state="skipped"]"#, long).await;
    thumbnails_load(&c, r#"[data-testid="import-row"] img"#, 5, long).await;
    screenshot(&c, "import-1-done").await;

    // Review: skip with "s", back with "k", save with "a" (or Enter), discard with "d".
    wait_for(&c, "#import-review", long).await.click().await.unwrap();
    let panel = wait_for(&c, "#import-review-panel", long).await;
    wait_text(&c, "#import-review-position", "1 of 40", long).await;
    panel.send_keys("s").await.unwrap();
    wait_text(&c, "#import-review-position", "2 of 40", long).await;
    panel.send_keys("k").await.unwrap();
    wait_text(&c, "#import-review-position", "1 of 40", long).await;
    screenshot(&c, "import-2-review").await;
    // Accept the first item whose proposal can be saved as it is (one demo answer has a wrong
    // GTIN check digit, which rightly blocks Save).
    let mut saved = 0;
    for _ in 0..10 {
        wait_for(&c, "#field-name", long).await;
        let enabled =
            c.execute("return !document.getElementById('import-review-accept').disabled", vec![]).await.unwrap();
        if enabled == json!(true) {
            wait_for(&c, "#import-review-panel", long).await.send_keys("a").await.unwrap();
            saved += 1;
            wait_text(&c, "#import-review-panel .saved", "1 saved", long).await;
            break;
        }
        wait_for(&c, "#import-review-panel", long).await.send_keys("s").await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(saved, 1, "no ready item could be saved");
    wait_text(&c, "#import-review-position", "of 39", long).await;
    wait_for(&c, "#import-review-panel", long).await.send_keys("d").await.unwrap();
    wait_text(&c, "#import-review-position", "of 38", long).await;
    wait_for(&c, "#import-review-panel", long).await.send_keys("\u{E00C}").await.unwrap();
    wait_text(&c, r#".chip[data-state="saved"]"#, "Saved 1", long).await;
    screenshot(&c, "import-3-reviewed").await;

    c.close().await.unwrap();

    let rows = products_on_disk(data_dir.path());
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
}

/// The demo's product of two photos in the real window: the shoot folder dropped in demo mode is
/// one product (front and back), its review shows both photos with the barcode's box drawn on the
/// back (a screenshot), and the keyboard moves the back to a product of its own, which waits for
/// "Extract again" (nothing is sent by the move), then extracts it when asked.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a display, tauri-driver and WebKitWebDriver: make test-e2e"]
async fn a_product_of_two_photos_is_reviewed_with_its_barcode_box_and_split_with_the_keyboard() {
    let data_dir = tempfile::tempdir().unwrap();
    let shoot = data_dir.path().join("demo-shoot");
    std::fs::create_dir_all(&shoot).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-shoot");
    for name in ["oat-bars_front.jpg", "oat-bars_back.jpg"] {
        std::fs::copy(fixtures.join(name), shoot.join(name)).unwrap();
    }
    let driver = start_driver(data_dir.path(), SHOOT_PORTS, &[]);
    let c = connect(&driver).await;
    let long = Duration::from_secs(120);
    wait_for(&c, "#demo-button", long).await.click().await.unwrap();
    wait_for(&c, r#"#breaker-badge[data-state="closed"]"#, long).await;
    drop_files(&c, &[&shoot]).await;
    wait_for(&c, r#"#import-status[data-status="finished"]"#, long).await;
    // The queue lists the shoot as one product of two photos.
    wait_text(&c, r#"[data-testid="import-row"] [data-testid="photo-count"]"#, "2 photos", long).await;

    wait_for(&c, "#import-review", long).await.click().await.unwrap();
    let panel = wait_for(&c, "#import-review-panel", long).await;
    wait_text(&c, "#import-review-position", "1 of 1", long).await;
    wait_text(&c, "#import-review-photo-count", "2 photos", long).await;
    let name = wait_for(&c, "#field-name", long).await.prop("value").await.unwrap();
    assert_eq!(name.as_deref(), Some("Crunchy Oat Bars"));
    // The back (photo 2) carries the barcode read on this computer, drawn where it is.
    panel.send_keys("2").await.unwrap();
    let rect = wait_for(&c, "#import-review-panel rect.box.barcode", long).await;
    let label = rect.attr("data-label").await.unwrap().unwrap_or_default();
    assert!(label.contains("4006381333931"), "{label}");
    let geometry = c
        .execute(
            "const r = document.querySelector('#import-review-panel rect.box.barcode').getBoundingClientRect(); \
             return [r.width, r.height];",
            vec![],
        )
        .await
        .unwrap();
    let (w, h) = (geometry[0].as_f64().unwrap(), geometry[1].as_f64().unwrap());
    assert!(w > 20.0 && h > 10.0, "the box is drawn at a visible size: {geometry}");
    screenshot(&c, "shoot-1-barcode-box").await;
    // Focusing a field shows where Gemini read it: the net content, on the back.
    panel.send_keys("1").await.unwrap();
    wait_text(&c, "#import-review-panel .photo-name", "Photo 1 of 2", long).await;
    wait_for(&c, "#field-net_content-value", long).await.click().await.unwrap();
    wait_text(&c, "#import-review-panel .photo-name", "Photo 2 of 2", long).await;
    let field = wait_for(&c, "#import-review-panel rect.box.field", long).await;
    assert_eq!(field.attr("data-label").await.unwrap().as_deref(), Some("Net content: read here"));
    screenshot(&c, "shoot-2-field-box").await;
    // The brand, on the front.
    wait_for(&c, "#field-brand", long).await.click().await.unwrap();
    wait_text(&c, "#import-review-panel .photo-name", "Photo 1 of 2", long).await;
    let field = wait_for(&c, "#import-review-panel rect.box.field", long).await;
    assert_eq!(field.attr("data-label").await.unwrap().as_deref(), Some("Brand: read here"));
    let panel = wait_for(&c, "#import-review-panel", long).await;
    panel.send_keys("2").await.unwrap();
    wait_text(&c, "#import-review-panel .photo-name", "Photo 2 of 2", long).await;

    // `n`: the shown photo (the back) becomes a product of its own; nothing is sent.
    panel.send_keys("n").await.unwrap();
    wait_text(&c, "#import-review-position", "1 of 2", long).await;
    wait_for(&c, "#import-review-regrouped", long).await;
    let count = c.execute("return document.getElementById('import-review-photo-count')", vec![]).await.unwrap();
    assert_eq!(count, json!(null), "the front is alone now");
    screenshot(&c, "shoot-3-split").await;
    // Asked: the front is extracted again, alone.
    wait_for(&c, "#import-review-panel", long).await.send_keys("x").await.unwrap();
    wait_for(&c, "#field-name", long).await;
    let deadline = Instant::now() + long;
    loop {
        let gone = c.execute("return document.getElementById('import-review-regrouped') === null", vec![]).await;
        if gone.unwrap() == json!(true) {
            break;
        }
        assert!(Instant::now() < deadline, "the product was not extracted again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c.close().await.unwrap();

    let status = Command::new(env!("CARGO_BIN_EXE_product-extractor"))
        .args(["import", "status", "--json"])
        .env("PRODUCT_EXTRACTOR_DATA_DIR", data_dir.path())
        .env_remove("DISPLAY")
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["counts"]["ready"], 1, "the front, extracted again: {status}");
    assert_eq!(status["counts"]["failed"], 1, "the back waits for Extract again: {status}");
}

/// The saved products, read from `data_dir` through the headless CLI (`products list --json`).
fn products_on_disk(data_dir: &Path) -> serde_json::Value {
    products_on(&Backend::Sqlite, data_dir)
}

/// The saved products of `backend`'s catalog (`data_dir`'s for SQLite), read through the
/// headless CLI (`products list --json`).
fn products_on(backend: &Backend, data_dir: &Path) -> serde_json::Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_product-extractor"));
    command.args(["products", "list", "--json"]).env("PRODUCT_EXTRACTOR_DATA_DIR", data_dir).env_remove("DISPLAY");
    for (k, v) in backend.env(&[]) {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The app itself, without a WebDriver, killed when dropped.
struct App(Child);

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn app_command(data_dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_product-extractor"));
    command
        .env("PRODUCT_EXTRACTOR_DATA_DIR", data_dir)
        .env("PRODUCT_EXTRACTOR_KEYRING_SERVICE", format!("product-extractor-test:{}", data_dir.display()))
        .env_remove("GEMINI_API_KEY")
        .env_remove("GEMINI_BASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        command.env(k, v);
    }
    command
}

/// The names on the session bus (the single-instance plugin registers one per data dir).
fn session_bus_names() -> String {
    let out = Command::new("dbus-send")
        .args(["--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus"])
        .arg("org.freedesktop.DBus.ListNames")
        .output()
        .expect("dbus-send (Debian's dbus package) lists the session bus names");
    assert!(out.status.success(), "no session bus: run under scripts/with-keyring: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// "Open with" on a running app: the second launch hands its photo to the first window, which
/// queues and extracts it, and exits at once — without touching the queue itself; a launch on
/// another data dir is its own instance, which extracts the photo it was launched with.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a display and a session bus: make test-e2e"]
async fn a_second_launch_hands_its_photos_to_the_running_window_and_exits() {
    use fake_gemini::{FakeGemini, FakeOptions};
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let base_url = fake.base_url();
    let env = [("GEMINI_API_KEY", "test-key"), ("GEMINI_BASE_URL", base_url.as_str())];
    let data_dir = tempfile::tempdir().unwrap();
    let _first = App(app_command(data_dir.path(), &env).spawn().unwrap());

    let id = product_extractor_lib::instance_id(data_dir.path());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !session_bus_names().contains(&id) {
        assert!(Instant::now() < deadline, "the first window never registered {id} on the session bus");
        std::thread::sleep(Duration::from_millis(200));
    }

    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/product.jpg");
    let mut second = App(app_command(data_dir.path(), &env).arg(&fixture).spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = second.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the second launch did not hand over and exit");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status:?}");

    // The running window queued the photo and extracted it: one call at Gemini.
    let deadline = Instant::now() + Duration::from_secs(60);
    while fake.generate_count() < 1 {
        assert!(Instant::now() < deadline, "the handed-over photo was never extracted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(fake.generate_count(), 1);
    drop(second);

    // Another data dir is another catalog: its own window, which stays up and extracts the photo
    // it was launched with ("Open with" when the app is not running).
    let other = tempfile::tempdir().unwrap();
    let mut third = App(app_command(other.path(), &env).arg(&fixture).spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    while fake.generate_count() < 2 {
        assert!(third.0.try_wait().unwrap().is_none(), "a launch on another data dir exited instead of opening");
        assert!(Instant::now() < deadline, "the photo the window was launched with was never extracted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(third.0.try_wait().unwrap().is_none(), "a launch on another data dir exited instead of opening");
}

/// Settings' "Serve the HTTP API while the window is open": turned on, it says where it serves;
/// a photo another program posts there shows in Extract, waiting for review like a dropped one.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a display (run under xvfb-run) plus tauri-driver and WebKitWebDriver"]
async fn settings_serve_the_http_api_and_a_posted_photo_waits_in_extract() {
    let data_dir = tempfile::tempdir().unwrap();
    let fake = fake_gemini::FakeGemini::start(fake_gemini::FakeOptions::default()).await.unwrap();
    let gemini = fake.base_url();
    let driver = start_driver(
        data_dir.path(),
        HTTP_API_PORTS,
        &[("GEMINI_BASE_URL", &gemini), ("GEMINI_API_KEY", "test-key"), ("GEMINI_MODEL", "gemini-2.5-flash")],
    );
    let c = connect(&driver).await;
    let long = Duration::from_secs(30);
    // A free port for the API.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    wait_for(&c, "#nav-settings", long).await.click().await.unwrap();
    let toggle = wait_for(&c, "#settings-http-api-with-window", long).await;
    toggle.click().await.unwrap();
    let listen = wait_for(&c, "#settings-http-api-listen", long).await;
    listen.clear().await.unwrap();
    listen.send_keys(&format!("127.0.0.1:{port}")).await.unwrap();
    wait_for(&c, "#settings-save", long).await.click().await.unwrap();
    let status = wait_text(&c, "#settings-http-api-status", "Serving at", long).await;
    assert!(status.contains(&format!("http://127.0.0.1:{port}")), "{status}");
    c.execute("document.querySelector('#settings-http-api').scrollIntoView()", vec![]).await.unwrap();
    screenshot(&c, "http-api-1-settings").await;
    // Another program posts a photo (curl, as a shop's script would).
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/product.jpg");
    let url = format!("http://127.0.0.1:{port}/api/products/extract");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", "-F", &format!("image=@{}", fixture.display()), &url])
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.ends_with("\n200"), "{text}");
    assert!(text.contains("Crunchy Oat Bars"), "{text}");
    // It waits for review in Extract.
    wait_text(&c, "#nav-extract .count", "1", long).await;
    wait_for(&c, "#nav-extract", long).await.click().await.unwrap();
    wait_text(&c, "main", "Crunchy Oat Bars", long).await;
    screenshot(&c, "http-api-2-posted-photo-in-extract").await;
    c.close().await.unwrap();
}
