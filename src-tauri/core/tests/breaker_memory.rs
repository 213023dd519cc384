//! The breaker across restarts (issue 26), through the catalog on both backends: what a run saves
//! (`breaker_memory::keep_saving`) is what the next run starts from (`breaker_memory::restore`),
//! one row per desktop on a team catalog; a breaker told not to remember starts CLOSED and empty.

use std::time::Duration;

use pe_core::breaker_memory;
use pe_core::catalog::server::testing::fresh_database;
use pe_core::catalog::Catalog;
use pe_core::resilience::{BreakerEventKind, BreakerState, ResilienceConfig, ResilienceStack};

fn stack(remember: bool) -> ResilienceStack {
    let mut config = ResilienceConfig::default();
    config.circuit_breaker.wait_duration_in_open_state = Duration::from_secs(600);
    config.circuit_breaker.remember_across_restarts = remember;
    ResilienceStack::new("gemini", config).unwrap()
}

/// Waits until the catalog holds a saved breaker in `state`.
async fn saved_as(catalog: &Catalog, state: BreakerState) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let saved = catalog.saved_breaker("gemini").await.unwrap();
        if saved.as_ref().is_some_and(|s| s.state == state) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "never saved as {state}: {saved:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One run opens its breaker (by hand: the transitions are what is saved), the next one starts
/// OPEN with the timeline from before.
async fn a_run_and_the_next(first: &Catalog, next: &Catalog) {
    let run = stack(true);
    assert!(!breaker_memory::restore(first, &run).await, "nothing saved yet");
    let saving = tokio::spawn(breaker_memory::keep_saving(first.clone(), run.clone()));
    run.breaker().transition_to_open().unwrap();
    saved_as(first, BreakerState::Open).await;
    saving.abort();

    let again = stack(true);
    assert!(breaker_memory::restore(next, &again).await);
    let snapshot = again.breaker().snapshot();
    assert_eq!(snapshot.state, BreakerState::Open, "still OPEN: its wait is not over");
    assert!(snapshot.restored_from_ms.is_some());
    let events = again.breaker().recent_events();
    assert!(
        events.iter().any(|e| e.kind == BreakerEventKind::StateTransition { from: BreakerState::Closed, to: BreakerState::Open }),
        "{events:?}"
    );
    assert!(matches!(events.last().map(|e| &e.kind), Some(BreakerEventKind::Restored { .. })), "{events:?}");
    assert!(again.breaker().try_acquire().is_err(), "a call is refused until the wait is over");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_breaker_open_before_a_restart_is_open_after_it_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = Catalog::path_in(dir.path());
    let catalog = Catalog::open(&path).unwrap();
    a_run_and_the_next(&catalog, &Catalog::open(&path).unwrap()).await;

    // Told not to remember: CLOSED and empty, as Resilience4j starts, and nothing saved.
    let forgetful = stack(false);
    assert!(!breaker_memory::restore(&catalog, &forgetful).await);
    assert_eq!(forgetful.breaker().state(), BreakerState::Closed);
    forgetful.breaker().transition_to_forced_open();
    tokio::time::timeout(Duration::from_secs(1), breaker_memory::keep_saving(catalog.clone(), forgetful))
        .await
        .expect("nothing to keep: it returns at once");
    assert_eq!(catalog.saved_breaker("gemini").await.unwrap().unwrap().state, BreakerState::Open, "untouched");
}

#[tokio::test(flavor = "multi_thread")]
async fn each_desktop_of_a_team_catalog_keeps_its_own_breaker() {
    use pe_core::catalog::server::{CatalogUrl, ServerCatalog, ServerUrl};
    let url = fresh_database("breakers").await;
    let no_env = |_: &str| None;
    let desktop = |name: &'static str| {
        let url = url.clone();
        async move {
            let server = ServerCatalog::connect_with(&ServerUrl::parse(&url).unwrap(), &no_env, None).await.unwrap();
            Catalog::on_server(server.with_desktop(name))
        }
    };
    // Alice's catalog, opened (and migrated) once, then her next run as another process.
    let _migrated = Catalog::open_url_with(&CatalogUrl::parse(&url).unwrap(), &no_env, None).await.unwrap();
    let alice = desktop("alice@desk-1 #11").await;
    let alice_again = desktop("alice@desk-1 #12").await;
    a_run_and_the_next(&alice, &alice_again).await;
    // Bob's desktop has saved nothing: his breaker starts afresh.
    let bob = desktop("bob@desk-2 #21").await;
    let bobs = stack(true);
    assert!(!breaker_memory::restore(&bob, &bobs).await);
    assert_eq!(bobs.breaker().state(), BreakerState::Closed);
}
