//! The catalog against a real SQLite file in a temporary directory.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pe_core::catalog::{
    AttemptOutcome, AttemptOutcomeKind, AttemptUsage, Catalog, CatalogError, NewAttempt, NewPhoto, PhotoId,
    SaveProduct, SCHEMA_VERSION,
};
use pe_core::product::{Price, Product};
use pe_core::{Coded, ErrorCode};
use tempfile::TempDir;

const T0: i64 = 1_760_000_000_000;

fn open() -> (TempDir, Catalog) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(&Catalog::path_in(&dir.path().join("data/nested"))).unwrap();
    (dir, catalog)
}

fn photo(n: u32) -> NewPhoto {
    NewPhoto {
        sha256: format!("{n:064x}"),
        original_path: format!("/photos/IMG_{n:04}.jpg"),
        original_path_bytes: None,
        file_bytes: 1_234_567,
        width: 4032,
        height: 3024,
        format: "jpeg".into(),
        thumbnail_jpeg: vec![0xFF, 0xD8, 0xFF, n as u8],
        seen_at: T0,
    }
}

fn product(name: &str) -> Product {
    Product {
        name: name.into(),
        brand: Some("Oatly".into()),
        category: Some("Plant drink".into()),
        price: Some(Price { amount: 2.49, currency: "EUR".into() }),
        gtin: Some("4006381333931".into()),
        ..Default::default()
    }
}

fn proposed(photo_id: PhotoId, name: &str) -> NewAttempt {
    NewAttempt {
        photo_id,
        model: "gemini-flash-latest".into(),
        started_at: T0 + 10,
        latency_ms: 2_345,
        usage: Some(AttemptUsage {
            prompt_tokens: 1_290,
            output_tokens: 85,
            thoughts_tokens: 310,
            total_tokens: 1_685,
            cached_tokens: 0,
        }),
        raw_response: Some(format!(
            r#"{{"candidates":[{{"content":{{"parts":[{{"text":"{{\"name\":\"{name}\"}}"}}]}}}}]}}"#
        )),
        outcome: AttemptOutcome::Proposed { product: product(name) },
        model_version: None,
        cost: None,
        batch: false,
        barcodes: None,
        more_photos: Vec::new(),
        sources: Vec::new(),
    }
}

fn save(photo_id: PhotoId, attempt_id: Option<i64>, name: &str, saved_at: i64) -> SaveProduct {
    SaveProduct { photo_id, attempt_id, saved: product(name), saved_by: "tester".into(), saved_at }
}

async fn pragma<T: rusqlite::types::FromSql + Send + 'static>(catalog: &Catalog, name: &'static str) -> T {
    catalog.with_connection(move |conn| Ok(conn.pragma_query_value(None, name, |r| r.get(0))?)).await.unwrap()
}

#[tokio::test]
async fn migrates_an_empty_file_with_wal_and_foreign_keys() {
    let (dir, catalog) = open();
    assert!(dir.path().join("data/nested/catalog.sqlite3").is_file());
    assert_eq!(catalog.schema_version().await.unwrap(), SCHEMA_VERSION);
    assert_eq!(pragma::<u32>(&catalog, "user_version").await, SCHEMA_VERSION);
    assert_eq!(pragma::<String>(&catalog, "journal_mode").await, "wal");
    assert_eq!(pragma::<i64>(&catalog, "foreign_keys").await, 1);
    assert_eq!(pragma::<i64>(&catalog, "synchronous").await, 1, "NORMAL");
    assert!(pragma::<i64>(&catalog, "busy_timeout").await >= 1000);
    let tables: Vec<String> = catalog
        .with_connection(|conn| {
            let mut stmt = conn.prepare(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
            )?;
            let names = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
            Ok(names)
        })
        .await
        .unwrap();
    assert_eq!(
        tables,
        [
            "attempt_photos",
            "attempts",
            "batches",
            "breaker_state",
            "import_item_gtins",
            "import_item_photos",
            "import_item_unreadable",
            "import_items",
            "photos",
            "product_photos",
            "product_revisions",
            "products",
            "products_fts",
            "products_fts_config",
            "products_fts_content",
            "products_fts_data",
            "products_fts_docsize",
            "products_fts_idx"
        ]
    );
    assert_eq!(pragma::<String>(&catalog, "integrity_check").await, "ok");
    assert_eq!(catalog.count_products().await.unwrap(), 0);
}

