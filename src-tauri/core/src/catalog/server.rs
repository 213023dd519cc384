//! The team catalog on a PostgreSQL server (issue 13): where a catalog is ([`CatalogUrl`]),
//! connecting with a pool ([`ServerCatalog::connect_using`]), and the server's versioned
//! migrations. The `Catalog` API over it is `super::Catalog` (mod.rs); the few operations that only
//! make sense for a SQLite file are refused with [`CatalogError::ServerNotSupported`](super::CatalogError)
//! (see [`CatalogUrl::require_local`]).
//!
//! - The password comes from the URL, else `PGPASSWORD`, else the password file (`PGPASSFILE`,
//!   default `~/.pgpass`, ignored when group or others can read it), in libpq's order, else the
//!   password this desktop saved for `user@host:port/database` ([`password_key`]; the app keeps it
//!   in the OS keyring). It never appears in a `Display`, a log line or an error: [`ServerUrl`]'s
//!   `Display` masks it; an authentication error names where the refused password came from.
//! - TLS (rustls) with `sslmode=require` (or libpq's `verify-ca` / `verify-full`): the server's
//!   certificate is always verified, chain and name, against `sslrootcert=FILE` (else
//!   `PGSSLROOTCERT`, else `~/.postgresql/root.crt`), else Mozilla's roots. Without it (libpq's
//!   default `prefer`, or `disable`) the connection is plain TCP, on which the password is only
//!   proven with SCRAM-SHA-256: a server asking for it in clear text or as MD5 is refused before
//!   anything is sent (`server_connect`; [`ServerError::InsecureAuth`]).
//! - Migrations: `migrations/pg/NNNN_*.sql`, numbered on their own, each applied in its own
//!   transaction together with its row in `schema_migrations`, under a transaction-scoped advisory
//!   lock, so desktops starting at once migrate once (the others wait, then find nothing to do).
//!   A server at a newer version than this build knows is refused ([`ServerError::SchemaTooNew`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use super::server_connect::InsecureAuth;
use super::server_connect::Transport;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::error::SqlState;

use super::migrations::Migration;
use super::CatalogError;
use crate::error::{Coded, ErrorCode};

/// The server's migrations, in order (versions from 1, no gaps). Append-only, like SQLite's.
pub const SERVER_MIGRATIONS: &[Migration] = &[
    Migration { version: 1, name: "pg/0001_catalog", sql: include_str!("migrations/pg/0001_catalog.sql") },
    Migration {
        version: 2,
        name: "pg/0002_barcodes_indexes_product_photos",
        sql: include_str!("migrations/pg/0002_barcodes_indexes_product_photos.sql"),
    },
    Migration { version: 3, name: "pg/0003_leases", sql: include_str!("migrations/pg/0003_leases.sql") },
    Migration { version: 4, name: "pg/0004_search", sql: include_str!("migrations/pg/0004_search.sql") },
    Migration { version: 5, name: "pg/0005_search_table", sql: include_str!("migrations/pg/0005_search_table.sql") },
    Migration { version: 6, name: "pg/0006_facet_indexes", sql: include_str!("migrations/pg/0006_facet_indexes.sql") },
    Migration { version: 7, name: "pg/0007_photo_host", sql: include_str!("migrations/pg/0007_photo_host.sql") },
    Migration { version: 8, name: "pg/0008_shared_queue", sql: include_str!("migrations/pg/0008_shared_queue.sql") },
    Migration {
        version: 9,
        name: "pg/0009_prepared_images",
        sql: include_str!("migrations/pg/0009_prepared_images.sql"),
    },
    Migration {
        version: 10,
        name: "pg/0010_search_prefixes",
        sql: include_str!("migrations/pg/0010_search_prefixes.sql"),
    },
    Migration { version: 11, name: "pg/0011_search_bands", sql: include_str!("migrations/pg/0011_search_bands.sql") },
    Migration { version: 12, name: "pg/0012_breaker_state", sql: include_str!("migrations/pg/0012_breaker_state.sql") },
    Migration { version: 13, name: "pg/0013_path_tags", sql: include_str!("migrations/pg/0013_path_tags.sql") },
];

/// The server schema version this build writes.
pub const SERVER_SCHEMA_VERSION: u32 = SERVER_MIGRATIONS[SERVER_MIGRATIONS.len() - 1].version;

/// The key of the advisory lock every migration runs under ("pe_migra").
const MIGRATION_LOCK: i64 = 0x7065_5f6d_6967_7261;

/// How long connecting may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections a desktop keeps to the server at most.
const POOL_SIZE: usize = 8;

/// `PRODUCT_EXTRACTOR_CATALOG_URL`: the catalog to open, over `[catalog] url`.
pub const ENV_CATALOG_URL: &str = "PRODUCT_EXTRACTOR_CATALOG_URL";

