//! The team catalog's foundation against a real PostgreSQL server (`scripts/with-postgres`, which
//! `make test` wraps the tests in): migrations, once under concurrency, a newer server refused,
//! typed connection errors that never show a password. Each test has a database of its own.

use std::path::Path;

use pe_core::catalog::server::testing::{fresh_database, server_url};
use pe_core::catalog::server::{CatalogUrl, ServerCatalog, ServerError, ServerUrl, SERVER_SCHEMA_VERSION};
use pe_core::catalog::{copy, Catalog};
use pe_core::{Coded, ErrorCode};

fn no_env(_: &str) -> Option<String> {
    None
}

async fn connect(url: &str) -> Result<ServerCatalog, ServerError> {
    // No home: a developer's own ~/.pgpass is never read.
    ServerCatalog::connect_with(&ServerUrl::parse(url).unwrap(), &no_env, None).await
}

async fn table_names(catalog: &ServerCatalog) -> Vec<String> {
    let client = catalog.client().await.unwrap();
    let rows = client
        .query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1", &[])
        .await
        .unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_database_is_migrated_and_a_second_migrate_does_nothing() {
    let url = fresh_database("fresh").await;
    let catalog = connect(&url).await.unwrap();
    assert_eq!(catalog.schema_version().await.unwrap(), 0);
    let applied = catalog.migrate().await.unwrap();
    assert_eq!(applied, (1..=SERVER_SCHEMA_VERSION).collect::<Vec<_>>());
    assert_eq!(catalog.schema_version().await.unwrap(), SERVER_SCHEMA_VERSION);
    assert_eq!(
        table_names(&catalog).await,
        [
            "attempt_photos",
            "attempts",
            "batches",
            "breaker_state",
            "import_item_gtins",
            "import_item_photos",
            "import_item_unreadable",
            "import_items",
            "photo_images",
            "photos",
            "product_photos",
            "product_revisions",
            "product_search",
            "products",
            "schema_migrations"
        ]
    );
    assert_eq!(catalog.migrate().await.unwrap(), Vec::<u32>::new(), "migrating again is a no-op");
    // A new connection (another desktop later) finds it migrated.
    let again = connect(&url).await.unwrap();
    assert_eq!(again.migrate().await.unwrap(), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_schema_keeps_the_sqlite_rules() {
    let catalog = connect(&fresh_database("rules").await).await.unwrap();
    catalog.migrate().await.unwrap();
    let client = catalog.client().await.unwrap();
    let photo = "INSERT INTO photos (sha256, original_path, file_bytes, width, height, format, thumbnail_jpeg,
                 first_seen_at, last_seen_at) VALUES ($1, 'a.jpg', 1, 1, 1, 'jpeg', '\\x00', 0, 0) RETURNING id";
    let bad = client.query_one(photo, &[&"not-a-sha"]).await.unwrap_err();
    assert!(bad.as_db_error().is_some_and(|e| e.constraint().is_some()), "{bad}");
    let id: i64 = client.query_one(photo, &[&"a".repeat(64)]).await.unwrap().get(0);
    let product = client
        .query_one(
            "INSERT INTO products (photo_id, saved_json, revision, name, created_at, updated_at)
             VALUES ($1, '{\"name\":\"Tea\"}', 1, 'Tea', 0, 0) RETURNING id",
            &[&id],
        )
        .await
        .unwrap();
    let product: i64 = product.get(0);
    // saved_json cannot change without a new revision (SQLite's trigger).
    let err = client
        .execute("UPDATE products SET saved_json = '{\"name\":\"Coffee\"}' WHERE id = $1", &[&product])
        .await
        .unwrap_err();
    assert!(err.as_db_error().unwrap().message().contains("without a new revision"), "{err}");
    client
        .execute("UPDATE products SET saved_json = '{\"name\":\"Coffee\"}', revision = 2 WHERE id = $1", &[&product])
        .await
        .unwrap();
    // Invalid JSON is refused, as json_valid() does.
    assert!(client.execute("UPDATE products SET proposed_json = 'nope' WHERE id = $1", &[&product]).await.is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn two_desktops_starting_at_once_migrate_once() {
    let url = fresh_database("concurrent").await;
    let (a, b) = tokio::join!(connect(&url), connect(&url));
    let (a, b) = (a.unwrap(), b.unwrap());
    let (ra, rb) = tokio::join!(a.migrate(), b.migrate());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    let mut all: Vec<u32> = ra.iter().chain(&rb).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (1..=SERVER_SCHEMA_VERSION).collect::<Vec<_>>(), "each migration once: {ra:?} {rb:?}");
    let client = a.client().await.unwrap();
    let rows: i64 = client.query_one("SELECT count(*) FROM schema_migrations", &[]).await.unwrap().get(0);
    assert_eq!(rows, i64::from(SERVER_SCHEMA_VERSION));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_with_a_newer_schema_is_refused() {
    let catalog = connect(&fresh_database("newer").await).await.unwrap();
    catalog.migrate().await.unwrap();
    let future = i32::try_from(SERVER_SCHEMA_VERSION + 1).unwrap();
    catalog
        .client()
        .await
        .unwrap()
        .execute("INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_a_newer_app')", &[&future])
        .await
        .unwrap();
    let err = catalog.migrate().await.unwrap_err();
    assert!(
        matches!(err, ServerError::SchemaTooNew { found, supported, .. }
            if found == SERVER_SCHEMA_VERSION + 1 && supported == SERVER_SCHEMA_VERSION),
        "{err:?}"
    );
    assert!(err.to_string().contains("update the app"), "{err}");
    // Nothing was changed by the refusal.
    assert_eq!(catalog.schema_version().await.unwrap(), SERVER_SCHEMA_VERSION + 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_password_is_a_typed_auth_error_that_never_shows_a_password() {
    let base = server_url();
    let real = ServerUrl::parse(&base).unwrap();
    let real_password = String::from_utf8(real.config().get_password().unwrap().to_vec()).unwrap();
    let (userinfo_end, _) = base.split_once('@').unwrap();
    let (user_part, _) = userinfo_end.rsplit_once(':').unwrap();
    let wrong = base.replacen(&format!("{user_part}:{real_password}@"), &format!("{user_part}:not-the-Pa55word@"), 1);
    let err = match connect(&wrong).await {
        Ok(_) => panic!("a wrong password connected"),
        Err(e) => e,
    };
    assert!(matches!(err, ServerError::Auth { ref user, .. } if user == "pe_test"), "{err:?}");
    assert_eq!(err.code(), ErrorCode::Catalog);
    for shown in [err.to_string(), format!("{err:?}")] {
        assert!(!shown.contains("not-the-Pa55word") && !shown.contains(&real_password), "{shown}");
        assert!(shown.contains("••••"), "the URL is shown masked: {shown}");
    }
    // Without any password: PasswordMissing says where to put one.
    let no_password = base.replacen(&format!(":{real_password}@"), "@", 1);
    let err = connect(&no_password).await.err().expect("no password connected");
    assert!(matches!(err, ServerError::PasswordMissing { .. }), "{err:?}");
    assert!(err.to_string().contains("PGPASSWORD"), "{err}");
    // PGPASSWORD supplies it (libpq's order: URL, then PGPASSWORD, then ~/.pgpass).
    let env = |k: &str| (k == "PGPASSWORD").then(|| real_password.clone());
    let url = ServerUrl::parse(&no_password).unwrap();
    ServerCatalog::connect_with(&url, &env, None).await.expect("PGPASSWORD is used");
}

/// TLS against the test server's certificate, signed by a throwaway CA
/// (`PRODUCT_EXTRACTOR_TEST_PG_CA`): `sslmode=require` verifies the certificate, so without the
/// CA it is refused with what to do; with `sslrootcert` (or `PGSSLROOTCERT`, or libpq's
/// `verify-full`) the connection is encrypted; a file without a certificate is a typed error.
#[tokio::test(flavor = "multi_thread")]
async fn tls_verifies_the_server_against_its_ca() {
    let base = fresh_database("tls").await;
    let ca = std::env::var("PRODUCT_EXTRACTOR_TEST_PG_CA")
        .expect("PRODUCT_EXTRACTOR_TEST_PG_CA is not set: run under scripts/with-postgres");
    let home = tempfile::tempdir().unwrap();
    let encrypted = |catalog: ServerCatalog| async move {
        let client = catalog.client().await.unwrap();
        let row = client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await.unwrap();
        row.get::<_, bool>(0)
    };
    let parse = |url: &str| ServerUrl::parse(url).unwrap();

    let err = ServerCatalog::connect_with(&parse(&format!("{base}?sslmode=require")), &no_env, Some(home.path()))
        .await
        .err()
        .expect("an unknown CA was trusted");
    assert!(matches!(err, ServerError::Tls { .. }), "{err:?}");
    assert!(err.to_string().contains("sslrootcert"), "{err}");
    assert_eq!(err.code(), ErrorCode::Network);

    let with_ca = format!("{base}?sslmode=verify-full&sslrootcert={}", ca.replace('/', "%2F"));
    let catalog = ServerCatalog::connect_with(&parse(&with_ca), &no_env, Some(home.path())).await.unwrap();
    assert!(encrypted(catalog).await, "the connection is TLS");

    let env = |k: &str| (k == "PGSSLROOTCERT").then(|| ca.clone());
    let catalog =
        ServerCatalog::connect_with(&parse(&format!("{base}?sslmode=require")), &env, Some(home.path())).await.unwrap();
    assert!(encrypted(catalog).await);
    // libpq's default place for the CA.
    let other_home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(other_home.path().join(".postgresql")).unwrap();
    std::fs::copy(&ca, other_home.path().join(".postgresql/root.crt")).unwrap();
    let catalog =
        ServerCatalog::connect_with(&parse(&format!("{base}?sslmode=require")), &no_env, Some(other_home.path()))
            .await
            .unwrap();
    assert!(encrypted(catalog).await);
    // Without sslmode the connection stays plain, as before.
    assert!(!encrypted(connect(&base).await.unwrap()).await);

    let empty = home.path().join("empty.crt");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let url = format!("{base}?sslmode=require&sslrootcert={}", empty.display());
    let err = ServerCatalog::connect_with(&parse(&url), &no_env, Some(home.path())).await.err().unwrap();
    assert!(err.to_string().contains("holds no usable certificate"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_listening_and_no_database_are_typed() {
    let base = server_url();
    let real = ServerUrl::parse(&base).unwrap();
    let port = real.config().get_ports()[0];
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let err = connect(&base.replacen(&format!(":{port}/"), &format!(":{closed_port}/"), 1)).await.err().unwrap();
    assert!(matches!(err, ServerError::Unreachable { .. }), "{err:?}");
    assert_eq!(err.code(), ErrorCode::Network);
    let (server, _) = base.rsplit_once('/').unwrap();
    let err = connect(&format!("{server}/no_such_catalog")).await.err().unwrap();
    assert!(matches!(err, ServerError::NoDatabase { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn check_reports_the_server_the_schema_and_the_masked_url() {
    let url = fresh_database("check").await;
    let catalog = connect(&url).await.unwrap();
    let check = catalog.check().await.unwrap();
    assert!(check.server_version.starts_with(char::is_numeric), "{check:?}");
    assert_eq!(check.schema_version, SERVER_SCHEMA_VERSION);
    assert_eq!(check.applied, (1..=SERVER_SCHEMA_VERSION).collect::<Vec<_>>());
    let parsed = CatalogUrl::parse(&url).unwrap();
    assert_eq!(check.url, parsed.to_string());
    assert!(check.url.starts_with("postgres://pe_test:••••@127.0.0.1:"), "{}", check.url);
}

/// SQLite tables that are deliberately not on the server, and why. FTS5's shadow tables
/// (`products_fts_*`) and SQLite's own (`sqlite_*`) are left out by name below.
const SQLITE_ONLY_TABLES: &[(&str, &str)] = &[
    // FTS5 search; the server searches a tsvector on products instead (see pg/0001's header).
    ("products_fts", "FTS5 search, replaced on the server by full-text search on products"),
];

/// Server columns that SQLite does not have, and why.
const SERVER_ONLY_COLUMNS: &[(&str, &str, &str)] = &[
    (
        "import_items",
        "changed_at",
        "the server's time of an item's last change: how desktops follow each other (pg/0008)",
    ),
    ("products", "search", "the full-text search vector, generated (pg/0004; SQLite has products_fts)"),
    ("product_search", "id", "search's own narrow table of live products, kept by triggers (pg/0005)"),
    ("product_search", "search", "the product's search vector, a copy of products.search (pg/0005)"),
    ("photo_images", "photo_id", "each photo's prepared image, for desktops without its file (pg/0009)"),
    ("photo_images", "jpeg", "the prepared JPEG, as sent to Gemini (pg/0009)"),
    ("photo_images", "width", "of the prepared JPEG (pg/0009)"),
    ("photo_images", "height", "of the prepared JPEG (pg/0009)"),
    ("photo_images", "barcodes_json", "the barcodes intake read from its pixels (pg/0009)"),
    ("photo_images", "stored_at", "when it was kept (pg/0009)"),
];

/// The server types a SQLite declared type may become (pg/0001's header gives the rules).
fn compatible(sqlite_type: &str, server_type: &str) -> bool {
    let allowed: &[&str] = match sqlite_type.to_ascii_uppercase().as_str() {
        "INTEGER" => &["bigint", "integer", "boolean"],
        // JSON: a TEXT column SQLite checks with json_valid().
        "TEXT" => &["text", "json", "jsonb"],
        "BLOB" => &["bytea"],
        "REAL" => &["double precision", "real"],
        _ => &[],
    };
    allowed.contains(&server_type)
}

/// (table, column) → (declared type, NOT NULL) of a fresh SQLite catalog, every migration applied.
fn sqlite_columns() -> std::collections::BTreeMap<(String, String), (String, bool)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.sqlite3");
    drop(pe_core::catalog::Catalog::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut statement = conn
        .prepare(
            "SELECT t.name, c.name, c.type, c.\"notnull\" OR c.pk > 0
             FROM sqlite_schema AS t, pragma_table_info(t.name) AS c
             WHERE t.type = 'table' AND t.name NOT GLOB 'sqlite_*' AND t.name NOT GLOB 'products_fts_*'",
        )
        .unwrap();
    let rows = statement
        .query_map([], |r| Ok(((r.get(0)?, r.get(1)?), (r.get(2)?, r.get(3)?))))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows
}

/// The same for a fresh server database, every server migration applied.
async fn server_columns() -> std::collections::BTreeMap<(String, String), (String, bool)> {
    let catalog = connect(&fresh_database("parity").await).await.unwrap();
    catalog.migrate().await.unwrap();
    let client = catalog.client().await.unwrap();
    let rows = client
        .query(
            "SELECT table_name::text, column_name::text, data_type::text, is_nullable = 'NO'
             FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> 'schema_migrations'",
            &[],
        )
        .await
        .unwrap();
    rows.iter().map(|r| ((r.get(0), r.get(1)), (r.get(2), r.get(3)))).collect()
}

/// Every SQLite table (but the listed SQLite-only ones) is on the server with the same columns,
/// compatible types and the same NOT NULL rules: a SQLite migration without its server migration
/// fails here.
#[tokio::test(flavor = "multi_thread")]
async fn the_server_schema_matches_the_sqlite_schema() {
    let sqlite = sqlite_columns();
    let server = server_columns().await;
    let sqlite_only = |table: &str| SQLITE_ONLY_TABLES.iter().any(|(t, _)| *t == table);
    let mut problems = Vec::new();
    for ((table, column), (sqlite_type, sqlite_not_null)) in &sqlite {
        if sqlite_only(table) {
            continue;
        }
        match server.get(&(table.clone(), column.clone())) {
            None => problems.push(format!("{table}.{column} ({sqlite_type}) is not on the server")),
            Some((server_type, server_not_null)) => {
                if !compatible(sqlite_type, server_type) {
                    problems.push(format!("{table}.{column}: {sqlite_type} in SQLite, {server_type} on the server"));
                }
                if sqlite_not_null != server_not_null {
                    problems.push(format!(
                        "{table}.{column}: NOT NULL {sqlite_not_null} in SQLite, {server_not_null} on the server"
                    ));
                }
            }
        }
    }
    for (table, column) in server.keys() {
        let in_sqlite = sqlite.contains_key(&(table.clone(), column.clone()));
        let listed = SERVER_ONLY_COLUMNS.iter().any(|(t, c, _)| t == table && c == column);
        if !in_sqlite && !listed {
            problems.push(format!("{table}.{column} is on the server only (list it in SERVER_ONLY_COLUMNS)"));
        }
    }
    assert!(problems.is_empty(), "the server schema drifted from SQLite's:\n{}", problems.join("\n"));
    // The comparison saw every table (a query that read nothing would pass anything).
    let tables: std::collections::BTreeSet<&str> = sqlite.keys().map(|(t, _)| t.as_str()).collect();
    for table in ["photos", "attempts", "products", "product_revisions", "import_items", "batches", "product_photos"] {
        assert!(tables.contains(table), "{table} missing from {tables:?}");
    }
    for (table, _) in SQLITE_ONLY_TABLES {
        assert!(tables.contains(table), "{table} is listed as SQLite-only but is not in SQLite");
    }
}

/// The copy's table list ([`copy::TABLES`]) is the SQLite schema's, column for column, each with
/// a kind both sides store it as: a migration that adds a column the copy does not carry fails.
#[tokio::test(flavor = "multi_thread")]
async fn the_copy_carries_every_table_and_column() {
    let sqlite = sqlite_columns();
    let server = server_columns().await;
    let sqlite_only = |table: &str| SQLITE_ONLY_TABLES.iter().any(|(t, _)| *t == table);
    let schema: std::collections::BTreeSet<(String, String)> =
        sqlite.keys().filter(|(t, _)| !sqlite_only(t)).cloned().collect();
    let mut carried = std::collections::BTreeSet::new();
    for table in copy::TABLES {
        for &(column, kind) in table.columns {
            let key = (table.name.to_string(), column.to_string());
            let (sqlite_type, _) = sqlite.get(&key).unwrap_or_else(|| panic!("{key:?} is not in SQLite"));
            let (server_type, _) = server.get(&key).unwrap_or_else(|| panic!("{key:?} is not on the server"));
            let expected = match kind {
                copy::Kind::Int => ("INTEGER", "bigint"),
                copy::Kind::Real => ("REAL", "double precision"),
                copy::Kind::Text => ("TEXT", "text"),
                copy::Kind::Json => ("TEXT", "json"),
                copy::Kind::Blob => ("BLOB", "bytea"),
            };
            assert_eq!((sqlite_type.as_str(), server_type.as_str()), expected, "{key:?} copied as {kind:?}");
            carried.insert(key);
        }
        for key in table.key {
            assert!(table.columns.iter().any(|(c, _)| c == key), "{}: key {key} is not a column", table.name);
        }
    }
    let missing: Vec<_> = schema.difference(&carried).collect();
    assert!(missing.is_empty(), "columns the copy does not carry: {missing:?}");
}

/// A non-UTF-8 file name's bytes (ISO-8859-1 "café.jpg").
const LATIN1_NAME: &[u8] = b"caf\xe9.jpg";

/// A SQLite catalog with a row in every table and the cases a copy could get wrong: a non-UTF-8
/// path, a deleted product, a duplicate, revisions, attempts with usage and cost (and one failed),
/// queue items in several states, a batch, a product's other photos, JSON whose key order matters.
fn sample_catalog(path: &Path) {
    drop(Catalog::open(path).unwrap());
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    let photo = "INSERT INTO photos (id, sha256, original_path, original_path_bytes, file_bytes, width, height, format,
                 thumbnail_jpeg, first_seen_at, last_seen_at, phash) VALUES (?1, ?2, ?3, ?4, ?5, 640, 480, 'jpeg', ?6, 10, 20, ?7)";
    for (id, name, bytes, phash) in [
        (1, "caf\u{fffd}.jpg", Some(LATIN1_NAME), Some("0123456789abcdef")),
        (2, "back.jpg", None, None),
        (3, "tea.png", None, Some("fedcba9876543210")),
    ] {
        let thumbnail: Vec<u8> = (0..4096u32).map(|i| (i * 7 + id) as u8).collect();
        conn.execute(
            photo,
            rusqlite::params![id, format!("{id}").repeat(64), name, bytes, 1000 + id, thumbnail, phash],
        )
        .unwrap();
    }
    conn.execute_batch(
        r#"
        INSERT INTO batches (id, display_name, name, state, model, requests, created_at, submitted_at, last_polled_at,
                             error, updated_at)
        VALUES (1, 'pe-batch-1', 'batches/abc123', 'running', 'gemini-2.5-flash', 2, 100, 110, 120, NULL, 120);
        INSERT INTO attempts (id, photo_id, model, started_at, latency_ms, prompt_tokens, output_tokens, thoughts_tokens,
                              total_tokens, outcome, proposal_json, error_code, error_message, raw_response,
                              cached_tokens, model_version, cost_nanos, batch, batch_name, barcodes_json)
        VALUES (1, 1, 'gemini-2.5-flash', 1000, 850, 1290, 210, 40, 1540, 'proposed',
                '{"name":"Crème brûlée","brand":"Acme","attributes":[{"name":"size","value":"2 x 100 g"}]}',
                NULL, NULL, '{"candidates":[]}', 12, 'gemini-2.5-flash-001', 987654, 0, NULL,
                '[{"gtin":"4006381333931","format":"ean13"}]'),
               (2, 2, 'gemini-2.5-flash', 2000, 30000, 1290, 0, NULL, 1290, 'failed', NULL, 'timeout',
                'no answer within 30 s', NULL, NULL, NULL, NULL, 0, NULL, '[]'),
               (3, 3, 'gemini-2.5-flash', 3000, 0, 1000, 100, 0, 1100, 'proposed', '{"name":"Green tea","brand":"Leaf"}',
                NULL, NULL, '{}', 0, 'gemini-2.5-flash-001', 1234, 1, 'batches/abc123', NULL);
        INSERT INTO attempt_photos (attempt_id, position, photo_id) VALUES (3, 1, 2);
        INSERT INTO products (id, photo_id, attempt_id, duplicate_of, proposed_json, saved_json, revision, name, brand,
                              category, price_amount, price_currency, gtin, flagged, created_at, updated_at, updated_by,
                              deleted_at, deleted_by)
        VALUES (1, 1, 1, NULL, '{"name":"Crème brûlée","brand":"Acme","attributes":[{"name":"size","value":"2 x 100 g"}]}',
                '{"name":"Crème brûlée","brand":"Acme","description":"Vanilla custard","attributes":[{"name":"size","value":"2 x 100 g"}]}',
                2, 'Crème brûlée', 'Acme', 'Desserts', 3.49, 'EUR', '4006381333931', 1, 1100, 1500, 'alice', NULL, NULL),
               (2, 3, 3, NULL, '{"name":"Green tea","brand":"Leaf"}', '{"name":"Green tea","brand":"Leaf"}', 1,
                'Green tea', 'Leaf', NULL, NULL, NULL, NULL, 0, 3100, 3200, 'bob', 3300, 'bob'),
               (3, 1, NULL, 1, NULL, '{"name":"Crème brûlée (copy)","brand":"Acme"}', 1, 'Crème brûlée (copy)', 'Acme',
                NULL, 0.1, 'USD', NULL, 0, 1600, 1600, 'alice', NULL, NULL);
        INSERT INTO product_photos (product_id, position, photo_id) VALUES (1, 1, 2);
        INSERT INTO product_revisions (product_id, revision, saved_json, proposed_json, attempt_id, source, saved_by, saved_at)
        VALUES (1, 1, '{"name":"Creme brulee","brand":"Acme"}', '{"name":"Crème brûlée","brand":"Acme"}', 1, 'review', 'alice', 1100),
               (1, 2, '{"name":"Crème brûlée","brand":"Acme","description":"Vanilla custard","attributes":[{"name":"size","value":"2 x 100 g"}]}',
                NULL, 1, 'edit', 'alice', 1500),
               (2, 1, '{"name":"Green tea","brand":"Leaf"}', '{"name":"Green tea","brand":"Leaf"}', 3, 'import', 'bob', 3100),
               (3, 1, '{"name":"Crème brûlée (copy)","brand":"Acme"}', NULL, NULL, 'duplicate', 'alice', 1600);
        INSERT INTO import_items (id, path, sha256, state, attempts, photo_id, attempt_id, proposal_json, flags_json,
                                  flag_count, product_id, saved_revision, created_product, queued_at, updated_at, origin,
                                  barcodes_json, group_json)
        VALUES (2, '/shoot/caf.jpg', '1111111111111111111111111111111111111111111111111111111111111111', 'saved', 1, 1, 1,
                '{"name":"Crème brûlée","brand":"Acme"}', '[{"field":"price","kind":"missing"}]', 1, 1, 2, 1, 900, 1500,
                'interactive', '[]', '{"merged_by":["4006381333931"]}');
        INSERT INTO import_items (id, path, state, attempts, error_code, error_message, queued_at, updated_at)
        VALUES (3, '/shoot/broken.jpg', 'failed', 3, 'timeout', 'no answer within 30 s', 901, 2100);
        INSERT INTO import_items (id, path, state, skip_reason, error_message, duplicate_of_item, queued_at, updated_at)
        VALUES (4, '/shoot/caf-again.jpg', 'skipped', 'already_queued', 'the same photo as item 2', 2, 902, 902);
        INSERT INTO import_items (id, path, sha256, state, photo_id, batch, batch_id, looks_like_photo_id,
                                  looks_like_distance, queued_at, updated_at)
        VALUES (5, '/shoot/tea.png', '3333333333333333333333333333333333333333333333333333333333333333', 'submitted', 3, 1, 1,
                1, 9, 903, 110);
        INSERT INTO import_items (id, path, sha256, state, photo_id, attempt_id, proposal_json, flags_json, queued_at,
                                  updated_at)
        VALUES (6, '/shoot/tea2.png', '3333333333333333333333333333333333333333333333333333333333333333', 'ready', 3, 3,
                '{"name":"Green tea"}', '[]', 904, 3000);
        "#,
    )
    .unwrap();
    // Queued, its name not UTF-8 (the display text lossy, the exact bytes kept).
    conn.execute(
        "INSERT INTO import_items (id, path, path_bytes, state, queued_at, updated_at)
         VALUES (1, '/shoot/caf\u{fffd}.jpg', ?1, 'queued', 899, 899)",
        [[b"/shoot/".as_slice(), LATIN1_NAME].concat()],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO import_item_photos (item_id, position, path, path_bytes, sha256, photo_id)
         VALUES (1, 1, '/shoot/caf\u{fffd}-back.jpg', ?1, NULL, NULL), (2, 1, '/shoot/back.jpg', NULL, ?2, 2)",
        rusqlite::params![b"/shoot/caf\xe9-back.jpg".as_slice(), "2".repeat(64)],
    )
    .unwrap();
    conn.execute("INSERT INTO import_item_gtins (item_id, gtin_key) VALUES (2, '04006381333931')", []).unwrap();
    // Queued on one computer of a team, which another could not read.
    conn.execute("UPDATE import_items SET queued_on = 'desk-1' WHERE id = 1", []).unwrap();
    conn.execute("INSERT INTO import_item_unreadable (item_id, host) VALUES (1, 'desk-2')", []).unwrap();
    // The breaker as a run left it (JSON, kept as text on both sides).
    conn.execute(
        "INSERT INTO breaker_state (breaker, desktop, saved_json, saved_at) VALUES ('gemini', '', ?1, 30)",
        [r#"{"state":"open","since_ms":10,"calls":["failure","failure"],"not_permitted_calls":3,"events":[],"saved_at_ms":30}"#],
    )
    .unwrap();
}

/// Every row of every copied table, in key order, as SQLite holds it.
fn all_rows(path: &Path) -> Vec<(&'static str, Vec<Vec<rusqlite::types::Value>>)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    copy::TABLES
        .iter()
        .map(|table| {
            let columns: Vec<&str> = table.columns.iter().map(|(c, _)| *c).collect();
            let sql = format!("SELECT {} FROM {} ORDER BY {}", columns.join(", "), table.name, table.key.join(", "));
            let mut statement = conn.prepare(&sql).unwrap();
            let rows = statement
                .query_map([], |row| (0..columns.len()).map(|i| row.get(i)).collect::<Result<Vec<_>, _>>())
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            (table.name, rows)
        })
        .collect()
}

fn counts(report: &copy::CopyReport) -> Vec<(&'static str, u64)> {
    report.tables.iter().map(|t| (t.table, t.rows)).collect()
}

const SAMPLE_COUNTS: &[(&str, u64)] = &[
    ("photos", 3),
    ("batches", 1),
    ("attempts", 3),
    ("attempt_photos", 1),
    ("products", 3),
    ("product_photos", 1),
    ("product_revisions", 4),
    ("import_items", 6),
    ("import_item_unreadable", 1),
    ("import_item_photos", 2),
    ("import_item_gtins", 1),
    ("breaker_state", 1),
];

/// SQLite → server → a new SQLite file: every row of every table comes back equal (ids, bytes,
/// JSON text, costs), the server's counts are the source's, its sequences go on after the copied
/// ids, search works in the copy, and a destination that already holds a catalog is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_catalog_copied_to_the_server_and_back_is_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original.sqlite3");
    sample_catalog(&original);
    let server_url = fresh_database("copy").await;
    let server = CatalogUrl::parse(&server_url).unwrap();

    let up = copy::copy_catalog(&CatalogUrl::Sqlite(original.clone()), &server, &no_env).await.unwrap();
    assert_eq!(counts(&up), SAMPLE_COUNTS);
    assert_eq!(up.to, server.to_string());
    assert!(up.to.contains("••••") && !up.to.contains(&password_of(&server_url)), "{}", up.to);

    // On the server: the counts, a row's exact values, and the sequences past the copied ids.
    let catalog = connect(&server_url).await.unwrap();
    let client = catalog.client().await.unwrap();
    for &(table, rows) in SAMPLE_COUNTS {
        let found: i64 = client.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await.unwrap().get(0);
        assert_eq!(found as u64, rows, "{table}");
    }
    // Every table the copy wrote, and the search table its triggers filled, is vacuumed with its
    // visibility map set, even on this test server, whose commits are asynchronous
    // (synchronous_commit = off): counts and facets then read indexes only, not the whole table.
    let tables: Vec<String> = SAMPLE_COUNTS
        .iter()
        .filter(|(_, rows)| *rows > 0)
        .map(|(t, _)| t.to_string())
        .chain(["product_search".into()])
        .collect();
    let rows = client
        .query(
            "SELECT relname::text, relallvisible::int8, relpages::int8 FROM pg_class
             WHERE relname = ANY($1) AND relkind = 'r' ORDER BY relname",
            &[&tables],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), tables.len(), "{tables:?}");
    for row in rows {
        let (table, visible, pages): (String, i64, i64) = (row.get(0), row.get(1), row.get(2));
        assert!(pages > 0 && visible == pages, "{table}: {visible} of {pages} pages all-visible after the copy");
    }
    let row = client
        .query_one("SELECT original_path_bytes, saved_json::text FROM photos, products WHERE photos.id = 1 AND products.id = 1", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Vec<u8>>(0), LATIN1_NAME);
    assert!(row.get::<_, String>(1).starts_with(r#"{"name":"Crème brûlée","brand":"Acme","description""#));
    let next: i64 = client
        .query_one(
            "INSERT INTO batches (display_name, state, model, requests, created_at, updated_at)
             VALUES ('pe-batch-next', 'submitting', 'm', 1, 0, 0) RETURNING id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(next, 2, "the identity sequence goes on after the copied ids");
    client.execute("DELETE FROM batches WHERE id = 2", &[]).await.unwrap();

    // A second copy into the server is refused, and changes nothing.
    let err = copy::copy_catalog(&CatalogUrl::Sqlite(original.clone()), &server, &no_env).await.unwrap_err();
    assert!(matches!(err, copy::CopyError::DestinationNotEmpty { .. }), "{err:?}");
    assert_eq!(err.code(), ErrorCode::Conflict);
    let message = err.to_string();
    assert!(
        message.contains("already holds") && message.contains("3 products") && message.contains("empty database"),
        "{message}"
    );
    let products: i64 = client.query_one("SELECT count(*) FROM products", &[]).await.unwrap().get(0);
    assert_eq!(products, 3);

    // Back to a new SQLite file: every table's rows equal the original's.
    let back = dir.path().join("back").join("catalog.sqlite3");
    let down = copy::copy_catalog(&server, &CatalogUrl::Sqlite(back.clone()), &no_env).await.unwrap();
    assert_eq!(counts(&down), SAMPLE_COUNTS);
    let (expected, found) = (all_rows(&original), all_rows(&back));
    for ((table, want), (_, got)) in expected.iter().zip(&found) {
        assert_eq!(got, want, "{table} after the round trip");
    }

    // Search works in the copy: accents folded, the deleted product left out.
    let copied = Catalog::open(&back).unwrap();
    let hits = copied.search_products("creme vanilla", 0, 10).await.unwrap();
    assert_eq!(hits.iter().map(|p| p.id).collect::<Vec<_>>(), [1]);
    let copies = copied.search_products("brulee", 0, 10).await.unwrap();
    assert_eq!(copies.len(), 2, "the product and its duplicate");
    assert!(copied.search_products("green", 0, 10).await.unwrap().is_empty(), "a deleted product is not found");
    drop(copied);

    // Into a SQLite file that holds a catalog: refused, the file unchanged.
    let err = copy::copy_catalog(&server, &CatalogUrl::Sqlite(original.clone()), &no_env).await.unwrap_err();
    assert!(matches!(err, copy::CopyError::DestinationNotEmpty { .. }), "{err:?}");
    assert_eq!(all_rows(&original), expected);

    // A source that does not exist is not created.
    let missing = dir.path().join("no-such.sqlite3");
    let err = copy::copy_catalog(&CatalogUrl::Sqlite(missing.clone()), &server, &no_env).await.unwrap_err();
    assert!(matches!(err, copy::CopyError::SourceMissing { .. }), "{err:?}");
    assert!(!missing.exists());
}

/// A copy larger than a chunk (photos with thumbnails, more than `CHUNK_ROWS` of them) is copied
/// whole, chunk after chunk, and a failure half-way leaves the destination empty.
#[tokio::test(flavor = "multi_thread")]
async fn a_copy_of_many_chunks_is_whole_and_a_failed_one_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("many.sqlite3");
    drop(Catalog::open(&original).unwrap());
    let rows = copy::CHUNK_ROWS * 2 + 7;
    {
        let mut conn = rusqlite::Connection::open(&original).unwrap();
        let tx = conn.transaction().unwrap();
        for id in 1..=rows {
            tx.execute(
                "INSERT INTO photos (id, sha256, original_path, file_bytes, width, height, format, thumbnail_jpeg,
                 first_seen_at, last_seen_at) VALUES (?1, ?2, ?3, 1, 1, 1, 'jpeg', ?4, 0, 0)",
                rusqlite::params![id as i64, format!("{id:064x}"), format!("/p/{id}.jpg"), vec![id as u8; 2048]],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let server = CatalogUrl::parse(&fresh_database("copy_many").await).unwrap();
    let report = copy::copy_catalog(&CatalogUrl::Sqlite(original.clone()), &server, &no_env).await.unwrap();
    assert_eq!(report.tables[0], copy::TableCount { table: "photos", rows: rows as u64 });
    let back = dir.path().join("back.sqlite3");
    copy::copy_catalog(&server, &CatalogUrl::Sqlite(back.clone()), &no_env).await.unwrap();
    assert_eq!(all_rows(&back), all_rows(&original));

    // A row the server refuses (a product whose name is blank: SQLite's CHECK is bypassed here by
    // dropping the rule in a scratch copy) fails the copy after the photos were written: the
    // destination keeps none of them.
    let bad = dir.path().join("bad.sqlite3");
    std::fs::copy(&original, &bad).unwrap();
    {
        let conn = rusqlite::Connection::open(&bad).unwrap();
        conn.execute_batch(
            "PRAGMA ignore_check_constraints = ON;
             INSERT INTO products (id, photo_id, saved_json, revision, name, created_at, updated_at)
             VALUES (1, 1, '{}', 1, ' ', 0, 0);",
        )
        .unwrap();
    }
    let empty = CatalogUrl::parse(&fresh_database("copy_bad").await).unwrap();
    let err = copy::copy_catalog(&CatalogUrl::Sqlite(bad), &empty, &no_env).await.unwrap_err();
    assert!(matches!(err, copy::CopyError::Server(ServerError::Server { .. })), "{err:?}");
    let CatalogUrl::Server(url) = &empty else { unreachable!() };
    let client = ServerCatalog::connect_with(url, &no_env, None).await.unwrap().client().await.unwrap();
    let photos: i64 = client.query_one("SELECT count(*) FROM photos", &[]).await.unwrap().get(0);
    assert_eq!(photos, 0, "the failed copy was rolled back whole");
}

fn password_of(url: &str) -> String {
    let password = ServerUrl::parse(url).unwrap().config().get_password().map(<[u8]>::to_vec);
    String::from_utf8(password.expect("the test URL has a password")).unwrap()
}

/// Search on the server finds what SQLite's finds (data-driven over queries): the same catalog
/// copied to the server, each query's matches compared as sets (the ranking functions differ:
/// bm25 and ts_rank). Word prefixes, case and accents folded, every word required, deleted
/// products left out, query syntax searched as text.
#[tokio::test(flavor = "multi_thread")]
async fn search_on_the_server_finds_what_sqlite_finds() {
    use pe_core::catalog::{NewPhoto, SaveProduct};
    use pe_core::product::{Attribute, Product};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("search.sqlite3");
    let catalog = Catalog::open(&path).unwrap();
    /// Name, brand, category, description, attributes.
    type Row<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>, &'a [(&'a str, &'a str)]);
    let products: &[Row<'_>] = &[
        ("Crème fraîche", Some("Élan"), Some("Dairy"), Some("Thick cultured cream."), &[("Fat", "30 %")]),
        ("Creme brulee kit", Some("Dessert Co"), Some("Baking"), None, &[]),
        (
            "Crunchy Oat Bars",
            Some("ACME"),
            Some("Cereal bars"),
            Some("Honey and almond."),
            &[("Flavor", "Honey & Almond")],
        ),
        ("Oat milk", Some("Oatly"), Some("Dairy alternatives"), Some("Barista edition"), &[("Volume", "1 l")]),
        ("Crêpes", Some("Bretagne"), Some("Bakery"), Some("Thin pancakes, 12 pieces."), &[]),
        ("Vanilla ice cream", Some("Häagen"), Some("Frozen"), Some("Madagascar vanilla."), &[("Size", "500 ml")]),
        ("Deleted crème", Some("Gone"), Some("Dairy"), None, &[]),
        ("name:x (quoted)", None, None, Some("A \"tricky\" AND NOT name"), &[]),
    ];
    let mut deleted = 0;
    for (i, (name, brand, category, description, attributes)) in (1u32..).zip(products) {
        let photo = catalog
            .record_photo(NewPhoto {
                sha256: format!("{i:064x}"),
                original_path: format!("/shoot/{i}.jpg"),
                original_path_bytes: None,
                file_bytes: 1000,
                width: 640,
                height: 480,
                format: "jpeg".into(),
                thumbnail_jpeg: vec![0xFF, 0xD8, 0xFF, i as u8],
                seen_at: 1_700_000_000_000,
            })
            .await
            .unwrap();
        let saved = Product {
            name: (*name).into(),
            brand: brand.map(Into::into),
            category: category.map(Into::into),
            description: description.map(Into::into),
            attributes: attributes.iter().map(|(n, v)| Attribute { name: (*n).into(), value: (*v).into() }).collect(),
            ..Product::default()
        };
        let record = catalog
            .save_product(SaveProduct {
                photo_id: photo,
                attempt_id: None,
                saved,
                saved_by: "alice".into(),
                saved_at: 1_700_000_000_000 + i64::from(i),
            })
            .await
            .unwrap();
        if name.starts_with("Deleted") {
            deleted = record.id;
            catalog.delete_product(record.id, "alice", 1_700_000_001_000).await.unwrap();
        }
    }
    let server_url = fresh_database("search").await;
    let server = CatalogUrl::parse(&server_url).unwrap();
    copy::copy_catalog(&CatalogUrl::Sqlite(path.clone()), &server, &no_env).await.unwrap();
    let remote = Catalog::on_server(connect(&server_url).await.unwrap());

    let queries = [
        "creme",
        "Crème",
        "CRE",
        "cr",
        "fraiche",
        "FRAÎCHE",
        "oat",
        "oat milk",
        "milk oat",
        "oat bars honey",
        "vanilla",
        "madagascar",
        "haagen",
        "elan",
        "12",
        "pieces",
        "almond",
        "honey & almond",
        "dairy",
        "zzz",
        "name:x",
        "\"tricky\"",
        "AND",
        "NOT name",
        "(quoted)",
        "500",
        "brûlée",
        "brulee",
        "gone",
        // pg/0010's prefix index: a term of 1 to 6 characters is one exact key, a longer one a
        // prefix of the words themselves.
        "c",
        "h",
        "l",
        "1",
        "c oat",
        "crunch",
        "crunchy",
        "crunchi",
        "madaga",
        "madagas",
        "cultur",
        "culture",
        "cultured",
        "baris",
        "barista",
        "ALTERNATIVES",
    ];
    for query in queries {
        let mut local: Vec<i64> = catalog.search_products(query, 0, 100).await.unwrap().iter().map(|p| p.id).collect();
        let mut server: Vec<i64> = remote.search_products(query, 0, 100).await.unwrap().iter().map(|p| p.id).collect();
        local.sort_unstable();
        server.sort_unstable();
        assert_eq!(server, local, "{query:?}: the server found {server:?}, SQLite {local:?}");
        assert!(!server.contains(&deleted), "{query:?}");
    }
    // What the examples promise, spelled out.
    let found = |q: &'static str| {
        let remote = &remote;
        async move { remote.search_products(q, 0, 100).await.unwrap().iter().map(|p| p.id).collect::<Vec<i64>>() }
    };
    assert_eq!(found("creme").await.len(), 2, "Crème fraîche and Creme brulee kit, not the deleted one");
    assert_eq!(found("cream").await, [6, 1], "a name match (ice cream) before a description's");
    // No word: the list, as on SQLite (every live product, the newest first).
    assert_eq!(found("   ").await, [8, 6, 5, 4, 3, 2, 1]);
}
