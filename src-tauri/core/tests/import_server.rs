//! The import engine on a team catalog (issue 13): several desktops work one queue on a real
//! PostgreSQL server (`scripts/with-postgres`), each with its own pipeline, breaker and bulkhead,
//! against fake Geminis on 127.0.0.1. A desktop here is an `ImportQueue` on its own connection
//! pool under its own desktop name (`user@host #pid`); two hosts are played in one process.
//!
//! What must hold across desktops: each photo is sent once, whoever queued it and however many
//! queue it; a desktop that dies leaves nothing behind (its items go back after their lease,
//! another desktop finishes those it had prepared, from their bytes in the catalog, and it
//! finishes the rest when it starts again); an interactive photo stays with the computer where
//! someone waits for it; a path is opened only by the desktop that queued it (issue 32).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{FakeGemini, FakeOptions};
use pe_core::catalog::desktop_key::DesktopKey;
use pe_core::catalog::server::testing::fresh_database;
use pe_core::catalog::server::{ServerCatalog, ServerUrl};
use pe_core::catalog::Catalog;
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::GeminiClient;
use pe_core::import::*;
use pe_core::pipeline::{system_clock, Pipeline};
use pe_core::resilience::{ResilienceConfig, ResilienceStack};
use pe_core::ErrorCode;

const KEY: &str = "test-key";

fn no_env(_: &str) -> Option<String> {
    None
}

/// One desktop of the team: its own fake Gemini (so its calls are counted apart), its own stack,
/// its own connections to the shared database.
struct Desktop {
    fake: FakeGemini,
    catalog: Catalog,
    stack: ResilienceStack,
}

impl Desktop {
    async fn new(url: &str, name: &str, latency: Duration) -> Desktop {
        let fake = FakeGemini::start(FakeOptions { latency, ..FakeOptions::default() }).await.unwrap();
        let server = ServerCatalog::connect_with(&ServerUrl::parse(url).unwrap(), &no_env, None).await.unwrap();
        server.migrate().await.unwrap();
        // A desktop's key lives in its data dir: the same computer started again has the same one.
        let key = DesktopKey::from_secret(pe_core::catalog::server::desktop_host(name).as_bytes());
        let catalog = Catalog::on_server(server.with_desktop(name).with_desktop_key(key));
        let mut resilience = ResilienceConfig::default();
        resilience.bulkhead.max_concurrent_calls = 4;
        resilience.retry.max_attempts = 1;
        let stack = ResilienceStack::new("gemini", resilience).unwrap();
        Desktop { fake, catalog, stack }
    }

    fn pipeline(&self) -> Pipeline {
        let config = GeminiConfig {
            base_url: self.fake.base_url(),
            api_key: ApiKey::new(KEY),
            timeout: Duration::from_secs(10),
            ..GeminiConfig::default()
        };
        let client = GeminiClient::new(&config).unwrap();
        Pipeline::new(client, self.stack.clone(), self.catalog.clone(), ImageConfig::default(), system_clock())
    }

    async fn queue(&self, options: ImportOptions) -> ImportQueue {
        ImportQueue::open(self.pipeline(), options).await.unwrap()
    }
}

fn options(lease_ms: u64) -> ImportOptions {
    ImportOptions {
        lease: Duration::from_millis(lease_ms),
        follow_interval: Duration::from_millis(100),
        ..ImportOptions::default()
    }
}

/// `n` distinct photos in `dir/folder` (each folder's its own: seeded by the folder's name).
fn photos(dir: &Path, folder: &str, n: u64) -> PathBuf {
    let seed = folder.bytes().fold(7_000u64, |seed, b| seed.wrapping_mul(31).wrapping_add(u64::from(b))) % 1_000_000;
    let folder = dir.join(folder);
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..n {
        std::fs::write(folder.join(format!("p{i:03}.jpg")), sample_jpeg(seed * 1_000 + i, 320, 240, 85)).unwrap();
    }
    folder
}

async fn rows(queue: &ImportQueue) -> Vec<ImportRow> {
    queue.items(0, 10_000, None).await.unwrap().rows
}