/// Where a catalog lives: a SQLite file, or a PostgreSQL server.
#[derive(Clone, PartialEq, Eq)]
pub enum CatalogUrl {
    /// A SQLite file (a path, or `sqlite:PATH`).
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` URL.
    Server(ServerUrl),
}

impl CatalogUrl {
    /// A `postgres://` / `postgresql://` URL is a server; anything else is a SQLite file's path
    /// (`sqlite:` in front is allowed). Blank is an error.
    pub fn parse(text: &str) -> Result<Self, ServerError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ServerError::InvalidUrl { reason: "the catalog URL is empty".into() });
        }
        if is_server_url(text) {
            return ServerUrl::parse(text).map(Self::Server);
        }
        if text.contains("://") {
            return Err(ServerError::InvalidUrl {
                reason: "a catalog is a SQLite file's path or a postgres:// URL".into(),
            });
        }
        let path = text.strip_prefix("sqlite:").unwrap_or(text);
        Ok(Self::Sqlite(PathBuf::from(path)))
    }

    /// The SQLite file, or the typed refusal for a server catalog, for an operation only a SQLite
    /// file has (its own backup and restore); everything else opens a server catalog too.
    pub fn require_local(&self, operation: &str) -> Result<&Path, CatalogError> {
        match self {
            Self::Sqlite(path) => Ok(path),
            Self::Server(url) => {
                Err(CatalogError::ServerNotSupported { operation: operation.to_string(), url: url.to_string() })
            }
        }
    }
}

impl fmt::Display for CatalogUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Server(url) => url.fmt(f),
        }
    }
}

impl fmt::Debug for CatalogUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CatalogUrl({self})")
    }
}

fn is_server_url(text: &str) -> bool {
    let lower = text.get(..13).unwrap_or(text).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// A PostgreSQL URL, parsed. `Display` and `Debug` show it with the password masked.
#[derive(Clone)]
pub struct ServerUrl {
    /// Boxed: it is large, and `CatalogUrl` is mostly a path.
    config: Box<tokio_postgres::Config>,
    masked: String,
    /// `sslrootcert`: the certificates (PEM) a TLS connection trusts instead of Mozilla's roots.
    root_cert: Option<PathBuf>,
}

impl PartialEq for ServerUrl {
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config
    }
}
impl Eq for ServerUrl {}

impl ServerUrl {
    /// Parses a `postgres://[user[:password]@][host][:port][/dbname][?param=value&…]` URL, with
    /// libpq's parameters (`sslmode` disable / prefer / require, `connect_timeout`, …).
    pub fn parse(text: &str) -> Result<Self, ServerError> {
        let text = text.trim();
        if !is_server_url(text) {
            return Err(ServerError::InvalidUrl { reason: "a server catalog's URL starts with postgres://".into() });
        }
        // The scheme is case-insensitive; tokio-postgres takes it in lower case only.
        let (scheme, rest) = text.split_once("://").expect("checked above");
        let text = &format!("{}://{rest}", scheme.to_ascii_lowercase());
        let (driver_text, root_cert) = tls_parameters(text)?;
        // tokio-postgres names the option it refuses, never its value.
        let config = tokio_postgres::Config::from_str(&driver_text)
            .map_err(|e| ServerError::InvalidUrl { reason: format!("{e} in the URL {}", mask_url(text)) })?;
        Ok(Self { config: Box::new(config), masked: mask_url(text), root_cert })
    }

    /// The name this desktop saves the server's password under ([`password_key`]), the URL's
    /// settings completed from `credentials`.
    pub fn password_key(&self, credentials: &Credentials<'_>) -> String {
        password_key(&resolve(self, &Credentials { saved: None, ..*credentials }).config)
    }

    /// The same URL with `password` as if it were in it (a password typed in Settings, not saved
    /// yet); its `Display` stays masked.
    pub fn with_password(&self, password: &str) -> Self {
        let mut url = self.clone();
        url.config.password(password);
        url
    }

    /// Whether the URL itself holds a password (`user:password@`, `?password=`).
    pub fn has_password(&self) -> bool {
        self.config.get_password().is_some()
    }

    /// The parsed settings, as given (no defaults, no password lookup).
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// Whether the connection must use TLS (`sslmode=require`).
    pub fn requires_tls(&self) -> bool {
        self.config.get_ssl_mode() == SslMode::Require
    }
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked)
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerUrl({})", self.masked)
    }
}

/// The URL as tokio-postgres takes it, and its `sslrootcert`: libpq's `sslmode=verify-ca` and
/// `verify-full` become `require` (a TLS connection here always verifies the server's certificate
/// and its name: `require` is already libpq's `verify-full`), and `sslrootcert=FILE` is taken out
/// (the driver does not know it; the connection trusts that file's certificates).
fn tls_parameters(text: &str) -> Result<(String, Option<PathBuf>), ServerError> {
    let Some((base, query)) = text.split_once('?') else {
        return Ok((text.to_string(), None));
    };
    let mut root_cert = None;
    let mut kept = Vec::new();
    for param in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        let decoded = || {
            percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map(|v| v.into_owned())
                .map_err(|_| ServerError::InvalidUrl { reason: format!("the value of {key} is not valid UTF-8") })
        };
        match key {
            "sslrootcert" => {
                let path = decoded()?;
                if path.is_empty() {
                    return Err(ServerError::InvalidUrl { reason: "sslrootcert names no file".into() });
                }
                root_cert = Some(PathBuf::from(path));
            }
            "sslmode" if matches!(value, "verify-ca" | "verify-full") => kept.push("sslmode=require".to_string()),
            _ => kept.push(param.to_string()),
        }
    }
    let driver = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((driver, root_cert))
}

