//! Backups and restores of the whole catalog file with SQLite's online backup API, on the catalog
//! thread (one job each: no other catalog call runs in between).
//!
//! A backup is written to a new file in a private folder next to the target and renamed over it
//! only when complete ([`StagedFile`]), so a failed backup never leaves a half-written file under
//! the target's name. Backups are ordinary rollback-journal SQLite files (no `-wal` beside them),
//! safe to copy.
//!
//! A backup is data, not a database to adopt (issue 32): whoever could write the file could have
//! planted a trigger that rewrites newly queued paths, or queue rows naming files of this computer.
//! A restore first checks the candidate, opened read-only, without touching the live catalog:
//! `PRAGMA integrity_check` and `foreign_key_check` must pass, its schema version must be one this
//! app knows (1..=[`SCHEMA_VERSION`]), its schema must be exactly what the app's own migrations
//! make at that version, object by object (tables, indexes, triggers, views: anything else is
//! refused, named), and it must have the live catalog's page size. It is then staged whole in a
//! file beside the catalog: copied, migrated to [`SCHEMA_VERSION`], checked again, and its queue
//! held (photos that were waiting come back failed as `restored`, sent again only when someone
//! asks). Only then is the live catalog copied to `backups/before-restore-<unix ms>.sqlite3` and
//! replaced by the staged one in one transaction of the backup API: a restore that fails leaves
//! the live catalog as it was.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use super::listing::count_live;
use super::migrations::{self, MIGRATIONS, SCHEMA_VERSION};
use super::records::{BackupSummary, RestoreSummary};
use super::CatalogError;
use crate::files::{Access, StagedFile};

/// How often a copy retries while another process holds a lock, and how long it waits between
/// tries (together about the connection's busy timeout).
const LOCK_RETRIES: u32 = 50;
const LOCK_PAUSE: Duration = Duration::from_millis(100);

/// The directory, beside the catalog file, that holds the safety copies made before a restore.
pub const SAFETY_BACKUP_DIR: &str = "backups";

/// Refuses a file of about `size` bytes on the disk of `dir` when it has not that much free and a
/// tenth more. A disk that cannot be read is taken as having room (the write itself then says).
fn check_room(dir: &Path, size: u64, probe: &crate::disk::FreeSpaceProbe) -> Result<(), CatalogError> {
    let needed = size.saturating_add(size / 10);
    match probe.free_space(dir) {
        Ok(free) if free.available < needed => {
            Err(CatalogError::NoRoom { path: dir.to_path_buf(), needed, free: free.available })
        }
        _ => Ok(()),
    }
}

pub(super) fn backup_to(conn: &Connection, live: &Path, target: &Path) -> Result<BackupSummary, CatalogError> {
    if is_live_file(live, target) {
        return Err(CatalogError::invalid(
            "path",
            format!("{} is the live catalog; choose another file for the backup", target.display()),
        ));
    }
    if target.file_name().is_none() {
        return Err(CatalogError::invalid("path", format!("{} is not a file name", target.display())));
    }
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|source| CatalogError::CreateDir { path: dir.clone(), source })?;
    // A backup is about the size of the catalog: refused up front when the destination's disk
    // has not that much free (and a tenth more), rather than after writing most of it.
    let size =
        conn.query_row("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()", [], |r| {
            r.get::<_, i64>(0)
        })?;
    check_room(&dir, u64::try_from(size).unwrap_or(0), &crate::disk::FreeSpaceProbe::system())?;
    // A new file (0600: a backup is the whole catalog) in a private folder beside the target,
    // SQLite's journal with it, renamed over the target only when complete; dropped on an error.
    let file_error = |action, source| CatalogError::File { action, path: target.into(), source };
    let (staged, file) = StagedFile::create(target, Access::Private).map_err(|e| file_error("write the backup", e))?;
    drop(file);
    let (products, schema_version) = write_backup(conn, staged.path())?;
    staged.commit().map_err(|e| file_error("move the backup to", e))?;
    let bytes = std::fs::metadata(target)
        .map_err(|source| CatalogError::File { action: "read the size of", path: target.into(), source })?
        .len();
    Ok(BackupSummary { path: target.display().to_string(), bytes, products, schema_version })
}

/// Copies the catalog into a new file at `path`; returns its live products and schema version.
fn write_backup(conn: &Connection, path: &Path) -> Result<(u64, u32), CatalogError> {
    let mut out = Connection::open(path)?;
    copy(conn, &mut out)?;
    // The copy carries the live file's WAL flag; a backup is one self-contained file.
    out.pragma_update_and_check(None, "journal_mode", "DELETE", |_| Ok(()))?;
    let counts = (count_live(&super::db::Db::Sqlite(&out))?, migrations::schema_version(&out)?);
    out.close().map_err(|(_, e)| e)?;
    Ok(counts)
}

