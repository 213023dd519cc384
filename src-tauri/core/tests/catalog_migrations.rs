//! Opening a catalog written by an earlier version of the app: build the file at that schema
//! version, write representative rows with that version's plain SQL, open it with
//! [`Catalog::open`] (which migrates it) and check the data, the revision backfill, search and
//! the constraints of the current schema.
//!
//! Data-driven: [`EARLIER`] has one row per earlier schema version, and a test fails until the
//! next migration adds its row.

use pe_core::catalog::migrations::{self, MIGRATIONS};
use pe_core::catalog::{Catalog, ProductQuery, RevisionSource, SaveProduct, SortDirection, SortKey, SCHEMA_VERSION};
use pe_core::product::{FlagKind, Product};
use rusqlite::Connection;

/// The fixtures' "now" (as in `common`), unix milliseconds; the seeds' times are T0-based.
const T0: i64 = 1_760_000_000_000;

/// A schema version and rows written with its SQL.
struct Earlier {
    version: u32,
    seed: &'static str,
}

/// Every schema version before [`SCHEMA_VERSION`].
const EARLIER: &[Earlier] = &[
    Earlier { version: 1, seed: SEED_V1 },
    // 0002 added only the search index: the rows are written the same way.
    Earlier { version: 2, seed: SEED_V1 },
    // 0003 added revisions and the listing's flag count, which its own writes keep.
    Earlier { version: 3, seed: SEED_V3 },
    // 0004 added the import queue: one item waiting, one ready for review.
    Earlier { version: 4, seed: SEED_V4 },
    // 0005 added the items' origin: an interactive item waiting for review.
    Earlier { version: 5, seed: SEED_V5 },
    // 0006 added the attempts' cost columns (NULL for old attempts): the same rows.
    Earlier { version: 6, seed: SEED_V5 },
    // 0007 added batch mode (the queue rebuilt with `submitted`): the same rows.
    Earlier { version: 7, seed: SEED_V5 },
    // 0008 made paths bytes (NULL for every UTF-8 path): the same rows.
    Earlier { version: 8, seed: SEED_V5 },
    // 0009 added the barcodes read (NULL for rows from before): the same rows.
    Earlier { version: 9, seed: SEED_V5 },
    // 0010 added only indexes: the same rows.
    Earlier { version: 10, seed: SEED_V5 },
    // 0011 added a product's other photos (empty for products from before): the same rows.
    Earlier { version: 11, seed: SEED_V5 },
    // 0012 added the photos' host (NULL for photos from before): the same rows.
    Earlier { version: 12, seed: SEED_V5 },
    // 0014 added only the breakers' saved state, which no catalog row needs.
    Earlier { version: 13, seed: SEED_V5 },
    // 0015 added the queue's path tags (NULL on SQLite): the same rows.
    Earlier { version: 14, seed: SEED_V5 },
];

/// Three photos; a proposed and a failed attempt; three products: one reviewed from a proposal
/// (revision 3, uncertain fields with a duplicate and an unknown name, an attribute), one typed
/// by hand (revision 1), one with diacritics and a GTIN (revision 2). Times are T0-based.
const SEED_V1: &str = include_str!("fixtures/seed_v1.sql");

/// [`SEED_V1`] as version 3 writes it: products carry their flag count and one revision each.
macro_rules! seed_v3 {
    () => {
        concat!(
            include_str!("fixtures/seed_v1.sql"),
            r#"
UPDATE products SET flagged = 2 WHERE id = 1;
INSERT INTO product_revisions (product_id, revision, saved_json, proposed_json, attempt_id, source, saved_by, saved_at)
SELECT id, revision, saved_json, proposed_json, attempt_id, 'review', '', updated_at FROM products;
"#
        )
    };
}
const SEED_V3: &str = seed_v3!();

/// [`SEED_V3`] with two import items, as version 4 writes them (no origin yet).
const SEED_V4: &str = concat!(
    seed_v3!(),
    r#"
INSERT INTO import_items (id, path, state, queued_at, updated_at) VALUES (1, '/shoot/waiting.jpg', 'queued', 1, 1);
INSERT INTO import_items (id, path, sha256, state, photo_id, attempt_id, proposal_json, flags_json, queued_at, updated_at)
SELECT 2, '/shoot/ready.jpg', sha256, 'ready', 1, 1, '{"name":"Oat Drnk"}', '[]', 2, 2 FROM photos WHERE id = 1;
"#
);