/// The password in a URL replaced by `••••` (in the user info and in a `password=` parameter).
pub fn mask_url(text: &str) -> String {
    const MASK: &str = "••••";
    let (scheme, rest) = match text.find("://") {
        Some(i) => text.split_at(i + 3),
        None => ("", text),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (userinfo, host) = authority.split_at(at);
            match userinfo.find(':') {
                Some(colon) => format!("{}:{MASK}{host}", &userinfo[..colon]),
                None => authority.to_string(),
            }
        }
        None => authority.to_string(),
    };
    let tail = match tail.find('?') {
        Some(q) => {
            let (path, query) = tail.split_at(q + 1);
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}={MASK}"),
                    _ => param.to_string(),
                })
                .collect();
            format!("{path}{}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}{authority}{tail}")
}

/// What can go wrong with a server catalog. No variant carries a password.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("invalid catalog URL: {reason}")]
    InvalidUrl { reason: String },
    #[error("cannot reach the catalog server {url}: {message}; check the host and port, and that the server runs")]
    Unreachable { url: String, message: String },
    #[error(
        "the catalog server {url} refused user {user}: {message}; check the password{} and the \
         server's pg_hba.conf",
        match tried { Some(source) => format!(" (the one from {source} was used)"), None => String::new() }
    )]
    Auth { url: String, user: String, message: String, tried: Option<PasswordSource> },
    #[error(
        "the catalog server {url} asks for a password and none was found: save it in this computer's \
         keyring (Settings › Catalog, or `product-extractor catalog password set`), or put it in \
         PGPASSWORD or ~/.pgpass (host:port:database:user:password)"
    )]
    PasswordMissing { url: String },
    /// On a connection without TLS, the server asked for the password in clear text or as MD5;
    /// nothing was sent (only SCRAM-SHA-256 proves a password there without giving it away).
    #[error(
        "the catalog server {url} asked for {asked} over a connection without TLS; nothing was sent. \
         Connect with TLS: add sslmode=verify-full to the URL (and sslrootcert=/path/to/ca.crt when \
         the server's certificate is signed by your own CA); or have the server's administrator use \
         scram-sha-256 (password_encryption = scram-sha-256 and scram-sha-256 in pg_hba.conf, then set \
         the password again)"
    )]
    InsecureAuth { url: String, asked: InsecureAuth },
    #[error("the database of {url} does not exist: create it on the server (createdb), or fix the URL")]
    NoDatabase { url: String },
    #[error(
        "TLS with the catalog server {url} failed: {message}; a server whose certificate is not \
         signed by a public authority needs its CA: add sslrootcert=/path/to/ca.crt to the URL, or \
         set PGSSLROOTCERT"
    )]
    Tls { url: String, message: String },
    #[error(
        "the catalog on {url} has schema version {found}, newer than this app supports ({supported}); \
         update the app"
    )]
    SchemaTooNew { url: String, found: u32, supported: u32 },
    #[error("catalog server migration {version} ({name}) failed on {url}: {message}")]
    Migration { url: String, version: u32, name: &'static str, message: String },
    #[error("the catalog server {url} failed: {message}")]
    Server { url: String, message: String },
}

impl Coded for ServerError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidUrl { .. } => ErrorCode::Config,
            Self::Unreachable { .. } | Self::Tls { .. } => ErrorCode::Network,
            Self::Auth { .. }
            | Self::InsecureAuth { .. }
            | Self::PasswordMissing { .. }
            | Self::NoDatabase { .. }
            | Self::SchemaTooNew { .. }
            | Self::Migration { .. }
            | Self::Server { .. } => ErrorCode::Catalog,
        }
    }
}

impl ServerError {
    /// Classifies a driver error met while talking to `url` as `user`.
    pub(crate) fn from_driver(e: &tokio_postgres::Error, url: &str, user: &str) -> Self {
        let url = url.to_string();
        if let Some(db) = e.as_db_error() {
            let message = db.message().to_string();
            return match *db.code() {
                SqlState::INVALID_PASSWORD | SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
                    Self::Auth { url, user: user.to_string(), message, tried: None }
                }
                // The server is stopping or starting (a restart, a failover): it goes away.
                SqlState::ADMIN_SHUTDOWN | SqlState::CRASH_SHUTDOWN | SqlState::CANNOT_CONNECT_NOW => {
                    Self::Unreachable { url, message }
                }
                SqlState::INVALID_CATALOG_NAME => Self::NoDatabase { url },
                _ => Self::Server { url, message },
            };
        }
        if let Some(asked) = InsecureAuth::of(e) {
            return Self::InsecureAuth { url, asked };
        }
        // tokio-postgres's own errors carry no kind to match; their texts are fixed.
        let text = error_chain(e);
        if text.contains("password missing") {
            Self::PasswordMissing { url }
        } else if text.contains("TLS") || text.contains("tls") || text.contains("certificate") {
            Self::Tls { url, message: text }
        } else if e.is_closed()
            || text.contains("error connecting")
            || text.contains("error communicating with the server")
            || text.contains("timeout")
        {
            Self::Unreachable { url, message: text }
        } else {
            Self::Server { url, message: text }
        }
    }

    fn from_pool(e: deadpool_postgres::PoolError, url: &str, user: &str) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => Self::from_driver(&e, url, user),
            deadpool_postgres::PoolError::Timeout(_) => {
                Self::Unreachable { url: url.to_string(), message: "timed out waiting for a connection".into() }
            }
            other => Self::Server { url: url.to_string(), message: other.to_string() },
        }
    }
}

