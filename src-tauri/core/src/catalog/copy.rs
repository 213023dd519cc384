//! `product-extractor catalog copy`: a whole catalog from one place to another — a SQLite file to
//! a PostgreSQL server (how a team starts: one desktop's catalog becomes the shared one), or a
//! server back to a new SQLite file (a team's catalog taken offline).
//!
//! - **Everything, ids kept.** Every table of the schema ([`TABLES`]: photos with their
//!   thumbnails, batches, attempts, products, revisions, the import queue and the 0011 photo
//!   tables), each row with its id, so every reference between them stays right. The server's
//!   identity sequences are moved past the copied ids afterwards, so the next row gets a new id.
//! - **All or nothing.** The destination is written in one transaction; a failure anywhere (or
//!   counts that do not match) leaves it as it was. The source is read in one snapshot (a SQLite
//!   read transaction, a `REPEATABLE READ` server transaction), so a desktop writing to it meanwhile
//!   cannot make the copy inconsistent.
//! - **Only into an empty catalog.** A destination that already holds rows in any of the tables is
//!   refused ([`CopyError::DestinationNotEmpty`]): merging two catalogs would collide on ids.
//! - **Bounded memory.** Each table is read in chunks of at most [`CHUNK_ROWS`] rows, in key order
//!   from where the last chunk ended (keyset pagination, the same SQL on both sides), and each
//!   chunk is written before the next is read: a 100,000-product catalog holds one chunk of rows
//!   (thumbnails included) at a time, never a table.
//! - **Verified.** After the rows are written, each table is counted in the destination (inside
//!   its transaction) against the source's count in its snapshot; a difference rolls back.
//! - **Search works on arrival.** Into SQLite, `products_fts` is rebuilt from the copied products
//!   before the commit (the server has no FTS5 table: its search is a later migration's).
//!
//! Both catalogs are brought to this build's schema first (SQLite by [`Catalog::open`], the server
//! by [`ServerCatalog::migrate`]), as opening them in the app would; a catalog newer than this
//! build is refused by those. SQLite work runs on the blocking pool, one step at a time, never on
//! an async worker.

use std::path::{Path, PathBuf};

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};

use super::server::{CatalogUrl, EnvFn, ServerCatalog, ServerError, ServerUrl};
use super::{Catalog, CatalogError};
use crate::error::{Coded, ErrorCode};

/// Rows read and written at a time (fewer for a table whose row has many columns, so that a
/// chunk's insert stays under PostgreSQL's 65,535 parameters). A chunk of photos with their
/// thumbnails (~20 KB each) is about 10 MB.
pub const CHUNK_ROWS: usize = 500;

/// PostgreSQL's limit of parameters in one statement.
const MAX_SERVER_PARAMETERS: usize = 65_535;

/// How a column's values travel: the same on both sides (SQLite's storage class, PostgreSQL's
/// type per pg/0001's rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SQLite INTEGER, PostgreSQL BIGINT.
    Int,
    /// SQLite REAL, PostgreSQL DOUBLE PRECISION.
    Real,
    /// SQLite TEXT, PostgreSQL TEXT.
    Text,
    /// SQLite TEXT checked by json_valid(), PostgreSQL JSON: carried as its text, verbatim.
    Json,
    /// SQLite BLOB, PostgreSQL BYTEA.
    Blob,
}

/// One table the copy carries: its columns in order, its key (what chunks are ordered and resumed
/// by), and whether its `id` is a server identity whose sequence follows the copied ids.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    pub key: &'static [&'static str],
    pub columns: &'static [(&'static str, Kind)],
    pub identity: bool,
}

use Kind::{Blob, Int, Json, Real, Text};

