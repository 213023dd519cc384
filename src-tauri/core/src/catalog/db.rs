//! One SQL seam for both backends: the code that must behave the same on a SQLite file and on a
//! PostgreSQL server (the import queue's store, the catalog writes it takes part in) is written
//! once against [`Db`], a synchronous connection that is either SQLite's or a server session's.
//!
//! - Statements use SQLite's numbered placeholders (`?1`, `?2`); on a server they become `$1`,
//!   `$2` ([`postgres_placeholders`]). Parameters are rusqlite's (`params![…]`); on a server each
//!   value is encoded for the type the server inferred for its placeholder ([`PgValue`]).
//! - Rows are read through [`DbRow::get`] with rusqlite's `FromSql`, whatever the backend: a
//!   server's columns are read into SQLite's value model first (`json`/`jsonb` as text, `boolean`
//!   as 0/1, `numeric` as an integer when it is one).
//! - A transaction ([`Db::transaction`]) is SQLite's `BEGIN IMMEDIATE` (one writer at a time) or
//!   a server's `SERIALIZABLE` one: a change that races another desktop's is refused with
//!   [`CatalogError::Contended`], and [`super::Catalog::run_db`] runs the whole closure again.
//!   Dropping a [`DbTx`] without [`DbTx::commit`] rolls it back.
//! - Where the two SQL dialects differ, the statement asks [`Db::dialect`]; the rest of the SQL is
//!   the common subset (`IS NOT DISTINCT FROM`, `RETURNING`, `ON CONFLICT`, `FILTER`).
//!
//! On a server the session runs on the blocking pool and waits for each statement with the
//! runtime's `block_on` (see [`super::Catalog::run_db`]): the closure stays synchronous, so no
//! transaction can span a Gemini call on either backend.

use std::cell::Cell;
use std::error::Error as StdError;

use bytes::{BufMut, BytesMut};
use rusqlite::types::{FromSql, Value, ValueRef};
use rusqlite::{Connection, ToSql};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{IsNull, Type};

use super::server::ServerError;
use super::CatalogError;

/// Which SQL a statement must be written in, where the two differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A connection to either backend, for synchronous statements.
#[derive(Clone, Copy)]
pub(crate) enum Db<'c> {
    Sqlite(&'c Connection),
    Postgres(&'c PgSession),
}

/// A statement failed: SQLite's error, or the server's (with its SQLSTATE).
#[derive(Debug)]
pub(crate) enum DbError {
    Sqlite(rusqlite::Error),
    Server { error: ServerError, state: Option<SqlState> },
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite(e)
    }
}

impl DbError {
    /// The server refused a change that raced another transaction (SERIALIZABLE's serialization
    /// failure, or a deadlock): running the transaction again is the fix.
    pub(crate) fn is_contention(&self) -> bool {
        matches!(self, Self::Server { state: Some(state), .. }
            if *state == SqlState::T_R_SERIALIZATION_FAILURE || *state == SqlState::T_R_DEADLOCK_DETECTED)
    }
}

impl From<DbError> for CatalogError {
    fn from(e: DbError) -> Self {
        if e.is_contention() {
            return CatalogError::Contended;
        }
        match e {
            DbError::Sqlite(e) => CatalogError::Sqlite(e),
            DbError::Server { error, .. } => CatalogError::Server(error),
        }
    }
}

/// A row of either backend.
pub(crate) enum DbRow<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(Vec<Value>),
}

