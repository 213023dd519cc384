//! Answers paid for that could not be written yet (issue 26): while the team catalog's server is
//! away, an item's outcome waits in memory for it to come back — and, so that a restart in the
//! meantime loses nothing either, in a small spool in the data dir (`ImportOptions::spool_dir`):
//! one JSON file per outcome, written before the queue waits, removed once the outcome is in the
//! catalog. An answer still on its way to the catalog when its work is stopped (a cancel, a
//! shutdown) is kept here too (`item::InHand`). The next run — or, after a cancel, the same one
//! before it claims again — writes what it finds there (`store::finish_spooled`) as soon as the
//! server answers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::records::ItemState;
use super::shared::Shared;
use super::store::{self, Finish};
use crate::files::{Access, StagedFile};

/// A spooled outcome, and which desktop (process) paid for it.
#[derive(Debug, Serialize, Deserialize)]
struct Spooled {
    desktop: Option<String>,
    finish: Finish,
}

/// Keeps `finish` in the spool; the file to remove once it is written. `None` (logged) when the
/// spool cannot be written: the outcome still waits in memory.
pub(crate) fn keep(dir: &Path, desktop: Option<&str>, finish: &Finish) -> Option<PathBuf> {
    let started = finish.attempt.as_ref().map_or(0, |a| a.started_at);
    let path = dir.join(format!("item-{}-{started}.json", finish.id));
    let written = (|| -> std::io::Result<()> {
        crate::files::create_private_dir(dir)?;
        let spooled = Spooled { desktop: desktop.map(str::to_owned), finish: finish.clone() };
        let json = serde_json::to_vec(&spooled).map_err(std::io::Error::other)?;
        let (staged, mut file) = StagedFile::create(&path, Access::Private)?;
        std::io::Write::write_all(&mut file, &json)?;
        drop(file);
        staged.commit()
    })();
    match written {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "import: an answer could not be kept in the spool");
            None
        }
    }
}

/// The outcome in `path` is in the catalog now.
pub(crate) fn written(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!(path = %path.display(), error = %e, "import: a spooled answer stays on disk");
    }
}

/// Writes what a previous run left in the spool, trying again (backing off) while the server is
/// away; ends when the spool is empty, or when what is left is refused by the catalog both ways
/// (its answer, and its attempt alone): such an answer stays in the spool, never set aside while
/// it may still be written, and the queue stops saying why; the driver replays again before it
/// claims anything once the queue runs (`Shared::spool_left`), and so does the next start, so the
/// photo is not paid for again. Then it lets the driver claim ([`Shared::replaying`]). Holds the
/// queue weakly.
pub(crate) async fn replay(shared: std::sync::Weak<Shared>) {
    replay_all(&shared).await;
    if let Some(shared) = shared.upgrade() {
        shared.replaying.store(false, std::sync::atomic::Ordering::SeqCst);
        shared.changed();
    }
}

async fn replay_all(shared: &std::sync::Weak<Shared>) {
    let mut pause = Duration::from_millis(500);
    // Refused both ways in this replay: left for the next one.
    let mut refused = std::collections::HashSet::new();
    loop {
        let Some(shared) = shared.upgrade() else { return };
        let Some(dir) = shared.options.spool_dir.clone() else { return };
        let pending = match tokio::task::spawn_blocking(move || entries(&dir)).await {
            Ok(pending) => pending,
            Err(_) => return,
        };
        let pending: Vec<_> = pending.into_iter().filter(|(path, _)| !refused.contains(path)).collect();
        if pending.is_empty() {
            return;
        }
        let mut away = false;
        for (path, spooled) in pending {
            let (id, to, now) = (spooled.finish.id, spooled.finish.to, shared.now());
            let (finish, desktop) = (spooled.finish.clone(), spooled.desktop.clone());
            let written =
                shared.counted(move |conn| store::finish_spooled(conn, &finish, desktop.as_deref(), now)).await;
            match written {
                Ok(counted) => {
                    tracing::info!(item = id, "import: an answer kept in the spool is written");
                    written_then(&shared, &path, id, to, &counted);
                }
                Err(e) if e.server_away().is_some() => {
                    away = true;
                    break;
                }
                Err(e) => {
                    // The catalog refuses the answer: its billed attempt is written alone, as the
                    // run that paid for it would have done (`item::refused`).
                    let (desktop, now) = (spooled.desktop.clone(), shared.now());
                    let kept = super::item::unwritable(spooled.finish, &e);
                    let attempt_only =
                        shared.counted(move |conn| store::finish_spooled(conn, &kept, desktop.as_deref(), now)).await;
                    match attempt_only {
                        Ok(counted) => {
                            tracing::warn!(item = id, error = %e, "import: a spooled answer was refused; its billed attempt is written alone");
                            written_then(&shared, &path, id, ItemState::Failed, &counted);
                        }
                        Err(again) if again.server_away().is_some() => {
                            away = true;
                            break;
                        }
                        Err(again) => {
                            // Nothing is claimed while it waits: its photo would be paid for
                            // again. The queue stops, saying why; Resume (or the next start)
                            // replays the spool first.
                            tracing::warn!(item = id, error = %again, "import: a spooled answer cannot be written now; it stays in the spool for the next try");
                            refused.insert(path);
                            shared.spool_left.store(true, std::sync::atomic::Ordering::SeqCst);
                            super::driver::stop_for(&shared, &again);
                        }
                    }
                }
            }
        }
        drop(shared);
        if away {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(30));
        }
    }
}

fn written_then(shared: &Arc<Shared>, path: &Path, id: super::ItemId, to: ItemState, counted: &store::Counted<bool>) {
    written(path);
    if counted.value {
        shared.item_changed(id, to, counted);
    } else {
        shared.publish(counted, 0);
    }
}

/// A spooled file this version cannot read stays, renamed, for a person to look at.
fn set_aside(path: &Path) {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".unwritable");
    if let Err(e) = std::fs::rename(path, PathBuf::from(aside)) {
        tracing::warn!(path = %path.display(), error = %e, "import: a spooled answer could not be set aside");
    }
}

/// The spool's outcomes, oldest file name first.
fn entries(dir: &Path) -> Vec<(PathBuf, Spooled)> {
    let Ok(read) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> =
        read.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let parsed = std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| serde_json::from_slice::<Spooled>(&bytes).map_err(|e| e.to_string()));
            match parsed {
                Ok(spooled) => Some((path, spooled)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "import: a spooled answer cannot be read");
                    set_aside(&path);
                    None
                }
            }
        })
        .collect()
}
