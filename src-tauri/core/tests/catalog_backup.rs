//! Backups and restores of the catalog file, against real SQLite files in a temporary directory.

use std::path::{Path, PathBuf};

use pe_core::catalog::migrations::{self, MIGRATIONS};
use pe_core::catalog::{
    Catalog, CatalogError, ProductRecord, RevisionSource, SaveProduct, UpdateProduct, SAFETY_BACKUP_DIR, SCHEMA_VERSION,
};
use pe_core::product::{Price, Product};
use pe_core::{Coded, ErrorCode};
use rusqlite::types::Value;
use rusqlite::{params, Connection};

mod common;

use common::{open, photo, T0};

fn product(name: &str) -> Product {
    Product {
        name: name.into(),
        brand: Some("Oatly".into()),
        description: Some(format!("{name}, creamy")),
        price: Some(Price { amount: 2.49, currency: "EUR".into() }),
        ..Default::default()
    }
}

async fn add(catalog: &Catalog, n: u32, name: &str) -> ProductRecord {
    let photo_id = catalog.record_photo(photo(n)).await.unwrap();
    let save = SaveProduct {
        photo_id,
        attempt_id: None,
        saved: product(name),
        saved_by: "alice".into(),
        saved_at: T0 + i64::from(n),
    };
    catalog.save_product(save).await.unwrap()
}

/// Every table (the full-text index's own tables included) and the schema, as sorted text rows.
async fn dump(catalog: &Catalog) -> Vec<String> {
    catalog.with_connection(|conn| Ok(dump_connection(conn))).await.unwrap()
}