impl DbRow<'_> {
    /// Column `idx` (from 0) as SQLite's value.
    pub(crate) fn get_ref(&self, idx: usize) -> rusqlite::Result<ValueRef<'_>> {
        match self {
            Self::Sqlite(row) => row.get_ref(idx),
            Self::Postgres(values) => {
                values.get(idx).map(ValueRef::from).ok_or(rusqlite::Error::InvalidColumnIndex(idx))
            }
        }
    }

    /// Column `idx` (from 0) as `T`, with rusqlite's conversions.
    pub(crate) fn get<T: FromSql>(&self, idx: usize) -> rusqlite::Result<T> {
        match self {
            Self::Sqlite(row) => row.get(idx),
            Self::Postgres(values) => {
                let value = values.get(idx).ok_or(rusqlite::Error::InvalidColumnIndex(idx))?;
                let value = ValueRef::from(value);
                T::column_result(value).map_err(|e| match e {
                    rusqlite::types::FromSqlError::InvalidType => {
                        rusqlite::Error::InvalidColumnType(idx, format!("column {idx}"), value.data_type())
                    }
                    other => rusqlite::Error::FromSqlConversionFailure(idx, value.data_type(), Box::new(other)),
                })
            }
        }
    }
}

/// Whether something failed because a transaction raced another one and should run again.
pub(crate) trait Contention {
    fn is_contention(&self) -> bool;
}

impl Contention for CatalogError {
    fn is_contention(&self) -> bool {
        matches!(self, CatalogError::Contended)
    }
}

/// Reads a row's single value: `OptionalRow::optional` turns "no row" into `None`.
pub(crate) trait OptionalRow<T> {
    fn optional(self) -> Result<Option<T>, DbError>;
}

impl<T> OptionalRow<T> for Result<T, DbError> {
    fn optional(self) -> Result<Option<T>, DbError> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(DbError::Sqlite(rusqlite::Error::QueryReturnedNoRows)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl<'c> Db<'c> {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Self::Sqlite(_) => Dialect::Sqlite,
            Self::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Who holds the shared queue's leases this connection takes: this process's desktop name on
    /// a server; `None` on SQLite, where one process works the queue and nothing is leased (the
    /// lease columns stay NULL, so `lease_owner IS NOT DISTINCT FROM ?` holds for every item).
    pub(crate) fn desktop(&self) -> Option<&str> {
        match self {
            Self::Sqlite(_) => None,
            Self::Postgres(session) => Some(&session.desktop),
        }
    }

    /// The computer this desktop runs on, on a server (what `queued_on` and the unreadable list
    /// hold); `None` on SQLite.
    pub(crate) fn host(&self) -> Option<&str> {
        self.desktop().map(super::server::desktop_host)
    }

    /// This desktop's tag for a photo it queues (see [`super::desktop_key`]); `None` on SQLite,
    /// whose file is this user's own.
    pub(crate) fn path_tag(&self, path: &crate::stored_path::StoredPath, sha256: Option<&str>) -> Option<String> {
        match self {
            Self::Sqlite(_) => None,
            Self::Postgres(session) => Some(session.key.tag(path, sha256)),
        }
    }

    /// Whose a row's path is: on SQLite always this user's; on a server whoever's tag it carries
    /// (see [`super::desktop_key::DesktopKey::judge`]).
    pub(crate) fn judge_path(
        &self,
        path: &crate::stored_path::StoredPath,
        sha256: Option<&str>,
        tag: Option<&str>,
    ) -> super::desktop_key::Tagged {
        match self {
            Self::Sqlite(_) => super::desktop_key::Tagged::Mine,
            Self::Postgres(session) => session.key.judge(path, sha256, tag),
        }
    }

    /// `%<key id>.%`: a row's tags that hold this desktop's (`LIKE`); `None` on SQLite.
    pub(crate) fn own_tags(&self) -> Option<String> {
        match self {
            Self::Sqlite(_) => None,
            Self::Postgres(session) => Some(format!("%{}.%", session.key.id())),
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<usize, DbError> {
        match self {
            Self::Sqlite(conn) => Ok(conn.prepare_cached(sql)?.execute(params)?),
            Self::Postgres(session) => session.execute(sql, params),
        }
    }

    /// The first row of a query, read by `f`; `QueryReturnedNoRows` when there is none (see
    /// [`OptionalRow::optional`]).
    pub(crate) fn query_row<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        f: impl FnOnce(&DbRow<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, DbError> {
        match self {
            Self::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = stmt.query(params)?;
                let row = rows.next()?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
                Ok(f(&DbRow::Sqlite(row))?)
            }
            Self::Postgres(session) => {
                let row = session.query(sql, params)?.into_iter().next().ok_or(rusqlite::Error::QueryReturnedNoRows)?;
                Ok(f(&DbRow::Postgres(row))?)
            }
        }
    }

    /// Every row of a query, each read by `f`.
    pub(crate) fn query_map<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        mut f: impl FnMut(&DbRow<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, DbError> {
        match self {
            Self::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = stmt.query(params)?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(f(&DbRow::Sqlite(row))?);
                }
                Ok(out)
            }
            Self::Postgres(session) => {
                let rows = session.query(sql, params)?;
                Ok(rows.into_iter().map(|row| f(&DbRow::Postgres(row))).collect::<Result<_, _>>()?)
            }
        }
    }

    /// Starts a transaction (SQLite: `BEGIN IMMEDIATE`; a server: `SERIALIZABLE`). It rolls back
    /// when dropped without [`DbTx::commit`].
    pub(crate) fn transaction(&self) -> Result<DbTx<'c>, DbError> {
        match self {
            Self::Sqlite(conn) => conn.execute_batch("BEGIN IMMEDIATE")?,
            Self::Postgres(session) => session.begin()?,
        }
        Ok(DbTx { db: *self, open: true })
    }

    /// Starts a read-only transaction: every statement in it sees the catalog as of one moment,
    /// and it never waits for or blocks a writer (SQLite: a deferred `BEGIN`, a WAL snapshot; a
    /// server: `REPEATABLE READ READ ONLY`, which never fails as a race). For reads that take
    /// several statements (a page and its total, a history, an export).
    pub(crate) fn read_transaction(&self) -> Result<DbTx<'c>, DbError> {
        match self {
            Self::Sqlite(conn) => conn.execute_batch("BEGIN")?,
            Self::Postgres(session) => session.begin_read()?,
        }
        Ok(DbTx { db: *self, open: true })
    }
}

/// An open transaction; derefs to its [`Db`].
pub(crate) struct DbTx<'c> {
    db: Db<'c>,
    open: bool,
}