/// [`SEED_V4`] with an interactive item being extracted when the app stopped, as version 5
/// writes it.
const SEED_V5: &str = concat!(
    seed_v3!(),
    r#"
INSERT INTO import_items (id, path, state, queued_at, updated_at) VALUES (1, '/shoot/waiting.jpg', 'queued', 1, 1);
INSERT INTO import_items (id, path, sha256, state, photo_id, attempt_id, proposal_json, flags_json, queued_at, updated_at)
SELECT 2, '/shoot/ready.jpg', sha256, 'ready', 1, 1, '{"name":"Oat Drnk"}', '[]', 2, 2 FROM photos WHERE id = 1;
INSERT INTO import_items (id, path, state, photo_id, origin, queued_at, updated_at)
VALUES (3, '/drop/mug.jpg', 'extracting', 2, 'interactive', 3, 3);
"#
);

fn earlier_file(dir: &std::path::Path, earlier: &Earlier) -> std::path::PathBuf {
    let path = dir.join(format!("catalog-v{}.sqlite3", earlier.version));
    let mut conn = Connection::open(&path).unwrap();
    let upto: Vec<_> = MIGRATIONS.iter().copied().filter(|m| m.version <= earlier.version).collect();
    let versions: Vec<u32> = upto.iter().map(|m| m.version).collect();
    assert_eq!(migrations::apply(&mut conn, &upto).unwrap(), versions);
    conn.execute_batch(earlier.seed).unwrap();
    assert_eq!(migrations::schema_version(&conn).unwrap(), earlier.version);
    path
}

#[test]
fn every_earlier_version_has_a_fixture() {
    let versions: Vec<u32> = EARLIER.iter().map(|e| e.version).collect();
    let expected: Vec<u32> = MIGRATIONS.iter().map(|m| m.version).filter(|v| *v < SCHEMA_VERSION).collect();
    assert_eq!(versions, expected, "add a row to EARLIER for the new migration");
}

