//! The team catalog's server goes away in the middle of an import (issue 26): the throwaway
//! PostgreSQL of `scripts/with-postgres` is stopped for a few seconds, then started again on the
//! same port, while two desktops import one folder. A lost server is a state of the queue, not an
//! error of its items: both desktops wait (`waiting_server`), keep every answer they paid for,
//! and go on by themselves once it is back; one desktop restarted during the outage writes what
//! it paid for from its spool. Every photo ends ready once; every call Gemini answered is in the
//! catalog; only calls in flight at the outage may be sent again.
//!
//! The server is shared by the whole test binary's tests: they take turns ([`SERVER`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{FakeGemini, FakeOptions};
use pe_core::catalog::server::testing::fresh_database;
use pe_core::catalog::server::{ServerCatalog, ServerUrl};
use pe_core::catalog::Catalog;
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::GeminiClient;
use pe_core::import::*;
use pe_core::pipeline::{system_clock, Pipeline};
use pe_core::resilience::{ResilienceConfig, ResilienceStack};

/// One test at a time stops the server.
static SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const K: u32 = 3;

fn no_env(_: &str) -> Option<String> {
    None
}

/// `scripts/with-postgres`'s control of its server.
fn server(action: &str) {
    let control = std::env::var("PRODUCT_EXTRACTOR_TEST_PG_SERVER")
        .expect("PRODUCT_EXTRACTOR_TEST_PG_SERVER: run under scripts/with-postgres (make test does)");
    let status = std::process::Command::new(control).arg(action).status().unwrap();
    assert!(status.success(), "server {action}: {status}");
}

/// One desktop: its own fake Gemini, stack and connections, and its own data dir's spool.
struct Desktop {
    fake: FakeGemini,
    url: String,
    stack: ResilienceStack,
    spool: PathBuf,
}

impl Desktop {
    async fn new(url: &str, latency: Duration, spool: PathBuf) -> Desktop {
        let fake = FakeGemini::start(FakeOptions { latency, ..FakeOptions::default() }).await.unwrap();
        let mut resilience = ResilienceConfig::default();
        resilience.bulkhead.max_concurrent_calls = K;
        resilience.retry.max_attempts = 1;
        let stack = ResilienceStack::new("gemini", resilience).unwrap();
        Desktop { fake, url: url.to_string(), stack, spool }
    }

    /// This desktop's queue, as the process `name` (`user@host #pid`).
    async fn queue(&self, name: &str, lease: Duration) -> ImportQueue {
        let server = ServerCatalog::connect_with(&ServerUrl::parse(&self.url).unwrap(), &no_env, None).await.unwrap();
        server.migrate().await.unwrap();
        // A desktop's key lives in its data dir: the same computer started again has the same one.
        let key = pe_core::catalog::desktop_key::DesktopKey::from_secret(
            pe_core::catalog::server::desktop_host(name).as_bytes(),
        );
        let catalog = Catalog::on_server(server.with_desktop(name).with_desktop_key(key));
        let config = GeminiConfig {
            base_url: self.fake.base_url(),
            api_key: ApiKey::new("test-key"),
            model: "gemini-2.5-flash".into(),
            timeout: Duration::from_secs(10),
            ..GeminiConfig::default()
        };
        let client = GeminiClient::new(&config).unwrap();
        let pipeline = Pipeline::new(client, self.stack.clone(), catalog, ImageConfig::default(), system_clock());
        let options = ImportOptions {
            lease,
            follow_interval: Duration::from_millis(100),
            spool_dir: Some(self.spool.clone()),
            ..ImportOptions::default()
        };
        ImportQueue::open(pipeline, options).await.unwrap()
    }
}

fn photos(dir: &Path, n: u64, seed: u64) -> PathBuf {
    let folder = dir.join("shoot");
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..n {
        std::fs::write(folder.join(format!("p{i:02}.jpg")), sample_jpeg(seed + i, 320, 240, 85)).unwrap();
    }
    folder
}

/// Waits (up to a minute) until `queue`'s progress matches.
async fn until(queue: &ImportQueue, what: &str, matches: impl Fn(&ImportProgress) -> bool) {
    let mut progress = queue.progress();
    // The read guard is dropped at once: held, it would block every publisher.
    let seen = tokio::time::timeout(Duration::from_secs(60), progress.wait_for(|p| matches(p))).await.is_ok();
    assert!(seen, "never {what}: {:?}", queue.progress().borrow());
}

fn waiting_for_the_server(p: &ImportProgress) -> bool {
    matches!(p.status, ImportStatus::WaitingServer { .. })
}