/// Every table of the catalog, in an order where each row's references are copied before it
/// (photos and batches, then attempts, products, …). The schema parity test checks that this list
/// has exactly the SQLite schema's tables and columns, so a migration cannot leave the copy behind.
/// Not here: `products_fts` (SQLite's search index, rebuilt from products).
pub const TABLES: &[Table] = &[
    Table {
        name: "photos",
        key: &["id"],
        identity: true,
        columns: &[
            ("id", Int),
            ("sha256", Text),
            ("original_path", Text),
            ("original_path_bytes", Blob),
            ("file_bytes", Int),
            ("width", Int),
            ("height", Int),
            ("format", Text),
            ("thumbnail_jpeg", Blob),
            ("first_seen_at", Int),
            ("last_seen_at", Int),
            ("phash", Text),
            ("original_host", Text),
        ],
    },
    Table {
        name: "batches",
        key: &["id"],
        identity: true,
        columns: &[
            ("id", Int),
            ("display_name", Text),
            ("name", Text),
            ("state", Text),
            ("model", Text),
            ("requests", Int),
            ("created_at", Int),
            ("submitted_at", Int),
            ("last_polled_at", Int),
            ("error", Text),
            ("updated_at", Int),
        ],
    },
    Table {
        name: "attempts",
        key: &["id"],
        identity: true,
        columns: &[
            ("id", Int),
            ("photo_id", Int),
            ("model", Text),
            ("started_at", Int),
            ("latency_ms", Int),
            ("prompt_tokens", Int),
            ("output_tokens", Int),
            ("thoughts_tokens", Int),
            ("total_tokens", Int),
            ("outcome", Text),
            ("proposal_json", Json),
            ("error_code", Text),
            ("error_message", Text),
            ("raw_response", Text),
            ("cached_tokens", Int),
            ("model_version", Text),
            ("cost_nanos", Int),
            ("batch", Int),
            ("batch_name", Text),
            ("barcodes_json", Json),
            ("sources_json", Json),
        ],
    },
    Table {
        name: "attempt_photos",
        key: &["attempt_id", "position"],
        identity: false,
        columns: &[("attempt_id", Int), ("position", Int), ("photo_id", Int)],
    },
    Table {
        name: "products",
        key: &["id"],
        identity: true,
        columns: &[
            ("id", Int),
            ("photo_id", Int),
            ("attempt_id", Int),
            ("duplicate_of", Int),
            ("proposed_json", Json),
            ("saved_json", Json),
            ("revision", Int),
            ("name", Text),
            ("brand", Text),
            ("category", Text),
            ("price_amount", Real),
            ("price_currency", Text),
            ("gtin", Text),
            ("flagged", Int),
            ("created_at", Int),
            ("updated_at", Int),
            ("updated_by", Text),
            ("deleted_at", Int),
            ("deleted_by", Text),
        ],
    },
    Table {
        name: "product_photos",
        key: &["product_id", "position"],
        identity: false,
        columns: &[("product_id", Int), ("position", Int), ("photo_id", Int)],
    },
    Table {
        name: "product_revisions",
        key: &["product_id", "revision"],
        identity: false,
        columns: &[
            ("product_id", Int),
            ("revision", Int),
            ("saved_json", Json),
            ("proposed_json", Json),
            ("attempt_id", Int),
            ("source", Text),
            ("saved_by", Text),
            ("saved_at", Int),
        ],
    },
    Table {
        name: "import_items",
        key: &["id"],
        identity: true,
        columns: &[
            ("id", Int),
            ("path", Text),
            ("path_bytes", Blob),
            ("sha256", Text),
            ("state", Text),
            ("attempts", Int),
            ("forced", Int),
            ("photo_id", Int),
            ("attempt_id", Int),
            ("proposal_json", Json),
            ("flags_json", Json),
            ("flag_count", Int),
            ("product_id", Int),
            ("saved_revision", Int),
            ("created_product", Int),
            ("skip_reason", Text),
            ("duplicate_of_item", Int),
            ("duplicate_of_product", Int),
            ("looks_like_photo_id", Int),
            ("looks_like_distance", Int),
            ("error_code", Text),
            ("error_message", Text),
            ("queued_at", Int),
            ("updated_at", Int),
            ("origin", Text),
            ("batch", Int),
            ("batch_id", Int),
            ("barcodes_json", Json),
            ("group_json", Text),
            ("lease_owner", Text),
            ("lease_until", Int),
            ("queued_on", Text),
            ("path_tag", Text),
        ],
    },
    Table {
        name: "import_item_unreadable",
        key: &["item_id", "host"],
        identity: false,
        columns: &[("item_id", Int), ("host", Text)],
    },
    Table {
        name: "import_item_photos",
        key: &["item_id", "position"],
        identity: false,
        columns: &[
            ("item_id", Int),
            ("position", Int),
            ("path", Text),
            ("path_bytes", Blob),
            ("sha256", Text),
            ("photo_id", Int),
            ("path_tag", Text),
        ],
    },
    Table {
        name: "import_item_gtins",
        key: &["item_id", "gtin_key"],
        identity: false,
        columns: &[("item_id", Int), ("gtin_key", Text)],
    },
    Table {
        name: "breaker_state",
        key: &["breaker", "desktop"],
        identity: false,
        columns: &[("breaker", Text), ("desktop", Text), ("saved_json", Json), ("saved_at", Int)],
    },
];