impl<'c> std::ops::Deref for DbTx<'c> {
    type Target = Db<'c>;
    fn deref(&self) -> &Db<'c> {
        &self.db
    }
}

impl DbTx<'_> {
    pub(crate) fn commit(mut self) -> Result<(), DbError> {
        self.open = false;
        match self.db {
            Db::Sqlite(conn) => Ok(conn.execute_batch("COMMIT")?),
            Db::Postgres(session) => session.end("COMMIT"),
        }
    }
}

impl Drop for DbTx<'_> {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let rolled_back = match self.db {
            Db::Sqlite(conn) => conn.execute_batch("ROLLBACK").map_err(DbError::from),
            Db::Postgres(session) => session.end("ROLLBACK"),
        };
        if let Err(e) = rolled_back {
            tracing::warn!(error = ?e, "rolling a catalog transaction back failed");
        }
    }
}

/// A server connection taken from the pool for one synchronous closure (on the blocking pool:
/// each statement waits with `block_on`).
pub(crate) struct PgSession {
    client: deadpool_postgres::Object,
    handle: tokio::runtime::Handle,
    url: String,
    user: String,
    /// This process on the shared queue (`ServerCatalog::desktop`).
    desktop: String,
    /// What this desktop tags the paths it queues with (`ServerCatalog::desktop_key`).
    key: std::sync::Arc<super::desktop_key::DesktopKey>,
    /// Whether a transaction is open (a closure that leaked its `DbTx` leaves one).
    in_tx: Cell<bool>,
    /// Transactions run alone (see [`PgSession::run_alone`]); `held`: the exclusive lock is held
    /// now.
    alone: Cell<bool>,
    held: Cell<bool>,
}

/// The advisory lock every seam transaction on a server takes: shared by all of them, exclusive
/// for one that has lost too many races (`"pe_seam\0"`).
const SEAM_LOCK: i64 = 0x7065_5f73_6561_6d00;

