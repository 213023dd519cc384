//! Batch mode against the fake Gemini's Batch API: chunks, polling through the states, per-item
//! errors, a batch that expires or fails, cancel, and a restart between polls.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fake_gemini::batches::{BatchFate, BatchTiming};
use fake_gemini::photos::sample_jpeg;
use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::catalog::Catalog;
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::GeminiClient;
use pe_core::import::*;
use pe_core::pipeline::{system_clock, Pipeline};
use pe_core::resilience::{ResilienceConfig, ResilienceStack};
use pe_core::ErrorCode;

struct Setup {
    fake: FakeGemini,
    dir: tempfile::TempDir,
    catalog: Catalog,
    stack: ResilienceStack,
}

impl Setup {
    async fn new() -> Setup {
        let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(&Catalog::path_in(&dir.path().join("data"))).unwrap();
        let mut resilience = ResilienceConfig::default();
        resilience.retry.max_attempts = 1;
        let stack = ResilienceStack::new("gemini", resilience).unwrap();
        Setup { fake, dir, catalog, stack }
    }

    fn pipeline(&self) -> Pipeline {
        let config = GeminiConfig {
            base_url: self.fake.base_url(),
            api_key: ApiKey::new("test-key"),
            timeout: Duration::from_secs(10),
            ..GeminiConfig::default()
        };
        let client = GeminiClient::new(&config).unwrap();
        Pipeline::new(client, self.stack.clone(), self.catalog.clone(), ImageConfig::default(), system_clock())
    }

    async fn open(&self, max_requests: usize) -> ImportQueue {
        let options = ImportOptions {
            batch: BatchOptions { poll_interval: Duration::from_millis(20), max_requests, ..BatchOptions::default() },
            ..ImportOptions::default()
        };
        ImportQueue::open(self.pipeline(), options).await.unwrap()
    }

