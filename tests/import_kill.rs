//! kill -9 at any moment loses nothing and duplicates nothing: the real binary imports 200
//! generated products — 50 of them of two photos (`pNNN.jpg` and `pNNN_back.jpg`, one product by
//! the default stem rule) — with `--save` against a slow fake Gemini on 127.0.0.1, is killed
//! (SIGKILL) four times at different moments, and is run again until it finishes.

#![cfg(unix)]

use std::collections::HashSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::catalog::Catalog;
use tokio::process::Command;

const PHOTOS: u64 = 200;
/// The first this many products also have a back photo, sent with their front.
const WITH_BACK: u64 = 50;
/// When each killed run is killed: the first this long after it starts (maybe while still
/// queueing), the others this long after the fake has seen one of their calls (mid-flight,
/// whatever the machine's load makes of the start-up time).
const KILL_AFTER_MS: [u64; 4] = [300, 750, 450, 950];
/// The fake's latency during each run (the last one finishes the import).
const LATENCY_MS: [u64; 5] = [200, 300, 150, 250, 100];

fn import(data: &Path, photos: &Path, base_url: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_product-extractor"));
    cmd.args(["--data-dir", data.to_str().unwrap(), "import", "--save", "--json", "--concurrency", "16"])
        .arg(photos)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("PRODUCT_EXTRACTOR_DATA_DIR")
        .env("GEMINI_API_KEY", "test-key")
        .env("GEMINI_BASE_URL", base_url)
        .stdin(Stdio::null());
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_at_any_moment_loses_nothing_and_duplicates_nothing() {
    let started = Instant::now();
    // A valid product for every photo, so --save saves each one.
    let product = serde_json::json!({
        "name": "Survivor Granola", "brand": "Kill Nine", "category": "Breakfast cereal", "description": null,
        "price": null, "gtin": null, "color": null, "size": null, "material": null, "net_content": null,
        "attributes": [], "uncertain_fields": [],
    });
    let fake = FakeGemini::start(FakeOptions { default_behavior: Behavior::Fixed(product), ..FakeOptions::default() })
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let photos = dir.path().join("photos");
    std::fs::create_dir_all(&photos).unwrap();
    let mut hashes = HashSet::new();
    let mut back_hashes = HashSet::new();
    let prepared =
        |jpeg: &[u8]| pe_core::intake::prepare_bytes(jpeg, &pe_core::config::ImageConfig::default()).unwrap().sha256;
    for i in 0..PHOTOS {
        let jpeg = sample_jpeg(10_000 + i, 160, 120, 80);
        hashes.insert(prepared(&jpeg));
        std::fs::write(photos.join(format!("p{i:03}.jpg")), jpeg).unwrap();
        if i < WITH_BACK {
            let back = sample_jpeg(20_000 + i, 160, 120, 80);
            back_hashes.insert(prepared(&back));
            std::fs::write(photos.join(format!("p{i:03}_back.jpg")), back).unwrap();
        }
    }
    assert_eq!((hashes.len(), back_hashes.len()), (PHOTOS as usize, WITH_BACK as usize));
    let data = dir.path().join("data");

    for (run, kill_after) in KILL_AFTER_MS.iter().enumerate() {
        fake.set_latency(Duration::from_millis(LATENCY_MS[run]));
        let calls_before = fake.generate_count();
        let mut child =
            import(&data, &photos, &fake.base_url()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        if run > 0 {
            let deadline = Instant::now() + Duration::from_secs(120);
            while fake.generate_count() == calls_before {
                assert!(Instant::now() < deadline, "run {run} sent nothing in 120 s");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(*kill_after)).await;
        child.kill().await.unwrap(); // SIGKILL
        let status = child.wait().await.unwrap();
        assert_eq!(status.signal(), Some(9), "run {run} was killed, not finished: {status:?}");
    }
    let sent_before_last_run = fake.generate_count();
    assert!(sent_before_last_run > 0, "the killed runs made progress");

    fake.set_latency(Duration::from_millis(LATENCY_MS[4]));
    let out = import(&data, &photos, &fake.base_url()).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let s = &summary["summary"];
    assert_eq!((&s["saved"], &s["ready"], &s["failed"], &s["skipped"]), (&200.into(), &0.into(), &0.into(), &0.into()));

    // Every photo is in the catalog exactly once.
    let catalog = Catalog::open(&Catalog::path_in(&data)).unwrap();
    assert_eq!(catalog.count_products().await.unwrap(), PHOTOS);
    let (saved_hashes, saved_backs, items, saved_items, integrity): (Vec<String>, Vec<String>, i64, i64, String) =
        catalog
            .with_connection(|c| {
                let mut stmt = c.prepare("SELECT ph.sha256 FROM products p JOIN photos ph ON ph.id = p.photo_id")?;
                let saved = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
                let mut stmt = c.prepare(
                "SELECT ph.sha256 FROM product_photos pp JOIN photos ph ON ph.id = pp.photo_id WHERE pp.position = 1",
            )?;
                let backs = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
                let items = c.query_row("SELECT count(*) FROM import_items", [], |r| r.get(0))?;
                let saved_items = c.query_row(
                    "SELECT count(DISTINCT product_id) FROM import_items WHERE state = 'saved'",
                    [],
                    |r| r.get(0),
                )?;
                let integrity = c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
                Ok((saved, backs, items, saved_items, integrity))
            })
            .await
            .unwrap();
    assert_eq!(saved_hashes.iter().cloned().collect::<HashSet<_>>(), hashes);
    assert_eq!(saved_hashes.len(), PHOTOS as usize);
    assert_eq!(saved_backs.len(), WITH_BACK as usize, "each back photo is on its product, once");
    assert_eq!(saved_backs.into_iter().collect::<HashSet<_>>(), back_hashes);
    assert_eq!((items, saved_items), (PHOTOS as i64, PHOTOS as i64), "one queue row per product, each saved once");
    assert_eq!(integrity, "ok");

    // The fake saw every product (one request each, with all its photos), each at most once more
    // than the number of kills.
    let per_photo = fake.generate_counts_per_body();
    assert_eq!(per_photo.len(), PHOTOS as usize);
    let most = per_photo.values().copied().max().unwrap();
    assert!(most <= KILL_AFTER_MS.len() + 1, "a photo was sent {most} times");
    let resent: usize = per_photo.values().map(|n| n - 1).sum();
    eprintln!(
        "kill -9 test: {} kills, {} calls for {PHOTOS} products ({resent} re-sent, at most {most} per product), {:.1} s",
        KILL_AFTER_MS.len(),
        fake.generate_count(),
        started.elapsed().as_secs_f64()
    );
}
