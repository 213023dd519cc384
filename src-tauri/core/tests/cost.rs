//! The cost meter against the fake Gemini and real SQLite files: every attempt priced from its
//! usage (and "price unknown" without a row), spend per day and model, the daily budget pausing
//! the queue without failing anything, and the cost per 1,000 photos of a 12 MP shoot.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{FakeGemini, FakeOptions};
use pe_core::catalog::{AttemptOutcome, AttemptUsage, Catalog, NewAttempt, NewPhoto};
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::GeminiClient;
use pe_core::import::{ClaimScope, EnqueueOptions, ImportOptions, ImportQueue, ImportStatus, ItemState};
use pe_core::intake::PreparedImage;
use pe_core::pipeline::{price_attempt, system_clock, Pipeline};
use pe_core::pricing::{list_price, BilledTokens, PricingConfig, Usd};
use pe_core::resilience::{ResilienceConfig, ResilienceStack};
use pe_core::ErrorCode;

const LITE: &str = "gemini-2.5-flash-lite";

struct Setup {
    fake: FakeGemini,
    dir: tempfile::TempDir,
    catalog: Catalog,
}

impl Setup {
    async fn new() -> Setup {
        let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(&dir.path().join("catalog.sqlite3")).unwrap();
        Setup { fake, dir, catalog }
    }

    fn client(&self, model: &str) -> GeminiClient {
        GeminiClient::new(&GeminiConfig {
            base_url: self.fake.base_url(),
            api_key: ApiKey::new("test-key"),
            model: model.into(),
            timeout: Duration::from_secs(20),
            ..GeminiConfig::default()
        })
        .unwrap()
    }

    fn pipeline(&self, model: &str, pricing: PricingConfig) -> Pipeline {
        let mut resilience = ResilienceConfig::default();
        resilience.retry.max_attempts = 1;
        resilience.bulkhead.max_concurrent_calls = 1;
        let stack = ResilienceStack::new("gemini", resilience).unwrap();
        Pipeline::new(self.client(model), stack, self.catalog.clone(), ImageConfig::default(), system_clock())
            .with_pricing(pricing)
    }

    fn photos(&self, n: u64, width: u32, height: u32) -> Vec<PathBuf> {
        (0..n)
            .map(|i| {
                let path = self.dir.path().join(format!("photo-{width}-{i:02}.jpg"));
                std::fs::write(&path, sample_jpeg(100 + i, width, height, 85)).unwrap();
                path
            })
            .collect()
    }
}

/// The queue as `extract` opens it: interactive, failing fast.
async fn extract_queue(pipeline: Pipeline) -> ImportQueue {
    let options = ImportOptions { claims: ClaimScope::Interactive, fail_fast: true, ..ImportOptions::default() };
    ImportQueue::open(pipeline, options).await.unwrap()
}