    fn photos(&self, n: u64, seed: u64) -> PathBuf {
        let dir = self.dir.path().join(format!("shoot-{seed}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..n {
            std::fs::write(dir.join(format!("p{i:02}.jpg")), sample_jpeg(seed + i, 320, 240, 85)).unwrap();
        }
        dir
    }
}

fn batch() -> EnqueueOptions {
    EnqueueOptions { batch: true, ..EnqueueOptions::default() }
}

async fn settled(queue: &ImportQueue) -> ImportProgress {
    tokio::time::timeout(Duration::from_secs(30), queue.settled()).await.expect("the queue settles within 30 s")
}

async fn rows(queue: &ImportQueue) -> Vec<ImportRow> {
    queue.items(0, 10_000, None).await.unwrap().rows
}

/// Attempts marked as a batch's (priced at the batch rate).
async fn batch_attempts(catalog: &Catalog) -> i64 {
    catalog
        .with_connection(|c| {
            Ok(c.query_row("SELECT count(*) FROM attempts WHERE batch_name LIKE 'batches/%'", [], |r| r.get(0))?)
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_import_goes_through_pending_running_succeeded_and_one_item_error_fails_alone() {
    let s = Setup::new().await;
    s.fake.set_batch_timing(BatchTiming { pending_polls: 2, running_polls: 2 });
    // The fifth request of the batch fails on its own (a per-item error); the others answer.
    for _ in 0..4 {
        s.fake.push(Behavior::Product);
    }
    s.fake.push(Behavior::InvalidImage);
    let queue = s.open(100).await;
    let mut progress = queue.progress();
    let report = queue.enqueue(vec![s.photos(6, 100)], batch()).await.unwrap();
    assert_eq!(report.queued, 6);
    // The states the progress view shows, as they come.
    let mut phases = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = progress.borrow_and_update().clone();
        if let Some(b) = p.batches.first() {
            if phases.last() != Some(&b.state) {
                phases.push(b.state);
            }
        }
        if p.is_settled() {
            break;
        }
        assert!(Instant::now() < deadline, "the batch import did not finish: {p:?}");
        let _ = tokio::time::timeout(Duration::from_millis(200), progress.changed()).await;
    }
    let p = settled(&queue).await;
    assert_eq!((p.counts.ready, p.counts.failed, p.counts.submitted), (5, 1, 0), "{p:?}");
    assert!(phases.contains(&BatchPhase::Pending) && phases.contains(&BatchPhase::Succeeded), "{phases:?}");
    assert_eq!(s.fake.batch_submissions(), (1, 6), "one batch of six requests");
    assert_eq!(s.fake.generate_count(), 0, "nothing was sent directly");
    let failed = rows(&queue).await.into_iter().find(|r| r.state == ItemState::Failed).unwrap();
    assert_eq!(failed.last_error.unwrap().code, ErrorCode::GeminiBadRequest);
    let info = &p.batches[0];
    assert_eq!((info.state, info.requests), (BatchPhase::Succeeded, 6));
    assert!(info.name.as_deref().unwrap().starts_with("batches/") && info.submitted_at.is_some());
    // Every attempt is marked as the batch's (priced at the batch rate).
    let marked = batch_attempts(&s.catalog).await;
    assert_eq!(marked, 6);
    // The import's running total (what `import --json`'s summary reports) is what the catalog
    // recorded for those six calls, to the nanodollar.
    let recorded = s.catalog.spent_between(0, i64::MAX).await.unwrap();
    assert_eq!(recorded.calls, 6);
    assert!(recorded.usd > pe_core::pricing::Usd::ZERO, "{recorded:?}");
    assert_eq!((p.cost.calls, p.cost.usd, p.cost.input_tokens), (6, recorded.usd, recorded.input_tokens), "{p:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transient_item_error_joins_the_next_chunk_and_a_permanent_one_fails_alone() {
    let s = Setup::new().await;
    // The first batch's six requests: two transient errors of their own (503, 500), one
    // permanent (400), three products. The next chunk answers the two again.
    for b in [
        Behavior::Product,
        Behavior::Unavailable,
        Behavior::Internal,
        Behavior::Product,
        Behavior::InvalidImage,
        Behavior::Product,
    ] {
        s.fake.push(b);
    }
    let queue = s.open(100).await;
    queue.enqueue(vec![s.photos(6, 700)], batch()).await.unwrap();
    let p = settled(&queue).await;
    assert_eq!((p.counts.ready, p.counts.failed, p.counts.queued, p.counts.submitted), (5, 1, 0, 0), "{p:?}");
    assert_eq!(s.fake.batch_submissions(), (2, 8), "six requests, then the two transient ones again");
    assert_eq!(s.fake.generate_count(), 0);
    let rows = rows(&queue).await;
    let mut attempts: Vec<u32> = rows.iter().map(|r| r.attempts).collect();
    attempts.sort();
    assert_eq!(attempts, [1, 1, 1, 1, 2, 2], "the retried items count both their batches' attempts");
    let failed = rows.iter().find(|r| r.state == ItemState::Failed).unwrap();
    assert_eq!((failed.attempts, failed.last_error.as_ref().unwrap().code), (1, ErrorCode::GeminiBadRequest));
    // Every answer, the errors included, is in the audit trail as its batch's.
    let marked = batch_attempts(&s.catalog).await;
    assert_eq!(marked, 8);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transient_item_error_fails_the_item_at_the_attempt_limit() {
    let s = Setup::new().await;
    for _ in 0..3 {
        s.fake.push(Behavior::Unavailable);
    }
    let queue = s.open(100).await;
    queue.enqueue(vec![s.photos(1, 800)], batch()).await.unwrap();
    let p = settled(&queue).await;
    assert_eq!((p.counts.ready, p.counts.failed), (0, 1), "{p:?}");
    assert_eq!(s.fake.batch_submissions(), (3, 3), "one batch per attempt, max_attempts_per_item = 3");
    let row = rows(&queue).await.remove(0);
    assert_eq!((row.attempts, row.last_error.unwrap().code), (3, ErrorCode::GeminiUnavailable));
}

#[tokio::test(flavor = "multi_thread")]
async fn chunks_respect_the_request_count_and_an_expired_batch_requeues_its_items() {
    let s = Setup::new().await;
    s.fake.set_batch_timing(BatchTiming { pending_polls: 1, running_polls: 0 });
    s.fake.push_batch(BatchFate::Expire);
    let queue = s.open(4).await;
    queue.enqueue(vec![s.photos(10, 200)], batch()).await.unwrap();
    let p = settled(&queue).await;
    assert_eq!((p.counts.ready, p.counts.failed), (10, 0), "{p:?}");
    let (batches, requests) = s.fake.batch_submissions();
    // 4 + 4 + 2, then the expired chunk's items once more.
    assert!(batches >= 4 && requests >= 14, "{batches} batches, {requests} requests");
    assert!(p.batches.iter().any(|b| b.state == BatchPhase::Expired), "{:?}", p.batches);
    // No chunk was larger than four requests.
    for r in s.fake.requests().iter().filter(|r| r.path.ends_with(":batchGenerateContent")) {
        let n = r.body["batch"]["inputConfig"]["requests"]["requests"].as_array().unwrap().len();
        assert!(n <= 4, "{n} requests in one batch");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_batch_requeues_with_the_reason_and_cancel_cancels_at_gemini() {
    let s = Setup::new().await;
    // Stays pending for a long while: cancelled before it ends.
    s.fake.set_batch_timing(BatchTiming { pending_polls: 1_000_000, running_polls: 0 });
    let queue = s.open(100).await;
    queue.enqueue(vec![s.photos(3, 300)], batch()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while queue.store().counts().await.unwrap().0.submitted < 3 {
        assert!(Instant::now() < deadline, "never submitted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    queue.cancel().await.unwrap();
    let all = rows(&queue).await;
    assert!(all.iter().all(|r| r.state == ItemState::Queued), "{all:?}");
    assert_eq!(all[0].last_error.as_ref().unwrap().code, ErrorCode::BatchEnded);
    let cancels = s.fake.requests().iter().filter(|r| r.path.ends_with(":cancel")).count();
    assert_eq!(cancels, 1, "Gemini was asked to cancel the batch");

    // Resumed: a batch that fails puts them back, then the next one answers.
    s.fake.set_batch_timing(BatchTiming { pending_polls: 0, running_polls: 1 });
    s.fake.push_batch(BatchFate::Fail("quota of batch jobs exceeded".into()));
    queue.resume();
    let p = settled(&queue).await;
    assert_eq!(p.counts.ready, 3, "{p:?}");
    assert!(
        p.batches
            .iter()
            .any(|b| b.state == BatchPhase::Failed
                && b.error.as_deref().is_some_and(|e| e.contains("quota of batch jobs"))),
        "{:?}",
        p.batches
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_while_a_batch_runs_polls_it_again_and_never_submits_it_twice() {
    let s = Setup::new().await;
    s.fake.set_batch_timing(BatchTiming { pending_polls: 3, running_polls: 3 });
    let queue = s.open(100).await;
    queue.enqueue(vec![s.photos(5, 400)], batch()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while queue.store().counts().await.unwrap().0.submitted < 5 {
        assert!(Instant::now() < deadline, "never submitted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(queue); // like a crash: nothing is cancelled
    let queue = s.open(100).await;
    let p = settled(&queue).await;
    assert_eq!(p.counts.ready, 5, "{p:?}");
    assert_eq!(s.fake.batch_submissions(), (1, 5), "the batch was polled again, not submitted again");
}