/// An error and its sources, one line.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Reads an environment variable (injected: tests do not depend on the process environment).
pub type EnvFn<'a> = &'a (dyn Fn(&str) -> Option<String> + Sync);

/// Reads a password this desktop saved for a server, by its [`password_key`] (the app: the OS
/// keyring).
pub type SavedPasswordFn<'a> = &'a (dyn Fn(&str) -> Option<String> + Sync);

/// Where a server catalog's settings may come from besides its URL: the environment (`PGUSER`,
/// `PGHOST`, `PGPORT`, `PGPASSWORD`, `PGPASSFILE`, `PGSSLROOTCERT`), the home directory
/// (`~/.pgpass`, `~/.postgresql/root.crt`) and the passwords this desktop saved (the keyring).
#[derive(Clone, Copy)]
pub struct Credentials<'a> {
    pub env: EnvFn<'a>,
    pub home: Option<&'a Path>,
    pub saved: Option<SavedPasswordFn<'a>>,
}

impl<'a> Credentials<'a> {
    /// The environment and the home directory only (no saved passwords).
    pub fn of(env: EnvFn<'a>, home: Option<&'a Path>) -> Self {
        Self { env, home, saved: None }
    }
}

/// This account's home directory (`~/.pgpass`, `~/.postgresql/root.crt`).
pub fn home_dir() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf())
}

/// Where the password a connection uses came from (what an authentication error names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordSource {
    Url,
    Environment,
    PasswordFile(PathBuf),
    Keyring,
}

impl fmt::Display for PasswordSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url => f.write_str("the URL"),
            Self::Environment => f.write_str("PGPASSWORD"),
            Self::PasswordFile(path) => write!(f, "{}", path.display()),
            Self::Keyring => f.write_str("this computer's keyring"),
        }
    }
}

/// A URL's settings completed ([`resolve`]).
pub struct Resolved {
    /// The settings to connect with (the password included: never print them).
    pub config: tokio_postgres::Config,
    /// Where the password came from; `None`: no password was found.
    pub password: Option<PasswordSource>,
    /// The certificates a TLS connection trusts: this file's (`sslrootcert`, `PGSSLROOTCERT`,
    /// `~/.postgresql/root.crt`), else Mozilla's roots.
    pub root_cert: Option<PathBuf>,
}

/// The URL's settings completed as libpq would: user (`PGUSER`, else the OS user), host
/// (`PGHOST`, else localhost), port (`PGPORT`, else 5432), the password (the URL, `PGPASSWORD`,
/// the password file, then the passwords this desktop saved), the TLS roots, and a connect
/// timeout.
pub fn resolve(url: &ServerUrl, credentials: &Credentials<'_>) -> Resolved {
    let env = credentials.env;
    let mut config = (*url.config).clone();
    let nonblank = |key: &str| env(key).filter(|v| !v.trim().is_empty());
    if config.get_user().is_none() {
        let user = nonblank("PGUSER").or_else(|| whoami::username().ok()).unwrap_or_else(|| "postgres".into());
        config.user(user);
    }
    if config.get_hosts().is_empty() {
        config.host(nonblank("PGHOST").unwrap_or_else(|| "localhost".into()));
    }
    if config.get_ports().is_empty() {
        config.port(nonblank("PGPORT").and_then(|p| p.parse().ok()).unwrap_or(5432));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let mut password = config.get_password().map(|_| PasswordSource::Url);
    if password.is_none() {
        if let Some(found) = env("PGPASSWORD").filter(|p| !p.is_empty()) {
            config.password(found);
            password = Some(PasswordSource::Environment);
        }
    }
    if password.is_none() {
        let file = nonblank("PGPASSFILE").map(PathBuf::from).or_else(|| credentials.home.map(|h| h.join(".pgpass")));
        if let Some((file, found)) = file.and_then(|file| password_from_file(&file, &config).map(|p| (file, p))) {
            config.password(found);
            password = Some(PasswordSource::PasswordFile(file));
        }
    }
    if password.is_none() {
        if let Some(found) = credentials.saved.and_then(|saved| saved(&password_key(&config))).filter(|p| !p.is_empty())
        {
            config.password(found);
            password = Some(PasswordSource::Keyring);
        }
    }
    let root_cert = url.root_cert.clone().or_else(|| nonblank("PGSSLROOTCERT").map(PathBuf::from)).or_else(|| {
        let default = credentials.home?.join(".postgresql").join("root.crt");
        default.is_file().then_some(default)
    });
    Resolved { config, password, root_cert }
}

/// [`resolve`]'s settings alone, from the environment and the home directory.
pub fn resolve_config(url: &ServerUrl, env: EnvFn<'_>, home: Option<&Path>) -> tokio_postgres::Config {
    resolve(url, &Credentials::of(env, home)).config
}

/// The name a desktop saves a server's password under: `user@host:port/database`, from settings
/// completed by [`resolve`] (so `postgres://db/catalog` and `postgres://alice@db:5432/catalog`
/// name the same password for alice).
pub fn password_key(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    format!("{user}@{host}:{port}/{db}")
}

/// The password for `config`'s first host, port, database and user in a libpq password file
/// (`host:port:database:user:password`, `*` matches anything, `\` escapes `:` and `\`). A file
/// that group or others may read is ignored, as libpq does.
fn password_from_file(file: &Path, config: &tokio_postgres::Config) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(file = %file.display(), "password file ignored: group or others can read it (chmod 0600)");
            return None;
        }
    }
    let text = std::fs::read_to_string(file).ok()?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(_)) => "localhost".into(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432).to_string();
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    password_in(&text, [&host, &port, db, user])
}