#[tokio::test]
async fn reopening_keeps_data_and_does_not_migrate_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.sqlite3");
    let catalog = Catalog::open(&path).unwrap();
    let photo_id = catalog.record_photo(photo(1)).await.unwrap();
    let attempt = catalog.record_attempt(proposed(photo_id, "Oat Drink")).await.unwrap();
    let saved = catalog.save_product(save(photo_id, Some(attempt), "Oat Drink", T0)).await.unwrap();
    // A marker only this first session writes: a second run of 0001 would fail (CREATE TABLE
    // without IF NOT EXISTS), and a rebuilt schema would lose it.
    catalog.with_connection(|conn| Ok(conn.execute_batch("CREATE TABLE marker (x INTEGER)")?)).await.unwrap();
    drop(catalog);

    let catalog = Catalog::open(&path).unwrap();
    assert_eq!(catalog.schema_version().await.unwrap(), SCHEMA_VERSION);
    assert_eq!(catalog.get_product(saved.id).await.unwrap(), saved);
    assert_eq!(catalog.attempts(photo_id).await.unwrap().len(), 1);
    assert_eq!(catalog.count_products().await.unwrap(), 1);
    let marker: i64 = catalog
        .with_connection(|conn| {
            Ok(conn.query_row("SELECT count(*) FROM sqlite_schema WHERE name = 'marker'", [], |r| r.get(0))?)
        })
        .await
        .unwrap();
    assert_eq!(marker, 1);
}

#[test]
fn a_file_from_a_newer_app_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.sqlite3");
    rusqlite::Connection::open(&path).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
    let err = Catalog::open(&path).unwrap_err();
    assert!(matches!(err, CatalogError::SchemaTooNew { .. }), "{err}");
    assert_eq!(err.code(), ErrorCode::Catalog);
}

