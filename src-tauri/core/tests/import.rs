//! The bulk-import queue end to end inside the core: generated photos in a temporary folder, the
//! real client against the fake Gemini on 127.0.0.1, a real SQLite file, in real time (short
//! durations; tokio's paused clock would fight the real HTTP).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::catalog::{AttemptOutcome, Catalog, NewAttempt, SaveProduct};
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::GeminiClient;
use pe_core::import::*;
use pe_core::pipeline::{system_clock, Pipeline};
use pe_core::product::Product;
use pe_core::resilience::{BreakerEventKind, BreakerState, ResilienceConfig, ResilienceStack};
use pe_core::{Coded, ErrorCode};
use serde_json::json;

const KEY: &str = "test-key";

struct Setup {
    fake: FakeGemini,
    dir: tempfile::TempDir,
    catalog: Catalog,
    stack: ResilienceStack,
}

impl Setup {
    async fn new(fake: FakeOptions, resilience: ResilienceConfig) -> Setup {
        let fake = FakeGemini::start(fake).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(&Catalog::path_in(&dir.path().join("data"))).unwrap();
        let stack = ResilienceStack::new("gemini", resilience).unwrap();
        Setup { fake, dir, catalog, stack }
    }

    /// A fake answering after `latency`, a stack with `slots` bulkhead slots and no retries.
    async fn with(latency: Duration, slots: u32) -> Setup {
        Setup::new(FakeOptions { latency, ..FakeOptions::default() }, resilience(slots)).await
    }

    fn pipeline(&self, key: &str) -> Pipeline {
        self.pipeline_on(self.catalog.clone(), key)
    }

    /// A pipeline on its own connection to the same catalog file: what another process has.
    fn other_process(&self) -> Pipeline {
        let catalog = Catalog::open(&Catalog::path_in(&self.dir.path().join("data"))).unwrap();
        self.pipeline_on(catalog, KEY)
    }

    fn pipeline_on(&self, catalog: Catalog, key: &str) -> Pipeline {
        let config = GeminiConfig {
            base_url: self.fake.base_url(),
            api_key: ApiKey::new(key),
            timeout: Duration::from_secs(10),
            ..GeminiConfig::default()
        };
        let client = GeminiClient::new(&config).unwrap();
        Pipeline::new(client, self.stack.clone(), catalog, ImageConfig::default(), system_clock())
    }

    async fn open(&self, options: ImportOptions) -> ImportQueue {
        ImportQueue::open(self.pipeline(KEY), options).await.unwrap()
    }

    /// `n` distinct photos `name-00.jpg` … in `folder` (created), seeds from `first_seed`.
    fn photos(&self, folder: &str, n: u64, first_seed: u64) -> Vec<PathBuf> {
        let dir = self.dir.path().join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        (0..n)
            .map(|i| {
                let path = dir.join(format!("photo-{i:02}.jpg"));
                std::fs::write(&path, sample_jpeg(first_seed + i, 320, 240, 85)).unwrap();
                path
            })
            .collect()
    }

    fn folder(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn resilience(slots: u32) -> ResilienceConfig {
    let mut r = ResilienceConfig::default();
    r.bulkhead.max_concurrent_calls = slots;
    r.retry.max_attempts = 1;
    r
}

/// One item in flight per slot and nothing prepared ahead: calls happen in queue order.
fn in_order() -> ImportOptions {
    ImportOptions { lookahead: Some(0), ..ImportOptions::default() }
}

fn idle() -> ImportOptions {
    ImportOptions { autostart: false, ..ImportOptions::default() }
}

async fn settled(queue: &ImportQueue) -> ImportProgress {
    tokio::time::timeout(Duration::from_secs(30), queue.settled()).await.expect("the queue settles within 30 s")
}

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn all_rows(queue: &ImportQueue) -> Vec<ImportRow> {
    queue.items(0, 10_000, None).await.unwrap().rows
}

/// The distinct statuses the queue went through, as the window would see them.
fn record_statuses(queue: &ImportQueue) -> Arc<Mutex<Vec<ImportStatus>>> {
    let mut rx = queue.progress();
    let seen = Arc::new(Mutex::new(vec![rx.borrow().status.clone()]));
    let out = seen.clone();
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let status = rx.borrow_and_update().status.clone();
            let mut seen = out.lock().unwrap();
            if seen.last() != Some(&status) {
                seen.push(status);
            }
        }
    });
    seen
}

fn fixed(name: &str, gtin: Option<&str>, uncertain: &[&str]) -> Behavior {
    Behavior::Fixed(json!({
        "name": name, "brand": "Testbrand", "category": "Tests", "description": null, "price": null,
        "gtin": gtin, "color": null, "size": "M", "material": null, "net_content": null,
        "attributes": [], "uncertain_fields": uncertain,
    }))
}

