//! Versioned schema migrations.
//!
//! Each migration is a SQL file in `migrations/`, compiled in with `include_str!`. The schema
//! version is SQLite's `PRAGMA user_version`: migration N brings the file from version N - 1 to N.
//! Every migration runs in its own `BEGIN IMMEDIATE` transaction together with the bump of
//! `user_version`, so a failed migration leaves the file at the previous version, untouched.
//! Migrations are append-only: never edit one that has shipped, add the next file instead.

use rusqlite::{Connection, TransactionBehavior};

use super::CatalogError;

/// One step of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The `user_version` after this migration; versions start at 1 and have no gaps.
    pub version: u32,
    /// The file name without extension, for errors and logs.
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration { version: 1, name: "0001_init", sql: include_str!("migrations/0001_init.sql") },
    Migration { version: 2, name: "0002_search", sql: include_str!("migrations/0002_search.sql") },
    Migration { version: 3, name: "0003_revisions", sql: include_str!("migrations/0003_revisions.sql") },
    Migration { version: 4, name: "0004_import_queue", sql: include_str!("migrations/0004_import_queue.sql") },
    Migration { version: 5, name: "0005_one_engine", sql: include_str!("migrations/0005_one_engine.sql") },
    Migration { version: 6, name: "0006_cost", sql: include_str!("migrations/0006_cost.sql") },
    Migration { version: 7, name: "0007_batch", sql: include_str!("migrations/0007_batch.sql") },
    Migration { version: 8, name: "0008_path_bytes", sql: include_str!("migrations/0008_path_bytes.sql") },
    Migration { version: 9, name: "0009_barcodes", sql: include_str!("migrations/0009_barcodes.sql") },
    Migration {
        version: 10,
        name: "0010_near_seed_indexes",
        sql: include_str!("migrations/0010_near_seed_indexes.sql"),
    },
    Migration { version: 11, name: "0011_product_photos", sql: include_str!("migrations/0011_product_photos.sql") },
    Migration { version: 12, name: "0012_photo_host", sql: include_str!("migrations/0012_photo_host.sql") },
    Migration { version: 13, name: "0013_leases", sql: include_str!("migrations/0013_leases.sql") },
    Migration { version: 14, name: "0014_breaker_state", sql: include_str!("migrations/0014_breaker_state.sql") },
    Migration { version: 15, name: "0015_path_tags", sql: include_str!("migrations/0015_path_tags.sql") },
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// The file's schema version (`PRAGMA user_version`).
pub fn schema_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// A migration about to run, told to whoever waits for the catalog to open (a long one shows the
/// window's progress window, or a line from the CLI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStep {
    /// The file's version when it was opened: 0 for a new file (creating one is instant).
    pub from: u32,
    /// The version this build brings it to.
    pub to: u32,
    /// This step: 1-based, of `count`.
    pub index: usize,
    pub count: usize,
    pub name: &'static str,
}

impl std::fmt::Display for MigrationStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {} of {} ({})", self.index, self.count, self.name)
    }
}

/// Applies the migrations the file does not have yet, in order, each in its own transaction.
/// Returns the versions applied. Refuses a file newer than `migrations` knows.
pub fn apply(conn: &mut Connection, migrations: &[Migration]) -> Result<Vec<u32>, CatalogError> {
    apply_with(conn, migrations, &mut |_| {})
}

/// [`apply`], telling `on_step` before each migration runs.
pub fn apply_with(
    conn: &mut Connection,
    migrations: &[Migration],
    on_step: &mut dyn FnMut(&MigrationStep),
) -> Result<Vec<u32>, CatalogError> {
    let supported = migrations.last().map_or(0, |m| m.version);
    let found = schema_version(conn)?;
    if found > supported {
        return Err(CatalogError::SchemaTooNew { found, supported });
    }
    let mut applied = Vec::new();
    let pending: Vec<&Migration> = migrations.iter().filter(|m| m.version > found).collect();
    for (i, migration) in pending.iter().enumerate() {
        on_step(&MigrationStep {
            from: found,
            to: supported,
            index: i + 1,
            count: pending.len(),
            name: migration.name,
        });
        let failed = |source| CatalogError::Migration { version: migration.version, name: migration.name, source };
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(failed)?;
        // Another process may have migrated between our first read and taking the write lock.
        if schema_version(&tx).map_err(failed)? >= migration.version {
            continue;
        }
        tx.execute_batch(migration.sql).map_err(failed)?;
        tx.pragma_update(None, "user_version", migration.version).map_err(failed)?;
        tx.commit().map_err(failed)?;
        tracing::info!(version = migration.version, name = migration.name, "catalog migrated");
        applied.push(migration.version);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_start_at_one_without_gaps() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version as usize, i + 1, "{}", m.name);
            assert!(m.name.starts_with(&format!("{:04}_", m.version)), "{}", m.name);
        }
        assert_eq!(SCHEMA_VERSION as usize, MIGRATIONS.len());
    }

    #[test]
    fn a_failed_migration_is_rolled_back_whole() {
        let mut conn = Connection::open_in_memory().unwrap();
        let steps = [
            Migration { version: 1, name: "0001_a", sql: "CREATE TABLE a (x INTEGER);" },
            Migration { version: 2, name: "0002_b", sql: "CREATE TABLE b (x INTEGER); THIS IS NOT SQL;" },
        ];
        let err = apply(&mut conn, &steps).unwrap_err();
        assert!(matches!(err, CatalogError::Migration { version: 2, .. }), "{err}");
        assert_eq!(schema_version(&conn).unwrap(), 1);
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(tables, ["a"]);
        assert!(conn.is_autocommit());
        // Fixed, the remaining step applies and the first one is not run again.
        let steps = [steps[0], Migration { version: 2, name: "0002_b", sql: "CREATE TABLE b (x INTEGER);" }];
        assert_eq!(apply(&mut conn, &steps).unwrap(), [2]);
        assert_eq!(apply(&mut conn, &steps).unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn a_newer_file_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        let err = apply(&mut conn, MIGRATIONS).unwrap_err();
        assert!(matches!(err, CatalogError::SchemaTooNew { .. }), "{err}");
    }
}