impl PgSession {
    pub(crate) fn new(
        client: deadpool_postgres::Object,
        handle: tokio::runtime::Handle,
        url: String,
        user: String,
        desktop: String,
        key: std::sync::Arc<super::desktop_key::DesktopKey>,
    ) -> Self {
        Self {
            key,
            client,
            handle,
            url,
            user,
            desktop,
            in_tx: Cell::new(false),
            alone: Cell::new(false),
            held: Cell::new(false),
        }
    }

    /// From now on, this session's transactions run alone: no other seam transaction of any
    /// desktop runs while one does, so it cannot lose a race again.
    ///
    /// Every seam transaction holds [`SEAM_LOCK`] shared (taken with `BEGIN`, released with the
    /// transaction). Under `SERIALIZABLE` a long transaction (queueing a folder of hundreds of
    /// photos) can lose to a stream of short ones (other desktops claiming and finishing items)
    /// every time it runs; after a few losses [`super::Catalog::run_db`] calls this. The
    /// exclusive lock is a session lock taken *before* `BEGIN`, so the transaction's snapshot is
    /// taken after every other seam transaction has ended; it is released after the
    /// transaction ends (and by [`PgSession::finish`] in any case).
    pub(crate) fn run_alone(&self) {
        self.alone.set(true);
    }

    /// Starts a seam transaction (see [`SEAM_LOCK`]). A transaction inside another is refused,
    /// as SQLite refuses it: PostgreSQL would only warn, then the inner `COMMIT` would end the
    /// outer transaction and the rest of it would run outside any.
    fn begin(&self) -> Result<(), DbError> {
        if self.in_tx.get() {
            return Err(DbError::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
                Some("cannot start a transaction within a transaction".into()),
            )));
        }
        if self.alone.get() && !self.held.get() {
            self.batch(&format!("SELECT pg_advisory_lock({SEAM_LOCK})"))?;
            self.held.set(true);
            return self.batch("BEGIN ISOLATION LEVEL SERIALIZABLE");
        }
        self.batch(&format!("BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT pg_advisory_xact_lock_shared({SEAM_LOCK})"))
    }

    /// Starts a read-only snapshot (see [`Db::read_transaction`]): no seam lock, it changes nothing.
    fn begin_read(&self) -> Result<(), DbError> {
        if self.in_tx.get() {
            return self.begin();
        }
        self.batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    }

    /// Ends a seam transaction with `COMMIT` or `ROLLBACK`, and lets go of the exclusive lock.
    fn end(&self, sql: &str) -> Result<(), DbError> {
        let result = self.batch(sql);
        self.release();
        result
    }

    fn release(&self) {
        if self.held.replace(false) {
            if let Err(e) = self.batch(&format!("SELECT pg_advisory_unlock({SEAM_LOCK})")) {
                tracing::warn!(error = ?e, "releasing the catalog's exclusive lock failed");
            }
        }
    }

    fn failed(&self, e: &tokio_postgres::Error) -> DbError {
        DbError::Server { error: ServerError::from_driver(e, &self.url, &self.user), state: e.code().cloned() }
    }

    fn batch(&self, sql: &str) -> Result<(), DbError> {
        let result = self.handle.block_on(self.client.batch_execute(sql)).map_err(|e| self.failed(&e));
        // A failed COMMIT ends the transaction too.
        self.in_tx.set(sql.starts_with("BEGIN") && result.is_ok());
        result
    }

    /// Prepares (cached per connection) and binds the values for the types the server inferred.
    fn prepare(&self, sql: &str) -> Result<tokio_postgres::Statement, DbError> {
        let sql = postgres_sql(sql);
        self.handle.block_on(self.client.prepare_cached(&sql)).map_err(|e| self.failed(&e))
    }

    fn values<'p>(
        &self,
        stmt: &tokio_postgres::Statement,
        params: &'p [&'p dyn ToSql],
    ) -> Result<Vec<PgValue<'p>>, DbError> {
        let wanted = stmt.params().len();
        if params.len() < wanted {
            return Err(DbError::Sqlite(rusqlite::Error::InvalidParameterCount(params.len(), wanted)));
        }
        params[..wanted]
            .iter()
            .map(|p| match p.to_sql()? {
                rusqlite::types::ToSqlOutput::Borrowed(v) => Ok(PgValue(PgOwned::from(v))),
                rusqlite::types::ToSqlOutput::Owned(v) => Ok(PgValue(PgOwned::detach(ValueRef::from(&v)))),
                _ => Err(DbError::Sqlite(rusqlite::Error::ToSqlConversionFailure("an unsupported parameter".into()))),
            })
            .collect()
    }

    fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<usize, DbError> {
        let stmt = self.prepare(sql)?;
        let values = self.values(&stmt, params)?;
        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
        let changed = self.handle.block_on(self.client.execute(&stmt, &refs)).map_err(|e| self.failed(&e))?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    fn query(&self, sql: &str, params: &[&dyn ToSql]) -> Result<Vec<Vec<Value>>, DbError> {
        let stmt = self.prepare(sql)?;
        let values = self.values(&stmt, params)?;
        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
        let rows = self.handle.block_on(self.client.query(&stmt, &refs)).map_err(|e| self.failed(&e))?;
        rows.iter().map(row_values).collect::<Result<_, _>>().map_err(DbError::Sqlite)
    }

    /// Ends the session: a transaction left open (a closure that returned early with an error
    /// after its `DbTx` was leaked) is rolled back before the connection returns to the pool.
    pub(crate) fn finish(self) {
        if self.client.is_closed() {
            return;
        }
        if self.in_tx.get() {
            if let Err(e) = self.handle.block_on(self.client.batch_execute("ROLLBACK")) {
                tracing::debug!(error = %e, "closing a catalog session");
            }
        }
        self.release();
    }
}