fn counts(ready: u32, saved: u32, failed: u32, skipped: u32) -> StateCounts {
    StateCounts { ready, saved, failed, skipped, ..StateCounts::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_folder_is_imported_recursively_with_exactly_k_calls_in_flight() {
    let s = Setup::with(Duration::from_millis(250), 3).await;
    s.photos("shoot", 9, 100);
    s.photos("shoot/sub", 3, 200);
    std::fs::write(s.folder("shoot/notes.txt"), b"not a photo").unwrap();
    std::fs::write(s.folder("shoot/sub/phone.heic"), b"\0\0\0\x18ftypheic\0\0\0\0mif1heic").unwrap();
    std::fs::create_dir_all(s.folder("shoot/.thumbs")).unwrap();
    std::fs::write(s.folder("shoot/.thumbs/x.jpg"), b"hidden").unwrap();
    let queue = s.open(ImportOptions::default()).await;
    let mut events = queue.subscribe();

    let started = Instant::now();
    let report = queue.enqueue(vec![s.folder("shoot")], EnqueueOptions::default()).await.unwrap();
    assert_eq!(
        report,
        EnqueueReport { queued: 12, duplicates: 0, skipped: 2, unchanged: 0, ..EnqueueReport::default() }
    );
    let progress = settled(&queue).await;
    let elapsed = started.elapsed();

    assert_eq!(progress.status, ImportStatus::Finished);
    assert_eq!(progress.counts, counts(12, 0, 0, 2));
    assert_eq!((progress.total, progress.done, progress.duplicates), (14, 14, 0));
    assert_eq!(progress.eta_ms, Some(0));
    assert!(progress.throughput_per_min > 0.0);
    assert_eq!(s.fake.generate_count(), 12);
    // No more than K calls at once...
    assert_eq!(s.fake.max_in_flight(), 3);
    // ...so 12 calls of 250 ms, 3 at a time, take at least 4 rounds. (That no slot is left idle
    // is a matter of speed, measured by the import bench in BENCHMARKS.md, not asserted here: on
    // a loaded machine a wall-clock bound fails for reasons that are not the queue's.)
    assert!(elapsed >= Duration::from_millis(1000), "{elapsed:?}");

    // The skipped files are listed with their reasons.
    let skipped = queue.items(0, 50, Some(vec![ItemState::Skipped])).await.unwrap();
    assert_eq!(skipped.total, 2);
    let reasons: Vec<_> = skipped.rows.iter().map(|r| r.skipped.as_ref().unwrap().reason).collect();
    assert_eq!(reasons, [SkipReason::NotAPhoto, SkipReason::UnsupportedFormat]);
    assert!(skipped.rows[1].skipped.as_ref().unwrap().message.contains("HEIC"));

    // Every item went preparing → extracting → ready, one event each.
    let mut per_item = std::collections::BTreeMap::<ItemId, Vec<ItemState>>::new();
    while let Ok(e) = events.try_recv() {
        per_item.entry(e.id).or_default().push(e.state);
    }
    assert_eq!(per_item.len(), 12);
    for states in per_item.values() {
        assert_eq!(states, &[ItemState::Preparing, ItemState::Extracting, ItemState::Ready]);
    }

    // Review gets the proposal, the attempt and the thumbnail.
    let ready = queue.items(0, 50, Some(vec![ItemState::Ready])).await.unwrap();
    assert_eq!(ready.total, 12);
    let row = &ready.rows[0];
    assert_eq!(row.file_name, "photo-00.jpg");
    assert!(row.path.ends_with("shoot/photo-00.jpg"));
    assert_eq!(row.attempts, 1);
    assert!(row.proposal.as_ref().is_some_and(|p| !p.name.is_empty()));
    assert!(row.looks_like.is_none(), "distinct photos do not look alike");
    let detail = queue.item(row.id).await.unwrap();
    assert_eq!(detail.proposal.as_ref().unwrap().name, row.proposal.as_ref().unwrap().name);
    assert_eq!(detail.flags.len() as u32, row.flag_count);
    let attempt = detail.attempt.unwrap();
    assert_eq!(attempt.model, "gemini-flash-latest");
    assert!(attempt.usage.unwrap().prompt_tokens > 0);
    assert!(attempt.raw_response.unwrap().contains("candidates"));
    // The row names its prepared photo by hash; the photo's thumbnail is a JPEG.
    let sha256 = row.photo_sha256.as_deref().expect("a prepared item names its photo");
    assert_eq!(Some(sha256), detail.sha256.as_deref());
    let jpeg = s.catalog.thumbnail_jpeg(sha256).await.unwrap().unwrap();
    assert_eq!(image::guess_format(&jpeg).unwrap(), image::ImageFormat::Jpeg);
    assert_eq!(s.catalog.count_products().await.unwrap(), 0, "nothing is saved without review");
}

/// The states a crash can leave behind, written as a killed process would have left them; the
/// next open resumes: preparing and extracting items are sent (again), ready ones never.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resumes_after_a_crash_at_each_state_boundary() {
    let s = Setup::with(Duration::ZERO, 2).await;
    let files = s.photos("in", 5, 300);
    let queue = s.open(idle()).await;
    let report = queue.enqueue(files.clone(), EnqueueOptions::default()).await.unwrap();
    assert_eq!(report.queued, 5);
    assert_eq!(queue.progress().borrow().status, ImportStatus::Idle, "not started without autostart");

    // Item 1 stays queued. 2: crashed while preparing. 3: while extracting (the photo recorded).
    // 4: after the ready transaction. 5: after saving.
    let pipeline = s.pipeline(KEY);
    let mut photo_ids = Vec::new();
    for file in &files[2..5] {
        let image = pipeline.prepare(file).await.unwrap();
        photo_ids.push(pipeline.record_photo(file, &image).await.unwrap());
    }
    let proposal = Product { name: "Crash-proof granola".into(), ..Product::default() };
    let mut attempts = Vec::new();
    for &photo_id in &photo_ids[1..] {
        let attempt = NewAttempt {
            photo_id,
            model: "gemini-flash-latest".into(),
            started_at: 1,
            latency_ms: 5,
            usage: None,
            raw_response: None,
            outcome: AttemptOutcome::Proposed { product: proposal.clone() },
            model_version: None,
            cost: None,
            batch: false,
            barcodes: None,
            more_photos: Vec::new(),
            sources: Vec::new(),
        };
        attempts.push(s.catalog.record_attempt(attempt).await.unwrap());
    }
    let saved = s
        .catalog
        .save_product(SaveProduct {
            photo_id: photo_ids[2],
            attempt_id: Some(attempts[1]),
            saved: proposal.clone(),
            saved_at: 2,
            saved_by: "test".into(),
        })
        .await
        .unwrap();
    let json = serde_json::to_string(&proposal).unwrap();
    let (p, a, product) = (photo_ids.clone(), attempts.clone(), saved.id);
    s.catalog
        .with_connection(move |c| {
            c.execute("UPDATE import_items SET state = 'preparing' WHERE id = 2", [])?;
            c.execute("UPDATE import_items SET state = 'extracting', photo_id = ?1 WHERE id = 3", [p[0]])?;
            c.execute(
                "UPDATE import_items SET state = 'ready', photo_id = ?1, attempt_id = ?2, proposal_json = ?3,
                                         flags_json = '[]', attempts = 1
                 WHERE id = 4",
                rusqlite::params![p[1], a[0], json],
            )?;
            c.execute(
                "UPDATE import_items SET state = 'saved', photo_id = ?1, attempt_id = ?2, proposal_json = ?3,
                                         flags_json = '[]', attempts = 1, product_id = ?4, saved_revision = 1,
                                         created_product = 1
                 WHERE id = 5",
                rusqlite::params![p[2], a[1], json, product],
            )?;
            Ok(())
        })
        .await
        .unwrap();
    drop(queue); // the crash

    let queue = s.open(ImportOptions::default()).await;
    let progress = settled(&queue).await;
    assert_eq!(progress.counts, counts(4, 1, 0, 0));
    assert_eq!(s.fake.generate_count(), 3, "items 1, 2 and 3 were sent; 4 and 5 never");
    let rows = all_rows(&queue).await;
    assert_eq!(rows[3].proposal.as_ref().unwrap().name, "Crash-proof granola", "the ready result was kept");
    assert_eq!(s.catalog.attempts(photo_ids[1]).await.unwrap().len(), 1);
    assert_eq!(rows[4].state, ItemState::Saved);
    assert_eq!(s.catalog.count_products().await.unwrap(), 1);
    assert!(rows.iter().take(3).all(|r| r.state == ItemState::Ready && r.attempts == 1), "{rows:?}");
}

/// A real crash: the queue is dropped (its tasks aborted) while a call is in flight. Only that
/// item is sent again; the item that was ready before the crash is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_mid_call_sends_only_the_item_in_flight_again() {
    let s = Setup::with(Duration::from_millis(300), 1).await;
    let files = s.photos("in", 3, 400);
    let queue = s.open(in_order()).await;
    let mut events = queue.subscribe();
    queue.enqueue(files, EnqueueOptions::default()).await.unwrap();
    // Until item 1 is ready and item 2 is in flight.
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), events.recv()).await.unwrap().unwrap();
        if e.id == 2 && e.state == ItemState::Extracting {
            break;
        }
    }
    wait_until("item 2 reaching the server", || s.fake.generate_count() == 2).await;
    drop(events);
    drop(queue); // the crash
    let rows_after_crash: Vec<(ItemState, u32)> = s
        .catalog
        .with_connection(|c| {
            let mut stmt = c.prepare("SELECT state, attempts FROM import_items ORDER BY id")?;
            let rows = stmt
                .query_map([], |r| Ok((ItemState::parse(&r.get::<_, String>(0)?).unwrap(), r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap();
    assert_eq!(rows_after_crash, [(ItemState::Ready, 1), (ItemState::Extracting, 0), (ItemState::Queued, 0)]);

    let queue = s.open(in_order()).await;
    let progress = settled(&queue).await;
    assert_eq!(progress.counts, counts(3, 0, 0, 0));
    assert_eq!(s.fake.generate_count(), 4, "1, 2, 2 again, 3");
    let mut sends: Vec<usize> = s.fake.generate_counts_per_body().into_values().collect();
    sends.sort_unstable();
    assert_eq!(sends, [1, 1, 2]);
    let rows = all_rows(&queue).await;
    assert_eq!(s.catalog.attempts(rows[0].photo_id.unwrap()).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicates_by_hash_are_recognized_and_can_be_forced() {
    let s = Setup::with(Duration::ZERO, 2).await;
    let a = s.photos("a", 1, 500).remove(0);
    let b = s.photos("b", 1, 501).remove(0);
    let copies = s.folder("copies");
    std::fs::create_dir_all(&copies).unwrap();
    for (from, to) in [(&a, "a-copy.jpg"), (&b, "b-copy.jpg"), (&b, "b-copy-2.jpg")] {
        std::fs::copy(from, copies.join(to)).unwrap();
    }
    let queue = s.open(ImportOptions::default()).await;
    queue.enqueue(vec![a.clone()], EnqueueOptions::default()).await.unwrap();
    settled(&queue).await;
    let a_item = all_rows(&queue).await[0].clone();
    let product = queue.item(a_item.id).await.unwrap().proposal.unwrap();
    let a_product = queue.save_item(a_item.id, product).await.unwrap();
    queue.enqueue(vec![b.clone()], EnqueueOptions::default()).await.unwrap();
    settled(&queue).await;

    // Already in the catalog (a), already queued (b, twice): nothing is sent.
    let report = queue.enqueue(vec![copies.clone()], EnqueueOptions::default()).await.unwrap();
    assert_eq!(
        report,
        EnqueueReport { queued: 0, duplicates: 3, skipped: 0, unchanged: 0, ..EnqueueReport::default() }
    );
    let progress = settled(&queue).await;
    assert_eq!(progress.duplicates, 3);
    assert_eq!(s.fake.generate_count(), 2);
    let rows = all_rows(&queue).await;
    let skip = |i: usize| rows[i].skipped.clone().unwrap();
    // Rows: a, b, a-copy, b-copy, b-copy-2 (the folder is read in name order).
    assert_eq!(skip(2).reason, SkipReason::AlreadyInCatalog);
    assert_eq!(skip(2).duplicate_of_product, Some(a_product.id));
    assert!(skip(2).message.contains(&a_product.saved.name), "{}", skip(2).message);
    assert_eq!((skip(3).reason, skip(3).duplicate_of_item), (SkipReason::AlreadyQueued, Some(rows[1].id)));
    assert_eq!((skip(4).reason, skip(4).duplicate_of_item), (SkipReason::AlreadyQueued, Some(rows[1].id)));

    // The same files again (a resumed run, a second drop): already listed, nothing new.
    let report = queue.enqueue(vec![copies.clone(), a.clone()], EnqueueOptions::default()).await.unwrap();
    assert_eq!(report, EnqueueReport { unchanged: 4, ..EnqueueReport::default() });
    assert_eq!(all_rows(&queue).await.len(), 5);

    // The user forces a re-extract: of a listed duplicate, and by dropping with force.
    queue.force_extract(rows[2].id).await.unwrap();
    let report = queue
        .enqueue(vec![copies.join("b-copy.jpg")], EnqueueOptions { force: true, ..EnqueueOptions::default() })
        .await
        .unwrap();
    assert_eq!(report.queued, 1);
    let progress = settled(&queue).await;
    assert_eq!(s.fake.generate_count(), 4);
    assert_eq!(progress.duplicates, 2, "b-copy and b-copy-2 stay listed as duplicates");
    let rows = all_rows(&queue).await;
    assert_eq!(rows[2].state, ItemState::Ready);
    assert_eq!(rows[2].product_id, Some(a_product.id), "saving it updates the existing product");
    assert_eq!(rows[5].state, ItemState::Ready);
    assert!(queue.force_extract(rows[0].id).await.is_err_and(|e| e.code() == ErrorCode::Conflict), "saved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn near_duplicates_are_flagged_as_looking_like_a_product_or_an_item() {
    let s = Setup::with(Duration::ZERO, 2).await;
    let dir = s.folder("near");
    std::fs::create_dir_all(&dir).unwrap();
    // The same pictures encoded at another quality: other bytes, the same look.
    for (name, seed, quality) in
        [("a.jpg", 600, 92), ("a-again.jpg", 600, 55), ("c.jpg", 601, 92), ("c-2.jpg", 601, 60)]
    {
        std::fs::write(dir.join(name), sample_jpeg(seed, 480, 360, quality)).unwrap();
    }
    let queue = s.open(ImportOptions::default()).await;
    queue.enqueue(vec![dir.join("a.jpg")], EnqueueOptions::default()).await.unwrap();
    settled(&queue).await;
    let a = all_rows(&queue).await[0].id;
    let proposal = queue.item(a).await.unwrap().proposal.unwrap();
    let product = queue.save_item(a, proposal).await.unwrap();
    for name in ["a-again.jpg", "c.jpg", "c-2.jpg"] {
        queue.enqueue(vec![dir.join(name)], EnqueueOptions::default()).await.unwrap();
        settled(&queue).await;
    }
    let rows = all_rows(&queue).await;
    match &rows[1].looks_like {
        Some(LooksLike::Product { product_id, name, distance }) => {
            assert_eq!(*product_id, product.id);
            assert_eq!(name, &product.saved.name);
            assert!(*distance <= NEAR_DUPLICATE_MAX_DISTANCE);
        }
        other => panic!("a-again should look like the product, got {other:?}"),
    }
    assert_eq!(rows[2].looks_like, None);
    match &rows[3].looks_like {
        Some(LooksLike::Item { item_id, path, .. }) => {
            assert_eq!(*item_id, rows[2].id);
            assert!(path.ends_with("c.jpg"));
        }
        other => panic!("c-2 should look like item c, got {other:?}"),
    }
    // "Save all" leaves the look-alikes for a person.
    let saved = queue.save_all_ready_unflagged().await.unwrap();
    let expected = if rows[2].flag_count == 0 { vec![rows[2].id] } else { vec![] };
    assert_eq!(saved, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_open_breaker_pauses_the_queue_and_it_resumes_by_itself() {
    let mut cfg = resilience(1);
    let cb = &mut cfg.circuit_breaker;
    cb.sliding_window_size = 4;
    cb.minimum_number_of_calls = 4;
    cb.wait_duration_in_open_state = Duration::from_millis(800);
    cb.permitted_number_of_calls_in_half_open_state = 1;
    let s = Setup::new(FakeOptions::default(), cfg).await;
    for _ in 0..4 {
        s.fake.push(Behavior::Unavailable);
    }
    let files = s.photos("in", 6, 700);
    let queue = s.open(ImportOptions { max_attempts_per_item: 10, ..in_order() }).await;
    let statuses = record_statuses(&queue);
    let started = Instant::now();
    queue.enqueue(files, EnqueueOptions::default()).await.unwrap();
    let progress = settled(&queue).await;

    assert!(started.elapsed() >= Duration::from_millis(800), "it waited for the breaker");
    assert_eq!(progress.counts, counts(6, 0, 0, 0), "no item failed because the breaker was open");
    assert_eq!(s.fake.generate_count(), 10, "4 failures, then each photo once");
    assert_eq!(s.stack.breaker().state(), BreakerState::Closed);
    let rejected =
        s.stack.breaker().recent_events().iter().filter(|e| e.kind == BreakerEventKind::NotPermitted).count();
    assert_eq!(rejected, 1, "one rejected call paused the queue");
    wait_until("the recorder to see the end", || statuses.lock().unwrap().last() == Some(&ImportStatus::Finished))
        .await;
    let statuses = statuses.lock().unwrap().clone();
    let paused = statuses.iter().find_map(|s| match s {
        ImportStatus::PausedBreaker { until_unix_ms, message } => Some((*until_unix_ms, message.clone())),
        _ => None,
    });
    let (until, message) = paused.unwrap_or_else(|| panic!("never paused: {statuses:?}"));
    assert!(until.is_some(), "OPEN has a next try time");
    assert!(
        message.starts_with("Paused: Gemini kept answering 5xx (overloaded or down) (circuit open) — next probe at "),
        "{message}"
    );
    // The item that met the open breaker kept its attempt count; the failures counted.
    let rows = all_rows(&queue).await;
    assert_eq!(rows.iter().map(|r| r.attempts).sum::<u32>(), 4 + 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_breaker_forced_open_pauses_until_it_is_released() {
    let s = Setup::with(Duration::ZERO, 2).await;
    s.stack.breaker().transition_to_forced_open();
    let files = s.photos("in", 3, 800);
    let queue = s.open(ImportOptions::default()).await;
    queue.enqueue(files, EnqueueOptions::default()).await.unwrap();
    let mut progress = queue.progress();
    // (The watch's read guard is dropped at once: holding it would block every publisher.)
    // Held (the gate closed: nothing can start a call until the hold ends) with no call under
    // way: whatever was sent is sent now.
    let paused = tokio::time::timeout(
        Duration::from_secs(5),
        progress.wait_for(|p| {
            matches!(p.status, ImportStatus::PausedBreaker { until_unix_ms: None, .. }) && p.counts.extracting == 0
        }),
    )
    .await
    .is_ok();
    assert!(paused, "paused without a retry time: {:?}", queue.progress().borrow().status);
    assert_eq!(s.fake.generate_count(), 0);
    assert_eq!(queue.progress().borrow().counts.failed, 0);
    s.stack.breaker().transition_to_closed();
    let progress = settled(&queue).await;
    assert_eq!(progress.counts, counts(3, 0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_key_stops_the_queue_items_stay_queued_and_a_new_key_finishes_it_by_itself() {
    let s = Setup::with(Duration::from_millis(50), 2).await;
    let files = s.photos("in", 5, 900);
    let queue = ImportQueue::open(s.pipeline("not-the-key"), ImportOptions::default()).await.unwrap();
    queue.enqueue(files, EnqueueOptions::default()).await.unwrap();
    let progress = settled(&queue).await;
    match &progress.status {
        ImportStatus::Stopped { code, message } => {
            assert_eq!(*code, ErrorCode::GeminiAuth);
            assert!(message.contains("key"), "{message}");
        }
        other => panic!("expected a stop for the key, got {other:?}"),
    }
    assert_eq!(progress.counts, StateCounts { queued: 5, ..StateCounts::default() }, "nothing failed");
    let sent = s.fake.generate_count();
    assert!((1..=2).contains(&sent), "only the K calls already in flight: {sent}");
    let rows = all_rows(&queue).await;
    assert!(rows.iter().all(|r| r.attempts == 0), "a rejected key is not the item's attempt");
    assert!(rows.iter().any(|r| r.last_error.as_ref().is_some_and(|e| e.code == ErrorCode::GeminiAuth)));
    // It does not retry by itself: a stop has no next try (unlike a hold), and once the calls that
    // were in flight have ended nothing else reaches the server.
    wait_until("the calls in flight end", || s.fake.in_flight() == 0).await;
    assert_eq!(s.fake.generate_count(), sent);

    // Settings saved with the same key (another setting changed): still stopped, nothing sent.
    queue.set_pipeline(s.pipeline("not-the-key"));
    assert!(matches!(queue.progress().borrow().status, ImportStatus::Stopped { .. }));
    // Another key: fixing the cause is enough, the queue goes on without Resume.
    queue.set_pipeline(s.pipeline(KEY));
    // Wait for the state the change leads to: "settled" alone could still see the stop from
    // before the queue took the new pipeline (a stress run under load did).
    let mut watch = queue.progress();
    // The read guard is dropped at once: held, it would block every publisher.
    let finished = tokio::time::timeout(
        Duration::from_secs(20),
        watch.wait_for(|p| p.status == ImportStatus::Finished && p.counts.ready == 5),
    )
    .await
    .is_ok();
    assert!(finished, "never finished with the new key: {:?}", queue.progress().borrow());
    let progress = queue.progress().borrow().clone();
    assert_eq!(progress.counts, counts(5, 0, 0, 0));
    assert!(all_rows(&queue).await.iter().all(|r| r.attempts == 1 && r.last_error.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quota_error_waits_the_servers_retry_delay() {
    let s = Setup::with(Duration::ZERO, 1).await;
    s.fake.push(Behavior::Quota { retry_delay: Duration::from_millis(1200) });
    let files = s.photos("in", 3, 1000);
    let queue = s.open(in_order()).await;
    let statuses = record_statuses(&queue);
    let started = Instant::now();
    queue.enqueue(files, EnqueueOptions::default()).await.unwrap();
    let progress = settled(&queue).await;
    assert!(started.elapsed() >= Duration::from_millis(1200), "{:?}", started.elapsed());
    assert_eq!(progress.counts, counts(3, 0, 0, 0));
    assert_eq!(s.fake.generate_count(), 4);
    let statuses = statuses.lock().unwrap().clone();
    assert!(
        statuses.iter().any(|s| matches!(s, ImportStatus::WaitingQuota { message, .. } if message.contains("quota"))),
        "{statuses:?}"
    );
    let rows = all_rows(&queue).await;
    assert!(rows.iter().all(|r| r.attempts == 1), "the quota wait is not the item's attempt");
    // The audit trail has the quota error and the answer for the first photo.
    assert_eq!(s.catalog.attempts(rows[0].photo_id.unwrap()).await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_per_day_quota_holds_the_queue_until_it_resets() {
    let s = Setup::with(Duration::ZERO, 1).await;
    s.fake.push(Behavior::DailyQuota);
    let files = s.photos("in", 3, 1300);
    let queue = s.open(in_order()).await;
    queue.enqueue(files, EnqueueOptions::default()).await.unwrap();
    let mut progress = queue.progress();
    // Waiting (the gate closed) with no call under way: whatever was sent is sent now.
    let waiting = tokio::time::timeout(
        Duration::from_secs(20),
        progress.wait_for(|p| {
            matches!(&p.status, ImportStatus::WaitingQuota { message, .. } if message.contains("daily quota"))
                && p.counts.extracting == 0
        }),
    )
    .await
    .expect("the queue waits for the daily quota")
    .unwrap()
    .clone();
    let ImportStatus::WaitingQuota { until_unix_ms, message } = &waiting.status else { unreachable!() };
    let now = chrono::Utc::now().timestamp_millis();
    let reset = pe_core::gemini::next_pacific_midnight(now);
    assert!((until_unix_ms - reset).abs() < 2_000, "until {until_unix_ms}, the next midnight PT is {reset}");
    assert!(message.contains("midnight Pacific time"), "{message}");
    // Nothing else is sent, nothing fails, and the quota is not the item's attempt.
    assert_eq!(s.fake.generate_count(), 1);
    let rows = all_rows(&queue).await;
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.state == ItemState::Queued && r.attempts == 0), "{rows:?}");
    let c = queue.progress().borrow().counts;
    assert_eq!((c.ready, c.saved, c.failed, c.skipped), (0, 0, 0, 0), "{c:?}");
    queue.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn items_failing_for_their_own_reasons_fail_alone_and_can_be_retried() {
    let s = Setup::with(Duration::ZERO, 1).await;
    let mut files = s.photos("in", 4, 1100);
    let broken = s.folder("in/photo-99-broken.jpg");
    std::fs::write(&broken, b"\xFF\xD8\xFF but not really a jpeg").unwrap();
    files.push(broken);
    s.fake.push(Behavior::NoCandidatesBlocked("SAFETY".into()));
    s.fake.push(Behavior::Garbage);
    let queue = s.open(in_order()).await;
    queue.enqueue(vec![s.folder("in")], EnqueueOptions::default()).await.unwrap();
    let progress = settled(&queue).await;
    assert_eq!(progress.status, ImportStatus::Finished);
    assert_eq!(progress.counts, counts(2, 0, 3, 0));
    let codes: Vec<Option<ErrorCode>> =
        all_rows(&queue).await.iter().map(|r| r.last_error.as_ref().map(|e| e.code)).collect();
    assert_eq!(
        codes,
        [Some(ErrorCode::Blocked), Some(ErrorCode::UnparsableOutput), None, None, Some(ErrorCode::InvalidImage)]
    );
    assert_eq!(s.fake.generate_count(), 4, "the broken file never reached the network");

    assert_eq!(queue.retry_failed().await.unwrap(), 3);
    let progress = settled(&queue).await;
    assert_eq!(progress.counts, counts(4, 0, 1, 0), "only the broken file fails again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pause_resume_cancel_and_clear_done() {
    let s = Setup::with(Duration::from_millis(300), 2).await;
    let files = s.photos("in", 8, 1200);
    let queue = s.open(ImportOptions { lookahead: Some(1), ..ImportOptions::default() }).await;
    queue.enqueue(files, EnqueueOptions::default()).await.unwrap();
    wait_until("two calls", || s.fake.generate_count() >= 2).await;

    queue.pause();
    assert_eq!(queue.progress().borrow().status, ImportStatus::PausedByUser);
    // Paused (the gate closed: no call can start until Resume) with no call under way: what was
    // sent is sent, and stays so.
    let mut progress = queue.progress();
    progress.wait_for(|p| p.counts.extracting == 0).await.unwrap();
    let sent = s.fake.generate_count();
    assert_eq!(queue.progress().borrow().status, ImportStatus::PausedByUser);
    assert_eq!(sent, queue.progress().borrow().counts.ready as usize, "every call sent was answered and written");
    assert!(queue.progress().borrow().counts.ready >= 2);

    queue.resume();
    wait_until("a call after resume", || s.fake.generate_count() > sent).await;
    queue.cancel().await.unwrap();
    let p = queue.progress().borrow().clone();
    assert_eq!(p.status, ImportStatus::Idle);
    assert_eq!((p.counts.preparing, p.counts.extracting, p.counts.failed), (0, 0, 0));
    assert!(p.counts.queued > 0, "{p:?}");
    // Cancelled: the driver abandoned the work in flight before `cancel` returned, and claims
    // nothing while idle; every item waits in the queue.
    assert_eq!(p.counts.queued + p.counts.ready, 8, "{p:?}");

    queue.resume();
    let p = settled(&queue).await;
    assert_eq!(p.counts, counts(8, 0, 0, 0));
    let rows = all_rows(&queue).await;
    let proposal = queue.item(rows[0].id).await.unwrap().proposal.unwrap();
    if proposal.is_valid() {
        queue.save_item(rows[0].id, proposal).await.unwrap();
    } else {
        queue.discard_item(rows[0].id).await.unwrap();
    }
    queue.discard_item(rows[1].id).await.unwrap();
    assert_eq!(queue.clear_done().await.unwrap(), 2);
    let p = queue.progress().borrow().clone();
    assert_eq!((p.total, p.counts.ready), (6, 6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn review_save_discard_save_all_unflagged_and_undo() {
    let s = Setup::with(Duration::ZERO, 1).await;
    s.fake.push(fixed("Plain Oats", Some("4006381333931"), &[]));
    s.fake.push(fixed("Plain Rice", None, &[]));
    s.fake.push(fixed("Unsure Shoe", None, &["size"]));
    s.fake.push(fixed("Bad Barcode", Some("4006381333932"), &[]));
    s.fake.push(fixed("Plain Tea", None, &[]));
    let files = s.photos("in", 5, 1300);
    let queue = s.open(in_order()).await;
    queue.enqueue(files, EnqueueOptions::default()).await.unwrap();
    settled(&queue).await;
    let rows = all_rows(&queue).await;
    let ids: Vec<ItemId> = rows.iter().map(|r| r.id).collect();
    assert_eq!(rows.iter().map(|r| r.flag_count).collect::<Vec<_>>(), [0, 0, 1, 1, 0]);

    // Accept refuses an invalid field, names it, and leaves the item ready.
    let bad = queue.item(ids[3]).await.unwrap().proposal.unwrap();
    let err = queue.save_item(ids[3], bad).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Validation);
    assert!(err.to_string().contains("gtin"), "{err}");
    // Discard.
    queue.discard_item(ids[4]).await.unwrap();
    assert!(queue.discard_item(ids[4]).await.is_err_and(|e| e.code() == ErrorCode::Conflict));

    // Save all: only the unflagged ones.
    let saved = queue.save_all_ready_unflagged().await.unwrap();
    assert_eq!(saved, [ids[0], ids[1]]);
    assert_eq!(s.catalog.count_products().await.unwrap(), 2);
    let rows = all_rows(&queue).await;
    assert_eq!(rows[0].state, ItemState::Saved);
    let oats = rows[0].product_id.unwrap();
    let rice = rows[1].product_id.unwrap();
    assert_eq!(s.catalog.get_product(oats).await.unwrap().saved.name, "Plain Oats");

    // Someone edits the rice product before the undo: that one is kept.
    let mut edited = s.catalog.get_product(rice).await.unwrap();
    edited.saved.name = "Basmati Rice".into();
    s.catalog
        .save_product(SaveProduct {
            photo_id: edited.photo_id,
            attempt_id: None,
            saved: edited.saved,
            saved_at: 9,
            saved_by: "test".into(),
        })
        .await
        .unwrap();
    let undo = queue.undo_save_all(saved).await.unwrap();
    assert_eq!(undo, UndoReport { restored: vec![ids[0]], kept: vec![ids[1]] });
    assert!(s.catalog.get_product(oats).await.is_err(), "the product the save created is gone");
    assert_eq!(s.catalog.count_products().await.unwrap(), 1);
    let rows = all_rows(&queue).await;
    assert_eq!((rows[0].state, rows[0].product_id), (ItemState::Ready, None));
    assert_eq!(rows[1].state, ItemState::Saved);

    // Accept with the reviewer's edits; a second accept is a conflict.
    let mut shoe = queue.item(ids[2]).await.unwrap().proposal.unwrap();
    shoe.size = Some("43".into());
    let record = queue.save_item(ids[2], shoe).await.unwrap();
    assert_eq!(record.saved.size.as_deref(), Some("43"));
    assert_eq!(record.proposed.unwrap().size.as_deref(), Some("M"), "the proposal is kept next to it");
    let again = queue.save_item(ids[2], Product { name: "x".into(), ..Product::default() }).await;
    assert!(again.is_err_and(|e| e.code() == ErrorCode::Conflict));
    let p = queue.progress().borrow().clone();
    assert_eq!(p.counts, counts(2, 2, 0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_process_at_a_time_works_a_catalogs_queue() {
    let s = Setup::with(Duration::ZERO, 1).await;
    let first = s.open(idle()).await;
    assert!(first.is_working());
    // A second opener does not fail: it follows the one that works the queue.
    let second = ImportQueue::open(s.pipeline(KEY), idle()).await.unwrap();
    assert!(!second.is_working());
    assert_eq!(second.progress().borrow().status, ImportStatus::WorkedElsewhere);
    // Reading needs no lock.
    assert_eq!(ImportStore::new(s.catalog.clone()).counts().await.unwrap().0.total(), 0);
    drop(first);
    // ...and takes over once the first lets go.
    tokio::time::timeout(Duration::from_secs(5), async {
        while !second.is_working() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the follower takes the queue over");
    drop(second);
    s.open(idle()).await;
}

/// The stored times come from the pipeline's clock, and a path that is not a file is listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn missing_paths_are_listed_as_unreadable() {
    let s = Setup::with(Duration::ZERO, 1).await;
    let queue = s.open(ImportOptions::default()).await;
    let report = queue.enqueue(vec![Path::new("/nonexistent/IMG_1.jpg").into()], EnqueueOptions::default()).await;
    assert_eq!(report.unwrap(), EnqueueReport { skipped: 1, ..EnqueueReport::default() });
    let rows = all_rows(&queue).await;
    assert_eq!(rows[0].skipped.as_ref().unwrap().reason, SkipReason::Unreadable);
    assert!(rows[0].updated_at > 1_600_000_000_000);
    assert_eq!(settled(&queue).await.status, ImportStatus::Finished);
}

/// After a shutdown, other handles' controls return at once (nobody is left to wait for) and the
/// lock is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn controls_after_shutdown_return_at_once() {
    let s = Setup::with(Duration::ZERO, 1).await;
    let queue = s.open(idle()).await;
    let other = queue.clone();
    queue.shutdown().await;
    assert!(tokio::time::timeout(Duration::from_secs(2), other.cancel()).await.is_ok());
    drop(other);
    s.open(idle()).await;
}

/// One engine: a photo dropped while a 100-photo import keeps every slot busy against a slow
/// Gemini gets the next free slot (never `bulkhead_full`), ahead of the import's prepared
/// lookahead, and is ready long before the import ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_photo_gets_the_next_free_slot_during_a_long_import() {
    const K: usize = 4;
    const LOOKAHEAD: usize = 24;
    let s = Setup::with(Duration::from_millis(500), K as u32).await;
    s.photos("shoot", 100, 1000);
    let dropped = s.photos("desk", 1, 5000).remove(0);
    let queue = s.open(ImportOptions { lookahead: Some(LOOKAHEAD), ..ImportOptions::default() }).await;
    queue.enqueue(vec![s.folder("shoot")], EnqueueOptions::default()).await.unwrap();
    // The import is under way: K calls in flight, the lookahead prepared and waiting for a slot.
    wait_until("the import sends", || s.fake.generate_count() >= 2 * K).await;
    let mut progress = queue.progress();
    wait_until("the lookahead is prepared", || {
        let c = progress.borrow_and_update().counts;
        (c.preparing + c.extracting) as usize >= K + LOOKAHEAD
    })
    .await;
    let enqueued = queue.enqueue_files(vec![dropped.clone()], EnqueueOptions::interactive()).await.unwrap();
    assert_eq!(enqueued.report.queued, 1);
    // Once it is prepared (extracting: waiting for a slot, then in its call), the bulk calls
    // still to come before it are at most those that held a slot already: how long preparing it
    // took (slots free meanwhile) depends on the machine's load, what comes after does not.
    let id = enqueued.files[0].result_of;
    let deadline = Instant::now() + Duration::from_secs(20);
    let sent_when_prepared = loop {
        let sent = s.fake.requests().len();
        let state = queue.item(id).await.unwrap().row.state;
        if state != ItemState::Queued && state != ItemState::Preparing {
            break sent;
        }
        assert!(Instant::now() < deadline, "the dropped photo was never prepared");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let detail = tokio::time::timeout(Duration::from_secs(10), queue.finished(enqueued.files[0].result_of))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(detail.row.state, ItemState::Ready, "{:?}", detail.row.last_error);
    assert_eq!(detail.row.origin, ItemOrigin::Interactive);
    // Where its request stands among the ones the fake received: only the slots that freed while
    // it was queued, prepared and recorded went to bulk items (about K per 500 ms), not the
    // LOOKAHEAD prepared ones waiting ahead of it (a first-come queue would send all of them first).
    let jpeg = pe_core::intake::prepare_file(&dropped, &ImageConfig::default()).unwrap().jpeg;
    let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &jpeg);
    let requests = s.fake.requests();
    let ours = requests.iter().position(|r| r.body.to_string().contains(&data)).expect("the dropped photo was sent");
    let ahead = ours.saturating_sub(sent_when_prepared);
    assert!(
        ahead <= K,
        "{ahead} bulk calls went before the prepared dropped photo (K = {K}, lookahead {LOOKAHEAD} prepared ahead of it)"
    );
    let progress = queue.progress().borrow().clone();
    assert!(progress.counts.active() > 50, "ready long before the import ends: {:?}", progress.counts);
    // Nothing failed for lack of a slot.
    let failed = queue.items(0, 200, Some(vec![ItemState::Failed])).await.unwrap();
    assert_eq!(failed.total, 0, "{:?}", failed.rows.first().map(|r| &r.last_error));
    queue.shutdown().await;
}

/// A second process on the same catalog hands its items to the one working the queue and gets
/// their results; it takes over when the first lets go. The same bytes are extracted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_opener_hands_its_photos_to_the_worker_and_gets_the_results() {
    let s = Setup::with(Duration::from_millis(20), 2).await;
    let photos = s.photos("desk", 3, 7000);
    let worker = s.open(ImportOptions { follow_interval: Duration::from_millis(50), ..ImportOptions::default() }).await;
    let follower = ImportQueue::open(
        s.other_process(),
        ImportOptions { follow_interval: Duration::from_millis(50), ..ImportOptions::default() },
    )
    .await
    .unwrap();
    assert!(worker.is_working() && !follower.is_working());
    let enqueued = follower.enqueue_files(photos.clone(), EnqueueOptions::interactive()).await.unwrap();
    for file in &enqueued.files {
        let detail = tokio::time::timeout(Duration::from_secs(10), follower.finished(file.result_of))
            .await
            .expect("the worker extracts the follower's photos")
            .unwrap();
        assert_eq!(detail.row.state, ItemState::Ready);
    }
    assert_eq!(s.fake.generate_count(), 3);
    // The same files again: the stored proposals, no call.
    let again = follower.enqueue_files(photos, EnqueueOptions::interactive()).await.unwrap();
    assert_eq!(again.report.unchanged, 3);
    for file in &again.files {
        assert_eq!(follower.finished(file.result_of).await.unwrap().row.state, ItemState::Ready);
    }
    assert_eq!(s.fake.generate_count(), 3, "the same bytes are never sent twice");
    worker.shutdown().await;
    tokio::time::timeout(Duration::from_secs(5), async {
        while !follower.is_working() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the follower takes the queue over");
}
