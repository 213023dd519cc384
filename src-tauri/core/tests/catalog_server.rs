//! The team catalog's foundation against a real PostgreSQL server (`scripts/with-postgres`, which
//! `make test` wraps the tests in): migrations, once under concurrency, a newer server refused,
//! typed connection errors that never show a password. Each test has a database of its own.

use pe_core::catalog::server::testing::{fresh_database, server_url};
use pe_core::catalog::server::{CatalogUrl, ServerCatalog, ServerError, ServerUrl, SERVER_SCHEMA_VERSION};
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
            "import_item_photos",
            "import_items",
            "photos",
            "product_photos",
            "product_revisions",
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

/// Server columns that SQLite does not have, and why (none yet: the queue's lease and the search
/// vector come with their own migrations, and are listed here then).
const SERVER_ONLY_COLUMNS: &[(&str, &str, &str)] = &[];

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
