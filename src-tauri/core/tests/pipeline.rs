//! One photo end to end inside the core, through the one engine (the import queue, as `extract`
//! runs it: interactive, failing fast): a real photo, the real client against the fake Gemini on
//! 127.0.0.1, and a real SQLite file.

mod barcode_photos;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::barcode::GtinSource;
use pe_core::catalog::{AttemptOutcomeKind, Catalog, RevisionSource, UpdateProduct};
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::GeminiClient;
use pe_core::import::{
    ClaimScope, EnqueueOptions, ImportError, ImportItemDetail, ImportOptions, ImportQueue, ItemState, SkipReason,
};
use pe_core::pipeline::{Pipeline, SaveError, UnixClock};
use pe_core::product::{FlagKind, Product};
use pe_core::resilience::{ResilienceConfig, ResilienceStack};
use pe_core::ErrorCode;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(name)
}

/// A clock that starts at 1_000 and moves only when told.
fn test_clock() -> (UnixClock, Arc<AtomicI64>) {
    let now = Arc::new(AtomicI64::new(1_000));
    let read = now.clone();
    (Arc::new(move || read.load(Ordering::SeqCst)), now)
}

struct Setup {
    pipeline: Pipeline,
    fake: FakeGemini,
    _dir: tempfile::TempDir,
    db: PathBuf,
}

async fn setup() -> Setup {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.sqlite3");
    let catalog = Catalog::open(&db).unwrap();
    let config = GeminiConfig {
        base_url: fake.base_url(),
        api_key: ApiKey::new("test-key"),
        timeout: Duration::from_secs(5),
        ..GeminiConfig::default()
    };
    let (clock, _) = test_clock();
    let mut resilience = ResilienceConfig::default();
    resilience.retry.max_attempts = 1;
    let stack = ResilienceStack::new("gemini", resilience).unwrap();
    let pipeline = Pipeline::new(GeminiClient::new(&config).unwrap(), stack, catalog, ImageConfig::default(), clock);
    Setup { pipeline, fake, _dir: dir, db }
}

impl Setup {
    /// The queue as the CLI's `extract` opens it.
    async fn queue(&self) -> ImportQueue {
        let options = ImportOptions { claims: ClaimScope::Interactive, fail_fast: true, ..ImportOptions::default() };
        ImportQueue::open(self.pipeline.clone(), options).await.unwrap()
    }
}

/// Queues one file as a dropped photo and waits for its item to finish.
async fn extract(queue: &ImportQueue, file: &Path) -> ImportItemDetail {
    let enqueued = queue.enqueue_files(vec![file.to_path_buf()], EnqueueOptions::interactive()).await.unwrap();
    queue.finished(enqueued.files[0].result_of).await.unwrap()
}

#[tokio::test]
async fn extraction_is_audited_but_not_saved_until_save() {
    let s = setup().await;
    let queue = s.queue().await;
    let mut events = queue.subscribe();
    let e = extract(&queue, &fixture("product.jpg")).await;
    let mut stages = Vec::new();
    while let Ok(event) = events.try_recv() {
        stages.push(event.state);
    }
    assert_eq!(stages, vec![ItemState::Preparing, ItemState::Extracting, ItemState::Ready]);
    let product = e.proposal.clone().unwrap();
    assert!(!product.name.is_empty());
    let attempt = e.attempt.clone().unwrap();
    assert!(attempt.usage.unwrap().prompt_tokens > 0);
    assert_eq!(e.row.product_id, None);

    let catalog = s.pipeline.catalog();
    let photo_id = e.row.photo_id.unwrap();
    let attempts = catalog.attempts(photo_id).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcomeKind::Proposed);
    assert_eq!(attempts[0].started_at, 1_000, "time comes from the injected clock");
    assert!(attempts[0].raw_response.as_deref().unwrap().contains("candidates"));
    assert_eq!(catalog.count_products().await.unwrap(), 0, "nothing is saved without Save");
    // The fixture is stored sideways with EXIF orientation 6; it is prepared upright (1200×900,
    // so its 256-px thumbnail is 256×192).
    let thumbnail: Vec<u8> = catalog
        .with_connection(move |c| {
            Ok(c.query_row("SELECT thumbnail_jpeg FROM photos WHERE id = ?1", [photo_id], |r| r.get(0))?)
        })
        .await
        .unwrap();
    let thumbnail = image::load_from_memory(&thumbnail).unwrap();
    assert_eq!((thumbnail.width(), thumbnail.height()), (256, 192));

    let mut edited = product.clone();
    edited.name = "Reviewed".into();
    edited.gtin = Some("4006381333931".into());
    let record = queue.save_item(e.row.id, edited).await.unwrap();
    assert_eq!(record.saved.name, "Reviewed");
    assert_eq!(record.proposed.as_ref().unwrap().name, product.name, "the proposal is kept");

    // The same bytes again are the same photo, already in the catalog: nothing is sent.
    let again = extract(&queue, &fixture("product.jpg")).await;
    assert_eq!(again.row.photo_id, Some(photo_id));
    assert_eq!(again.row.product_id, Some(record.id));
    assert_eq!(s.fake.generate_count(), 1);
}