impl Table {
    fn column_list(&self) -> String {
        self.columns.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
    }

    fn key_indexes(&self) -> Vec<usize> {
        self.key
            .iter()
            .map(|k| self.columns.iter().position(|(name, _)| name == k).expect("a key is one of the columns"))
            .collect()
    }

    /// Rows per chunk for this table.
    fn chunk_rows(&self) -> usize {
        CHUNK_ROWS.min(MAX_SERVER_PARAMETERS / self.columns.len())
    }
}

/// One column's value on its way.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    /// Text, and JSON as its text.
    Text(String),
    Blob(Vec<u8>),
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Value::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Value::Text(v) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
            Value::Blob(v) => ToSqlOutput::Borrowed(ValueRef::Blob(v)),
        })
    }
}

/// Every parameter the copy sends has an explicit cast in its SQL (`$1::bigint`, `$2::text`, …,
/// see [`server_cast`]), so the server's parameter type is the value's own.
impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => v.to_sql(ty, out),
            Value::Real(v) => v.to_sql(ty, out),
            Value::Text(v) => v.to_sql(ty, out),
            Value::Blob(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        [Type::INT8, Type::FLOAT8, Type::TEXT, Type::BYTEA].contains(ty)
    }

    to_sql_checked!();
}

/// A parameter's cast in server SQL: the type its value is sent as (JSON goes as text, and the
/// server checks and keeps it verbatim).
fn server_cast(kind: Kind) -> &'static str {
    match kind {
        Int => "::bigint",
        Real => "::double precision",
        Text => "::text",
        Json => "::text::json",
        Blob => "::bytea",
    }
}

/// How many rows of one table were copied (and found in the destination).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableCount {
    pub table: &'static str,
    pub rows: u64,
}

/// What `catalog copy` reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CopyReport {
    /// The source and the destination, a server URL's password masked.
    pub from: String,
    pub to: String,
    /// Each table's rows, in copy order; the same in the source and the destination.
    pub tables: Vec<TableCount>,
}

/// Why a copy did not happen. Nothing was written to the destination in any of these cases.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("cannot copy from {path}: there is no catalog file there")]
    SourceMissing { path: PathBuf },
    #[error(
        "the destination {url} already holds a catalog ({tables}); nothing was copied: copy into a new \
         SQLite file, or into an empty database (createdb a new one and give its postgres:// URL)"
    )]
    DestinationNotEmpty { url: String, tables: String },
    #[error(
        "the copy to {url} was rolled back: {table} has {source_rows} rows in the source but {destination_rows} \
         in the destination"
    )]
    CountMismatch { url: String, table: &'static str, source_rows: u64, destination_rows: u64 },
    #[error("cannot copy {table}.{column} from {url}: {reason}")]
    Value { url: String, table: &'static str, column: &'static str, reason: String },
    #[error("the SQLite catalog {path} failed during the copy: {source}")]
    Sqlite { path: PathBuf, source: rusqlite::Error },
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl Coded for CopyError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::SourceMissing { .. } => ErrorCode::NotFound,
            Self::DestinationNotEmpty { .. } => ErrorCode::Conflict,
            Self::CountMismatch { .. } | Self::Value { .. } | Self::Sqlite { .. } => ErrorCode::Catalog,
            Self::Server(e) => e.code(),
            Self::Catalog(e) => e.code(),
        }
    }
}

