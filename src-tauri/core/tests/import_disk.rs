//! A full disk in the middle of an import (issue 26): the queue stops taking photos, says which
//! disk and how much is free, writes what it already paid for, and goes on by itself once there
//! is room — every photo extracted once, none paid for twice, the catalog intact. Two ways to fill
//! a disk without filling one: an injected free-space probe under the watermark, and SQLite's
//! own `SQLITE_FULL` (the catalog's `max_page_count` held at its size: every write that needs a
//! new page fails as on a full file system).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{FakeGemini, FakeOptions};
use pe_core::catalog::Catalog;
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::disk::{DiskCheck, FreeSpace, FreeSpaceProbe};
use pe_core::gemini::GeminiClient;
use pe_core::import::*;
use pe_core::pipeline::{system_clock, Pipeline};
use pe_core::resilience::{ResilienceConfig, ResilienceStack};

const GB: u64 = 1_000_000_000;

struct Setup {
    fake: FakeGemini,
    dir: tempfile::TempDir,
    catalog: Catalog,
    /// What the injected probe says is free on a 100 GB disk.
    free: Arc<AtomicU64>,
}

impl Setup {
    async fn new(latency: Duration) -> Setup {
        let fake = FakeGemini::start(FakeOptions { latency, ..FakeOptions::default() }).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(&Catalog::path_in(&dir.path().join("data"))).unwrap();
        Setup { fake, dir, catalog, free: Arc::new(AtomicU64::new(50 * GB)) }
    }

    async fn queue(&self) -> ImportQueue {
        let config = GeminiConfig {
            base_url: self.fake.base_url(),
            api_key: ApiKey::new("test-key"),
            model: "gemini-2.5-flash".into(),
            ..GeminiConfig::default()
        };
        let mut resilience = ResilienceConfig::default();
        resilience.bulkhead.max_concurrent_calls = 2;
        let stack = ResilienceStack::new("gemini", resilience).unwrap();
        let client = GeminiClient::new(&config).unwrap();
        let pipeline = Pipeline::new(client, stack, self.catalog.clone(), ImageConfig::default(), system_clock());
        let free = self.free.clone();
        let disk = DiskCheck {
            dir: Some(self.dir.path().join("data")),
            probe: FreeSpaceProbe::new(move |_| {
                Ok(FreeSpace { available: free.load(Ordering::SeqCst), total: 100 * GB })
            }),
            recheck: Duration::from_millis(50),
            ..DiskCheck::default()
        };
        ImportQueue::open(pipeline, ImportOptions { disk, ..ImportOptions::default() }).await.unwrap()
    }

    fn photos(&self, n: u64, seed: u64) -> PathBuf {
        let folder = self.dir.path().join("shoot");
        std::fs::create_dir_all(&folder).unwrap();
        for i in 0..n {
            std::fs::write(folder.join(format!("p{i:02}.jpg")), sample_jpeg(seed + i, 320, 240, 85)).unwrap();
        }
        folder
    }

    /// Every photo was sent exactly once.
    fn each_sent_once(&self, n: usize) {
        let sent = self.fake.generate_counts_per_body();
        assert_eq!(sent.len(), n, "{sent:?}");
        assert!(sent.values().all(|times| *times == 1), "each photo paid for once: {sent:?}");
    }

    async fn integrity(&self) -> String {
        self.catalog
            .with_connection(|c| Ok(c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))?))
            .await
            .unwrap()
    }
}

async fn status_is(queue: &ImportQueue, what: &str, matches: impl Fn(&ImportProgress) -> bool) -> ImportProgress {
    let mut progress = queue.progress();
    // The watch's read guard is dropped at once: held, it would block every publisher (and the
    // next borrow behind them).
    let seen = tokio::time::timeout(Duration::from_secs(30), progress.wait_for(|p| matches(p))).await.is_ok();
    let now = queue.progress().borrow().clone();
    assert!(seen, "the queue never showed {what}: {now:?}");
    now
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_disk_under_the_watermark_pauses_the_import_writes_what_was_paid_and_goes_on_once_freed() {
    let s = Setup::new(Duration::from_millis(200)).await;
    let queue = s.queue().await;
    queue.enqueue(vec![s.photos(10, 300)], EnqueueOptions::default()).await.unwrap();
    status_is(&queue, "a first answer", |p| p.counts.ready >= 1).await;

    // 100 MB left on a 100 GB disk: under the 1 GiB the queue keeps free.
    s.free.store(100_000_000, Ordering::SeqCst);
    // (A photo prepared ahead may wait at the gate; none is at Gemini.)
    let held = status_is(&queue, "the pause for the disk with no call in flight", |p| {
        matches!(p.status, ImportStatus::PausedDisk { .. }) && p.counts.extracting == 0
    })
    .await;
    let ImportStatus::PausedDisk { free_bytes, message } = &held.status else { unreachable!() };
    assert_eq!(*free_bytes, Some(100_000_000));
    assert!(message.contains("has 100 MB free, less than the 1.1 GB the import keeps free"), "{message}");
    assert!(message.contains("Free some space: the import goes on by itself"), "{message}");
    // Every call made was answered and written: every paid answer is ready.
    assert_eq!(held.counts.ready as usize, s.fake.generate_count(), "{held:?}");
    assert!(held.counts.queued > 0, "photos wait: {held:?}");

    s.free.store(20 * GB, Ordering::SeqCst);
    let done = tokio::time::timeout(Duration::from_secs(30), queue.settled()).await.unwrap();
    assert_eq!(done.status, ImportStatus::Finished, "{done:?}");
    assert_eq!(done.counts.ready, 10);
    s.each_sent_once(10);
    assert_eq!(s.integrity().await, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_full_holds_the_answers_paid_for_and_writes_them_once_there_is_room() {
    // Slow answers, so calls are in flight when the catalog's file stops growing.
    let s = Setup::new(Duration::from_millis(400)).await;
    let queue = s.queue().await;
    queue.enqueue(vec![s.photos(6, 600)], EnqueueOptions::default()).await.unwrap();
    status_is(&queue, "a call in flight", |p| p.counts.extracting >= 1).await;
    // The file may not grow any more: as on a full file system, a write that needs a page fails
    // with SQLITE_FULL (the probe still says there is room: the disk filled faster than it looks).
    s.catalog
        .with_connection(|c| {
            let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            c.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))?;
            Ok(())
        })
        .await
        .unwrap();
    let held =
        status_is(&queue, "the pause for the full disk", |p| matches!(p.status, ImportStatus::PausedDisk { .. })).await;
    let ImportStatus::PausedDisk { message, .. } = &held.status else { unreachable!() };
    assert!(message.contains("is full: the catalog could not be written"), "{message}");
    assert!(message.contains(&s.dir.path().join("data").display().to_string()), "names the disk's folder: {message}");

    // Room again.
    s.catalog
        .with_connection(|c| Ok(c.query_row("PRAGMA max_page_count = 1073741823", [], |_| Ok(()))?))
        .await
        .unwrap();
    let done = tokio::time::timeout(Duration::from_secs(30), queue.settled()).await.unwrap();
    assert_eq!(done.status, ImportStatus::Finished, "{done:?}");
    assert_eq!(done.counts.ready, 6, "{done:?}");
    s.each_sent_once(6);
    assert_eq!(s.integrity().await, "ok");
    // The answers paid for before the disk filled are the ones recorded: one attempt each.
    let attempts: i64 = s
        .catalog
        .with_connection(|c| Ok(c.query_row("SELECT count(*) FROM attempts", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(attempts, 6);
}