#[tokio::test]
async fn a_catalog_from_every_earlier_version_opens_with_its_data_intact() {
    for earlier in EARLIER {
        let dir = tempfile::tempdir().unwrap();
        let path = earlier_file(dir.path(), earlier);
        let catalog = Catalog::open(&path).unwrap();
        let from = earlier.version;
        assert_eq!(catalog.schema_version().await.unwrap(), SCHEMA_VERSION, "from {from}");
        // 0012: a photo recorded before says on which computer it is not.
        assert_eq!(catalog.get_product(1).await.unwrap().original_host, None, "from {from}");
        if from == 4 {
            // Items queued before 0005 are bulk imports: none becomes an interactive review.
            let queue = pe_core::import::ImportStore::new(catalog.clone());
            let page = queue.items(0, 10, None).await.unwrap();
            let rows: Vec<_> = page.rows.iter().map(|r| (r.id, r.state, r.origin)).collect();
            use pe_core::import::{ItemOrigin, ItemState};
            assert_eq!(rows, [(1, ItemState::Queued, ItemOrigin::Import), (2, ItemState::Ready, ItemOrigin::Import)]);
        }
        if from >= 5 {
            // 0007 rebuilt the queue with the `submitted` state: every item and its origin kept, none in
            // batch mode, no batch yet.
            let queue = pe_core::import::ImportStore::new(catalog.clone());
            let page = queue.items(0, 10, None).await.unwrap();
            let rows: Vec<_> = page.rows.iter().map(|r| (r.id, r.state, r.origin, r.photo_id)).collect();
            // 0008: every earlier path was stored as its text, so none has bytes of its own.
            assert!(page.rows.iter().all(|r| r.path_bytes.is_none()), "from {from}");
            use pe_core::import::{ItemOrigin, ItemState};
            assert_eq!(
                rows,
                [
                    (1, ItemState::Queued, ItemOrigin::Import, None),
                    (2, ItemState::Ready, ItemOrigin::Import, Some(1)),
                    (3, ItemState::Extracting, ItemOrigin::Interactive, Some(2)),
                ]
            );
            let (batch_items, batches, indexes): (i64, i64, i64) = catalog
                .with_connection(|c| {
                    Ok((
                        c.query_row("SELECT count(*) FROM import_items WHERE batch <> 0 OR batch_id IS NOT NULL", [], |r| r.get(0))?,
                        c.query_row("SELECT count(*) FROM batches", [], |r| r.get(0))?,
                        c.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'import_items' AND sql IS NOT NULL", [], |r| r.get(0))?,
                    ))
                })
                .await
                .unwrap();
            assert_eq!((batch_items, batches, indexes), (0, 0, 7), "the queue's indexes are all back");
            // The new CHECKs hold: a submitted item needs its batch.
            let refused = catalog
                .with_connection(|c| Ok(c.execute("UPDATE import_items SET state = 'submitted' WHERE id = 3", [])?))
                .await;
            assert!(refused.is_err(), "a submitted item without a batch was accepted");
        }

        // The rows, as the current API reads them.
        let oat = catalog.get_product(1).await.unwrap();
        assert_eq!((oat.saved.name.as_str(), oat.revision, oat.attempt_id), ("Oat Drink", 3, Some(1)), "from {from}");
        assert_eq!(oat.proposed.as_ref().map(|p| p.name.as_str()), Some("Oat Drnk"));
        assert_eq!((oat.created_at, oat.updated_at, oat.updated_by.as_str()), (T0 + 10, T0 + 30, ""));
        assert_eq!((oat.duplicate_of, oat.deleted_at, oat.deleted_by.as_deref()), (None, None, None));
        assert_eq!(catalog.thumbnail_jpeg(&oat.sha256).await.unwrap(), Some(vec![0xFF, 0xD8, 0xFF, 1]), "from {from}");
        let flags: Vec<_> = oat.flags.iter().map(|f| (f.field.as_str(), f.kind)).collect();
        assert_eq!(flags, [("price", FlagKind::Uncertain), ("gtin", FlagKind::Uncertain)]);
        let rye = catalog.get_product(2).await.unwrap();
        assert_eq!((rye.revision, rye.proposed, rye.saved.description.as_deref()), (1, None, Some("Baked with honey")));
        let first = &catalog.attempts(1).await.unwrap()[0];
        assert_eq!(first.proposal.as_ref().unwrap().name, "Oat Drnk");
        // 0006: an attempt from before costs were recorded has no price (never a made-up one).
        assert_eq!((first.cost_usd, first.cached_tokens, first.batch), (None, None, false), "from {from}");
        assert_eq!(catalog.count_products().await.unwrap(), 3);

        // flagged was backfilled in SQL exactly as Product::validate() counts.
        let page = catalog
            .query_products(ProductQuery { sort: SortKey::Name, direction: SortDirection::Asc, ..Default::default() })
            .await
            .unwrap();
        assert_eq!(page.total, 3);
        for row in &page.rows {
            let record = catalog.get_product(row.id).await.unwrap();
            assert_eq!(row.flagged as usize, record.flags.len(), "from {from}: {}", row.name);
        }
        assert_eq!(
            page.rows.iter().map(|r| (r.name.as_str(), r.flagged)).collect::<Vec<_>>(),
            [("Crème Brûlée", 0), ("Oat Drink", 2), ("Rye Bread", 0)]
        );

        // One revision per product, at its current revision, as a review by nobody known.
        for (id, revision, saved_at) in [(1, 3, T0 + 30), (2, 1, T0 + 20), (3, 2, T0 + 40)] {
            let history = catalog.history(id).await.unwrap();
            assert_eq!(history.len(), 1, "from {from}: product {id}");
            let only = &history[0];
            assert_eq!(
                (only.revision, only.source, only.saved_by.as_str(), only.saved_at),
                (revision, RevisionSource::Review, "", saved_at)
            );
            assert_eq!(only.saved, catalog.get_product(id).await.unwrap().saved);
        }
        let first = &catalog.history(1).await.unwrap()[0].changes[0];
        assert_eq!(
            (first.field.as_str(), first.before.as_deref(), first.after.as_deref()),
            ("name", Some("Oat Drnk"), Some("Oat Drink")),
            "against the proposal kept"
        );

        // Search finds the old rows (name, description, attributes, folded diacritics).
        for (text, name) in
            [("honey", "Rye Bread"), ("vanilla", "Oat Drink"), ("creme", "Crème Brûlée"), ("oat", "Oat Drink")]
        {
            let found = catalog.search_products(text, 0, 10).await.unwrap();
            assert_eq!(found.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), [name], "from {from}: {text}");
        }

        // The current schema's rules hold for the old rows.
        let checks: (String, i64, Vec<String>) = catalog
            .with_connection(|conn| {
                let integrity = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
                let dangling = conn.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))?;
                conn.execute("INSERT INTO products_fts (products_fts, rank) VALUES ('integrity-check', 1)", [])?;
                let mut stmt = conn.prepare(
                    "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'products' ORDER BY name",
                )?;
                let indexes = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
                Ok((integrity, dangling, indexes))
            })
            .await
            .unwrap();
        assert_eq!((checks.0.as_str(), checks.1), ("ok", 0), "from {from}");
        assert!(checks.2.contains(&"products_one_per_photo".to_string()), "{:?}", checks.2);
        assert!(
            !checks.2.iter().any(|i| i.starts_with("sqlite_autoindex")),
            "the column UNIQUE is gone: {:?}",
            checks.2
        );
        let second_for_photo = catalog
            .with_connection(|conn| {
                Ok(conn.execute(
                    "INSERT INTO products (photo_id, saved_json, revision, name, created_at, updated_at)
                     VALUES (1, '{}', 1, 'Second', 0, 0)",
                    [],
                )?)
            })
            .await
            .unwrap_err();
        assert!(second_for_photo.to_string().contains("UNIQUE"), "{second_for_photo}");
        let copy = catalog.duplicate_product(1, "alice", T0 + 100).await.unwrap();
        assert_eq!((copy.photo_id, copy.duplicate_of), (1, Some(1)));

        // New saves continue the old numbering; a delete hides the old row from search.
        let save = SaveProduct {
            photo_id: 3,
            attempt_id: None,
            saved: Product { name: "Crème Caramel".into(), ..Default::default() },
            saved_by: "alice".into(),
            saved_at: T0 + 200,
        };
        let resaved = catalog.save_product(save).await.unwrap();
        assert_eq!((resaved.id, resaved.revision), (3, 3));
        assert_eq!(catalog.history(3).await.unwrap().iter().map(|r| r.revision).collect::<Vec<_>>(), [3, 2]);
        catalog.delete_product(2, "alice", T0 + 300).await.unwrap();
        assert!(catalog.search_products("honey", 0, 10).await.unwrap().is_empty(), "from {from}");
    }
}