pub(super) fn restore_from(
    conn: &mut Connection,
    live: &Path,
    source: &Path,
    at: i64,
) -> Result<RestoreSummary, CatalogError> {
    let refuse = |reason: String| CatalogError::RestoreRefused { path: source.into(), reason };
    if is_live_file(live, source) {
        return Err(refuse("it is the live catalog itself".into()));
    }
    if !source.is_file() {
        return Err(refuse("there is no such file".into()));
    }
    let candidate = Connection::open_with_flags(source, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| refuse(format!("it cannot be opened ({e})")))?;
    let schema_version_before = check_candidate(&candidate).map_err(refuse)?;
    // The backup API cannot change the page size of a WAL database.
    let page_size = |conn: &Connection| conn.pragma_query_value(None, "page_size", |row| row.get::<_, i64>(0));
    let (theirs, ours) = (page_size(&candidate)?, page_size(conn)?);
    if theirs != ours {
        return Err(refuse(format!(
            "its page size is {theirs} bytes, the catalog's {ours}; it was not written by this app"
        )));
    }

    unknown_objects(&candidate, schema_version_before).map_err(refuse)?;

    // The restored catalog, whole, beside the live one before the live one is touched: in a new
    // private folder (removed with it), so no name there can be prepared by someone else.
    let dir = live.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let staging = tempfile::Builder::new().prefix(".restore-").tempdir_in(dir).map_err(|source| {
        CatalogError::File { action: "make a folder for the restore in", path: dir.into(), source }
    })?;
    let staged = stage(&candidate, &staging.path().join("catalog.sqlite3"), at, &refuse);
    drop(candidate);
    let (staged, held) = staged?;
    let safety = dir.join(SAFETY_BACKUP_DIR).join(format!("before-restore-{at}.sqlite3"));
    backup_to(conn, live, &safety)?;
    // One transaction of the backup API: on an error the live catalog is rolled back as it was.
    let replaced = copy(&staged, conn);
    drop(staged);
    drop(staging);
    conn.flush_prepared_statement_cache();
    replaced?;
    let summary = RestoreSummary {
        products: count_live(&super::db::Db::Sqlite(conn))?,
        schema_version_before,
        migrated_to: migrations::schema_version(conn)?,
        safety_backup: safety.display().to_string(),
        held,
    };
    tracing::info!(from = %source.display(), ?summary, "catalog restored");
    Ok(summary)
}

/// The candidate copied into a new file at `path`, migrated, checked and its queue held: the
/// catalog the restore puts in place, and how many photos were waiting in its queue.
fn stage(
    candidate: &Connection,
    path: &Path,
    at: i64,
    refuse: &dyn Fn(String) -> CatalogError,
) -> Result<(Connection, u64), CatalogError> {
    let mut staged = Connection::open(path)?;
    copy(candidate, &mut staged)?;
    migrations::apply(&mut staged, MIGRATIONS)?;
    if let Some(first) = integrity_problems(&staged)?.first() {
        return Err(refuse(format!("after migrating it, the catalog failed its integrity check: {first}")));
    }
    let held = hold_queue(&staged, at)?;
    Ok((staged, held))
}

/// A restored queue sends nothing by itself: every photo that was waiting or in progress (a row
/// the backup's writer may have planted) comes back failed as `restored`; Retry in the Import view
/// queues it again. What was done (ready, saved, skipped) is kept.
fn hold_queue(conn: &Connection, at: i64) -> Result<u64, CatalogError> {
    let held = conn.execute(
        "UPDATE import_items
         SET state = 'failed', error_code = 'restored', batch_id = NULL, lease_owner = NULL, lease_until = NULL,
             error_message = 'Restored from a backup: not queued again until you ask (Retry).', updated_at = ?1
         WHERE state IN ('queued', 'preparing', 'extracting', 'submitted')",
        [at],
    )?;
    Ok(held as u64)
}