async fn wait_for(what: &str, timeout: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether the computer `host` is on item `id`'s list of those that cannot read its files.
async fn unreadable_by(url: &str, id: ItemId, host: &str) -> bool {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    let task = tokio::spawn(connection);
    let row = client
        .query_opt("SELECT 1 FROM import_item_unreadable WHERE item_id = $1 AND host = $2", &[&id, &host])
        .await
        .unwrap();
    drop(client);
    let _ = task.await;
    row.is_some()
}

/// Every photo's request body, from every desktop's fake: how many times each was sent.
fn sends(desktops: &[&Desktop]) -> HashMap<u64, usize> {
    let mut all = HashMap::new();
    for desktop in desktops {
        for (body, n) in desktop.fake.generate_counts_per_body() {
            *all.entry(body).or_default() += n;
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_desktops_importing_one_folder_send_each_photo_once_and_share_the_work() {
    let url = fresh_database("two_desktops").await;
    let dir = tempfile::tempdir().unwrap();
    let folder = photos(dir.path(), "shoot", 40);
    let alice = Desktop::new(&url, "alice@desk-1 #1", Duration::from_millis(150)).await;
    let bob = Desktop::new(&url, "bob@desk-2 #2", Duration::from_millis(150)).await;
    let (qa, qb) = tokio::join!(alice.queue(options(30_000)), bob.queue(options(30_000)));
    // Both queue the same folder at the same moment: 40 items, not 80.
    let (a, b) = tokio::join!(
        qa.enqueue(vec![folder.clone()], EnqueueOptions::default()),
        qb.enqueue(vec![folder.clone()], EnqueueOptions::default())
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.queued + b.queued, 40, "alice {a:?}, bob {b:?}");
    // Each desktop holds a bounded share at a time: K = 4 calls and K photos prepared ahead, and
    // at most as many again writing their outcome (one claim used to take 32 of the 40).
    let mut most_held = 0;
    wait_for("every item ready", Duration::from_secs(60), async || {
        let all = rows(&qa).await;
        for desktop in ["alice@desk-1 #1", "bob@desk-2 #2"] {
            most_held = most_held.max(all.iter().filter(|r| r.worked_by.as_deref() == Some(desktop)).count());
        }
        all.iter().filter(|r| r.state == ItemState::Ready).count() == 40
    })
    .await;
    assert!(most_held <= 16, "a desktop held {most_held} items at once");
    let all = rows(&qb).await;
    assert_eq!(all.len(), 40, "one item per photo: {all:?}");
    assert!(all.iter().all(|r| r.state == ItemState::Ready && r.worked_by.is_none()), "leases end: {all:?}");
    let sent = sends(&[&alice, &bob]);
    assert_eq!(sent.values().sum::<usize>(), 40);
    assert!(sent.values().all(|n| *n == 1), "each photo sent once: {sent:?}");
    // Both listed the folder, so both tagged its photos as theirs (issue 32: a path is opened
    // only by a desktop that listed it itself) and both may open them.
    let (by_alice, by_bob) = (alice.fake.generate_count(), bob.fake.generate_count());
    assert!(by_alice > 0 && by_bob > 0, "both desktops worked: alice {by_alice}, bob {by_bob}");
    // Each desktop keeps its own bulkhead: never more than its 4 slots at its own fake.
    assert!(alice.fake.max_in_flight() <= 4 && bob.fake.max_in_flight() <= 4);
    // Who queued it is recorded: the item's host.
    assert!(all.iter().all(|r| matches!(r.queued_on.as_deref(), Some("desk-1" | "desk-2"))), "{all:?}");
    // What the Import view says was spent covers both desktops' calls on each desktop (its own
    // added as they finish, the other's read when it follows the other's changes).
    for queue in [&qa, &qb] {
        let mut progress = queue.progress();
        let all_calls = tokio::time::timeout(Duration::from_secs(10), progress.wait_for(|p| p.queue_cost.calls == 40));
        assert!(all_calls.await.is_ok(), "{:?}", queue.progress().borrow().queue_cost);
        assert!(queue.progress().borrow().queue_cost.usd > pe_core::pricing::Usd::ZERO);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_desktops_items_go_back_after_their_lease_and_another_finishes_them() {
    let url = fresh_database("dead_desktop").await;
    let dir = tempfile::tempdir().unwrap();
    let folder = photos(dir.path(), "shoot", 12);
    // Alice's Gemini never answers in time: she holds items when she dies.
    let alice = Desktop::new(&url, "alice@desk-1 #1", Duration::from_secs(3600)).await;
    let qa = alice.queue(options(1_000)).await;
    qa.enqueue(vec![folder], EnqueueOptions::default()).await.unwrap();
    wait_for("alice has items in flight", Duration::from_secs(20), async || alice.fake.generate_count() >= 4).await;
    // What she had sent: prepared (its photo recorded and uploaded) and at Gemini.
    let held: Vec<ItemId> = rows(&qa)
        .await
        .iter()
        .filter(|r| r.worked_by.is_some() && r.state == ItemState::Extracting)
        .map(|r| r.id)
        .collect();
    assert!(!held.is_empty());
    for row in rows(&qa).await.iter().filter(|r| r.worked_by.is_some()) {
        assert_eq!(row.worked_by.as_deref(), Some("alice@desk-1 #1"), "the Import view says who works it");
    }
    // Her process dies: nothing renews her leases any more.
    drop(qa);
    let bob = Desktop::new(&url, "bob@desk-2 #2", Duration::from_millis(50)).await;
    let qb = bob.queue(options(1_000)).await;
    // Work travels as bytes, never as a path: bob finishes the items alice had sent, from the
    // prepared photos the catalog holds, and leaves the files only she listed to her computer.
    // Settled: what alice had sent is ready, and nothing else is in flight (alice may have prepared
    // one more item after `held` was read; bob may be finishing it).
    wait_for("bob finished what alice had sent", Duration::from_secs(30), async || {
        let all = rows(&qb).await;
        all.iter().filter(|r| held.contains(&r.id)).all(|r| r.state == ItemState::Ready)
            && !all.iter().any(|r| matches!(r.state, ItemState::Preparing | ItemState::Extracting))
            && bob.fake.in_flight() == 0
    })
    .await;
    let all = rows(&qb).await;
    let ready: Vec<ItemId> = all.iter().filter(|r| r.state == ItemState::Ready).map(|r| r.id).collect();
    assert_eq!(bob.fake.generate_count(), ready.len(), "bob sent only photos alice had prepared");
    assert!(
        all.iter().all(|r| r.state == ItemState::Ready || r.state == ItemState::Queued),
        "the rest waits for alice: {all:?}"
    );
    for id in &held {
        let row = all.iter().find(|r| r.id == *id).unwrap();
        assert_eq!(row.attempts, 1, "a lease that ran out does not count as an attempt: {row:?}");
    }
    // Alice starts again (her data dir's key with her): she finishes the rest.
    let alice = Desktop::new(&url, "alice@desk-1 #1", Duration::from_millis(50)).await;
    let qa = alice.queue(options(1_000)).await;
    wait_for("alice finished the rest", Duration::from_secs(30), async || {
        rows(&qa).await.iter().all(|r| r.state == ItemState::Ready)
    })
    .await;
    assert_eq!(alice.fake.generate_count(), 12 - ready.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_gives_back_only_this_desktops_items() {
    let url = fresh_database("cancel_own").await;
    let dir = tempfile::tempdir().unwrap();
    let folder = photos(dir.path(), "shoot", 16);
    let alice = Desktop::new(&url, "alice@desk-1 #1", Duration::from_secs(3600)).await;
    let bob = Desktop::new(&url, "bob@desk-2 #2", Duration::from_secs(3600)).await;
    let qa = alice.queue(options(30_000)).await;
    let qb = bob.queue(options(30_000)).await;
    qa.enqueue(vec![folder], EnqueueOptions::default()).await.unwrap();
    // Each works what it queued (a path is opened only by the desktop that queued it).
    qb.enqueue(vec![photos(dir.path(), "bobs", 16)], EnqueueOptions::default()).await.unwrap();
    wait_for("both have items in flight", Duration::from_secs(20), async || {
        alice.fake.generate_count() >= 4 && bob.fake.generate_count() >= 4
    })
    .await;
    qa.cancel().await.unwrap();
    let all = rows(&qb).await;
    let alices = all.iter().filter(|r| r.worked_by.as_deref() == Some("alice@desk-1 #1")).count();
    let bobs = all.iter().filter(|r| r.worked_by.as_deref() == Some("bob@desk-2 #2")).count();
    assert_eq!(alices, 0, "alice's cancel gave her items back: {all:?}");
    assert!(bobs >= 4, "bob's calls go on: {all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn interactive_photos_and_paths_only_one_desktop_listed_stay_with_that_desktop() {
    let url = fresh_database("hosts").await;
    let dir = tempfile::tempdir().unwrap();
    let alice = Desktop::new(&url, "alice@desk-1 #1", Duration::from_millis(20)).await;
    let bob = Desktop::new(&url, "bob@desk-2 #2", Duration::from_millis(20)).await;
    // Alice's window waits (not started yet); Bob's works.
    let qa = alice.queue(ImportOptions { autostart: false, ..options(30_000) }).await;
    let _bob_works = bob.queue(options(30_000)).await;
    // A photo dropped on Alice's desk: someone waits at her computer, so only it extracts it.
    let dropped = photos(dir.path(), "drop", 1).join("p000.jpg");
    let ours = qa.enqueue_files(vec![dropped], EnqueueOptions::interactive()).await.unwrap();
    let dropped_id = ours.files[0].item;
    // A bulk photo that is gone from the disk Bob sees (as if it were only on Alice's).
    let gone = photos(dir.path(), "gone", 1).join("p000.jpg");
    let bulk = qa.enqueue_files(vec![gone.clone()], EnqueueOptions::default()).await.unwrap();
    let gone_id = bulk.files[0].item;
    std::fs::remove_file(&gone).unwrap();
    // Bob works nothing of Alice's: the dropped photo is hers (someone waits at her computer),
    // and the bulk one is a path only she listed (issue 32), not prepared yet.
    // Alice starts: she extracts her photo, and the missing one fails on her own computer, named.
    qa.resume();
    let done = tokio::time::timeout(Duration::from_secs(20), qa.finished(dropped_id)).await.unwrap().unwrap();
    assert_eq!(done.row.state, ItemState::Ready);
    let failed = tokio::time::timeout(Duration::from_secs(20), qa.finished(gone_id)).await.unwrap().unwrap();
    assert_eq!(failed.row.state, ItemState::Failed);
    assert_eq!(failed.row.last_error.as_ref().map(|e| e.code), Some(ErrorCode::Io), "{failed:?}");
    assert_eq!(alice.fake.generate_count(), 1);
    assert_eq!(bob.fake.generate_count(), 0, "bob never sent alice's photos");
    assert!(!unreadable_by(&url, gone_id, "desk-2").await, "bob never even claimed it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overnight_import_on_a_team_catalog_is_refused_with_the_reason() {
    let url = fresh_database("batch_refused").await;
    let dir = tempfile::tempdir().unwrap();
    let folder = photos(dir.path(), "shoot", 1);
    let alice = Desktop::new(&url, "alice@desk-1 #1", Duration::ZERO).await;
    let qa = alice.queue(options(30_000)).await;
    let refused = qa.enqueue(vec![folder], EnqueueOptions { batch: true, ..EnqueueOptions::default() }).await;
    let message = refused.unwrap_err().to_string();
    assert!(message.contains("overnight"), "{message}");
    assert!(rows(&qa).await.is_empty());
}

/// A team catalog keeps each photo's prepared image (pg/0009): another desktop shows it where
/// the file is not on its disk, and extracts the product again from it, sending the very upload
/// the first desktop sent. A file that now holds other bytes is sent as the kept photo too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_desktop_extracts_a_product_again_from_the_kept_photo() {
    let url = fresh_database("kept_photo").await;
    let dir = tempfile::tempdir().unwrap();
    let folder = photos(dir.path(), "alice-shoot", 1);
    let file = folder.join("p000.jpg");
    let alice = Desktop::new(&url, "alice@desk-1 #1", Duration::from_millis(10)).await;
    let bob = Desktop::new(&url, "bob@desk-2 #2", Duration::from_millis(10)).await;
    let qa = alice.queue(options(30_000)).await;
    let enqueued = qa.enqueue_files(vec![file.clone()], EnqueueOptions::interactive()).await.unwrap();
    let item = qa.finished(enqueued.files[0].item).await.unwrap();
    let proposal = item.proposal.clone().expect("alice's photo extracted");
    let saved = qa.save_item(item.row.id, proposal).await.unwrap();
    assert_eq!(alice.fake.generate_count(), 1);
    let first_body = *alice.fake.generate_counts_per_body().keys().next().unwrap();

    // The file is on alice's disk only: bob sees the kept photo.
    let kept = bob.catalog.prepared_image_url(saved.photo_id).await.unwrap().expect("the photo is kept");
    assert!(kept.starts_with("data:image/jpeg;base64,"), "{}", &kept[..40]);
    std::fs::remove_file(&file).unwrap();
    let qb = bob.queue(options(30_000)).await;
    let photos: Vec<_> = bob
        .catalog
        .product_photos(saved.id)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (pe_core::stored_path::StoredPath::from_text_and_hex(&p.path, p.path_bytes.as_deref()), p.sha256))
        .collect();
    let forced = EnqueueOptions { force: true, ..EnqueueOptions::interactive() };
    let again = qb.enqueue_product(photos.clone(), forced).await.unwrap();
    let item = qb.finished(again.files[0].item).await.unwrap();
    assert_eq!(item.row.state, ItemState::Ready, "{:?}", item.row.last_error);
    assert_eq!(item.row.photo_id, Some(saved.photo_id), "the same photo");
    let sent = bob.fake.generate_counts_per_body();
    assert_eq!(sent.keys().copied().collect::<Vec<_>>(), vec![first_body], "the very upload alice sent");
    qb.discard_item(item.row.id).await.unwrap();

    // Another photo now at the same path: the product's photo is still the kept one.
    std::fs::write(&file, sample_jpeg(424_242, 320, 240, 85)).unwrap();
    let again = qb.enqueue_product(photos, forced).await.unwrap();
    let item = qb.finished(again.files[0].item).await.unwrap();
    assert_eq!(item.row.state, ItemState::Ready, "{:?}", item.row.last_error);
    assert_eq!(item.row.photo_id, Some(saved.photo_id));
    assert_eq!(bob.fake.generate_counts_per_body().get(&first_body), Some(&2));
    qa.shutdown().await;
    qb.shutdown().await;
}

/// Issue 32, finding 1: whoever can write to the team database (a colleague's credentials, a
/// compromised desktop) adds queue rows naming a private file on this computer, to have the
/// desktop read it, send it to Gemini and store its prepared copy where they can read it back.
/// The desktop opens only paths it queued itself, as it queued them: every such row is refused
/// with one typed reason (the same whether the file exists or not), the private file is never
/// sent or stored, and the refused rows do not hold up the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rows_injected_into_the_shared_queue_never_make_a_desktop_open_their_paths() {
    use sha2::Digest;
    let url = fresh_database("injected_rows").await;
    let dir = tempfile::tempdir().unwrap();
    // The victim's private photo: a valid JPEG, so that were it read it would be sent and stored.
    let private = photos(dir.path(), "private", 1).join("p000.jpg");
    let private_sha = hex::encode(sha2::Sha256::digest(std::fs::read(&private).unwrap()));
    let missing = dir.path().join("private").join("not-there.jpg");
    let victim = Desktop::new(&url, "victim@desk-1 #1", Duration::from_millis(20)).await;
    let qv = victim.queue(options(30_000)).await;
    // The victim's own photo goes through as always.
    let own = photos(dir.path(), "own", 1).join("p000.jpg");
    let mine = qv.enqueue_files(vec![own.clone()], EnqueueOptions::default()).await.unwrap().files[0].item;
    let done = tokio::time::timeout(Duration::from_secs(20), qv.finished(mine)).await.unwrap().unwrap();
    assert_eq!(done.row.state, ItemState::Ready);

    // The attacker, with plain SQL.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    let task = tokio::spawn(connection);
    let (own_sha, own_tag): (Option<String>, Option<String>) = {
        let row = client.query_one("SELECT sha256, path_tag FROM import_items WHERE id = $1", &[&mine]).await.unwrap();
        (row.get(0), row.get(1))
    };
    assert!(own_tag.is_some(), "the desktop tags the rows it queues on a server");
    let private_text = private.to_str().unwrap().to_owned();
    let missing_text = missing.to_str().unwrap().to_owned();
    let insert = "INSERT INTO import_items (path, sha256, state, origin, queued_at, updated_at, queued_on, path_tag)
                  VALUES ($1, $2, 'queued', $3, 1, 1, $4, $5) RETURNING id";
    let mut injected: Vec<(i64, &str)> = Vec::new();
    // What the row is, its path, hash, origin, computer and tag.
    type Case<'a> = (&'a str, &'a str, Option<String>, &'a str, Option<&'a str>, Option<String>);
    let cases: Vec<Case> = vec![
        ("no hash, no computer", &private_text, None, "import", None, None),
        ("the victim's computer, any hash", &private_text, Some("00".repeat(32)), "import", Some("desk-1"), None),
        (
            "the file's own hash and a made-up tag",
            &private_text,
            Some(private_sha.clone()),
            "import",
            Some("desk-1"),
            Some("ab".repeat(32)),
        ),
        ("someone waits for it", &private_text, Some(private_sha.clone()), "interactive", Some("desk-1"), None),
        (
            "the tag of the victim's own photo",
            &private_text,
            own_sha.clone(),
            "import",
            Some("desk-1"),
            own_tag.clone(),
        ),
        ("a file that does not exist", &missing_text, None, "import", Some("desk-1"), None),
    ];
    for (n, (what, path, sha, origin, on, tag)) in cases.iter().enumerate() {
        // Another spelling of the same file for each row (one pending row per path).
        let path = path.replace("/private/", &format!("/private/{}", "./".repeat(n)));
        let id: i64 = client.query_one(insert, &[&path, sha, origin, on, tag]).await.unwrap().get(0);
        injected.push((id, what));
    }
    // A product of two photos: the victim's own (with its own tag: a copy of a row it queued
    // names the same file with the same bytes) and, as its second photo, the private file.
    let own_text = own.to_str().unwrap().to_owned();
    let product: i64 =
        client.query_one(insert, &[&own_text, &own_sha, &"import", &Some("desk-1"), &own_tag]).await.unwrap().get(0);
    client
        .execute(
            "INSERT INTO import_item_photos (item_id, position, path, sha256) VALUES ($1, 1, $2, $3)",
            &[&product, &private_text, &private_sha],
        )
        .await
        .unwrap();
    injected.push((product, "a second photo of a product"));

    let mut messages = Vec::new();
    for (id, what) in &injected {
        let item = tokio::time::timeout(Duration::from_secs(20), qv.finished(*id)).await.unwrap().unwrap();
        assert_eq!(item.row.state, ItemState::Failed, "{what}: {item:?}");
        let error = item.row.last_error.clone().unwrap();
        assert_eq!(error.code, ErrorCode::NotQueuedHere, "{what}: {error:?}");
        assert!(!error.message.contains("private") && !error.message.contains("not-there"), "{what}: {error:?}");
        messages.push(error.message);
    }
    messages.dedup();
    assert_eq!(messages.len(), 1, "one message whatever exists on this disk: {messages:?}");
    assert_eq!(victim.fake.generate_count(), 1, "only the victim's own photo was sent");
    let stored: i64 = client
        .query_one("SELECT count(*) FROM photos WHERE original_path LIKE '%private%' OR sha256 = $1", &[&private_sha])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 0, "the private file is not in the catalog");
    // Nothing is left waiting: the refused rows do not hold up the queue.
    assert!(rows(&qv).await.iter().all(|r| r.state != ItemState::Queued && r.state != ItemState::Preparing));
    drop(client);
    let _ = task.await;
}
