//! The catalog's error type.

use std::path::PathBuf;

use crate::error::{Coded, ErrorCode, ErrorData};
use crate::product::FieldFlag;

/// Everything that can go wrong in the catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// SQLite refused a statement.
    #[error("catalog database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database file could not be opened or configured.
    #[error("cannot open the catalog {path}: {source}")]
    Open { path: PathBuf, source: rusqlite::Error },
    /// The directory for the database file could not be created.
    #[error("cannot create the catalog directory {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    /// The catalog thread could not be started.
    #[error("cannot start the catalog thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// A migration failed; it was rolled back and the schema stays at the previous version.
    #[error("catalog migration {version} ({name}) failed: {source}")]
    Migration { version: u32, name: &'static str, source: rusqlite::Error },
    /// The file was written by a newer version of the app.
    #[error("the catalog has schema version {found}, newer than this app supports ({supported}); update the app")]
    SchemaTooNew { found: u32, supported: u32 },
    /// The row asked for does not exist.
    #[error("{what} {id} does not exist")]
    NotFound { what: &'static str, id: i64 },
    /// The product was deleted (soft delete): it cannot be changed until the delete is undone.
    #[error("product {id} was deleted; undo the delete to change it")]
    Deleted { id: i64 },
    /// Someone saved the product since the editor opened `expected`: the edit was not saved.
    #[error(
        "product {id} was changed by {} at revision {current} since you opened revision {expected}; \
         reload to see their changes",
        if updated_by.is_empty() { "someone" } else { updated_by.as_str() }
    )]
    Conflict { id: i64, expected: u32, current: u32, updated_by: String, updated_at: i64 },
    /// A file offered for restore is not a usable catalog; the live catalog was not touched.
    #[error("cannot restore from {path}: {reason}")]
    RestoreRefused { path: PathBuf, reason: String },
    /// Reading or writing a file next to the catalog (a backup) failed.
    #[error("cannot {action} {path}: {source}")]
    File { action: &'static str, path: PathBuf, source: std::io::Error },
    /// The input was refused; `fields` names what is wrong. A product refused by its checks also
    /// carries its flags (empty for any other refusal).
    #[error("invalid {}: {message}", fields.join(", "))]
    Invalid { fields: Vec<String>, message: String, flags: Vec<FieldFlag> },
    /// A stored JSON column could not be written or read back.
    #[error("catalog JSON error: {0}")]
    Json(#[from] serde_json::Error),
    /// The catalog thread is gone (it cannot accept jobs any more).
    #[error("the catalog is closed")]
    Closed,
    /// The catalog is on a PostgreSQL server, where this operation does not work: a SQLite file's
    /// own backup and restore (a server has its own), and overnight (batch) imports. `url` has its
    /// password masked.
    #[error(
        "the team catalog on a PostgreSQL server ({url}) does not support {operation}: everything else \
         (imports, extraction, review, editing, export, the cost report) works on it; for {operation}, \
         use the local catalog (remove --catalog, PRODUCT_EXTRACTOR_CATALOG_URL or [catalog] url)"
    )]
    ServerNotSupported { operation: String, url: String },
    /// The server catalog failed (unreachable, refused, a statement failed); the message says
    /// what to check.
    #[error(transparent)]
    Server(#[from] super::server::ServerError),
    /// Another desktop changed the same rows at the same moment, again and again: nothing was
    /// changed. (A single race is run again without telling anyone.)
    #[error("other desktops kept changing the same catalog rows at the same moment; nothing was changed, try again")]
    Contended,
    /// The disk of `path` has not the room a file needs (a backup): nothing was written.
    #[error(
        "the disk holding {path} has {} free, and this needs about {}: free some space or choose another place",
        crate::disk::bytes_text(*free),
        crate::disk::bytes_text(*needed)
    )]
    NoRoom { path: PathBuf, needed: u64, free: u64 },
    /// A job panicked on the catalog thread. Its transaction was rolled back and the catalog keeps
    /// serving later calls.
    #[error("a catalog operation panicked: {message}")]
    Panicked { message: String },
}

impl CatalogError {
    /// The disk under the catalog is full: SQLite's `SQLITE_FULL` (or an I/O error for lack of
    /// space). Nothing was written; the catalog is as it was before the statement.
    pub fn is_disk_full(&self) -> bool {
        match self {
            Self::Sqlite(e) | Self::Open { source: e, .. } | Self::Migration { source: e, .. } => sqlite_full(e),
            Self::File { source, .. } | Self::CreateDir { source, .. } => {
                source.kind() == std::io::ErrorKind::StorageFull
            }
            _ => false,
        }
    }

    /// The team catalog's server cannot be reached now (the network, a restart, a failover): what
    /// was asked was not done, and can be once it is back. The reason, for the message.
    pub fn server_away(&self) -> Option<&str> {
        match self {
            Self::Server(super::server::ServerError::Unreachable { message, .. }) => Some(message),
            _ => None,
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid { fields: vec![field.into()], message: message.into(), flags: Vec::new() }
    }
}

impl Coded for CatalogError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::Server(e) => e.code(),
            Self::NoRoom { .. } => ErrorCode::DiskFull,
            _ if self.is_disk_full() => ErrorCode::DiskFull,
            Self::NotFound { .. } | Self::Deleted { .. } => ErrorCode::NotFound,
            Self::Invalid { .. } | Self::RestoreRefused { .. } => ErrorCode::Validation,
            Self::Conflict { .. } => ErrorCode::RevisionConflict,
            Self::CreateDir { .. } | Self::File { .. } => ErrorCode::Io,
            Self::Sqlite(_)
            | Self::Open { .. }
            | Self::Migration { .. }
            | Self::SchemaTooNew { .. }
            | Self::Json(_)
            | Self::Spawn(_)
            | Self::Closed
            | Self::Contended
            | Self::ServerNotSupported { .. }
            | Self::Panicked { .. } => ErrorCode::Catalog,
        }
    }

    fn data(&self) -> Option<ErrorData> {
        match self {
            Self::Invalid { flags, .. } if !flags.is_empty() => Some(ErrorData::Validation { flags: flags.clone() }),
            _ => None,
        }
    }
}

/// `SQLITE_FULL`: SQLite's unix VFS reports a write that found no space (ENOSPC) so.
fn sqlite_full(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull)
}
