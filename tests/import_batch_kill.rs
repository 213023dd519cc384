//! Batch mode survives kill -9: the real binary imports 50 generated photos with
//! `import --batch --save` against the fake Gemini's Batch API on 127.0.0.1, is killed (SIGKILL)
//! once after its first batch was submitted and once while it polls, and is run again until it
//! finishes. Every photo ends up in the catalog exactly once, every chunk was submitted once, and
//! every answer was priced at the model's batch discount: half the price of the same tokens.

#![cfg(unix)]

use std::collections::HashSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use fake_gemini::batches::BatchTiming;
use fake_gemini::photos::sample_jpeg;
use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::catalog::Catalog;
use pe_core::pricing::{BilledTokens, PricingConfig};
use tokio::process::Command;

const PHOTOS: u64 = 50;

fn import(data: &Path, photos: &Path, base_url: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_product-extractor"));
    cmd.args(["--data-dir", data.to_str().unwrap(), "import", "--batch", "--save", "--json"])
        .arg(photos)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("PRODUCT_EXTRACTOR_DATA_DIR")
        .env("GEMINI_API_KEY", "test-key")
        .env("GEMINI_BASE_URL", base_url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn polls(fake: &FakeGemini) -> usize {
    fake.requests().iter().filter(|r| r.method == "GET" && r.path.starts_with("/v1beta/batches/")).count()
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_after_submission_and_while_polling_loses_nothing_and_submits_nothing_twice() {
    let product = serde_json::json!({
        "name": "Overnight Oats", "brand": "Half Price", "category": "Breakfast cereal", "description": null,
        "price": null, "gtin": null, "color": null, "size": null, "material": null, "net_content": null,
        "attributes": [], "uncertain_fields": [],
    });
    let fake = FakeGemini::start(FakeOptions { default_behavior: Behavior::Fixed(product), ..FakeOptions::default() })
        .await
        .unwrap();
    // Each batch stays pending for a while: the runs are killed before it answers.
    fake.set_batch_timing(BatchTiming { pending_polls: 6, running_polls: 2 });
    let dir = tempfile::tempdir().unwrap();
    let photos = dir.path().join("photos");
    std::fs::create_dir_all(&photos).unwrap();
    let mut hashes = HashSet::new();
    for i in 0..PHOTOS {
        let jpeg = sample_jpeg(20_000 + i, 160, 120, 80);
        let prepared = pe_core::intake::prepare_bytes(&jpeg, &pe_core::config::ImageConfig::default()).unwrap();
        hashes.insert(prepared.sha256);
        std::fs::write(photos.join(format!("p{i:02}.jpg")), jpeg).unwrap();
    }
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // Look often, in chunks of 20 photos (three batches), on a model with a list price (the
    // default alias is answered by the fake under its own name, which has none).
    std::fs::write(
        data.join("config.toml"),
        "[gemini]\nmodel = \"gemini-2.5-flash-lite\"\n[batch]\npoll_interval = \"100ms\"\nmax_requests = 20\n",
    )
    .unwrap();

    // Run 1: killed once its first batch was submitted.
    let mut child = import(&data, &photos, &fake.base_url()).spawn().unwrap();
    wait_for("a first submission", || fake.batch_submissions().0 >= 1).await;
    child.kill().await.unwrap();
    assert_eq!(child.wait().await.unwrap().signal(), Some(9));
    let after_first = fake.batch_submissions();

    // Run 2: killed while it polls (a few polls into the batches, none finished).
    let mut child = import(&data, &photos, &fake.base_url()).spawn().unwrap();
    let seen = polls(&fake);
    wait_for("polls after the restart", || polls(&fake) >= seen + 3).await;
    child.kill().await.unwrap();
    assert_eq!(child.wait().await.unwrap().signal(), Some(9));

    // Run 3: to the end.
    let out = import(&data, &photos, &fake.base_url()).stdout(Stdio::piped()).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let s = &summary["summary"];
    assert_eq!((&s["saved"], &s["failed"]), (&PHOTOS.into(), &0.into()), "{summary}");

    let catalog = Catalog::open(&Catalog::path_in(&data)).unwrap();
    assert_eq!(catalog.count_products().await.unwrap(), PHOTOS);
    let (saved, attempts, batch_attempts, batches): (Vec<String>, i64, i64, i64) = catalog
        .with_connection(|c| {
            let mut stmt = c.prepare("SELECT ph.sha256 FROM products p JOIN photos ph ON ph.id = p.photo_id")?;
            let saved = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
            let attempts = c.query_row("SELECT count(*) FROM attempts", [], |r| r.get(0))?;
            let batch_attempts =
                c.query_row("SELECT count(*) FROM attempts WHERE batch_name IS NOT NULL", [], |r| r.get(0))?;
            let batches = c.query_row("SELECT count(*) FROM batches", [], |r| r.get(0))?;
            Ok((saved, attempts, batch_attempts, batches))
        })
        .await
        .unwrap();
    assert_eq!(saved.iter().cloned().collect::<HashSet<_>>(), hashes, "every photo saved");
    assert_eq!(saved.len(), PHOTOS as usize, "each once");
    assert_eq!((attempts, batch_attempts), (PHOTOS as i64, PHOTOS as i64), "one answer per photo, each a batch's");
    // One submission per chunk: 20 + 20 + 10 requests in three batches, however often killed.
    assert_eq!(fake.batch_submissions(), (3, PHOTOS as usize), "after run 1: {after_first:?}");
    assert_eq!(batches, 3);
    assert_eq!(fake.generate_count(), 0, "nothing was sent outside a batch");

    // Cost at half price: each attempt's recorded cost is what the one cost rule gives its
    // tokens with the batch discount, and the whole import costs half of the same tokens sent
    // one call at a time.
    type Priced = (String, Option<String>, i64, i64, i64, Option<i64>, i64);
    let priced: Vec<Priced> = catalog
        .with_connection(|c| {
            let mut stmt = c.prepare(
                "SELECT model, model_version, prompt_tokens, coalesce(cached_tokens, 0), output_tokens, cost_nanos, \
                 batch FROM attempts",
            )?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)))?
                .collect::<Result<_, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap();
    let pricing = PricingConfig::default();
    let (mut recorded, mut at_batch_price, mut at_full_price) = (0i64, 0i64, 0i64);
    for (model, version, input, cached, output, cost, batch) in &priced {
        let tokens = BilledTokens { input: *input as u64, cached_input: *cached as u64, output: *output as u64 };
        assert!(*input > 0 && *output > 0, "usage recorded: {model} {input} in {output} out");
        assert_eq!(*batch, 1, "billed as a batch call");
        let price = pricing
            .price_for(model, version.as_deref())
            .unwrap_or_else(|| panic!("{model} (answered as {version:?}) has a list price"))
            .price;
        assert_eq!(price.batch_discount, 0.5);
        let cost = cost.expect("a priced model's attempt stores its cost");
        assert_eq!(cost, price.cost(tokens, true).nanos(), "{model} {version:?}: {tokens:?}");
        recorded += cost;
        at_batch_price += price.cost(tokens, true).nanos();
        at_full_price += price.cost(tokens, false).nanos();
    }
    assert!(recorded > 0);
    assert_eq!(recorded, at_batch_price);
    // Half, to within the rounding of each attempt to the nanodollar.
    assert!((2 * recorded - at_full_price).abs() <= priced.len() as i64, "{recorded} vs {at_full_price}");
}