/// Opening an older file tells each pending migration before it runs (the window shows a progress
/// window when they take more than a moment); a new file counts from version 0.
#[tokio::test]
async fn opening_tells_each_pending_migration_in_order() {
    let earlier = &EARLIER[1];
    let dir = tempfile::tempdir().unwrap();
    let path = earlier_file(dir.path(), earlier);
    let mut steps = Vec::new();
    let catalog = Catalog::open_with(&path, &mut |step| steps.push(step.clone())).unwrap();
    assert_eq!(catalog.schema_version().await.unwrap(), SCHEMA_VERSION);
    let pending: Vec<_> = MIGRATIONS.iter().filter(|m| m.version > earlier.version).collect();
    assert!(!pending.is_empty());
    let told: Vec<_> = steps.iter().map(|s| (s.from, s.to, s.index, s.count, s.name)).collect();
    let expected: Vec<_> = pending
        .iter()
        .enumerate()
        .map(|(i, m)| (earlier.version, SCHEMA_VERSION, i + 1, pending.len(), m.name))
        .collect();
    assert_eq!(told, expected);
    assert_eq!(steps[0].to_string(), format!("step 1 of {} ({})", pending.len(), pending[0].name));
    drop(catalog);

    // Opened again: nothing to do, nothing told.
    let mut again = Vec::new();
    Catalog::open_with(&path, &mut |step| again.push(step.clone())).unwrap();
    assert!(again.is_empty(), "{again:?}");

    let mut fresh = Vec::new();
    Catalog::open_with(&dir.path().join("new.sqlite3"), &mut |step| fresh.push(step.from)).unwrap();
    assert_eq!(fresh, vec![0; MIGRATIONS.len()]);
}