/// A statement written for SQLite as PostgreSQL takes it: the placeholders
/// ([`postgres_placeholders`]), and SQLite's `json_extract(column, '$.key')` as
/// `(column ->> 'key')` (a top-level key's text, the one JSON path the shared SQL uses).
pub(crate) fn postgres_sql(sql: &str) -> String {
    postgres_placeholders(&json_extract_to_postgres(sql))
}

fn json_extract_to_postgres(sql: &str) -> String {
    const CALL: &str = "json_extract(";
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find(CALL) {
        out.push_str(&rest[..at]);
        let args = &rest[at + CALL.len()..];
        let parsed = args.find(')').and_then(|end| {
            let (column, path) = args[..end].split_once(',')?;
            let key = path.trim().strip_prefix("'$.")?.strip_suffix('\'')?;
            let simple =
                |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
            (simple(column.trim()) && simple(key)).then(|| (format!("({} ->> '{key}')", column.trim()), end))
        });
        match parsed {
            Some((text, end)) => {
                out.push_str(&text);
                rest = &args[end + 1..];
            }
            None => {
                out.push_str(CALL);
                rest = args;
            }
        }
    }
    out.push_str(rest);
    out
}

/// SQLite's placeholders (`?NNN`, and a bare `?` as the next number) as PostgreSQL's (`$NNN`),
/// outside string literals, quoted identifiers and comments.
pub(crate) fn postgres_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut highest = 0u32;
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                let number = if digits.is_empty() { highest + 1 } else { digits.parse().unwrap_or(0) };
                highest = highest.max(number);
                out.push('$');
                out.push_str(&number.to_string());
            }
            c => out.push(c),
        }
    }
    out
}

/// A parameter's value, owned where rusqlite lent it.
#[derive(Debug)]
enum PgOwned<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a [u8]),
    TextOwned(Vec<u8>),
    Blob(&'a [u8]),
    BlobOwned(Vec<u8>),
}

impl<'a> From<ValueRef<'a>> for PgOwned<'a> {
    fn from(v: ValueRef<'a>) -> Self {
        match v {
            ValueRef::Null => Self::Null,
            ValueRef::Integer(i) => Self::Integer(i),
            ValueRef::Real(f) => Self::Real(f),
            ValueRef::Text(t) => Self::Text(t),
            ValueRef::Blob(b) => Self::Blob(b),
        }
    }
}

