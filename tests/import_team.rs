//! Two desktops, one shared queue (issue 13): the real binary twice, each with its own data dir
//! (its own config, breaker and bulkhead) and its own fake Gemini on 127.0.0.1, both on one
//! database of the throwaway PostgreSQL of `scripts/with-postgres`, importing the same folder.
//!
//! - Both run to the end: every photo is extracted exactly once (whichever desktop sent it), both
//!   share the work, and both exit 0 with every product saved once.
//! - One is killed with SIGKILL mid-import: the other finishes the dead desktop's photos (those it
//!   held go back to the queue: at once, as the dead process was on this computer, else after its
//!   lease), nothing is lost, and only the calls the dead one had not finished are sent again.

#![cfg(unix)]

use std::collections::{HashMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::catalog::server::testing::fresh_database;
use pe_core::catalog::server::{ServerCatalog, ServerUrl};
use tokio::process::Command;

const K: u32 = 4;

fn no_env(_: &str) -> Option<String> {
    None
}

/// One desktop: a data dir whose config names the team catalog, and its own fake Gemini.
struct Desktop {
    data: PathBuf,
    fake: FakeGemini,
}

impl Desktop {
    async fn new(dir: &Path, name: &str, url: &str, latency: Duration) -> Desktop {
        let data = dir.join(name);
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("config.toml"), format!("[catalog]\nurl = \"{url}\"\nlease = \"3s\"\n")).unwrap();
        let product = serde_json::json!({
            "name": "Team Granola", "brand": "Two Desks", "category": "Breakfast cereal", "description": null,
            "price": null, "gtin": null, "color": null, "size": null, "material": null, "net_content": null,
            "attributes": [], "uncertain_fields": [],
        });
        let fake = FakeGemini::start(FakeOptions {
            latency,
            default_behavior: Behavior::Fixed(product),
            ..FakeOptions::default()
        })
        .await
        .unwrap();
        Desktop { data, fake }
    }

    fn import(&self, photos: &Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_product-extractor"));
        cmd.args(["--data-dir", self.data.to_str().unwrap(), "import", "--save", "--json", "--concurrency"])
            .arg(K.to_string())
            .arg(photos)
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("PRODUCT_EXTRACTOR_DATA_DIR")
            .env_remove("PRODUCT_EXTRACTOR_CATALOG_URL")
            .env("GEMINI_API_KEY", "test-key")
            .env("GEMINI_BASE_URL", self.fake.base_url())
            .stdin(Stdio::null());
        cmd
    }
}

fn photos(dir: &Path, folder: &str, n: u64, seed: u64) -> PathBuf {
    let folder = dir.join(folder);
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..n {
        std::fs::write(folder.join(format!("p{i:03}.jpg")), sample_jpeg(seed + i, 160, 120, 80)).unwrap();
    }
    folder
}

/// How many times each photo (request body) was sent, over both fakes.
fn sends(desktops: &[&Desktop]) -> HashMap<u64, usize> {
    let mut all = HashMap::new();
    for desktop in desktops {
        for (body, n) in desktop.fake.generate_counts_per_body() {
            *all.entry(body).or_default() += n;
        }
    }
    all
}