/// Copies the whole catalog at `from` into `to` (see the module's documentation). `env` supplies
/// a server's password settings (`PGPASSWORD`, …) as for [`ServerCatalog::connect`].
pub async fn copy_catalog(from: &CatalogUrl, to: &CatalogUrl, env: EnvFn<'_>) -> Result<CopyReport, CopyError> {
    let mut source = match from {
        CatalogUrl::Sqlite(path) => {
            if !path.is_file() {
                return Err(CopyError::SourceMissing { path: path.clone() });
            }
            Side::Sqlite(SqliteSide::open(path, false).await?)
        }
        CatalogUrl::Server(url) => Side::Server(Box::new(ServerSide::open(url, env, false).await?)),
    };
    let result = copy_from(&mut source, from, to, env).await;
    // The source's snapshot is only read: ending it either way changes nothing.
    let ended = source.end(false).await;
    let report = result?;
    ended?;
    Ok(report)
}

async fn copy_from(
    source: &mut Side,
    from: &CatalogUrl,
    to: &CatalogUrl,
    env: EnvFn<'_>,
) -> Result<CopyReport, CopyError> {
    let mut counts = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        counts.push(source.count(table).await?);
    }
    let mut destination = match to {
        CatalogUrl::Sqlite(path) => Side::Sqlite(SqliteSide::open(path, true).await?),
        CatalogUrl::Server(url) => Side::Server(Box::new(ServerSide::open(url, env, true).await?)),
    };
    match fill(source, &mut destination, &counts).await {
        Ok(tables) => {
            destination.end(true).await?;
            destination.after_commit().await;
            Ok(CopyReport { from: from.to_string(), to: to.to_string(), tables })
        }
        Err(e) => {
            if let Err(rollback) = destination.end(false).await {
                tracing::warn!(error = %rollback, "rolling the copy's destination back failed");
            }
            Err(e)
        }
    }
}

/// Inside the destination's transaction: refuse a non-empty one, copy every table, finish
/// (sequences, search), verify the counts.
async fn fill(source: &mut Side, destination: &mut Side, counts: &[u64]) -> Result<Vec<TableCount>, CopyError> {
    let mut held = Vec::new();
    for table in TABLES {
        let rows = destination.count(table).await?;
        if rows > 0 {
            held.push(format!("{} {}", rows, table.name.replace('_', " ")));
        }
    }
    if !held.is_empty() {
        return Err(CopyError::DestinationNotEmpty { url: destination.url(), tables: held.join(", ") });
    }
    for table in TABLES {
        let key_indexes = table.key_indexes();
        let mut after: Option<Vec<Value>> = None;
        let mut copied = 0u64;
        loop {
            let rows = source.read_chunk(table, after.take(), table.chunk_rows()).await?;
            let Some(last) = rows.last() else { break };
            after = Some(key_indexes.iter().map(|&i| last[i].clone()).collect());
            copied += rows.len() as u64;
            let full = rows.len() == table.chunk_rows();
            destination.write_chunk(table, rows).await?;
            if !full {
                break;
            }
        }
        tracing::info!(table = table.name, rows = copied, "catalog copy: table copied");
    }
    destination.finish().await?;
    let mut tables = Vec::with_capacity(TABLES.len());
    for (table, &source_rows) in TABLES.iter().zip(counts) {
        let destination_rows = destination.count(table).await?;
        if destination_rows != source_rows {
            return Err(CopyError::CountMismatch {
                url: destination.url(),
                table: table.name,
                source_rows,
                destination_rows,
            });
        }
        tables.push(TableCount { table: table.name, rows: destination_rows });
    }
    Ok(tables)
}