/// What the catalog holds once everything is back: every item's state, and every attempt.
async fn catalog_totals(url: &str) -> (Vec<ItemState>, i64) {
    let server = ServerCatalog::connect_with(&ServerUrl::parse(url).unwrap(), &no_env, None).await.unwrap();
    let catalog = Catalog::on_server(server.with_desktop("checker@desk-9 #9"));
    let rows = ImportStore::new(catalog.clone()).items(0, 1_000, None).await.unwrap().rows;
    let attempts = catalog.spent_between(0, i64::MAX).await.unwrap().calls;
    (rows.into_iter().map(|r| r.state).collect(), i64::from(attempts))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_desktops_wait_for_their_server_keep_what_they_paid_for_and_finish_by_themselves() {
    let _turn = SERVER.lock().await;
    let url = fresh_database("outage").await;
    let dir = tempfile::tempdir().unwrap();
    let folder = photos(dir.path(), 18, 4_000);
    let alice = Desktop::new(&url, Duration::from_millis(700), dir.path().join("alice-spool")).await;
    let bob = Desktop::new(&url, Duration::from_millis(700), dir.path().join("bob-spool")).await;
    let qa = alice.queue("alice@desk-1 #1", Duration::from_secs(60)).await;
    let qb = bob.queue("bob@desk-2 #2", Duration::from_secs(60)).await;
    let (a, b) = tokio::join!(
        qa.enqueue(vec![folder.clone()], EnqueueOptions::default()),
        qb.enqueue(vec![folder.clone()], EnqueueOptions::default())
    );
    assert_eq!(a.unwrap().queued + b.unwrap().queued, 18);
    until(&qa, "a first answer", |p| p.counts.ready >= 2).await;

    // The server goes away while calls are in flight; their answers arrive meanwhile.
    server("stop");
    until(&qa, "alice waiting for the server", waiting_for_the_server).await;
    until(&qb, "bob waiting for the server", waiting_for_the_server).await;
    // Several seconds: both desktops tried again and backed off (0.5 s, 1 s, 2 s, …).
    until(&qa, "alice backing off", |p| {
        matches!(p.status, ImportStatus::WaitingServer { since_unix_ms, next_try_unix_ms, .. }
            if next_try_unix_ms - since_unix_ms >= 3_000)
    })
    .await;
    let ImportStatus::WaitingServer { message, .. } = qa.progress().borrow().status.clone() else { unreachable!() };
    assert!(message.starts_with("Waiting for the team catalog's server ("), "{message}");
    assert!(message.contains("goes on by itself once it is back"), "{message}");
    server("start");

    // Both go on by themselves: nobody presses Resume.
    until(&qa, "alice finished", |p| p.status == ImportStatus::Finished).await;
    until(&qb, "bob finished", |p| p.status == ImportStatus::Finished).await;
    let (states, attempts) = catalog_totals(&url).await;
    assert_eq!(states.len(), 18);
    assert!(states.iter().all(|s| *s == ItemState::Ready), "{states:?}");
    let calls = alice.fake.generate_count() + bob.fake.generate_count();
    assert_eq!(attempts as usize, calls, "every answer Gemini gave is in the catalog");
    assert!(calls <= 18 + 2 * K as usize, "only calls in flight at the outage are sent again: {calls}");
    for desktop in [&alice, &bob] {
        assert_eq!(std::fs::read_dir(&desktop.spool).map(|d| d.count()).unwrap_or(0), 0, "the spool is empty");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_desktop_restarted_while_its_server_was_away_writes_what_it_paid_for_from_its_spool() {
    let _turn = SERVER.lock().await;
    let url = fresh_database("outage_restart").await;
    let dir = tempfile::tempdir().unwrap();
    let folder = photos(dir.path(), 12, 5_000);
    let bob = Desktop::new(&url, Duration::from_millis(1_500), dir.path().join("bob-spool")).await;
    // A short lease: the claims of bob's first process come back soon after the server does.
    let lease = Duration::from_secs(3);
    // A pid no process has: the second run finds the first one gone and queues its items again at
    // once, so its claims race the spool's writes (they used to win when the lease had run out).
    let first = bob.queue("bob@desk-2 #4999999", lease).await;
    first.enqueue(vec![folder], EnqueueOptions::default()).await.unwrap();
    // Stopped while calls are at Gemini: their answers arrive with the server away, and are kept.
    until(&first, "calls at Gemini", |p| p.counts.extracting >= 1).await;
    server("stop");
    until(&first, "bob waiting for the server", waiting_for_the_server).await;
    let spooled = async {
        loop {
            let kept = std::fs::read_dir(&bob.spool).map(|d| d.count()).unwrap_or(0);
            if kept >= 1 {
                return kept;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let kept = tokio::time::timeout(Duration::from_secs(30), spooled).await.expect("an answer is kept in the spool");
    // Every call made has been answered (nothing is claimed while the server is away): a call
    // cut short by the process's end would be paid for and lost whatever the app does.
    let answered = async {
        while bob.fake.in_flight() > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), answered).await.expect("the calls in flight are answered");
    // And every answer is in the app's hands (counted in this import's cost, on its way to the
    // catalog), not still being read off the socket: an answer cut off mid-read by the process's
    // end is lost to any app. Some of them are in the spool already, the others wait in memory for
    // their first write to fail; the shutdown must keep those too.
    let calls_made = bob.fake.generate_count() as u32;
    until(&first, "every answer in hand", |p| p.cost.calls >= calls_made).await;
    // Bob's process ends (its answers in memory with it) while the server is away.
    first.shutdown().await;
    server("start");

    let second = bob.queue("bob@desk-2 #22", lease).await;
    until(&second, "bob's second run finished", |p| p.status == ImportStatus::Finished && p.counts.ready == 12).await;
    let (states, attempts) = catalog_totals(&url).await;
    assert!(states.iter().all(|s| *s == ItemState::Ready), "{states:?}");
    let calls = bob.fake.generate_count();
    assert_eq!(attempts as usize, calls, "every answer Gemini gave is in the catalog ({kept} from the spool)");
    // Every call of the first run was answered before it ended, and the second run writes those
    // answers before it claims anything: no photo is paid for twice.
    assert_eq!(calls, 12, "each photo is sent once ({kept} answers from the spool)");
    assert_eq!(std::fs::read_dir(&bob.spool).map(|d| d.count()).unwrap_or(0), 0, "the spool is empty");
}
