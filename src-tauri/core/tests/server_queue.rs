//! The shared queue's leases on the real PostgreSQL of `scripts/with-postgres` (issue 13): two
//! desktops claiming from one queue at once never take the same item, a desktop's lease holds
//! while it renews it, an item whose desktop died goes back to the queue when its lease runs out
//! and another desktop finishes it, and a desktop whose lease was taken over changes nothing.
//! Time (unix ms) is passed in; each test has a database of its own.

use std::collections::HashSet;
use std::time::Duration;

use pe_core::catalog::leases::{Finished, ServerQueue};
use pe_core::catalog::server::testing::fresh_database;
use pe_core::catalog::server::{ServerCatalog, ServerUrl};

const T0: i64 = 1_700_000_000_000;
const LEASE: Duration = Duration::from_secs(30);

fn no_env(_: &str) -> Option<String> {
    None
}

async fn server(label: &str) -> ServerCatalog {
    let url = fresh_database(label).await;
    let catalog = ServerCatalog::connect_with(&ServerUrl::parse(&url).unwrap(), &no_env, None).await.unwrap();
    catalog.migrate().await.unwrap();
    catalog
}

/// `n` queued bulk items, and `interactive` interactive ones after them.
async fn queue(catalog: &ServerCatalog, n: i64, interactive: i64) {
    let client = catalog.client().await.unwrap();
    for i in 0..n + interactive {
        let origin = if i < n { "import" } else { "interactive" };
        client
            .execute(
                "INSERT INTO import_items (path, state, origin, queued_at, updated_at) VALUES ($1, 'queued', $2, $3, $3)",
                &[&format!("/shoot/p{i:04}.jpg"), &origin, &T0],
            )
            .await
            .unwrap();
    }
}

async fn states(catalog: &ServerCatalog) -> Vec<(i64, String, Option<String>, i64)> {
    let client = catalog.client().await.unwrap();
    let rows =
        client.query("SELECT id, state, lease_owner, attempts FROM import_items ORDER BY id", &[]).await.unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_desktops_claiming_at_once_never_take_the_same_item() {
    let catalog = server("leases_race").await;
    queue(&catalog, 200, 0).await;
    // Two desktops, each with four workers claiming as fast as they can.
    let claimed = std::sync::Mutex::new(Vec::new());
    let work = |desktop: &'static str| {
        let (catalog, claimed) = (&catalog, &claimed);
        async move {
            let queue = ServerQueue::new(catalog, desktop, LEASE);
            let workers = (0..4).map(|_| async {
                while let Some(item) = queue.claim(T0).await.unwrap() {
                    claimed.lock().unwrap().push((item.id, desktop));
                }
            });
            futures_util::future::join_all(workers).await;
        }
    };
    tokio::join!(work("alice@desk-1"), work("bob@desk-2"));
    let claimed = claimed.into_inner().unwrap();
    let ids: HashSet<i64> = claimed.iter().map(|(id, _)| *id).collect();
    assert_eq!((claimed.len(), ids.len()), (200, 200), "every item claimed exactly once");
    let by_alice = claimed.iter().filter(|(_, d)| *d == "alice@desk-1").count();
    assert!(by_alice > 0 && by_alice < 200, "both desktops worked: alice {by_alice} of 200");
    let leases = ServerQueue::new(&catalog, "carol@desk-3", LEASE).leases().await.unwrap();
    assert_eq!(leases.len(), 200);
    assert!(leases.iter().all(|l| l.state == "preparing" && l.until == T0 + 30_000), "{:?}", &leases[..2]);
    for (id, desktop) in &claimed {
        assert_eq!(&leases.iter().find(|l| l.id == *id).unwrap().owner, desktop, "the item's lease names who works it");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn interactive_items_are_claimed_first() {
    let catalog = server("leases_order").await;
    queue(&catalog, 3, 1).await;
    let queue = ServerQueue::new(&catalog, "alice@desk-1", LEASE);
    let mut got = Vec::new();
    while let Some(item) = queue.claim(T0).await.unwrap() {
        got.push((item.id, item.origin));
    }
    assert_eq!(got.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [4, 1, 2, 3]);
    assert_eq!(got[0].1, "interactive");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_desktops_items_go_back_after_their_lease_and_another_finishes_them() {
    let catalog = server("leases_expiry").await;
    queue(&catalog, 3, 0).await;
    let alice = ServerQueue::new(&catalog, "alice@desk-1", LEASE);
    let bob = ServerQueue::new(&catalog, "bob@desk-2", LEASE);
    let a1 = alice.claim(T0).await.unwrap().unwrap();
    let a2 = alice.claim(T0).await.unwrap().unwrap();
    // Alice renews the first item at +20 s, then dies (kill -9: no more renewals, no release).
    assert_eq!(alice.renew(&[a1.id, a2.id], T0 + 20_000).await.unwrap().len(), 2);
    assert_eq!(alice.renew(&[a1.id], T0 + 40_000).await.unwrap(), [a1.id]);
    // At +55 s the second item's lease (renewed to +50 s) ran out; the first's (to +70 s) did not.
    assert_eq!(bob.expire(T0 + 55_000).await.unwrap(), [a2.id]);
    assert_eq!(bob.expire(T0 + 70_000).await.unwrap(), Vec::<i64>::new(), "a lease holds up to its time");
    assert_eq!(bob.expire(T0 + 70_001).await.unwrap(), [a1.id]);
    // Bob takes them over (the queue order: fewest attempts, oldest) and finishes them.
    let mut taken = Vec::new();
    while let Some(item) = bob.claim(T0 + 71_000).await.unwrap() {
        taken.push(item.id);
    }
    assert_eq!(taken, [1, 2, 3]);
    // Alice comes back (a network that returned, not a crash): her lease was taken over, so she
    // changes nothing, and her renewal says so.
    assert!(!alice.finish(a1.id, &Finished::Requeued { counted: true }, T0 + 72_000).await.unwrap());
    assert_eq!(alice.renew(&[a1.id], T0 + 72_000).await.unwrap(), Vec::<i64>::new());
    // Bob's outcomes end his leases.
    assert!(bob.finish(1, &Finished::Requeued { counted: true }, T0 + 73_000).await.unwrap());
    let failed = Finished::Failed { code: "invalid_image".into(), message: "This file is not an image.".into() };
    assert!(bob.finish(2, &failed, T0 + 73_000).await.unwrap());
    let rows = states(&catalog).await;
    assert_eq!(
        rows,
        [
            (1, "queued".to_string(), None, 1),
            (2, "failed".to_string(), None, 1),
            (3, "preparing".to_string(), Some("bob@desk-2".to_string()), 0)
        ]
    );
    // A finished item is not leased, so it never expires back into the queue.
    assert_eq!(bob.expire(T0 + 10_000_000).await.unwrap(), [3]);
    assert_eq!(states(&catalog).await[1].1, "failed");
}