/// `WHERE (k1, k2) > (p1, p2) ORDER BY k1, k2 LIMIT n`: the next chunk after the key `after`,
/// with `param(i, kind)` writing the i-th (1-based) placeholder in the side's dialect.
fn chunk_query(
    table: &Table,
    select_list: &str,
    resume: bool,
    limit: usize,
    param: impl Fn(usize, Kind) -> String,
) -> String {
    let keys = table.key.join(", ");
    let filter = if resume {
        let params: Vec<String> =
            table.key_indexes().iter().enumerate().map(|(i, &column)| param(i + 1, table.columns[column].1)).collect();
        format!("WHERE ({keys}) > ({})", params.join(", "))
    } else {
        String::new()
    };
    format!("SELECT {select_list} FROM {} {filter} ORDER BY {keys} LIMIT {limit}", table.name)
}

/// One end of the copy.
enum Side {
    Sqlite(SqliteSide),
    Server(Box<ServerSide>),
}

impl Side {
    fn url(&self) -> String {
        match self {
            Side::Sqlite(side) => side.path.display().to_string(),
            Side::Server(side) => side.catalog.url().to_string(),
        }
    }

    async fn count(&mut self, table: &'static Table) -> Result<u64, CopyError> {
        let sql = format!("SELECT count(*) FROM {}", table.name);
        let rows: i64 = match self {
            Side::Sqlite(side) => side.run(move |conn| conn.query_row(&sql, [], |r| r.get(0))).await?,
            Side::Server(side) => side.client.query_one(&sql, &[]).await.map_err(|e| side.error(&e))?.get(0),
        };
        Ok(u64::try_from(rows).unwrap_or(0))
    }