#[tokio::test]
async fn a_failed_call_is_audited_with_its_code() {
    let s = setup().await;
    s.fake.push(Behavior::Unavailable);
    let e = extract(&s.queue().await, &fixture("product.jpg")).await;
    assert_eq!(e.row.state, ItemState::Failed);
    assert_eq!(e.row.last_error.unwrap().code, ErrorCode::GeminiUnavailable);
    let attempts = s.pipeline.catalog().attempts(1).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcomeKind::Failed);
    assert_eq!(attempts[0].error_code, Some(ErrorCode::GeminiUnavailable));
    assert_eq!(attempts[0].prompt_tokens, None, "an error status is not billed");
}

#[tokio::test]
async fn a_billed_failure_is_audited_with_its_usage() {
    let s = setup().await;
    let queue = s.queue().await;
    let cases = [
        ("product.jpg", Behavior::ThinkingExhausted, ErrorCode::OutputTruncated),
        ("label.png", Behavior::NoCandidatesBlocked("PROHIBITED_CONTENT".into()), ErrorCode::Blocked),
    ];
    for (name, behavior, code) in cases {
        s.fake.push(behavior);
        let e = extract(&queue, &fixture(name)).await;
        assert_eq!(e.row.state, ItemState::Failed, "{name}");
        assert_eq!(e.row.last_error.as_ref().unwrap().code, code, "{name}");
        // The item's detail carries the attempt's usage (the CLI's failed --json line prints it).
        let usage = e.attempt.as_ref().and_then(|a| a.usage).unwrap_or_else(|| panic!("{name}: no usage"));
        assert!(usage.prompt_tokens > 0 && usage.total_tokens >= usage.prompt_tokens, "{name}: {usage:?}");
        let photo = e.row.photo_id.unwrap();
        let attempts = s.pipeline.catalog().attempts(photo).await.unwrap();
        let attempt = attempts.last().unwrap();
        assert_eq!(attempt.error_code, Some(code), "{name}");
        assert_eq!(attempt.prompt_tokens, Some(usage.prompt_tokens), "{name}");
        assert_eq!(attempt.output_tokens, Some(usage.output_tokens), "{name}");
        assert_eq!(attempt.thoughts_tokens, Some(usage.thoughts_tokens), "{name}");
        if code == ErrorCode::OutputTruncated {
            assert_eq!((usage.output_tokens, usage.thoughts_tokens), (8192, 8192), "thinking used the whole cap");
        }
    }
}