impl PgOwned<'_> {
    fn detach(v: ValueRef<'_>) -> PgOwned<'static> {
        match v {
            ValueRef::Null => PgOwned::Null,
            ValueRef::Integer(i) => PgOwned::Integer(i),
            ValueRef::Real(f) => PgOwned::Real(f),
            ValueRef::Text(t) => PgOwned::TextOwned(t.to_vec()),
            ValueRef::Blob(b) => PgOwned::BlobOwned(b.to_vec()),
        }
    }
}

/// A SQLite value, encoded for the type the server inferred for its placeholder.
#[derive(Debug)]
struct PgValue<'a>(PgOwned<'a>);

type BoxError = Box<dyn StdError + Sync + Send>;

impl tokio_postgres::types::ToSql for PgValue<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let text = |bytes: &[u8], out: &mut BytesMut| -> Result<IsNull, BoxError> {
            match *ty {
                Type::JSONB => {
                    out.put_u8(1);
                    out.put_slice(bytes);
                }
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::JSON | Type::UNKNOWN => {
                    out.put_slice(bytes)
                }
                _ => return Err(format!("a text value for a {ty} parameter").into()),
            }
            Ok(IsNull::No)
        };
        match &self.0 {
            PgOwned::Null => Ok(IsNull::Yes),
            PgOwned::Integer(i) => {
                match *ty {
                    Type::INT8 => out.put_i64(*i),
                    Type::INT4 => out.put_i32(i32::try_from(*i)?),
                    Type::INT2 => out.put_i16(i16::try_from(*i)?),
                    Type::BOOL => out.put_u8(u8::from(*i != 0)),
                    Type::FLOAT8 => out.put_f64(*i as f64),
                    Type::FLOAT4 => out.put_f32(*i as f32),
                    Type::TEXT | Type::VARCHAR | Type::UNKNOWN => out.put_slice(i.to_string().as_bytes()),
                    _ => return Err(format!("an integer for a {ty} parameter").into()),
                }
                Ok(IsNull::No)
            }
            PgOwned::Real(f) => {
                match *ty {
                    Type::FLOAT8 => out.put_f64(*f),
                    Type::FLOAT4 => out.put_f32(*f as f32),
                    _ => return Err(format!("a real number for a {ty} parameter").into()),
                }
                Ok(IsNull::No)
            }
            PgOwned::Text(t) => text(t, out),
            PgOwned::TextOwned(t) => text(t, out),
            PgOwned::Blob(b) if *ty == Type::BYTEA => {
                out.put_slice(b);
                Ok(IsNull::No)
            }
            PgOwned::BlobOwned(b) if *ty == Type::BYTEA => {
                out.put_slice(b);
                Ok(IsNull::No)
            }
            PgOwned::Blob(_) | PgOwned::BlobOwned(_) => Err(format!("bytes for a {ty} parameter").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// A column's bytes as the server sent them (binary format), whatever its type.
struct Raw<'a>(Option<&'a [u8]>);

impl<'a> tokio_postgres::types::FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(Raw(Some(raw)))
    }
    fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
        Ok(Raw(None))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A server row in SQLite's value model.
fn row_values(row: &tokio_postgres::Row) -> rusqlite::Result<Vec<Value>> {
    (0..row.len())
        .map(|idx| {
            let ty = row.columns()[idx].type_();
            let failed = |e: BoxError| rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Null, e);
            let Raw(raw) = row.try_get::<_, Raw<'_>>(idx).map_err(|e| failed(Box::new(e)))?;
            let Some(raw) = raw else { return Ok(Value::Null) };
            column_value(ty, raw).map_err(failed)
        })
        .collect()
}