#[tokio::test]
async fn every_attempt_is_priced_from_its_usage_and_an_unknown_model_stays_unpriced() {
    let s = Setup::new().await;
    let files = s.photos(2, 1600, 1200);

    let queue = extract_queue(s.pipeline(LITE, PricingConfig::default())).await;
    let enqueued = queue.enqueue_files(vec![files[0].clone()], EnqueueOptions::interactive()).await.unwrap();
    let detail = queue.finished(enqueued.files[0].result_of).await.unwrap();
    let attempt = detail.attempt.expect("an attempt");
    let usage = attempt.usage.expect("usage");
    assert!(usage.prompt_tokens > 4 * 258, "{usage:?}");
    let expected = list_price(LITE).unwrap().cost(usage.billed(), false);
    assert_eq!(attempt.cost_usd, Some(expected));
    assert!(!attempt.batch);
    // The same in the audit trail, with the model that answered.
    let photo = detail.row.photo_id.unwrap();
    let record = &s.catalog.attempts(photo).await.unwrap()[0];
    assert_eq!((record.cost_usd, record.model_version.as_deref()), (Some(expected), Some(LITE)));
    let product = s.catalog.photo_cost(photo).await.unwrap();
    assert_eq!((product.calls, product.usd, product.unpriced_calls), (1, expected, 0));
    queue.shutdown().await;

    // An alias is priced as the model that answered (modelVersion): the default model has a price.
    let queue = extract_queue(s.pipeline("gemini-flash-latest", PricingConfig::default())).await;
    let enqueued = queue.enqueue_files(vec![files[1].clone()], EnqueueOptions::interactive()).await.unwrap();
    let detail = queue.finished(enqueued.files[0].result_of).await.unwrap();
    let attempt = detail.attempt.unwrap();
    let alias = list_price(fake_gemini::FLASH_LATEST_TARGET).unwrap().cost(attempt.usage.unwrap().billed(), false);
    assert_eq!(attempt.cost_usd, Some(alias));
    queue.shutdown().await;

    // A model without a price row: tokens, and no made-up price.
    let files = s.photos(3, 1600, 1200);
    let queue = extract_queue(s.pipeline("gemini-2.5-pro", PricingConfig::default())).await;
    let enqueued = queue.enqueue_files(vec![files[2].clone()], EnqueueOptions::interactive()).await.unwrap();
    let detail = queue.finished(enqueued.files[0].result_of).await.unwrap();
    let attempt = detail.attempt.unwrap();
    assert!(attempt.usage.unwrap().prompt_tokens > 0);
    assert_eq!(attempt.cost_usd, None);
    let today = s.pipeline(LITE, PricingConfig::default()).spent_today().await.unwrap();
    assert_eq!((today.calls, today.usd, today.unpriced_calls), (3, expected.saturating_add(alias), 1));
    queue.shutdown().await;
}

/// A billed call stays in the cost meter when what it answered cannot be written: the catalog
/// refuses to make the item ready (here a trigger planted on the SQLite file; on a server, e.g. a
/// value it cannot hold). The item fails with the catalog's error, and the attempt — its usage,
/// its cost — is recorded all the same. A save that fails afterwards leaves it too.
#[tokio::test]
async fn a_billed_call_is_recorded_when_its_answer_cannot_be_written_or_saved() {
    let s = Setup::new().await;
    let files = s.photos(2, 640, 480);
    let planted = rusqlite::Connection::open(s.dir.path().join("catalog.sqlite3")).unwrap();
    planted
        .execute_batch(
            "CREATE TRIGGER refuse_ready BEFORE UPDATE OF state ON import_items WHEN NEW.state = 'ready'
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
        )
        .unwrap();
    let queue = extract_queue(s.pipeline(LITE, PricingConfig::default())).await;
    let enqueued = queue.enqueue_files(vec![files[0].clone()], EnqueueOptions::interactive()).await.unwrap();
    // Before the fix the refused write ended the item's task: it never finished.
    let finished = tokio::time::timeout(Duration::from_secs(60), queue.finished(enqueued.files[0].result_of));
    let detail = finished.await.expect("the item finishes").unwrap();
    assert_eq!(detail.row.state, ItemState::Failed, "{detail:?}");
    let error = detail.row.last_error.as_ref().expect("the catalog's error");
    assert!(error.message.contains("refused by the test"), "{error:?}");
    assert_eq!(s.fake.generate_count(), 1);
    let attempt = detail.attempt.as_ref().expect("the billed attempt is recorded");
    let usage = attempt.usage.expect("with its usage");
    assert!(usage.prompt_tokens > 0, "{usage:?}");
    let cost = list_price(LITE).unwrap().cost(usage.billed(), false);
    assert_eq!(attempt.cost_usd, Some(cost));
    let spent = s.catalog.spent_between(0, i64::MAX).await.unwrap();
    assert_eq!((spent.calls, spent.usd, spent.input_tokens), (1, cost, u64::from(usage.prompt_tokens)));

    // The answer is written; the save after it fails: the call stays counted.
    planted
        .execute_batch(
            "DROP TRIGGER refuse_ready;
             CREATE TRIGGER refuse_products BEFORE INSERT ON products
             BEGIN SELECT RAISE(ABORT, 'no saving in this test'); END;",
        )
        .unwrap();
    let enqueued = queue.enqueue_files(vec![files[1].clone()], EnqueueOptions::interactive()).await.unwrap();
    let detail = queue.finished(enqueued.files[0].result_of).await.unwrap();
    assert_eq!(detail.row.state, ItemState::Ready, "{detail:?}");
    let saved = queue.save_item(detail.row.id, detail.proposal.clone().unwrap()).await;
    assert!(saved.is_err(), "{saved:?}");
    let spent = s.catalog.spent_between(0, i64::MAX).await.unwrap();
    assert_eq!(spent.calls, 2, "{spent:?}");
    queue.shutdown().await;
}