/// The queue's items by state, and the live products, as the server has them.
async fn server_counts(url: &str) -> (HashMap<String, i64>, i64, i64) {
    let server = ServerCatalog::connect_with(&ServerUrl::parse(url).unwrap(), &no_env, None).await.unwrap();
    let client = server.client().await.unwrap();
    let states = client
        .query("SELECT state, count(*) FROM import_items GROUP BY state", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
        .collect();
    let products: i64 =
        client.query_one("SELECT count(*) FROM products WHERE deleted_at IS NULL", &[]).await.unwrap().get(0);
    let leased: i64 =
        client.query_one("SELECT count(*) FROM import_items WHERE lease_owner IS NOT NULL", &[]).await.unwrap().get(0);
    (states, products, leased)
}

fn summary(stdout: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout);
    let last = text.lines().last().unwrap_or_else(|| panic!("no output: {text}"));
    serde_json::from_str::<serde_json::Value>(last).unwrap()["summary"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_desktops_import_one_folder_each_photo_once_and_one_killed_is_finished_by_the_other() {
    let started = Instant::now();
    let url = fresh_database("team_import").await;
    let dir = tempfile::tempdir().unwrap();
    let alice = Desktop::new(dir.path(), "alice", &url, Duration::from_millis(150)).await;
    let bob = Desktop::new(dir.path(), "bob", &url, Duration::from_millis(150)).await;

    // Both desktops import one folder at once, to the end.
    const N: u64 = 40;
    let shoot = photos(dir.path(), "shoot", N, 30_000);
    let (a, b) = tokio::join!(alice.import(&shoot).output(), bob.import(&shoot).output());
    let (a, b) = (a.unwrap(), b.unwrap());
    for (who, out) in [("alice", &a), ("bob", &b)] {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{who}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let sent = sends(&[&alice, &bob]);
    assert_eq!(sent.len(), N as usize, "every photo was sent");
    assert!(sent.values().all(|n| *n == 1), "each photo exactly once: {sent:?}");
    let (by_alice, by_bob) = (alice.fake.generate_count(), bob.fake.generate_count());
    assert!(by_alice > 0 && by_bob > 0, "both desktops worked: alice {by_alice}, bob {by_bob}");
    let (states, products, leased) = server_counts(&url).await;
    assert_eq!(states.get("saved"), Some(&(N as i64)), "{states:?}");
    assert_eq!((products, leased), (N as i64, 0));
    eprintln!("two desktops: alice sent {by_alice}, bob {by_bob} of {N}");
    let summary_a = summary(&a.stdout);
    assert_eq!(summary_a["failed"], 0, "{summary_a}");

    // Again with another folder, and Alice is killed (SIGKILL) while her calls are in flight.
    const M: u64 = 60;
    let second = photos(dir.path(), "second", M, 40_000);
    alice.fake.set_latency(Duration::from_millis(600));
    bob.fake.set_latency(Duration::from_millis(200));
    let (alice_before, bob_before) = (alice.fake.generate_count(), bob.fake.generate_count());
    let mut killed = alice.import(&second).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let survivor = bob.import(&second).output();
    let kill = async {
        let deadline = Instant::now() + Duration::from_secs(120);
        // Her first round of calls answered and the next one in flight.
        while alice.fake.generate_count() < alice_before + 2 * K as usize || alice.fake.in_flight() == 0 {
            assert!(Instant::now() < deadline, "alice sent nothing in 120 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        killed.kill().await.unwrap();
        let status = killed.wait().await.unwrap();
        assert_eq!(status.signal(), Some(9), "alice was killed, not finished: {status:?}");
    };
    let ((), out) = tokio::join!(kill, survivor);
    let out = out.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "bob: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (states, products, leased) = server_counts(&url).await;
    assert_eq!(states.get("saved"), Some(&((N + M) as i64)), "nothing lost: {states:?}");
    assert_eq!((products, leased), ((N + M) as i64, 0), "every product once, no lease left");
    let (by_alice, by_bob) = (alice.fake.generate_count() - alice_before, bob.fake.generate_count() - bob_before);
    let second_sent: HashMap<u64, usize> = {
        let first: HashSet<u64> = sent.keys().copied().collect();
        sends(&[&alice, &bob]).into_iter().filter(|(body, _)| !first.contains(body)).collect()
    };
    assert_eq!(second_sent.len(), M as usize, "every photo of the second folder was sent");
    let again = second_sent.values().filter(|n| **n > 1).count();
    assert!(second_sent.values().all(|n| *n <= 2), "a photo at most twice: {second_sent:?}");
    // Sent again: only photos Alice had sent (her K calls in flight, and at most K more whose
    // answers she had but had not written yet: a send slot is given back before the write).
    let alice_sent = alice.fake.generate_counts_per_body();
    for (body, n) in &second_sent {
        if *n > 1 {
            assert!(alice_sent.contains_key(body), "a photo sent twice was one of alice's");
        }
    }
    assert!(again <= 2 * K as usize, "only alice's unfinished calls were sent again: {again}");
    eprintln!(
        "kill -9 of one desktop: alice sent {by_alice} before she died, bob {by_bob}, {again} sent again; {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