#[tokio::test]
async fn the_audit_trail_keeps_failures_and_proposals() {
    let (_dir, catalog) = open();
    let photo_id = catalog.record_photo(photo(1)).await.unwrap();
    let failed = catalog
        .record_attempt(NewAttempt {
            photo_id,
            model: "gemini-flash-latest".into(),
            started_at: T0,
            latency_ms: 812,
            usage: None,
            raw_response: Some(r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}"#.into()),
            outcome: AttemptOutcome::Failed { code: ErrorCode::GeminiQuota, message: "quota exceeded".into() },
            model_version: None,
            cost: None,
            batch: false,
            barcodes: None,
            more_photos: Vec::new(),
            sources: Vec::new(),
        })
        .await
        .unwrap();
    let ok = catalog.record_attempt(proposed(photo_id, "Oat Drnk")).await.unwrap();
    assert!(ok > failed);

    let attempts = catalog.attempts(photo_id).await.unwrap();
    assert_eq!(attempts.len(), 2);
    let (a, b) = (&attempts[0], &attempts[1]);
    assert_eq!((a.id, a.photo_id, a.started_at, a.latency_ms), (failed, photo_id, T0, 812));
    assert_eq!(a.outcome, AttemptOutcomeKind::Failed);
    assert_eq!(a.error_code, Some(ErrorCode::GeminiQuota));
    assert_eq!(a.error_message.as_deref(), Some("quota exceeded"));
    assert_eq!(a.raw_response.as_deref(), Some(r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}"#));
    assert_eq!((a.prompt_tokens, a.total_tokens), (None, None));
    assert_eq!(a.proposal, None);

    assert_eq!((b.id, b.model.as_str(), b.started_at, b.latency_ms), (ok, "gemini-flash-latest", T0 + 10, 2_345));
    assert_eq!(b.outcome, AttemptOutcomeKind::Proposed);
    assert_eq!(
        (b.prompt_tokens, b.output_tokens, b.thoughts_tokens, b.total_tokens),
        (Some(1_290), Some(85), Some(310), Some(1_685))
    );
    assert_eq!(b.proposal, Some(product("Oat Drnk")));
    assert!(b.raw_response.as_deref().unwrap().contains("candidates"));
    assert_eq!((b.error_code, b.error_message.as_deref()), (None, None));

    // What the UI receives.
    let json = serde_json::to_value(&attempts).unwrap();
    assert_eq!(json[0]["outcome"], "failed");
    assert_eq!(json[0]["error_code"], "gemini_quota");
    assert_eq!(json[1]["outcome"], "proposed");
    assert_eq!(json[1]["proposal"]["name"], "Oat Drnk");
    assert!(catalog.attempts(photo_id + 1).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_proposal_and_the_saved_product_are_stored_separately() {
    let (_dir, catalog) = open();
    let photo_id = catalog.record_photo(photo(1)).await.unwrap();
    let attempt = catalog.record_attempt(proposed(photo_id, "Oat Drnk")).await.unwrap();
    let record = catalog.save_product(save(photo_id, Some(attempt), "Oat Drink", T0 + 50)).await.unwrap();
    assert_eq!(record.revision, 1);
    assert_eq!((record.created_at, record.updated_at), (T0 + 50, T0 + 50));

    let read = catalog.get_product(record.id).await.unwrap();
    assert_eq!(read, record);
    assert_eq!(read.proposed.as_ref().unwrap().name, "Oat Drnk");
    assert_eq!(read.saved.name, "Oat Drink");
    assert_eq!(read.attempt_id, Some(attempt));
    assert_eq!(read.photo_id, photo_id);
    assert_eq!(read.sha256, photo(1).sha256);
    assert_eq!(read.original_path, "/photos/IMG_0001.jpg");
    assert_eq!(catalog.thumbnail_jpeg(&read.sha256).await.unwrap(), Some(vec![0xFF, 0xD8, 0xFF, 1]));
    assert_eq!(catalog.product_for_photo(photo_id).await.unwrap(), Some(record.id));

    // Typed by hand: no attempt, no proposal.
    let other = catalog.record_photo(photo(2)).await.unwrap();
    let manual = catalog.save_product(save(other, None, "Rye Bread", T0 + 60)).await.unwrap();
    assert_eq!((manual.attempt_id, manual.proposed), (None, None));

    let json = serde_json::to_value(&read).unwrap();
    assert_eq!(json["saved"]["name"], "Oat Drink");
    assert_eq!(json["proposed"]["name"], "Oat Drnk");
    assert_eq!(json["photo_id"], photo_id);
}

#[tokio::test]
async fn saving_a_photo_twice_updates_its_one_product() {
    let (_dir, catalog) = open();
    let photo_id = catalog.record_photo(photo(1)).await.unwrap();
    let attempt = catalog.record_attempt(proposed(photo_id, "Oat Drnk")).await.unwrap();
    let first = catalog.save_product(save(photo_id, Some(attempt), "Oat Drink", T0 + 100)).await.unwrap();
    let second = catalog.save_product(save(photo_id, None, "Oat Drink Barista", T0 + 200)).await.unwrap();
    assert_eq!(second.id, first.id);
    assert_eq!(second.revision, 2);
    assert_eq!((second.created_at, second.updated_at), (T0 + 100, T0 + 200));
    assert_eq!(second.saved.name, "Oat Drink Barista");
    // Saved without an attempt: the proposal stays.
    assert_eq!(second.attempt_id, Some(attempt));
    assert_eq!(second.proposed.as_ref().unwrap().name, "Oat Drnk");
    assert_eq!(catalog.count_products().await.unwrap(), 1);

    // A new extraction replaces the proposal.
    let again = catalog.record_attempt(proposed(photo_id, "Oat Drink 1 l")).await.unwrap();
    let third = catalog.save_product(save(photo_id, Some(again), "Oat Drink 1 l", T0 + 300)).await.unwrap();
    assert_eq!((third.id, third.revision, third.attempt_id), (first.id, 3, Some(again)));
    assert_eq!(third.proposed.unwrap().name, "Oat Drink 1 l");
    let list = catalog.list_products(0, 10).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].name.as_str(), list[0].revision), ("Oat Drink 1 l", 3));
}