fn dump_connection(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    let mut tables =
        conn.prepare("SELECT name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY name").unwrap();
    let schema: Vec<(String, Option<String>)> =
        tables.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
    for (name, sql) in &schema {
        out.push(format!("schema {name}: {sql:?}"));
    }
    out.push(format!("user_version {}", migrations::schema_version(conn).unwrap()));
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for table in names {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let columns = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |row| {
                let values: Vec<Value> = (0..columns).map(|i| row.get::<_, Value>(i)).collect::<Result<_, _>>()?;
                Ok(format!("{table}: {values:?}"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.extend(rows);
    }
    out
}

fn refused(err: &CatalogError, reason: &str) {
    match err {
        CatalogError::RestoreRefused { reason: why, .. } => assert!(why.contains(reason), "{why:?} lacks {reason:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(err.code(), ErrorCode::Validation);
    assert!(err.to_string().starts_with("cannot restore from "), "{err}");
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn backup_mutate_restore_gives_back_every_row() {
    let (dir, catalog) = open();
    let oat = add(&catalog, 1, "Oat Drink").await;
    add(&catalog, 2, "Rye Bread").await;
    catalog.duplicate_product(oat.id, "bob", T0 + 10).await.unwrap();
    let before = dump(&catalog).await;

    let target = dir.path().join("elsewhere/nested/catalog-backup.sqlite3");
    let summary = catalog.backup_to(&target).await.unwrap();
    assert_eq!(summary.path, target.display().to_string());
    assert_eq!((summary.products, summary.schema_version), (3, SCHEMA_VERSION));
    assert_eq!(summary.bytes, std::fs::metadata(&target).unwrap().len());
    // One self-contained file: no WAL beside it, no leftover partial file.
    assert_eq!(files_in(target.parent().unwrap()), ["catalog-backup.sqlite3"]);
    let copy = Connection::open(&target).unwrap();
    assert_eq!(copy.pragma_query_value(None, "journal_mode", |r| r.get::<_, String>(0)).unwrap(), "delete");
    assert_eq!(dump_connection(&copy), before, "the backup holds exactly the catalog");
    drop(copy);

    // Change everything a restore must undo: new rows, an edit, a delete.
    add(&catalog, 3, "Spelt Muesli").await;
    let edited = UpdateProduct {
        id: oat.id,
        expected_revision: 1,
        saved: product("Oat Drink Barista"),
        attempt_id: None,
        source: RevisionSource::Edit,
        saved_by: "bob".into(),
        saved_at: T0 + 100,
    };
    catalog.update_product(edited).await.unwrap();
    catalog.delete_product(oat.id + 1, "bob", T0 + 200).await.unwrap();
    let mutated = dump(&catalog).await;
    assert_ne!(mutated, before);

    let restored = catalog.restore_from(&target, T0 + 1_000).await.unwrap();
    assert_eq!(
        (restored.products, restored.schema_version_before, restored.migrated_to),
        (3, SCHEMA_VERSION, SCHEMA_VERSION)
    );
    let safety = Catalog::path_in(dir.path())
        .parent()
        .unwrap()
        .join(SAFETY_BACKUP_DIR)
        .join(format!("before-restore-{}.sqlite3", T0 + 1_000));
    assert_eq!(restored.safety_backup, safety.display().to_string());
    assert_eq!(dump(&catalog).await, before, "every table is as it was at the backup");
    assert_eq!(
        dump_connection(&Connection::open(&safety).unwrap()),
        mutated,
        "the safety backup holds what was replaced"
    );

    // The restored catalog works: search, save, integrity.
    assert_eq!(catalog.search_products("spelt", 0, 10).await.unwrap().len(), 0);
    assert_eq!(catalog.search_products("drink", 0, 10).await.unwrap().len(), 2);
    add(&catalog, 4, "Barley Flakes").await;
    assert_eq!(catalog.count_products().await.unwrap(), 4);
    let check: String =
        catalog.with_connection(|conn| Ok(conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?)).await.unwrap();
    assert_eq!(check, "ok");

    // And the data survives closing and reopening the file.
    let path = catalog.path().to_path_buf();
    drop(catalog);
    let reopened = Catalog::open(&path).unwrap();
    assert_eq!(reopened.count_products().await.unwrap(), 4);
}

#[tokio::test]
async fn a_backup_never_overwrites_the_live_catalog_or_leaves_a_half_file() {
    let (dir, catalog) = open();
    add(&catalog, 1, "Oat Drink").await;
    let live = catalog.path().to_path_buf();
    for target in [
        live.clone(),
        dir.path().join(".").join(live.file_name().unwrap()),
        PathBuf::from(format!("{}-wal", live.display())),
    ] {
        let err = catalog.backup_to(&target).await.unwrap_err();
        assert!(matches!(&err, CatalogError::Invalid { fields, .. } if fields == &["path"]), "{target:?}: {err:?}");
        assert!(err.to_string().contains("live catalog"), "{err}");
    }
    assert_eq!(catalog.count_products().await.unwrap(), 1);

    // A target that cannot be written (a directory is in the way): an error, and nothing left behind.
    let blocked = dir.path().join("blocked");
    std::fs::create_dir_all(blocked.join("inside")).unwrap();
    let err = catalog.backup_to(&blocked).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Io, "{err:?}");
    assert_eq!(
        files_in(dir.path()).into_iter().filter(|f| f.contains("partial")).count(),
        0,
        "{:?}",
        files_in(dir.path())
    );

    // An existing backup is replaced.
    let target = dir.path().join("backup.sqlite3");
    std::fs::write(&target, b"old").unwrap();
    catalog.backup_to(&target).await.unwrap();
    assert_eq!(Catalog::open(&target).unwrap().count_products().await.unwrap(), 1);
}

#[tokio::test]
async fn a_restore_refuses_files_that_are_not_good_catalogs_and_changes_nothing() {
    let (dir, catalog) = open();
    add(&catalog, 1, "Oat Drink").await;
    add(&catalog, 2, "Rye Bread").await;
    let good = dir.path().join("good.sqlite3");
    catalog.backup_to(&good).await.unwrap();
    let before = dump(&catalog).await;
    let bytes = std::fs::read(&good).unwrap();

    let garbage = dir.path().join("garbage.sqlite3");
    std::fs::write(&garbage, b"this is not a database, just some text that goes on for a while ........").unwrap();
    refused(&catalog.restore_from(&garbage, T0).await.unwrap_err(), "not a SQLite database");

    let zeros = dir.path().join("zeros.sqlite3");
    std::fs::write(&zeros, vec![0u8; 8192]).unwrap();
    let err = catalog.restore_from(&zeros, T0).await.unwrap_err();
    assert!(matches!(err, CatalogError::RestoreRefused { .. }), "{err:?}");

    let truncated = dir.path().join("truncated.sqlite3");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let err = catalog.restore_from(&truncated, T0).await.unwrap_err();
    refused(&err, "damaged");

    let header_only = dir.path().join("header-only.sqlite3");
    std::fs::write(&header_only, &bytes[..100]).unwrap();
    assert!(matches!(catalog.restore_from(&header_only, T0).await.unwrap_err(), CatalogError::RestoreRefused { .. }));

    let newer = dir.path().join("newer.sqlite3");
    std::fs::write(&newer, &bytes).unwrap();
    Connection::open(&newer).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
    refused(&catalog.restore_from(&newer, T0).await.unwrap_err(), "newer version of the app");

    let other = dir.path().join("other.sqlite3");
    let conn = Connection::open(&other).unwrap();
    conn.execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('hello'); PRAGMA user_version = 1;")
        .unwrap();
    drop(conn);
    refused(&catalog.restore_from(&other, T0).await.unwrap_err(), "not a product-extractor catalog");

    let dangling = dir.path().join("dangling.sqlite3");
    std::fs::write(&dangling, &bytes).unwrap();
    let conn = Connection::open(&dangling).unwrap();
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    conn.execute("INSERT INTO product_revisions SELECT 999, revision, saved_json, NULL, NULL, 'edit', '', 0 FROM products LIMIT 1", []).unwrap();
    drop(conn);
    refused(&catalog.restore_from(&dangling, T0).await.unwrap_err(), "refer to rows that do not exist");

    let paged = dir.path().join("paged.sqlite3");
    std::fs::copy(&good, &paged).unwrap();
    let conn = Connection::open(&paged).unwrap();
    conn.execute_batch("PRAGMA page_size = 16384; VACUUM;").unwrap();
    assert_eq!(conn.pragma_query_value(None, "page_size", |r| r.get::<_, i64>(0)).unwrap(), 16384);
    drop(conn);
    refused(&catalog.restore_from(&paged, T0).await.unwrap_err(), "page size");

    refused(&catalog.restore_from(&dir.path().join("missing.sqlite3"), T0).await.unwrap_err(), "no such file");
    refused(&catalog.restore_from(catalog.path(), T0).await.unwrap_err(), "live catalog");

    // Nothing was touched, and no safety backup was needed.
    assert_eq!(dump(&catalog).await, before);
    assert!(!dir.path().join(SAFETY_BACKUP_DIR).exists());
    // The good one still restores.
    assert_eq!(catalog.restore_from(&good, T0).await.unwrap().products, 2);
}

#[tokio::test]
async fn a_backup_of_an_older_version_is_migrated_on_restore() {
    let (dir, catalog) = open();
    add(&catalog, 1, "Today's Product").await;
    let old = dir.path().join("version-1.sqlite3");
    {
        let mut conn = Connection::open(&old).unwrap();
        assert_eq!(migrations::apply(&mut conn, &MIGRATIONS[..1]).unwrap(), [1]);
        conn.execute(
            "INSERT INTO photos (id, sha256, original_path, file_bytes, width, height, format, thumbnail_jpeg,
                                 first_seen_at, last_seen_at)
             VALUES (1, ?1, 'x.jpg', 1, 1, 1, 'jpeg', x'FFD8', ?2, ?2)",
            params![format!("{:064x}", 1), T0],
        )
        .unwrap();
        let saved = serde_json::to_string(&product("Granola From 2024")).unwrap();
        conn.execute(
            "INSERT INTO products (photo_id, saved_json, revision, name, brand, price_amount, price_currency,
                                   created_at, updated_at)
             VALUES (1, ?1, 4, 'Granola From 2024', 'Oatly', 2.49, 'EUR', ?2, ?2)",
            params![saved, T0],
        )
        .unwrap();
    }
    let restored = catalog.restore_from(&old, T0 + 5).await.unwrap();
    assert_eq!((restored.schema_version_before, restored.migrated_to, restored.products), (1, SCHEMA_VERSION, 1));
    assert_eq!(catalog.schema_version().await.unwrap(), SCHEMA_VERSION);
    let found = catalog.search_products("granola", 0, 10).await.unwrap();
    assert_eq!(found.len(), 1);
    let history = catalog.history(found[0].id).await.unwrap();
    assert_eq!((history.len(), history[0].revision), (1, 4));
    // The safety backup of today's catalog can be restored in turn.
    let back = catalog.restore_from(Path::new(&restored.safety_backup), T0 + 6).await.unwrap();
    assert_eq!(back.products, 1);
    assert_eq!(catalog.list_products(0, 10).await.unwrap()[0].name, "Today's Product");
}

#[tokio::test]
async fn a_file_with_a_table_the_app_does_not_make_is_refused_and_changes_nothing() {
    let (dir, catalog) = open();
    add(&catalog, 1, "Oat Drink").await;
    let before = dump(&catalog).await;
    // A version 2 file that passes every other check, with a table in the way of migration 3
    // (which used to fail half-way through the restore).
    let odd = dir.path().join("odd.sqlite3");
    {
        let mut conn = Connection::open(&odd).unwrap();
        migrations::apply(&mut conn, &MIGRATIONS[..2]).unwrap();
        conn.execute_batch("CREATE TABLE product_revisions (x INTEGER)").unwrap();
    }
    let err = catalog.restore_from(&odd, T0).await.unwrap_err();
    refused(&err, "it has a table \"product_revisions\" that the app's schema version 2 does not make");
    assert_eq!(dump(&catalog).await, before, "the catalog is as it was");
    assert!(files_in(dir.path()).iter().all(|f| !f.starts_with(".restore-")), "{:?}", files_in(dir.path()));
    assert_eq!(catalog.schema_version().await.unwrap(), SCHEMA_VERSION);
    add(&catalog, 2, "Rye Bread").await;
    assert_eq!(catalog.count_products().await.unwrap(), 2);
}

/// Issue 32, finding 2: a backup is data, not a database to adopt. Whoever could write the file
/// planted a trigger that rewrites newly queued paths: the restore is refused, the trigger named,
/// and the live catalog is as it was.
#[tokio::test]
async fn a_backup_with_a_planted_trigger_is_refused_and_changes_nothing() {
    let (dir, catalog) = open();
    add(&catalog, 1, "Oat Drink").await;
    let backup = dir.path().join("planted.sqlite3");
    catalog.backup_to(&backup).await.unwrap();
    {
        let conn = Connection::open(&backup).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER queue_rewrite AFTER INSERT ON import_items BEGIN
                 UPDATE import_items SET path = '/home/victim/.ssh/id_ed25519' WHERE id = NEW.id;
             END;",
        )
        .unwrap();
    }
    let before = dump(&catalog).await;
    let err = catalog.restore_from(&backup, T0).await.unwrap_err();
    refused(&err, "it has a trigger \"queue_rewrite\"");
    assert_eq!(dump(&catalog).await, before);
    // A view, or an index, is refused the same way.
    {
        let conn = Connection::open(&backup).unwrap();
        conn.execute_batch("DROP TRIGGER queue_rewrite; CREATE VIEW everything AS SELECT * FROM photos;").unwrap();
    }
    refused(&catalog.restore_from(&backup, T0).await.unwrap_err(), "it has a view \"everything\"");
    {
        let conn = Connection::open(&backup).unwrap();
        conn.execute_batch("DROP VIEW everything; CREATE INDEX spy ON products (name);").unwrap();
    }
    refused(&catalog.restore_from(&backup, T0).await.unwrap_err(), "it has a index \"spy\"");
    assert_eq!(dump(&catalog).await, before);
}

/// Issue 32, finding 2: queue rows planted in a backup (naming files of this computer) are kept
/// as data but not sent: the restored queue has nothing queued until someone asks.
#[tokio::test]
async fn a_restored_queue_sends_nothing_by_itself() {
    let (dir, catalog) = open();
    add(&catalog, 1, "Oat Drink").await;
    let backup = dir.path().join("queued.sqlite3");
    catalog.backup_to(&backup).await.unwrap();
    {
        let conn = Connection::open(&backup).unwrap();
        conn.execute_batch(
            "INSERT INTO import_items (path, state, queued_at, updated_at) VALUES ('/etc/shadow', 'queued', 1, 1);
             INSERT INTO import_items (path, state, queued_at, updated_at) VALUES ('/home/victim/tax.pdf', 'queued', 1, 1);",
        )
        .unwrap();
    }
    let restored = catalog.restore_from(&backup, T0).await.unwrap();
    assert_eq!((restored.products, restored.held), (1, 2));
    let states: Vec<(String, Option<String>)> = catalog
        .with_connection(|conn| {
            let mut stmt = conn.prepare("SELECT state, error_code FROM import_items ORDER BY id")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap();
    assert_eq!(states, vec![("failed".to_string(), Some("restored".to_string())); 2]);
}

/// A folder other users write to (sticky, like /tmp): links under the old unfinished file's names
/// (`.X.partial` and its SQLite journal) are not followed, and the backup is a regular file only
/// this user reads (it is the whole catalog).
#[cfg(unix)]
#[tokio::test]
async fn a_backup_into_a_shared_folder_is_private_and_follows_no_link() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let (dir, catalog) = open();
    add(&catalog, 1, "Oat Drink").await;
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let target = shared.join("backup.sqlite3");
    for name in [".backup.sqlite3.partial", ".backup.sqlite3.partial-journal", "backup.sqlite3.tmp"] {
        std::os::unix::fs::symlink(&victim, shared.join(name)).unwrap();
    }

    catalog.backup_to(&target).await.unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "no link's target was written");
    let meta = std::fs::symlink_metadata(&target).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.mode() & 0o7777, 0o600);
    assert_eq!(meta.uid(), std::fs::metadata(dir.path()).unwrap().uid(), "this user's");
    let copy = Connection::open_with_flags(&target, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    assert_eq!(copy.query_row("SELECT count(*) FROM products", [], |r| r.get::<_, i64>(0)).unwrap(), 1);
    drop(copy);
    assert_eq!(
        files_in(&shared),
        [".backup.sqlite3.partial", ".backup.sqlite3.partial-journal", "backup.sqlite3", "backup.sqlite3.tmp"]
    );
}