/// The first line of a password file matching `wanted` (host, port, database, user).
fn password_in(text: &str, wanted: [&str; 4]) -> Option<String> {
    text.lines().filter(|line| !line.trim_start().starts_with('#') && !line.trim().is_empty()).find_map(|line| {
        let fields = split_pgpass(line);
        if fields.len() < 5 {
            return None;
        }
        let matches = fields.iter().zip(wanted).all(|(field, want)| field == "*" || field == want);
        matches.then(|| fields[4..].join(":"))
    })
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut().expect("never empty").push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("never empty").push(c),
        }
    }
    fields
}

/// A desktop's name on the shared queue: `user@host #pid`.
pub(crate) fn desktop_name(user: &str, host: Option<&str>, pid: u32) -> String {
    format!("{user}@{} #{pid}", host.unwrap_or("unknown-host"))
}

/// The computer a desktop name (`user@host #pid`) names: what "which desktop works which item"
/// shows, and how a desktop knows its own items after a restart.
pub fn desktop_host(desktop: &str) -> &str {
    let host = desktop.split_once('@').map_or(desktop, |(_, rest)| rest);
    host.rsplit_once(" #").map_or(host, |(host, _)| host)
}

/// What `catalog check` reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ServerCheck {
    /// The URL, password masked.
    pub url: String,
    /// `SHOW server_version`.
    pub server_version: String,
    /// The schema version after migrating.
    pub schema_version: u32,
    /// The migrations this connection applied (empty: the server was up to date).
    pub applied: Vec<u32>,
}

/// A connected server catalog: a pool of connections.
pub struct ServerCatalog {
    pool: Pool,
    url: ServerUrl,
    user: String,
    /// The settings the pool connects with (password resolved), for the change listener's own
    /// connection (see `server_changes`).
    config: tokio_postgres::Config,
    /// The changes other desktops made, once something listens (see `server_changes`).
    pub(super) changes: super::server_changes::Changes,
    /// This process as the shared queue knows it: who holds a lease (see [`Self::desktop`]).
    desktop: String,
    /// Where the password came from, for an authentication error.
    password: Option<PasswordSource>,
    /// What this desktop tags the paths it queues with (see [`super::desktop_key`]).
    key: std::sync::Arc<super::desktop_key::DesktopKey>,
    /// How each connection is made (TLS, or plain and SCRAM only), for the pool and the change
    /// listener alike.
    transport: Transport,
}