fn column_value(ty: &Type, raw: &[u8]) -> Result<Value, BoxError> {
    let int = |n: usize| -> Result<i64, BoxError> {
        let bytes: [u8; 8] = {
            let mut padded = [0u8; 8];
            if raw.len() != n {
                return Err(format!("a {ty} column of {} bytes", raw.len()).into());
            }
            // Sign-extend a big-endian integer of n bytes.
            let fill = if raw.first().is_some_and(|b| b & 0x80 != 0) { 0xff } else { 0 };
            padded[..8 - n].fill(fill);
            padded[8 - n..].copy_from_slice(raw);
            padded
        };
        Ok(i64::from_be_bytes(bytes))
    };
    let utf8 = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).map(Value::Text).map_err(|e| Box::new(e) as BoxError);
    Ok(match *ty {
        Type::BOOL => Value::Integer(i64::from(raw.first().copied().unwrap_or(0) != 0)),
        Type::INT2 => Value::Integer(int(2)?),
        Type::INT4 | Type::OID => Value::Integer(int(4)?),
        Type::INT8 => Value::Integer(int(8)?),
        Type::FLOAT4 => Value::Real(f64::from(f32::from_be_bytes(raw.try_into()?))),
        Type::FLOAT8 => Value::Real(f64::from_be_bytes(raw.try_into()?)),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::JSON => utf8(raw)?,
        Type::JSONB => utf8(raw.get(1..).unwrap_or_default())?,
        Type::BYTEA => Value::Blob(raw.to_vec()),
        Type::NUMERIC => numeric(raw)?,
        _ => return Err(format!("a {ty} column (read it as text, bigint or bytea)").into()),
    })
}