#[tokio::test]
async fn an_attempt_of_another_photo_is_refused() {
    let (_dir, catalog) = open();
    let mine = catalog.record_photo(photo(1)).await.unwrap();
    let theirs = catalog.record_photo(photo(2)).await.unwrap();
    let their_attempt = catalog.record_attempt(proposed(theirs, "Rye Bread")).await.unwrap();
    let err = catalog.save_product(save(mine, Some(their_attempt), "Oat Drink", T0)).await.unwrap_err();
    match &err {
        CatalogError::Invalid { fields, message, .. } => {
            assert_eq!(fields, &["attempt_id"]);
            assert!(message.contains(&format!("photo {theirs}")), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.code(), ErrorCode::Validation);
    assert_eq!(catalog.count_products().await.unwrap(), 0);
    assert_eq!(catalog.product_for_photo(mine).await.unwrap(), None);
}

#[tokio::test]
async fn references_are_checked_by_the_api_and_by_sqlite() {
    let (_dir, catalog) = open();
    let err = catalog.record_attempt(proposed(999, "X")).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { what: "photo", id: 999 }), "{err:?}");
    let err = catalog.save_product(save(999, None, "X", T0)).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { what: "photo", id: 999 }), "{err:?}");
    let photo_id = catalog.record_photo(photo(1)).await.unwrap();
    let err = catalog.save_product(save(photo_id, Some(999), "X", T0)).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { what: "attempt", id: 999 }), "{err:?}");
    assert_eq!(err.code(), ErrorCode::NotFound);

    // Behind the API, SQLite enforces the same: foreign keys are on for the catalog's connection.
    let raw = catalog
        .with_connection(|conn| {
            Ok(conn.execute(
                "INSERT INTO attempts (photo_id, model, started_at, latency_ms, outcome, error_code)
                 VALUES (999, 'm', 0, 0, 'failed', 'timeout')",
                [],
            )?)
        })
        .await
        .unwrap_err();
    assert!(raw.to_string().contains("FOREIGN KEY"), "{raw}");
    // An attempt cannot back a product of another photo, even written by hand.
    let other = catalog.record_photo(photo(2)).await.unwrap();
    let other_attempt = catalog.record_attempt(proposed(other, "Y")).await.unwrap();
    let product = catalog.save_product(save(photo_id, None, "X", T0)).await.unwrap();
    let raw = catalog
        .with_connection(move |conn| {
            Ok(conn.execute("UPDATE products SET attempt_id = ?1 WHERE id = ?2", [other_attempt, product.id])?)
        })
        .await
        .unwrap_err();
    assert!(raw.to_string().contains("FOREIGN KEY"), "{raw}");
    // And the CHECK constraints hold.
    let raw = catalog
        .with_connection(move |conn| Ok(conn.execute("UPDATE products SET name = ' ' WHERE id = ?1", [product.id])?))
        .await
        .unwrap_err();
    assert!(raw.to_string().contains("CHECK"), "{raw}");
    assert_eq!(pragma::<String>(&catalog, "integrity_check").await, "ok");
}