/// The TLS connector of a server that requires TLS: the server's certificate verified (chain
/// and name) against the certificates of `root_cert` (PEM), else Mozilla's roots.
fn tls_connector(
    url: &ServerUrl,
    root_cert: Option<&Path>,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, ServerError> {
    use rustls::pki_types::pem::PemObject;
    let Some(file) = root_cert else {
        return Ok(tokio_postgres_rustls::MakeRustlsConnect::with_webpki_roots());
    };
    let failed = |message: String| ServerError::Tls { url: url.to_string(), message };
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| failed(format!("cannot read the root certificates in {} ({e})", file.display())))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(failed(format!("{} holds no usable certificate (PEM, BEGIN CERTIFICATE)", file.display())));
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

impl ServerCatalog {
    /// Connects (one connection is opened now, so a wrong host or password is told here).
    pub async fn connect(url: &ServerUrl, env: EnvFn<'_>) -> Result<Self, ServerError> {
        let home = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
        Self::connect_using(url, &Credentials::of(env, home.as_deref())).await
    }

    /// [`ServerCatalog::connect`] with the home directory (for `~/.pgpass`) given.
    pub async fn connect_with(url: &ServerUrl, env: EnvFn<'_>, home: Option<&Path>) -> Result<Self, ServerError> {
        Self::connect_using(url, &Credentials::of(env, home)).await
    }

    /// Connects with the settings [`resolve`] completes from `credentials`.
    pub async fn connect_using(url: &ServerUrl, credentials: &Credentials<'_>) -> Result<Self, ServerError> {
        let Resolved { mut config, password, root_cert } = resolve(url, credentials);
        // The catalog's statements are short; JIT compiling one costs more (~150 ms) than it saves.
        let options = match config.get_options() {
            Some(given) if !given.trim().is_empty() => format!("{given} -c jit=off"),
            _ => "-c jit=off".to_string(),
        };
        config.options(options);
        let user = config.get_user().unwrap_or_default().to_string();
        let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        if !url.requires_tls() {
            // libpq's default `prefer` would try TLS first; without a trusted certificate that
            // fails here rather than falling back, so only `require` asks for TLS.
            config.ssl_mode(SslMode::Disable);
        }
        let transport = if url.requires_tls() {
            Transport::Tls(tls_connector(url, root_cert.as_deref())?)
        } else {
            Transport::Plain
        };
        let manager = Manager::from_connect(config.clone(), transport.clone(), manager_config);
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT * 2))
            .build()
            .map_err(|e| ServerError::Server { url: url.to_string(), message: e.to_string() })?;
        let desktop = desktop_name(&super::local_user(), super::local_host().as_deref(), std::process::id());
        let key = std::sync::Arc::new(super::desktop_key::DesktopKey::random());
        let catalog = Self {
            pool,
            url: url.clone(),
            user,
            config,
            changes: Default::default(),
            desktop,
            password,
            transport,
            key,
        };
        drop(catalog.client().await?);
        Ok(catalog)
    }

    /// Where the password this desktop connects with came from (`None`: no password).
    pub fn password_source(&self) -> Option<&PasswordSource> {
        self.password.as_ref()
    }

    /// The URL, password masked.
    pub fn url(&self) -> &ServerUrl {
        &self.url
    }

    /// This process on the shared queue, `user@host #pid`: what a lease it holds says, and what
    /// the Import view shows beside an item another desktop works. Two processes on one computer
    /// (the window and a CLI import) are two desktops.
    pub fn desktop(&self) -> &str {
        &self.desktop
    }

    /// The same connection under another desktop name (`user@host #pid`): a test that plays
    /// several desktops of a team in one process gives each its own.
    pub fn with_desktop(mut self, desktop: impl Into<String>) -> Self {
        self.desktop = desktop.into();
        self
    }

    /// This desktop's key for the paths it queues (the data dir's, [`DesktopKey::load_or_create`]):
    /// without it, a connection trusts only the rows it queued itself.
    ///
    /// [`DesktopKey::load_or_create`]: super::desktop_key::DesktopKey::load_or_create
    pub fn with_desktop_key(mut self, key: super::desktop_key::DesktopKey) -> Self {
        self.key = std::sync::Arc::new(key);
        self
    }

    /// What this desktop tags the paths it queues with.
    pub(crate) fn desktop_key(&self) -> std::sync::Arc<super::desktop_key::DesktopKey> {
        self.key.clone()
    }

    /// The user the pool connects as.
    pub(crate) fn user(&self) -> &str {
        &self.user
    }

    /// The resolved connection settings (password included: never print them).
    pub(crate) fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// How this catalog's connections are made.
    pub(crate) fn transport(&self) -> &Transport {
        &self.transport
    }

    /// A connection from the pool.
    pub async fn client(&self) -> Result<deadpool_postgres::Object, ServerError> {
        self.pool.get().await.map_err(|e| match ServerError::from_pool(e, &self.url.to_string(), &self.user) {
            ServerError::Auth { url, user, message, .. } => {
                ServerError::Auth { url, user, message, tried: self.password.clone() }
            }
            other => other,
        })
    }

    pub(crate) fn driver_error(&self, e: &tokio_postgres::Error) -> ServerError {
        ServerError::from_driver(e, &self.url.to_string(), &self.user)
    }

    /// `SHOW server_version`.
    pub async fn server_version(&self) -> Result<String, ServerError> {
        let client = self.client().await?;
        let row = client.query_one("SHOW server_version", &[]).await.map_err(|e| self.driver_error(&e))?;
        Ok(row.get(0))
    }

    /// The schema version on the server (0: no catalog yet).
    pub async fn schema_version(&self) -> Result<u32, ServerError> {
        let client = self.client().await?;
        let exists = client
            .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
            .await
            .map_err(|e| self.driver_error(&e))?;
        if !exists.get::<_, bool>(0) {
            return Ok(0);
        }
        let row = client
            .query_one("SELECT coalesce(max(version), 0) FROM schema_migrations", &[])
            .await
            .map_err(|e| self.driver_error(&e))?;
        Ok(u32::try_from(row.get::<_, i32>(0)).unwrap_or(0))
    }

    /// Applies [`SERVER_MIGRATIONS`] the server does not have yet. Returns the versions applied.
    pub async fn migrate(&self) -> Result<Vec<u32>, ServerError> {
        self.migrate_with(SERVER_MIGRATIONS).await
    }

    /// Applies `migrations` the server does not have yet, each in its own transaction under the
    /// advisory lock (so concurrent migrators apply each once). Refuses a newer server.
    pub async fn migrate_with(&self, migrations: &[Migration]) -> Result<Vec<u32>, ServerError> {
        let supported = migrations.last().map_or(0, |m| m.version);
        let url = self.url.to_string();
        let mut client = self.client().await?;
        let mut applied = Vec::new();
        loop {
            let tx = client.transaction().await.map_err(|e| self.driver_error(&e))?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .await
                .map_err(|e| self.driver_error(&e))?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (
                     version    INTEGER PRIMARY KEY CHECK (version >= 1),
                     name       TEXT NOT NULL,
                     applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                     applied_by TEXT NOT NULL DEFAULT current_user
                 )",
            )
            .await
            .map_err(|e| self.driver_error(&e))?;
            let row = tx
                .query_one("SELECT coalesce(max(version), 0) FROM schema_migrations", &[])
                .await
                .map_err(|e| self.driver_error(&e))?;
            let found = u32::try_from(row.get::<_, i32>(0)).unwrap_or(0);
            if found > supported {
                return Err(ServerError::SchemaTooNew { url, found, supported });
            }
            let Some(next) = migrations.iter().find(|m| m.version > found) else {
                tx.commit().await.map_err(|e| self.driver_error(&e))?;
                return Ok(applied);
            };
            let failed = |e: tokio_postgres::Error| ServerError::Migration {
                url: url.clone(),
                version: next.version,
                name: next.name,
                message: e.as_db_error().map_or_else(|| e.to_string(), |db| db.message().to_string()),
            };
            tracing::info!(version = next.version, name = next.name, url = %self.url, "migrating the catalog server");
            tx.batch_execute(next.sql).await.map_err(failed)?;
            let version = i32::try_from(next.version).expect("migration versions are small");
            tx.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", &[&version, &next.name])
                .await
                .map_err(failed)?;
            tx.commit().await.map_err(failed)?;
            applied.push(next.version);
        }
    }

    /// Migrates, then reports the server version, the schema version and the masked URL.
    pub async fn check(&self) -> Result<ServerCheck, ServerError> {
        let applied = self.migrate().await?;
        Ok(ServerCheck {
            url: self.url.to_string(),
            server_version: self.server_version().await?,
            schema_version: self.schema_version().await?,
            applied,
        })
    }
}