/// A billed answer whose item the catalog takes neither way (not `ready`, nor `failed` with the
/// attempt alone) is kept in the spool: a replay that meets the same refusal leaves it there and
/// stops the queue (nothing claimed), and the first replay the catalog accepts (here Resume's)
/// writes it before anything is claimed; the photo is paid for once.
#[tokio::test]
async fn an_answer_the_catalog_takes_neither_way_waits_in_the_spool_for_the_next_run() {
    let s = Setup::new().await;
    let files = s.photos(1, 640, 480);
    let spool = s.dir.path().join("spool");
    let options = || ImportOptions {
        claims: ClaimScope::Interactive,
        fail_fast: true,
        spool_dir: Some(spool.clone()),
        ..ImportOptions::default()
    };
    let planted = rusqlite::Connection::open(s.dir.path().join("catalog.sqlite3")).unwrap();
    planted
        .execute_batch(
            "CREATE TRIGGER refuse_ends BEFORE UPDATE OF state ON import_items WHEN NEW.state IN ('ready', 'failed')
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
        )
        .unwrap();
    let queue = ImportQueue::open(s.pipeline(LITE, PricingConfig::default()), options()).await.unwrap();
    queue.enqueue_files(vec![files[0].clone()], EnqueueOptions::interactive()).await.unwrap();
    let kept = async {
        while std::fs::read_dir(&spool).map(|d| d.count()).unwrap_or(0) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), kept).await.expect("the answer is kept in the spool");
    assert_eq!(s.fake.generate_count(), 1);
    queue.shutdown().await;

    // The next run, the catalog still refusing: the answer stays in the spool (not set aside), the
    // queue stops saying why, and the photo is not claimed, so not paid for again.
    let queue = ImportQueue::open(s.pipeline(LITE, PricingConfig::default()), options()).await.unwrap();
    let stopped = async {
        loop {
            if let ImportStatus::Stopped { message, .. } = &queue.progress().borrow().status {
                return message.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let message = tokio::time::timeout(Duration::from_secs(60), stopped).await.expect("the queue stops");
    assert!(message.contains("refused by the test"), "{message}");
    assert_eq!(s.fake.generate_count(), 1, "nothing is claimed while a paid answer waits in the spool");
    let spooled: Vec<_> = std::fs::read_dir(&spool).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(spooled.len(), 1, "{spooled:?}");
    assert!(spooled[0].to_string_lossy().ends_with(".json"), "kept for the next try, not set aside: {spooled:?}");

    // The catalog takes it again; Resume writes the spool before anything is claimed.
    planted.execute_batch("DROP TRIGGER refuse_ends;").unwrap();
    queue.resume();
    let ready = async {
        loop {
            let rows = queue.store().items(0, 10, None).await.unwrap().rows;
            if rows.iter().all(|r| r.state == ItemState::Ready) && !rows.is_empty() {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let rows = tokio::time::timeout(Duration::from_secs(60), ready).await.expect("the spooled answer is written");
    assert_eq!(rows.len(), 1);
    assert_eq!(s.fake.generate_count(), 1, "the photo was not paid for again");
    assert_eq!(s.catalog.spent_between(0, i64::MAX).await.unwrap().calls, 1);
    assert_eq!(std::fs::read_dir(&spool).map(|d| d.count()).unwrap_or(0), 0, "the spool is empty");
    queue.shutdown().await;
}

#[test]
fn a_failed_but_billed_attempt_is_priced_and_its_model_read_from_the_body() {
    let mut attempt = NewAttempt {
        photo_id: 1,
        model: "gemini-flash-latest".into(),
        started_at: 0,
        latency_ms: 1,
        usage: Some(AttemptUsage {
            prompt_tokens: 2_000,
            output_tokens: 8_192,
            cached_tokens: 1_000,
            ..Default::default()
        }),
        raw_response: Some(
            r#"{"candidates":[{"finishReason":"MAX_TOKENS"}],"modelVersion":"gemini-2.5-flash"}"#.into(),
        ),
        outcome: AttemptOutcome::Failed { code: ErrorCode::UnparsableOutput, message: "cut off".into() },
        model_version: None,
        cost: None,
        batch: true,
        barcodes: None,
        more_photos: Vec::new(),
        sources: Vec::new(),
    };
    price_attempt(&mut attempt, &PricingConfig::default());
    assert_eq!(attempt.model_version.as_deref(), Some("gemini-2.5-flash"));
    // (1,000 × $0.30 + 1,000 × $0.03 + 8,192 × $2.50) / 1M, at half price.
    assert_eq!(attempt.cost, Some(Usd::from_nanos(10_405_000)));
}

#[tokio::test]
async fn spend_per_day_and_model_from_a_real_file() {
    let s = Setup::new().await;
    let photo = s
        .catalog
        .record_photo(NewPhoto {
            sha256: "ab".repeat(32),
            original_path: "/p.jpg".into(),
            original_path_bytes: None,
            file_bytes: 1,
            width: 1,
            height: 1,
            format: "jpeg".into(),
            thumbnail_jpeg: vec![0xff],
            seen_at: 0,
        })
        .await
        .unwrap();
    const DAY: i64 = 86_400_000;
    let t0 = 20_000 * DAY; // 2024-10-04T00:00Z
    let pricing = PricingConfig::default();
    let rows = [
        (t0 + 1_000, LITE, Some(1_000), false),
        (t0 + DAY - 1, LITE, Some(3_000), true),
        (t0 + DAY, LITE, Some(1_000), false),
        (t0 + DAY + 5, "my-own-model", Some(500), false),
        (t0 + DAY + 6, LITE, None, false),
    ];
    for (started_at, model, prompt, batch) in rows {
        let mut attempt = NewAttempt {
            photo_id: photo,
            model: model.into(),
            started_at,
            latency_ms: 1,
            usage: prompt.map(|p| AttemptUsage { prompt_tokens: p, output_tokens: 100, ..Default::default() }),
            raw_response: None,
            outcome: AttemptOutcome::Failed { code: ErrorCode::Timeout, message: "x".into() },
            model_version: None,
            cost: None,
            batch,
            barcodes: None,
            more_photos: Vec::new(),
            sources: Vec::new(),
        };
        price_attempt(&mut attempt, &pricing);
        s.catalog.record_attempt(attempt).await.unwrap();
    }
    let lite = list_price(LITE).unwrap();
    let cost = |input, batch| lite.cost(BilledTokens { input, cached_input: 0, output: 100 }, batch);

    let days = s.catalog.usage_by_day(t0, 0).await.unwrap();
    let got: Vec<_> = days.iter().map(|d| (d.day.as_str(), d.model.as_str(), d.total.calls, d.total.usd)).collect();
    assert_eq!(
        got,
        [
            ("2024-10-04", LITE, 2, cost(1_000, false).saturating_add(cost(3_000, true))),
            ("2024-10-05", LITE, 2, cost(1_000, false)),
            ("2024-10-05", "my-own-model", 1, Usd::ZERO),
        ]
    );
    assert_eq!((days[1].total.input_tokens, days[1].total.output_tokens), (1_000, 100), "no usage, no tokens");
    assert_eq!(days[2].total.unpriced_calls, 1);
    // An hour east of UTC, the first day's last attempt is on the second day.
    let east = s.catalog.usage_by_day(t0, 3_600_000).await.unwrap();
    assert_eq!((east[0].total.calls, east[1].total.calls), (1, 3));
    let first_day = s.catalog.spent_between(t0, t0 + DAY).await.unwrap();
    assert_eq!((first_day.calls, first_day.input_tokens, first_day.output_tokens), (2, 4_000, 200));
}

#[tokio::test]
async fn the_daily_budget_pauses_the_queue_and_nothing_fails() {
    let s = Setup::new().await;
    let files = s.photos(6, 320, 240);
    let pipeline = s.pipeline(LITE, PricingConfig::default());
    let per_call = pipeline.estimate_call(Some((320, 240))).await.unwrap();
    assert_eq!(per_call.measured_calls, 0, "nothing measured yet: the image-token rule");
    let per_call = per_call.usd.unwrap();
    // Room for about two calls.
    let budget = per_call.dollars() * 2.5;
    let tight = PricingConfig { daily_budget_usd: Some(budget), ..Default::default() };
    let options = ImportOptions { lookahead: Some(0), ..ImportOptions::default() };
    let queue = ImportQueue::open(s.pipeline(LITE, tight), options).await.unwrap();
    queue.enqueue(files.clone(), EnqueueOptions::default()).await.unwrap();
    let mut progress = queue.progress();
    let deadline = Instant::now() + Duration::from_secs(30);
    let paused = loop {
        let p = progress.borrow_and_update().clone();
        if let ImportStatus::PausedBudget { message, .. } = &p.status {
            assert!(message.starts_with("Today's Gemini budget ($0.000"), "{message}");
            assert!(message.ends_with("is spent; resumes tomorrow or raise it in Settings."), "{message}");
            break p;
        }
        assert!(!p.is_settled() || p.total == 0, "settled without pausing: {p:?}");
        assert!(Instant::now() < deadline, "no budget pause: {p:?}");
        let _ = tokio::time::timeout(Duration::from_millis(200), progress.changed()).await;
    };
    assert_eq!(paused.counts.failed, 0);
    assert!(paused.counts.ready >= 1 && paused.counts.ready < 6, "{paused:?}");
    let spent = s.catalog.spent_between(0, i64::MAX).await.unwrap().usd;
    assert!(spent.dollars() <= budget, "spent {spent} of {budget}");
    assert_eq!(paused.cost.usd, spent, "the running total is what the catalog recorded");

    // A higher budget in Settings (a new pipeline): the queue goes on by itself.
    let roomy = PricingConfig { daily_budget_usd: Some(1.0), ..Default::default() };
    queue.set_pipeline(s.pipeline(LITE, roomy));
    let done = tokio::time::timeout(Duration::from_secs(30), queue.settled()).await.unwrap();
    assert_eq!((done.counts.ready, done.counts.failed), (6, 0), "{done:?}");
    assert_eq!(done.cost.calls, 6);
    queue.shutdown().await;
}

/// BENCHMARKS.md's table: tokens and dollars per 1,000 photos of a 12 MP shoot on
/// gemini-2.5-flash-lite, from the usage the fake reports (Google's image-token rule; text at
/// about four characters a token). Run with
/// `cargo test -p product-extractor-core --test cost -- --nocapture cost_per_1000`.
#[tokio::test]
async fn cost_per_1000_photos_of_a_12_mp_shoot() {
    let s = Setup::new().await;
    let client = s.client(LITE);
    let raw = sample_jpeg(7, 4000, 3000, 90);
    let path = s.dir.path().join("12mp.jpg");
    std::fs::write(&path, &raw).unwrap();
    let prepared = pe_core::intake::prepare_file_async(
        path,
        ImageConfig::default(),
        None,
        &pe_core::intake::DecodeBudget::new(1 << 30),
    )
    .await
    .unwrap();
    assert_eq!((prepared.width, prepared.height), (1536, 1152));

    let a = client.extract_product(PreparedImage::MIME_TYPE, &raw).await.unwrap().usage;
    let b = client.extract_product(PreparedImage::MIME_TYPE, &prepared.jpeg).await.unwrap().usage;
    let price = list_price(LITE).unwrap();
    // (a) as the seed sent it: the 12 MP file, thinking at the model's default (the fake's
    // invented thoughts included). (b) and (c): our prepared photo with thinking off
    // (`gemini.thinking = "off"`): the answer's tokens only.
    let seed = a.billed();
    let ours = BilledTokens { output: u64::from(b.output_tokens - b.thoughts_tokens), ..b.billed() };
    let per_1000 = |t: BilledTokens, batch: bool| {
        let cost = price.cost(t, batch);
        (t.input * 1000, t.output * 1000, Usd::from_nanos(cost.nanos() * 1000))
    };
    let rows = [
        ("(a) raw 4000×3000, as the seed sent it", per_1000(seed, false)),
        ("(b) prepared 1536×1152, thinking off", per_1000(ours, false)),
        ("(c) (b) in batch mode", per_1000(ours, true)),
    ];
    println!("| per 1,000 photos | input tokens | output tokens | cost |");
    println!("|---|---:|---:|---:|");
    for (name, (input, output, usd)) in &rows {
        println!("| {name} | {input} | {output} | {usd} |");
    }
    println!(
        "image tokens per photo: (a) {}, (b) {}",
        client.image_tokens(4000, 3000),
        client.image_tokens(1536, 1152)
    );
    println!("per photo: (a) {seed:?}, (b) {ours:?}, (b)'s thoughts as the fake invents them: {}", b.thoughts_tokens);
    let (a_usd, c_usd) = (rows[0].1 .2, rows[2].1 .2);
    assert!(c_usd.dollars() <= 0.15, "(c) costs {c_usd} per 1,000 photos");
    assert!(a_usd.nanos() >= 5 * c_usd.nanos(), "(a) {a_usd} is not 5× (c) {c_usd}");
}

/// An estimate counts the image by the model family's rule and the configured media resolution
/// (the one rule in `gemini::models`), and agrees with what the fake bills for the same photo.
#[tokio::test]
async fn estimates_count_the_image_by_family_and_media_resolution() {
    use pe_core::config::MediaResolution;
    let s = Setup::new().await;
    let client = |model: &str, media_resolution| {
        GeminiClient::new(&GeminiConfig {
            base_url: s.fake.base_url(),
            api_key: ApiKey::new("test-key"),
            model: model.into(),
            media_resolution,
            ..GeminiConfig::default()
        })
        .unwrap()
    };
    let lite = client(LITE, MediaResolution::ModelDefault);
    assert_eq!(lite.image_tokens(1536, 1152), 1032);
    assert_eq!(client(LITE, MediaResolution::Low).image_tokens(1536, 1152), 64);
    let three = client("gemini-3-flash-preview", MediaResolution::Low);
    assert_eq!(three.image_tokens(1536, 1152), 280);
    assert_eq!(client("gemini-3-flash-preview", MediaResolution::ModelDefault).image_tokens(640, 480), 1120);
    // An alias not looked up yet: the tile rule, until the first call resolves it.
    assert_eq!(client("gemini-flash-latest", MediaResolution::Low).image_tokens(1536, 1152), 64);

    // The estimate's input is what the fake bills for the photo and the text.
    for c in [lite, three] {
        let photo = sample_jpeg(3, 1536, 1152, 85);
        let billed = c.extract_product(PreparedImage::MIME_TYPE, &photo).await.unwrap().usage;
        let estimate = pe_core::pricing::estimated_tokens(c.image_tokens(1536, 1152), c.prompt_text_chars());
        let (estimated, actual) = (estimate.input, u64::from(billed.prompt_tokens));
        assert!(estimated.abs_diff(actual) * 10 <= actual, "{}: estimated {estimated}, billed {actual}", c.model());
    }
}