#[tokio::test]
async fn a_bad_photo_never_reaches_the_network_or_the_catalog() {
    let s = setup().await;
    let queue = s.queue().await;
    for (name, code) in [("not-an-image.jpg", ErrorCode::InvalidImage), ("truncated.jpg", ErrorCode::InvalidImage)] {
        let e = extract(&queue, &fixture(name)).await;
        assert_eq!(e.row.state, ItemState::Failed, "{name}");
        assert_eq!(e.row.last_error.as_ref().unwrap().code, code, "{name}: {:?}", e.row.last_error);
    }
    let missing = extract(&queue, Path::new("/nonexistent/photo.jpg")).await;
    assert_eq!(missing.row.skipped.unwrap().reason, SkipReason::Unreadable);
    assert_eq!(s.fake.generate_count(), 0);
    let photos: i64 = s
        .pipeline
        .catalog()
        .with_connection(|c| Ok(c.query_row("SELECT count(*) FROM photos", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(photos, 0);
}

#[tokio::test]
async fn save_refuses_invalid_fields_and_names_them() {
    let s = setup().await;
    let queue = s.queue().await;
    let e = extract(&queue, &fixture("product.jpg")).await;
    let bad = Product { name: "X".into(), gtin: Some("4006381333932".into()), ..Default::default() };
    match queue.save_item(e.row.id, bad).await {
        Err(ImportError::Save(SaveError::Invalid(flags))) => assert_eq!(flags[0].field, "gtin"),
        other => panic!("expected a validation error, got {other:?}"),
    }
    assert_eq!(s.pipeline.catalog().count_products().await.unwrap(), 0);
}

/// While Gemini is thinking, the catalog holds no transaction: another connection can take the
/// write lock at once.
#[tokio::test(flavor = "multi_thread")]
async fn no_transaction_is_open_while_gemini_is_called() {
    let s = setup().await;
    s.fake.push(Behavior::Slow(Duration::from_millis(800)));
    let queue = s.queue().await;
    let call = tokio::spawn({
        let queue = queue.clone();
        async move { extract(&queue, &fixture("product.jpg")).await }
    });
    // Wait until the request is in flight at the fake.
    while s.fake.generate_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let autocommit = s.pipeline.catalog().with_connection(|c| Ok(c.is_autocommit())).await.unwrap();
    assert!(autocommit, "the catalog connection is not inside a transaction");
    let db = s.db.clone();
    tokio::task::spawn_blocking(move || {
        let other = rusqlite::Connection::open(db).unwrap();
        other.busy_timeout(Duration::ZERO).unwrap();
        other.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").expect("the write lock is free during the call");
    })
    .await
    .unwrap();
    assert!(!call.is_finished(), "the call was still in flight during the check");
    assert_eq!(call.await.unwrap().row.state, ItemState::Ready);
}

/// A storm of 429s opens the breaker, and the rejection says so: the pipeline notes each failure
/// the breaker records, and names the cause when they agree (a mix says only "failing").
#[tokio::test]
async fn a_breaker_opened_by_429s_says_gemini_kept_answering_429() {
    use pe_core::pipeline::ExtractError;
    use pe_core::resilience::SlotPolicy;
    let fake = FakeGemini::start(FakeOptions {
        default_behavior: Behavior::Quota { retry_delay: Duration::from_millis(10) },
        ..FakeOptions::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(&dir.path().join("catalog.sqlite3")).unwrap();
    let config =
        GeminiConfig { base_url: fake.base_url(), api_key: ApiKey::new("test-key"), ..GeminiConfig::default() };
    let mut resilience = ResilienceConfig::default();
    resilience.retry.max_attempts = 2;
    resilience.retry.wait_duration = Duration::from_millis(10);
    resilience.circuit_breaker.sliding_window_size = 4;
    resilience.circuit_breaker.minimum_number_of_calls = 4;
    let stack = ResilienceStack::new("gemini", resilience).unwrap();
    let (clock, _) = test_clock();
    let pipeline = Pipeline::new(GeminiClient::new(&config).unwrap(), stack, catalog, ImageConfig::default(), clock);
    let image = pipeline.prepare(&fixture("product.jpg")).await.unwrap();
    let photo = pipeline.record_photo(&fixture("product.jpg"), &image).await.unwrap();
    let mut messages = Vec::new();
    for _ in 0..3 {
        let outcome = pipeline.call_gemini(photo, &image, SlotPolicy::Configured).await.into_outcome();
        let pe_core::pipeline::GeminiOutcome::Failed { error, .. } = outcome else { panic!("a storm never answers") };
        messages.push((pe_core::Coded::code(&error), error.to_string()));
        if let ExtractError::CircuitOpen(_, opened_by) = &error {
            assert_eq!(*opened_by, Some(ErrorCode::GeminiQuota));
        }
    }
    assert_eq!(messages[0].0, ErrorCode::GeminiQuota, "{messages:?}");
    assert_eq!(messages[2].0, ErrorCode::CircuitOpen, "{messages:?}");
    assert!(messages[2].1.starts_with("Gemini kept answering 429 (quota), so calls are paused until "), "{messages:?}");
}

/// A generated product photo in `dir`: the scene, with a real EAN-13 (GTIN 4006381333931) drawn
/// on it when `barcode`.
fn barcode_photo(dir: &Path, barcode: bool) -> PathBuf {
    use barcode_photos::{draw, finish, scene, Effects, Placement, Symbol, Symbology};
    let mut img = scene(7);
    if barcode {
        draw(&mut img, &Symbol::new(Symbology::Ean13, "400638133393"), Placement::plain((768.0, 700.0)));
    }
    let path = dir.join(if barcode { "with-barcode.png" } else { "without-barcode.png" });
    finish(img, Effects::default(), 7).save(&path).unwrap();
    path
}

/// Gemini's answer, fixed: a soup with this GTIN.
fn soup(gtin: &str) -> Behavior {
    Behavior::Fixed(serde_json::json!({"name": "Tomato soup", "gtin": gtin, "uncertain_fields": ["gtin"]}))
}

const BARCODE_GTIN: &str = "4006381333931";

#[tokio::test]
async fn the_photos_barcode_overrides_a_wrong_gtin_with_a_flag() {
    let s = setup().await;
    s.fake.push(soup("0036000291452"));
    let queue = s.queue().await;
    let e = extract(&queue, &barcode_photo(s._dir.path(), true)).await;
    assert_eq!(e.row.state, ItemState::Ready, "{:?}", e.row.last_error);
    let read: Vec<&str> = e.barcodes.as_deref().unwrap().iter().map(|b| b.gtin.as_str()).collect();
    assert_eq!(read, [BARCODE_GTIN]);
    let proposal = e.proposal.clone().unwrap();
    assert_eq!(proposal.gtin.as_deref(), Some(BARCODE_GTIN));
    assert!(proposal.uncertain_fields.is_empty(), "the barcode settled the GTIN");
    let flags: Vec<_> = e.flags.iter().filter(|f| f.field == "gtin").collect();
    assert_eq!(flags.len(), 1, "{:?}", e.flags);
    assert_eq!(flags[0].kind, FlagKind::Barcode);
    assert!(flags[0].message.contains("barcode reads 4006381333931"), "{}", flags[0].message);
    assert!(flags[0].message.contains("Gemini read 0036000291452"), "{}", flags[0].message);
    // The attempt keeps what was read, and the proposal it made.
    let attempt_id = e.attempt.as_ref().unwrap().id;
    let (stored, proposal_json): (String, String) = s
        .pipeline
        .catalog()
        .with_connection(move |c| {
            Ok(c.query_row("SELECT barcodes_json, proposal_json FROM attempts WHERE id = ?1", [attempt_id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?)
        })
        .await
        .unwrap();
    assert!(stored.contains(r#""gtin":"4006381333931""#) && stored.contains(r#""format":"ean13""#), "{stored}");
    assert!(proposal_json.contains(BARCODE_GTIN));
    // Saved, the product says where its GTIN came from.
    let record = queue.save_item(e.row.id, proposal).await.unwrap();
    assert_eq!(record.gtin_source, Some(GtinSource::Photo));
    let mut typed = record.saved.clone();
    typed.gtin = Some("0036000291452".into());
    let edit = UpdateProduct {
        id: record.id,
        expected_revision: record.revision,
        saved: typed,
        attempt_id: None,
        source: RevisionSource::Edit,
        saved_by: "staff".into(),
        saved_at: 2_000,
    };
    let record = s.pipeline.catalog().update_product(edit).await.unwrap();
    assert_eq!(record.gtin_source, Some(GtinSource::Review), "a GTIN typed over the barcode's is a person's");
}

#[tokio::test]
async fn a_gtin_that_matches_the_barcode_is_not_flagged() {
    let s = setup().await;
    s.fake.push(soup(BARCODE_GTIN));
    let queue = s.queue().await;
    let e = extract(&queue, &barcode_photo(s._dir.path(), true)).await;
    assert_eq!(e.row.state, ItemState::Ready, "{:?}", e.row.last_error);
    assert_eq!(e.proposal.as_ref().unwrap().gtin.as_deref(), Some(BARCODE_GTIN));
    assert!(e.flags.is_empty(), "{:?}", e.flags);
    let record = queue.save_item(e.row.id, e.proposal.clone().unwrap()).await.unwrap();
    assert_eq!(record.gtin_source, Some(GtinSource::Photo));
}

#[tokio::test]
async fn without_a_barcode_geminis_gtin_stands() {
    let s = setup().await;
    s.fake.push(soup("0036000291452"));
    let queue = s.queue().await;
    let e = extract(&queue, &barcode_photo(s._dir.path(), false)).await;
    assert_eq!(e.row.state, ItemState::Ready, "{:?}", e.row.last_error);
    assert_eq!(e.barcodes.as_deref(), Some(&[][..]), "read, nothing found");
    assert_eq!(e.proposal.as_ref().unwrap().gtin.as_deref(), Some("0036000291452"));
    assert!(e.flags.iter().all(|f| f.kind != FlagKind::Barcode), "{:?}", e.flags);
    let record = queue.save_item(e.row.id, e.proposal.clone().unwrap()).await.unwrap();
    assert_eq!(record.gtin_source, Some(GtinSource::Model));
}