#[tokio::test]
async fn the_same_bytes_are_the_same_photo() {
    let (_dir, catalog) = open();
    let first = catalog.record_photo(photo(7)).await.unwrap();
    let moved = NewPhoto {
        sha256: photo(7).sha256.to_uppercase(),
        original_path: "/elsewhere/copy.jpg".into(),
        original_path_bytes: None,
        seen_at: T0 + 5_000,
        ..photo(7)
    };
    assert_eq!(catalog.record_photo(moved).await.unwrap(), first);
    assert_ne!(catalog.record_photo(photo(8)).await.unwrap(), first);
    let (path, first_seen, last_seen): (String, i64, i64) = catalog
        .with_connection(move |conn| {
            Ok(conn.query_row(
                "SELECT original_path, first_seen_at, last_seen_at FROM photos WHERE id = ?1",
                [first],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?)
        })
        .await
        .unwrap();
    assert_eq!((path.as_str(), first_seen, last_seen), ("/elsewhere/copy.jpg", T0, T0 + 5_000));
    let photos: i64 = catalog
        .with_connection(|conn| Ok(conn.query_row("SELECT count(*) FROM photos", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(photos, 2);

    let err = catalog.record_photo(NewPhoto { sha256: "abc".into(), ..photo(9) }).await.unwrap_err();
    assert!(matches!(&err, CatalogError::Invalid { fields, .. } if fields == &["sha256"]), "{err:?}");
}

#[tokio::test]
async fn the_list_is_newest_first_and_paginated() {
    let (_dir, catalog) = open();
    let mut ids = Vec::new();
    for n in 1..=5u32 {
        let photo_id = catalog.record_photo(photo(n)).await.unwrap();
        let record =
            catalog.save_product(save(photo_id, None, &format!("Product {n}"), T0 + i64::from(n))).await.unwrap();
        ids.push(record.id);
    }
    // Product 2 is edited last, so it moves to the top.
    let photo_2 = catalog.get_product(ids[1]).await.unwrap().photo_id;
    catalog.save_product(save(photo_2, None, "Product 2 edited", T0 + 100)).await.unwrap();

    let names = |list: Vec<pe_core::catalog::ProductSummary>| list.into_iter().map(|p| p.name).collect::<Vec<_>>();
    assert_eq!(names(catalog.list_products(0, 2).await.unwrap()), ["Product 2 edited", "Product 5"]);
    assert_eq!(names(catalog.list_products(2, 2).await.unwrap()), ["Product 4", "Product 3"]);
    assert_eq!(names(catalog.list_products(4, 2).await.unwrap()), ["Product 1"]);
    assert!(catalog.list_products(5, 2).await.unwrap().is_empty());
    assert!(catalog.list_products(0, 0).await.unwrap().is_empty());
    assert_eq!(catalog.count_products().await.unwrap(), 5);

    let top = &catalog.list_products(0, 1).await.unwrap()[0];
    assert_eq!((top.id, top.updated_at, top.revision), (ids[1], T0 + 100, 2));
    assert_eq!(top.brand.as_deref(), Some("Oatly"));
    assert_eq!(top.category.as_deref(), Some("Plant drink"));
    assert_eq!(top.price, Some(Price { amount: 2.49, currency: "EUR".into() }));
    assert_eq!(top.gtin.as_deref(), Some("4006381333931"));
    assert_eq!(top.photo_sha256, format!("{:064x}", 2));
    assert_eq!(catalog.thumbnail_jpeg(&top.photo_sha256).await.unwrap(), Some(vec![0xFF, 0xD8, 0xFF, 2]));
}

#[tokio::test]
async fn a_missing_product_is_not_found() {
    let (_dir, catalog) = open();
    let err = catalog.get_product(42).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { what: "product", id: 42 }), "{err:?}");
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert_eq!(catalog.product_for_photo(42).await.unwrap(), None);
}

#[tokio::test]
async fn an_invalid_product_is_refused() {
    let (_dir, catalog) = open();
    let photo_id = catalog.record_photo(photo(1)).await.unwrap();
    let bad = Product { name: " ".into(), gtin: Some("4006381333932".into()), ..product("x") };
    let err = catalog
        .save_product(SaveProduct { photo_id, attempt_id: None, saved: bad, saved_by: "tester".into(), saved_at: T0 })
        .await
        .unwrap_err();
    match &err {
        CatalogError::Invalid { fields, message, .. } => {
            assert_eq!(fields, &["name", "gtin"]);
            assert!(message.contains("check digit"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.code(), ErrorCode::Validation);
    assert_eq!(catalog.count_products().await.unwrap(), 0);

    // Uncertain fields are not invalid.
    let unsure = Product { uncertain_fields: vec!["price".into()], ..product("Oat Drink") };
    catalog
        .save_product(SaveProduct {
            photo_id,
            attempt_id: None,
            saved: unsure,
            saved_by: "tester".into(),
            saved_at: T0,
        })
        .await
        .unwrap();
    assert_eq!(catalog.count_products().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_attempts_all_land() {
    let (_dir, catalog) = open();
    let photo_id = catalog.record_photo(photo(1)).await.unwrap();
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let catalog = catalog.clone();
            tokio::spawn(async move {
                let mut attempt = proposed(photo_id, &format!("Product {i}"));
                attempt.latency_ms = i;
                catalog.record_attempt(attempt).await.unwrap()
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap());
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 50);
    let attempts = catalog.attempts(photo_id).await.unwrap();
    assert_eq!(attempts.len(), 50);
    let mut latencies: Vec<u64> = attempts.iter().map(|a| a.latency_ms).collect();
    latencies.sort_unstable();
    assert_eq!(latencies, (0..50).collect::<Vec<u64>>());
    assert_eq!(pragma::<String>(&catalog, "integrity_check").await, "ok");
}

/// On a single-threaded runtime, a slow job on the catalog thread must not stop other tasks:
/// waiting for the catalog is an `.await`, not a blocking call.
#[tokio::test(flavor = "current_thread")]
async fn waiting_for_the_catalog_does_not_block_the_runtime() {
    let (_dir, catalog) = open();
    let ticks = Arc::new(AtomicU32::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                ticks.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let slow = catalog.with_connection(|_conn| {
        std::thread::sleep(Duration::from_millis(400));
        Ok(())
    });
    // Queued behind the slow job; also awaited without blocking.
    let (slow, count) = tokio::join!(slow, catalog.count_products());
    slow.unwrap();
    assert_eq!(count.unwrap(), 0);
    let seen = ticks.load(Ordering::SeqCst);
    ticker.abort();
    assert!(seen >= 10, "the runtime made only {seen} ticks while the catalog was busy");
}

#[tokio::test]
async fn a_panicking_job_does_not_kill_the_catalog() {
    let (_dir, catalog) = open();
    let err = catalog
        .with_connection(|conn| -> Result<(), CatalogError> {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            conn.execute(
                "INSERT INTO photos (sha256, original_path, file_bytes, width, height, format, thumbnail_jpeg,
                                     first_seen_at, last_seen_at)
                 VALUES (?1, 'p', 0, 0, 0, 'jpeg', x'', 0, 0)",
                [format!("{:064x}", 1)],
            )?;
            panic!("boom");
        })
        .await
        .unwrap_err();
    assert!(matches!(&err, CatalogError::Panicked { message } if message == "boom"), "{err:?}");
    assert_eq!(err.code(), ErrorCode::Catalog);

    let kept = catalog.record_photo(photo(2)).await.unwrap();
    // A job that forgets to commit is rolled back too.
    catalog.with_connection(|conn| Ok(conn.execute_batch("BEGIN; DELETE FROM photos;")?)).await.unwrap();

    // Still serving, with both transactions rolled back.
    let autocommit = catalog.with_connection(|conn| Ok(conn.is_autocommit())).await.unwrap();
    assert!(autocommit);
    let photos: i64 = catalog
        .with_connection(|conn| Ok(conn.query_row("SELECT count(*) FROM photos", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(photos, 1);
    assert_eq!(catalog.record_photo(photo(2)).await.unwrap(), kept);
    let id = catalog.record_photo(photo(1)).await.unwrap();
    assert_ne!(id, kept);
    assert!(catalog.attempts(id).await.unwrap().is_empty());
}

#[test]
fn the_handle_can_be_shared_across_threads_and_lives_in_the_data_dir() {
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<Catalog>();
    let dir = std::path::Path::new("/data/product-extractor");
    assert_eq!(Catalog::path_in(dir), dir.join("catalog.sqlite3"));
}