/// A `numeric` in its binary form (what `sum(bigint)` returns): an integer when it is one that
/// fits, else a real number.
fn numeric(raw: &[u8]) -> Result<Value, BoxError> {
    let word = |i: usize| -> Result<i16, BoxError> {
        let bytes = raw.get(i * 2..i * 2 + 2).ok_or("a short numeric")?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    };
    let digits = usize::try_from(word(0)?)?;
    let weight = i32::from(word(1)?);
    let sign = word(2)? as u16;
    if sign == 0xC000 {
        return Ok(Value::Null); // NaN
    }
    let mut value = 0f64;
    let mut exact: Option<i128> = Some(0);
    for i in 0..digits {
        let digit = i32::from(word(4 + i)?);
        let power = weight - i32::try_from(i)?;
        value += f64::from(digit) * 10000f64.powi(power);
        exact = match (exact, u32::try_from(power)) {
            (Some(sum), Ok(p)) => 10000i128.checked_pow(p).and_then(|m| sum.checked_add(i128::from(digit) * m)),
            _ => None,
        };
    }
    let negative = sign == 0x4000;
    match exact.and_then(|e| i64::try_from(e).ok()) {
        Some(e) => Ok(Value::Integer(if negative { -e } else { e })),
        _ => Ok(Value::Real(if negative { -value } else { value })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long transaction that keeps losing races to a stream of short ones (other desktops
    /// claiming and finishing items while this one queues a whole folder) is not starved: after
    /// a few losses it runs alone and commits. Against the real server of `scripts/with-postgres`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_long_transaction_that_keeps_losing_races_runs_alone_and_commits() {
        use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
        use std::sync::Arc;
        let url = crate::catalog::server::testing::fresh_database("seam_alone").await;
        let url = crate::catalog::server::CatalogUrl::parse(&url).unwrap();
        let catalog = crate::catalog::Catalog::open_url(&url, &|_: &str| None).await.unwrap();
        catalog
            .run_db(|db| db.execute("CREATE TABLE probe (n BIGINT NOT NULL)", &[]).map_err(CatalogError::from))
            .await
            .unwrap();
        // Each reads the whole table and appends to it: every two of them conflict.
        let append = |pause: std::time::Duration, n: i64| {
            move |db: &Db<'_>| -> Result<(), CatalogError> {
                let tx = db.transaction()?;
                let _: i64 = tx.query_row("SELECT count(*) FROM probe", &[], |r| r.get(0))?;
                std::thread::sleep(pause);
                tx.execute("INSERT INTO probe (n) VALUES (?1)", &[&n])?;
                Ok(tx.commit()?)
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let short_commits = Arc::new(AtomicU32::new(0));
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let (catalog, stop, commits) = (catalog.clone(), stop.clone(), short_commits.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::SeqCst) {
                        if catalog.run_db(append(std::time::Duration::ZERO, 1)).await.is_ok() {
                            commits.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        while short_commits.load(Ordering::SeqCst) < 20 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let tries = Arc::new(AtomicU32::new(0));
        let counted = tries.clone();
        let long = append(std::time::Duration::from_millis(40), -1);
        let result = catalog
            .run_db(move |db| {
                counted.fetch_add(1, Ordering::SeqCst);
                long(db)
            })
            .await;
        let before = short_commits.load(Ordering::SeqCst);
        // The others go on afterwards: the exclusive lock was let go.
        while short_commits.load(Ordering::SeqCst) < before + 10 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        stop.store(true, Ordering::SeqCst);
        for writer in writers {
            writer.await.unwrap();
        }
        let tries = tries.load(Ordering::SeqCst);
        assert!(result.is_ok(), "the long transaction failed after {tries} tries: {result:?}");
        assert!(tries <= crate::catalog::RUN_ALONE_AFTER + 1, "once alone, it cannot lose: {tries} tries");
        let long_rows: i64 = catalog
            .run_db(|db| {
                db.query_row("SELECT count(*) FROM probe WHERE n = -1", &[], |r| r.get(0)).map_err(CatalogError::from)
            })
            .await
            .unwrap();
        assert_eq!(long_rows, 1);
    }

    #[test]
    fn placeholders_become_numbered_dollars_outside_literals() {
        assert_eq!(postgres_placeholders("SELECT ?1, ?2 WHERE a = ?1"), "SELECT $1, $2 WHERE a = $1");
        assert_eq!(postgres_placeholders("VALUES (?, ?, ?5, ?)"), "VALUES ($1, $2, $5, $6)");
        assert_eq!(postgres_placeholders("SELECT '?1', \"a?\" -- ?3\n, ?2"), "SELECT '?1', \"a?\" -- ?3\n, $2");
        assert_eq!(postgres_placeholders("SELECT 'it''s', ?1"), "SELECT 'it''s', $1");
    }

    #[test]
    fn json_extract_becomes_the_text_operator() {
        assert_eq!(
            postgres_sql("SELECT json_extract(i.proposal_json, '$.name'), x FROM t WHERE a = ?1"),
            "SELECT (i.proposal_json ->> 'name'), x FROM t WHERE a = $1"
        );
        assert_eq!(postgres_sql("SELECT json_extract(a, '$[0]')"), "SELECT json_extract(a, '$[0]')");
    }

    #[test]
    fn numeric_reads_integers_exactly_and_fractions_as_reals() {
        // 123456789: weight 2, digits [1, 2345, 6789].
        let raw: Vec<u8> = [3i16, 2, 0, 0, 1, 2345, 6789].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(numeric(&raw).unwrap(), Value::Integer(123_456_789));
        let negative: Vec<u8> = [1i16, 0, 0x4000, 0, 42].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(numeric(&negative).unwrap(), Value::Integer(-42));
        let zero: Vec<u8> = [0i16, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(numeric(&zero).unwrap(), Value::Integer(0));
        // 1.5: weight 0, digits [1, 5000], scale 1.
        let half: Vec<u8> = [2i16, 0, 0, 1, 1, 5000].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(numeric(&half).unwrap(), Value::Real(1.5));
    }

    #[test]
    fn integers_of_every_width_are_sign_extended() {
        assert_eq!(column_value(&Type::INT2, &(-2i16).to_be_bytes()).unwrap(), Value::Integer(-2));
        assert_eq!(column_value(&Type::INT4, &70_000i32.to_be_bytes()).unwrap(), Value::Integer(70_000));
        assert_eq!(column_value(&Type::INT8, &(-1i64).to_be_bytes()).unwrap(), Value::Integer(-1));
        assert_eq!(column_value(&Type::BOOL, &[1]).unwrap(), Value::Integer(1));
        assert_eq!(column_value(&Type::JSONB, b"\x01{\"a\":1}").unwrap(), Value::Text("{\"a\":1}".into()));
    }
}