    async fn read_chunk(
        &mut self,
        table: &'static Table,
        after: Option<Vec<Value>>,
        limit: usize,
    ) -> Result<Vec<Vec<Value>>, CopyError> {
        match self {
            Side::Sqlite(side) => {
                let url = side.path.display().to_string();
                let sql = chunk_query(table, &table.column_list(), after.is_some(), limit, |i, _| format!("?{i}"));
                side.run_copy(move |conn| {
                    let mut statement = conn.prepare_cached(&sql).map_err(Fail::Sqlite)?;
                    let params = after.unwrap_or_default();
                    let mut rows = statement.query(rusqlite::params_from_iter(&params)).map_err(Fail::Sqlite)?;
                    let mut chunk = Vec::with_capacity(limit);
                    while let Some(row) = rows.next().map_err(Fail::Sqlite)? {
                        let mut values = Vec::with_capacity(table.columns.len());
                        for (i, &(column, kind)) in table.columns.iter().enumerate() {
                            let value = row.get_ref(i).map_err(Fail::Sqlite)?;
                            values.push(from_sqlite(value, kind).map_err(|reason| {
                                Fail::Copy(CopyError::Value { url: url.clone(), table: table.name, column, reason })
                            })?);
                        }
                        chunk.push(values);
                    }
                    Ok(chunk)
                })
                .await
            }
            Side::Server(side) => {
                let select_list = table
                    .columns
                    .iter()
                    .map(|&(name, kind)| if kind == Json { format!("{name}::text") } else { name.to_string() })
                    .collect::<Vec<_>>()
                    .join(", ");
                let sql = chunk_query(table, &select_list, after.is_some(), limit, |i, kind| {
                    format!("${i}{}", server_cast(kind))
                });
                let params = after.unwrap_or_default();
                let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
                let rows = side.client.query(&sql, &params).await.map_err(|e| side.error(&e))?;
                rows.iter()
                    .map(|row| {
                        table
                            .columns
                            .iter()
                            .enumerate()
                            .map(|(i, &(column, kind))| {
                                from_server(row, i, kind).map_err(|e| CopyError::Value {
                                    url: side.catalog.url().to_string(),
                                    table: table.name,
                                    column,
                                    reason: e.to_string(),
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect()
            }
        }
    }

    async fn write_chunk(&mut self, table: &'static Table, rows: Vec<Vec<Value>>) -> Result<(), CopyError> {
        match self {
            Side::Sqlite(side) => {
                let placeholders = (1..=table.columns.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ");
                let sql = format!("INSERT INTO {} ({}) VALUES ({placeholders})", table.name, table.column_list());
                side.run(move |conn| {
                    let mut statement = conn.prepare_cached(&sql)?;
                    for row in &rows {
                        statement.execute(rusqlite::params_from_iter(row))?;
                    }
                    Ok(())
                })
                .await
            }
            Side::Server(side) => {
                let width = table.columns.len();
                let tuples = (0..rows.len())
                    .map(|r| {
                        let values = table
                            .columns
                            .iter()
                            .enumerate()
                            .map(|(c, &(_, kind))| format!("${}{}", r * width + c + 1, server_cast(kind)))
                            .collect::<Vec<_>>();
                        format!("({})", values.join(", "))
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let sql = format!("INSERT INTO {} ({}) VALUES {tuples}", table.name, table.column_list());
                let params: Vec<&(dyn ToSql + Sync)> =
                    rows.iter().flatten().map(|v| v as &(dyn ToSql + Sync)).collect();
                side.client.execute(&sql, &params).await.map_err(|e| side.error(&e))?;
                Ok(())
            }
        }
    }

    /// After the rows, before the counts and the commit: the server's identity sequences moved past
    /// the copied ids (else the next insert would collide with a copied row); SQLite's search index
    /// rebuilt from the copied products.
    async fn finish(&mut self) -> Result<(), CopyError> {
        match self {
            Side::Sqlite(side) => {
                side.run(|conn| {
                    conn.execute_batch(
                        "DELETE FROM products_fts;
                         INSERT INTO products_fts (rowid, name, brand, category, description, attributes)
                         SELECT * FROM products_search_text;
                         INSERT INTO products_fts (products_fts) VALUES ('optimize');",
                    )
                })
                .await
            }
            Side::Server(side) => {
                for table in TABLES.iter().filter(|t| t.identity) {
                    let sql = format!(
                        "SELECT setval(pg_get_serial_sequence('{0}', 'id'), coalesce(max(id), 0) + 1, false) FROM {0}",
                        table.name
                    );
                    side.client.query_one(&sql, &[]).await.map_err(|e| side.error(&e))?;
                }
                Ok(())
            }
        }
    }

    /// Commits (or rolls back) the side's transaction.
    async fn end(&mut self, commit: bool) -> Result<(), CopyError> {
        let sql = if commit { "COMMIT" } else { "ROLLBACK" };
        match self {
            Side::Sqlite(side) => side.run(move |conn| conn.execute_batch(sql)).await,
            Side::Server(side) => side.client.batch_execute(sql).await.map_err(|e| side.error(&e)),
        }
    }

    /// Housekeeping once committed, which the copy does not depend on: SQLite folds the copy's
    /// pages from the WAL into the file (as opening after a migration does); the server vacuums
    /// and analyzes the new rows now rather than at autovacuum's next rounds: the planner's
    /// statistics (search plans depend on how common a word is), the visibility map, and the
    /// search index's pending list merged into the index (until then every search reads it).
    async fn after_commit(&mut self) {
        let done = match self {
            Side::Sqlite(side) => {
                side.run(|conn| conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))).await
            }
            Side::Server(side) => side.vacuum().await,
        };
        if let Err(e) = done {
            tracing::warn!(error = %e, "after the catalog copy");
        }
    }
}

/// The server's tables that the copy fills without naming them: the search table, which triggers
/// fill from the copied products (pg/0005), vacuumed with the copied tables.
const SERVER_DERIVED_TABLES: &[&str] = &["product_search"];

/// How many times the copy vacuums a table that is left without its visibility map.
const VACUUM_ROUNDS: u32 = 4;

/// What a SQLite step can fail with: SQLite itself, or a value the copy refuses.
enum Fail {
    Sqlite(rusqlite::Error),
    Copy(CopyError),
}

/// A SQLite catalog's end: its own connection (not the `Catalog` thread's: the copy needs one
/// transaction across many steps), lent to the blocking pool for each step.
struct SqliteSide {
    path: PathBuf,
    conn: Option<Connection>,
}

impl SqliteSide {
    /// Brings the file to this build's schema (creating it for a destination), then opens the
    /// copy's connection in a transaction: a read snapshot for a source, the write lock for a
    /// destination.
    async fn open(path: &Path, destination: bool) -> Result<Self, CopyError> {
        let owned = path.to_path_buf();
        let opened = tokio::task::spawn_blocking(move || -> Result<Connection, CopyError> {
            drop(Catalog::open(&owned)?);
            let conn = Connection::open(&owned).map_err(|source| CatalogError::Open { path: owned.clone(), source })?;
            let begin = || -> rusqlite::Result<()> {
                conn.busy_timeout(super::BUSY_TIMEOUT)?;
                conn.pragma_update(None, "foreign_keys", true)?;
                if destination {
                    conn.execute_batch("BEGIN IMMEDIATE")?;
                } else {
                    // A deferred transaction's snapshot starts at its first read.
                    conn.execute_batch("BEGIN")?;
                    conn.query_row("SELECT count(*) FROM photos", [], |_| Ok(()))?;
                }
                Ok(())
            };
            begin().map_err(|source| CopyError::Sqlite { path: owned.clone(), source })?;
            Ok(conn)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        Ok(Self { path: path.to_path_buf(), conn: Some(opened) })
    }

    /// Runs `f` on the connection on the blocking pool.
    async fn run<R: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    ) -> Result<R, CopyError> {
        self.run_copy(move |conn| f(conn).map_err(Fail::Sqlite)).await
    }

    async fn run_copy<R: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut Connection) -> Result<R, Fail> + Send + 'static,
    ) -> Result<R, CopyError> {
        let mut conn = self.conn.take().expect("the connection is back after every step");
        let (conn, result) = tokio::task::spawn_blocking(move || {
            let result = f(&mut conn);
            (conn, result)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        self.conn = Some(conn);
        result.map_err(|fail| match fail {
            Fail::Sqlite(source) => CopyError::Sqlite { path: self.path.clone(), source },
            Fail::Copy(e) => e,
        })
    }
}

/// A server catalog's end: one pooled connection in a transaction (begun and ended by SQL, as the
/// transaction spans many steps).
struct ServerSide {
    catalog: ServerCatalog,
    client: deadpool_postgres::Object,
}

impl ServerSide {
    /// VACUUM (ANALYZE) of the copied tables, until each has its visibility map (a few rounds
    /// at most). VACUUM marks a page all-visible only once its rows' commit hint bits are set,
    /// and those wait while any commit of the same group of 32 transaction ids is asynchronous
    /// and not yet flushed (up to ~0.6 s with `synchronous_commit = off`). The destination's own
    /// commits are synchronous ([`Self::open`]), but another session's (an autovacuum of any
    /// database, a desktop) may land in the group while the VACUUM runs: the tables it left
    /// unmarked are vacuumed again after a second, which reads only their unmarked pages.
    /// Without the visibility map, every count and facet of the copied catalog reads the whole
    /// table instead of an index (measured at 100k products: a first page 70 ms instead of a
    /// few, the facets 150 ms).
    async fn vacuum(&mut self) -> Result<(), CopyError> {
        let mut tables: Vec<&str> =
            TABLES.iter().map(|t| t.name).chain(SERVER_DERIVED_TABLES.iter().copied()).collect();
        let mut command = "VACUUM (ANALYZE)";
        for round in 1..=VACUUM_ROUNDS {
            self.client.batch_execute(&format!("{command} {}", tables.join(", "))).await.map_err(|e| self.error(&e))?;
            let unmarked = self
                .client
                .query(
                    "SELECT relname::text FROM pg_class
                     WHERE relname = ANY($1) AND relkind = 'r' AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
                       AND relallvisible < relpages",
                    &[&tables],
                )
                .await
                .map_err(|e| self.error(&e))?;
            let unmarked: Vec<String> = unmarked.iter().map(|r| r.get(0)).collect();
            if unmarked.is_empty() {
                return Ok(());
            }
            if round == VACUUM_ROUNDS {
                tracing::warn!(tables = ?unmarked, "after the catalog copy, tables without a full visibility map (autovacuum will set it)");
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            tables.retain(|t| unmarked.iter().any(|u| u == t));
            command = "VACUUM";
        }
        Ok(())
    }

    /// Connects and migrates, then begins: a read-only `REPEATABLE READ` snapshot for a source; for
    /// a destination a transaction that locks the catalog's tables against other writers (a
    /// desktop saving while the copy fills an empty catalog would collide with copied ids), in a
    /// session that commits synchronously whatever the server's `synchronous_commit`: the copy is
    /// durable before it is reported, and its VACUUM ([`Self::vacuum`]) can set the commit hint
    /// bits of the copied rows and of its own ANALYZE at once.
    async fn open(url: &ServerUrl, env: EnvFn<'_>, destination: bool) -> Result<Self, CopyError> {
        let catalog = ServerCatalog::connect(url, env).await?;
        catalog.migrate().await?;
        let client = catalog.client().await?;
        let begin = if destination {
            let tables = TABLES.iter().map(|t| t.name).collect::<Vec<_>>().join(", ");
            format!("SET synchronous_commit = on; BEGIN; LOCK TABLE {tables} IN EXCLUSIVE MODE")
        } else {
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY".to_string()
        };
        client.batch_execute(&begin).await.map_err(|e| catalog.driver_error(&e))?;
        Ok(Self { catalog, client })
    }

    fn error(&self, e: &tokio_postgres::Error) -> CopyError {
        self.catalog.driver_error(e).into()
    }
}

/// A SQLite value as the column's kind. SQLite's STRICT tables guarantee the storage class;
/// 0011's tables are not STRICT, so a stray class is refused here rather than copied wrong.
fn from_sqlite(value: ValueRef<'_>, kind: Kind) -> Result<Value, String> {
    Ok(match (value, kind) {
        (ValueRef::Null, _) => Value::Null,
        (ValueRef::Integer(v), Int) => Value::Int(v),
        (ValueRef::Integer(v), Real) => Value::Real(v as f64),
        (ValueRef::Real(v), Real) => Value::Real(v),
        (ValueRef::Text(v), Text | Json) => {
            Value::Text(String::from_utf8(v.to_vec()).map_err(|_| "text that is not UTF-8".to_string())?)
        }
        (ValueRef::Blob(v), Blob) => Value::Blob(v.to_vec()),
        (other, kind) => return Err(format!("a {:?} value in a {kind:?} column", other.data_type())),
    })
}

fn from_server(row: &tokio_postgres::Row, i: usize, kind: Kind) -> Result<Value, tokio_postgres::Error> {
    Ok(match kind {
        Int => row.try_get::<_, Option<i64>>(i)?.map_or(Value::Null, Value::Int),
        Real => row.try_get::<_, Option<f64>>(i)?.map_or(Value::Null, Value::Real),
        Text | Json => row.try_get::<_, Option<String>>(i)?.map_or(Value::Null, Value::Text),
        Blob => row.try_get::<_, Option<Vec<u8>>>(i)?.map_or(Value::Null, Value::Blob),
    })
}