/// The candidate's schema object by object against what the app's own migrations make at its
/// version (`sqlite_schema`: tables, indexes, triggers, views, with their SQL); SQLite's own
/// objects (`sqlite_*`: statistics, sequences, automatic indexes) aside. The first object that
/// differs, named, or `Ok`.
fn unknown_objects(candidate: &Connection, version: u32) -> Result<(), String> {
    type Object = (String, String, Option<String>);
    let objects = |conn: &Connection| -> rusqlite::Result<std::collections::BTreeSet<Object>> {
        let mut stmt =
            conn.prepare("SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect()
    };
    let mut reference = Connection::open_in_memory().map_err(|e| e.to_string())?;
    let known = MIGRATIONS.iter().take_while(|m| m.version <= version).copied().collect::<Vec<_>>();
    migrations::apply(&mut reference, &known).map_err(|e| e.to_string())?;
    let expected = objects(&reference).map_err(|e| e.to_string())?;
    let found = objects(candidate).map_err(|e| format!("it cannot be read ({e})"))?;
    if let Some((kind, name, _)) = found.difference(&expected).next() {
        return Err(format!(
            "its schema is not the app's: it has a {kind} \"{name}\" that the app's schema version {version} does not \
             make (a backup written by this app has none; it may have been altered)"
        ));
    }
    if let Some((kind, name, _)) = expected.difference(&found).next() {
        return Err(format!(
            "its schema is not the app's: the {kind} \"{name}\" of schema version {version} is missing"
        ));
    }
    Ok(())
}

/// Why `candidate` is not a catalog this app can restore, or its schema version.
fn check_candidate(candidate: &Connection) -> Result<u32, String> {
    let problems = integrity_problems(candidate)
        .map_err(|e| format!("it is not a SQLite database, or it is damaged ({})", sqlite_message(&e)))?;
    if let Some(first) = problems.first() {
        return Err(format!("it is damaged: {first}"));
    }
    let version = migrations::schema_version(candidate).map_err(|e| format!("it cannot be read ({e})"))?;
    if version > SCHEMA_VERSION {
        return Err(format!(
            "it was written by a newer version of the app (schema version {version}; this app knows up to \
             {SCHEMA_VERSION}); update the app first"
        ));
    }
    let tables: u32 = candidate
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('photos', 'products')",
            [],
            |row| row.get(0),
        )
        .map_err(|e| format!("it cannot be read ({e})"))?;
    if version == 0 || tables != 2 {
        return Err("it is a SQLite database, but not a product-extractor catalog".into());
    }
    let violations: Option<String> = candidate
        .query_row("SELECT \"table\" FROM pragma_foreign_key_check LIMIT 1", [], |row| row.get(0))
        .map(Some)
        .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(e) })
        .map_err(|e| format!("it cannot be read ({e})"))?;
    if let Some(table) = violations {
        return Err(format!("it is damaged: rows of {table} refer to rows that do not exist"));
    }
    Ok(version)
}

/// `PRAGMA integrity_check`'s findings; empty when it says "ok".
fn integrity_problems(conn: &Connection) -> Result<Vec<String>, CatalogError> {
    let mut stmt = conn.prepare("PRAGMA integrity_check")?;
    let rows: Vec<String> = stmt.query_map([], |row| row.get(0))?.collect::<Result<_, _>>()?;
    Ok(if rows == ["ok"] { Vec::new() } else { rows })
}

fn sqlite_message(e: &CatalogError) -> String {
    match e {
        CatalogError::Sqlite(rusqlite::Error::SqliteFailure(_, Some(message))) => message.clone(),
        other => other.to_string(),
    }
}

/// Copies every page of `from` into `to` in one step (a consistent snapshot), retrying for a
/// while if another process holds a lock.
fn copy(from: &Connection, to: &mut Connection) -> Result<(), CatalogError> {
    let backup = Backup::new(from, to)?;
    for _ in 0..LOCK_RETRIES {
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            StepResult::More => continue,
            _busy_or_locked => std::thread::sleep(LOCK_PAUSE),
        }
    }
    Err(CatalogError::Sqlite(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
        Some("another process kept the catalog locked during the copy".into()),
    )))
}

/// True when `path` names the live catalog file or one of its side files.
fn is_live_file(live: &Path, path: &Path) -> bool {
    let (Some(live), Some(path)) = (resolved(live), resolved(path)) else { return false };
    let live = live.as_os_str().to_string_lossy().into_owned();
    let path = path.as_os_str().to_string_lossy().into_owned();
    path == live || ["-wal", "-shm", "-journal"].iter().any(|side| path == format!("{live}{side}"))
}

/// `path` with symlinks and `..` resolved, whether or not the file itself exists yet.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(path) = path.canonicalize() {
        return Some(path);
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    Some(dir.canonicalize().ok()?.join(path.file_name()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::{FreeSpace, FreeSpaceProbe};
    use crate::error::{Coded, ErrorCode};

    #[test]
    fn a_backup_is_refused_up_front_on_a_disk_without_room_for_it() {
        let disk = |available| FreeSpaceProbe::new(move |_| Ok(FreeSpace { available, total: 100_000_000_000 }));
        let refused = check_room(Path::new("/media/stick"), 500_000_000, &disk(520_000_000)).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::DiskFull);
        assert_eq!(
            refused.to_string(),
            "the disk holding /media/stick has 520 MB free, and this needs about 550 MB: free some space or choose \
             another place"
        );
        assert!(check_room(Path::new("/media/stick"), 500_000_000, &disk(560_000_000)).is_ok());
        let unreadable = FreeSpaceProbe::new(|_| Err(std::io::Error::other("no statvfs")));
        assert!(check_room(Path::new("/x"), u64::MAX, &unreadable).is_ok());
    }
}