/// For the tests that need a real server (`tests/catalog_server.rs`, the CLI's): the throwaway
/// server `scripts/with-postgres` starts, and a fresh database on it per test.
#[doc(hidden)]
pub mod testing {
    use std::sync::atomic::{AtomicU32, Ordering};

    pub use super::super::server_listing::SearchWay;

    /// Makes every search without filters on every server catalog of this process find its
    /// newest matches `way` (None: the cheapest, as the app does). The ways find the same
    /// matches, so forcing one changes no other test's results, only how they are read.
    pub fn force_search_way(way: Option<SearchWay>) {
        super::super::server_listing::force_way(way);
    }

    /// `PRODUCT_EXTRACTOR_TEST_PG_URL`, set by `scripts/with-postgres`.
    pub const ENV_TEST_URL: &str = "PRODUCT_EXTRACTOR_TEST_PG_URL";

    /// The test server's URL (its role may create databases). Panics, never skips, without it.
    pub fn server_url() -> String {
        std::env::var(ENV_TEST_URL).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| {
            panic!(
                "{ENV_TEST_URL} is not set: this test needs a PostgreSQL server. Run it under \
                 scripts/with-postgres (make test does), e.g. scripts/with-postgres scripts/with-keyring \
                 cargo test --workspace --test catalog_server"
            )
        })
    }

    /// Creates a database of its own for one test (`label`, the process id and a counter make the
    /// name unique, so tests run in parallel) and returns its URL.
    pub async fn fresh_database(label: &str) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let base = server_url();
        let name = format!("pe_{label}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("cannot reach the test server ({ENV_TEST_URL}): {e}"));
        let task = tokio::spawn(connection);
        client.batch_execute(&format!("CREATE DATABASE \"{name}\"")).await.expect("CREATE DATABASE");
        drop(client);
        let _ = task.await;
        let (prefix, _) = base.split_once('?').unwrap_or((&base, ""));
        let (server, _) = prefix.rsplit_once('/').expect("the test URL names a database");
        format!("{server}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_the_password_everywhere() {
        assert_eq!(mask_url("postgres://alice:s3cret@host/db"), "postgres://alice:••••@host/db");
        assert_eq!(mask_url("postgres://alice@host:5433/db"), "postgres://alice@host:5433/db");
        assert_eq!(
            mask_url("postgres://host/db?password=s3cret&sslmode=require"),
            "postgres://host/db?password=••••&sslmode=require"
        );
        assert_eq!(mask_url("postgresql://a:p%40ss@h"), "postgresql://a:••••@h");
        let url = CatalogUrl::parse("postgres://alice:s3cret@db.example:5432/catalog").unwrap();
        assert_eq!(url.to_string(), "postgres://alice:••••@db.example:5432/catalog");
        assert!(!format!("{url:?}").contains("s3cret"));
    }

    #[test]
    fn a_path_is_sqlite_and_a_url_is_a_server() {
        assert_eq!(
            CatalogUrl::parse("/data/catalog.sqlite3").unwrap(),
            CatalogUrl::Sqlite("/data/catalog.sqlite3".into())
        );
        assert_eq!(CatalogUrl::parse("sqlite:rel.db").unwrap(), CatalogUrl::Sqlite("rel.db".into()));
        assert!(matches!(CatalogUrl::parse("POSTGRES://h/db").unwrap(), CatalogUrl::Server(_)));
        assert!(matches!(CatalogUrl::parse("  ").unwrap_err(), ServerError::InvalidUrl { .. }));
        assert!(matches!(CatalogUrl::parse("mysql://h/db").unwrap_err(), ServerError::InvalidUrl { .. }));
        let err = CatalogUrl::parse("postgres://a:s3cret@h/db?sslmode=sometimes").unwrap_err();
        assert!(matches!(err, ServerError::InvalidUrl { .. }));
        assert!(!err.to_string().contains("s3cret"), "{err}");
        let CatalogUrl::Server(url) = CatalogUrl::parse("postgres://h/db?sslmode=require").unwrap() else { panic!() };
        assert!(url.requires_tls());
    }

    #[test]
    fn libpq_tls_parameters_are_taken_as_rustls_needs_them() {
        let url = ServerUrl::parse("postgres://a:s3cret@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.crt").unwrap();
        assert!(url.requires_tls());
        assert_eq!(url.root_cert.as_deref(), Some(Path::new("/etc/ca.crt")));
        assert!(!url.to_string().contains("s3cret"), "{url}");
        let url = ServerUrl::parse("postgres://h/db?sslrootcert=ca.pem&sslmode=verify-ca&application_name=x").unwrap();
        assert!(url.requires_tls());
        assert_eq!(url.config().get_application_name(), Some("x"));
        assert!(matches!(
            ServerUrl::parse("postgres://h/db?sslrootcert=").unwrap_err(),
            ServerError::InvalidUrl { .. }
        ));
        assert!(!ServerUrl::parse("postgres://h/db?sslmode=disable").unwrap().requires_tls());
    }

    #[test]
    fn a_server_catalog_is_refused_where_it_does_not_work_yet() {
        let url = CatalogUrl::parse("postgres://alice:s3cret@h/db").unwrap();
        let err = url.require_local("`import`").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("does not support `import`: everything else (imports,"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn the_password_comes_from_the_url_then_pgpassword_then_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".pgpass");
        std::fs::write(&file, "# team\nother:*:*:*:nope\ndb.example:5432:catalog:alice:from\\:file\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let url = ServerUrl::parse("postgres://alice@db.example/catalog").unwrap();
        let none = |_: &str| None;
        let config = resolve_config(&url, &none, Some(dir.path()));
        assert_eq!(config.get_password(), Some(&b"from:file"[..]));
        let env = |k: &str| (k == "PGPASSWORD").then(|| "from-env".to_string());
        assert_eq!(resolve_config(&url, &env, Some(dir.path())).get_password(), Some(&b"from-env"[..]));
        let in_url = ServerUrl::parse("postgres://alice:in-url@db.example/catalog").unwrap();
        assert_eq!(resolve_config(&in_url, &env, Some(dir.path())).get_password(), Some(&b"in-url"[..]));
        // The desktop's saved password comes last, under `user@host:port/db`.
        let saved = |key: &str| (key == "alice@db.example:5432/catalog").then(|| "from-keyring".to_string());
        let nowhere = tempfile::tempdir().unwrap();
        let keyring = Credentials { env: &none, home: Some(nowhere.path()), saved: Some(&saved) };
        let resolved = resolve(&url, &keyring);
        assert_eq!(resolved.config.get_password(), Some(&b"from-keyring"[..]));
        assert_eq!(resolved.password, Some(PasswordSource::Keyring));
        assert_eq!(url.password_key(&keyring), "alice@db.example:5432/catalog");
        let with_file = Credentials { home: Some(dir.path()), ..keyring };
        assert_eq!(resolve(&url, &with_file).password, Some(PasswordSource::PasswordFile(file.clone())));
        assert_eq!(resolve(&in_url, &with_file).password, Some(PasswordSource::Url));
        assert_eq!(resolve(&url, &Credentials::of(&none, Some(nowhere.path()))).password, None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert_eq!(
                resolve_config(&url, &none, Some(dir.path())).get_password(),
                None,
                "a readable file is ignored"
            );
        }
    }
}
