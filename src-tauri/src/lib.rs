//! The product-extractor app: a thin shell around `pe_core`.
//!
//! - [`cli`] parses the command line; a subcommand runs headless and never touches GTK.
//! - [`state`] holds the paths, the catalog and the live pipeline.
//! - [`commands`] are the Tauri commands, one file per domain, listed once in its registry.
//! - [`bindings`] writes the command wrappers and shared constants for the UI (TypeScript).
//! - [`dto`] are the IPC shapes that are not core types; their TypeScript twins are generated.
//! - [`events`] bridges the core's resilience snapshots and the import queue's progress and item
//!   changes to the window.
//! - [`logging`] writes the rotating log file.
//! - [`opening`] opens the state before the window, with a progress window for a long upgrade.
//! - [`thumbnails`] serves photos' thumbnails to the window by content hash (`thumb:`).

pub mod api;
pub mod bindings;
pub mod cli;
pub mod commands;
pub mod dto;
pub mod events;
pub(crate) mod extraction;
pub mod logging;
pub mod opening;
pub mod secrets;
pub mod state;
pub mod team;
pub mod terminal;
pub mod thumbnails;

use std::path::{Path, PathBuf};

use clap::Parser;
use pe_core::import::EnqueueOptions;
use tauri::{AppHandle, Manager, Runtime};

use crate::state::{process_env, AppState};

/// Sent to the window when photos arrive from outside it ([`events::Opened`]).
pub const OPENED_EVENT: &str = <events::Opened as events::WindowEvent>::NAME;

/// Registers the plugin, the state and every command. Generic over the runtime so the commands
/// can be driven through Tauri's mock runtime in tests.
pub fn setup<R: Runtime>(builder: tauri::Builder<R>, state: AppState) -> tauri::Builder<R> {
    setup_opening(builder, state, Vec::new())
}

/// [`setup`] for a window launched with photo or folder paths ("Open with"). They are queued in
/// the setup hook, which runs after the plugins: a second launch has handed its paths to the
/// running window and exited inside the single-instance plugin by then, so only the window that
/// stays ever touches the queue.
pub fn setup_opening<R: Runtime>(builder: tauri::Builder<R>, state: AppState, open: Vec<PathBuf>) -> tauri::Builder<R> {
    let bridge_state = state.clone();
    let import_state = state.clone();
    let catalog_state = state.clone();
    let api_state = state.clone();
    builder
        .plugin(tauri_plugin_dialog::init())
        .manage(state)
        .register_asynchronous_uri_scheme_protocol(thumbnails::THUMBNAIL_SCHEME, thumbnails::handle)
        .setup(move |app| {
            open_paths(app.handle(), open);
            tauri::async_runtime::spawn(events::resilience_bridge(app.handle().clone(), bridge_state));
            // Opens the import queue, which resumes an import a previous session left unfinished
            // (crash-resume), and forwards its progress to the window.
            tauri::async_runtime::spawn(events::import_bridge(app.handle().clone(), import_state));
            // A team catalog: what other desktops save shows here as it commits.
            tauri::async_runtime::spawn(events::catalog_bridge(app.handle().clone(), catalog_state));
            // Settings' "Serve the HTTP API while the window is open".
            tauri::async_runtime::spawn(async move { api_state.window_api().reconcile(&api_state).await });
            Ok(())
        })
        .on_webview_event(|webview, event| {
            // The webview gets dropped paths as text: a drop with a path that is not valid UTF-8
            // never reaches it (Tauri's drop event fails to serialize, so the window sees nothing).
            // Such a drop is queued here, from the exact paths, as "Open with" photos are.
            if let tauri::WebviewEvent::DragDrop(tauri::DragDropEvent::Drop { paths, .. }) = event {
                if paths.iter().any(|p| p.to_str().is_none()) {
                    open_paths(webview.app_handle(), paths.clone());
                }
            }
        })
        .invoke_handler(commands::invoke_handler())
}

/// When this process started (first thing in [`main_entry`]).
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Logs, once, how long the window took from launch to showing its first data (the Extract
/// view's cards, read from the queue). `make bench-startup` reads this line.
pub fn mark_interactive() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if let Some(started) = STARTED.get() {
        ONCE.call_once(|| tracing::info!(ms = started.elapsed().as_millis() as u64, "the window is interactive"));
    }
}

/// The process entry: a subcommand runs headless; otherwise the window opens. Returns the exit
/// code.
pub fn main_entry() -> i32 {
    STARTED.get_or_init(std::time::Instant::now);
    // Before any other thread allocates: flat memory under a long import.
    pe_core::memory::keep_large_buffers_out_of_the_heap();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { cli::EXIT_USAGE } else { cli::EXIT_OK };
        }
    };
    match cli.command {
        Some(command) => cli::run(&cli.global, command),
        None => run_window(&cli.global, cli.open),
    }
}

fn run_window(global: &cli::Global, open: Vec<PathBuf>) -> i32 {
    // A word that is no file is a mistyped subcommand more likely than a photo.
    if let Some(missing) = open.iter().find(|p| !p.exists()) {
        terminal::errln!(
            "error: no such file, folder or command: {} (see `product-extractor --help`)",
            terminal::path(missing)
        );
        return cli::EXIT_USAGE;
    }
    let paths = global.paths();
    let server = match global.catalog_url(&paths) {
        Ok(Some(pe_core::catalog::server::CatalogUrl::Server(url))) => Some(url),
        Ok(_) => None,
        Err(e) => {
            terminal::errln!("error: {}", e.message);
            return cli::EXIT_USAGE;
        }
    };
    let paths = match global.local_paths("the window") {
        Ok(paths) => paths,
        Err(_) if server.is_some() => paths,
        Err(e) => {
            terminal::errln!("error: {}", e.message);
            return cli::EXIT_USAGE;
        }
    };
    let _log = logging::init(&paths, true);
    tracing::info!(data_dir = %paths.data_dir.display(), "starting the window");
    let opened = match server {
        // A team catalog: connected and migrated on Tauri's runtime (its pool lives there).
        Some(url) => {
            let keyring = secrets::Keyring::from_env(&*process_env());
            tauri::async_runtime::block_on(async {
                team::Login::read(&keyring, &url, process_env()).await.in_data_dir(&paths.data_dir).open(&url).await
            })
            .map_err(pe_core::ErrorReport::from)
            .and_then(|catalog| AppState::open_on(paths, process_env(), catalog))
        }
        None => opening::open_state(paths, process_env()),
    };
    let state = match opened {
        Ok(state) => state,
        Err(e) => {
            terminal::errln!("error: {}", e.message);
            return cli::EXIT_USAGE;
        }
    };
    let instance_id = instance_id(&paths_of(&state));
    // One window per catalog: a second launch on the same data dir hands its paths to the running
    // window (which queues them and comes to the front) and exits. Windows on other data dirs are
    // other catalogs, so they run side by side.
    let builder = tauri::Builder::default()
        .plugin(
            tauri_plugin_single_instance::Builder::new()
                .dbus_id(instance_id)
                .callback(|app, argv, cwd| {
                    let open = cli::Cli::try_parse_from(&argv).map(|c| c.open).unwrap_or_default();
                    let cwd = PathBuf::from(cwd);
                    let open = open.into_iter().map(|p| if p.is_absolute() { p } else { cwd.join(p) }).collect();
                    show_window(app);
                    open_paths(app, open);
                })
                .build(),
        )
        .plugin(tauri_plugin_window_state::Builder::default().build())
        .plugin(tauri_plugin_notification::init());
    match setup_opening(builder, state, open).run(tauri::generate_context!("tauri.conf.json")) {
        Ok(()) => cli::EXIT_OK,
        Err(e) if e.to_string().contains(CLOSING_INSTANCE) => relaunch_after(&e),
        Err(e) => {
            tracing::error!("the window failed: {e}");
            terminal::errln!("error: the window failed: {e}");
            cli::EXIT_FAILED
        }
    }
}

fn paths_of(state: &AppState) -> PathBuf {
    state.paths().data_dir.clone()
}

/// What the single-instance plugin says when the window it found quit while being handed this
/// launch's paths (a window that was closing as the app was started again).
const CLOSING_INSTANCE: &str = "failed to forward arguments to the running instance";
/// How many times a launch starts over after meeting a closing window.
const RELAUNCH_ENV: &str = "PRODUCT_EXTRACTOR_RELAUNCH";

/// Starts this launch over (the same process, arguments and environment) once the window that
/// was closing is gone, instead of failing: up to three times.
fn relaunch_after(error: &tauri::Error) -> i32 {
    let tries: u32 = std::env::var(RELAUNCH_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    tracing::warn!(tries, "the running window quit while this launch was handed to it: starting over ({error})");
    #[cfg(unix)]
    if tries < 3 {
        use std::os::unix::process::CommandExt;
        std::thread::sleep(std::time::Duration::from_millis(300));
        if let Ok(exe) = std::env::current_exe() {
            let failed = std::process::Command::new(exe)
                .args(std::env::args_os().skip(1))
                .env(RELAUNCH_ENV, (tries + 1).to_string())
                .exec();
            tracing::error!("starting over failed: {failed}");
        }
    }
    terminal::errln!("error: the window failed: {error}");
    cli::EXIT_FAILED
}

/// The single-instance name for a data dir: the app's identifier and a hash of the directory (a
/// D-Bus name element cannot start with a digit, hence the `d`).
pub fn instance_id(data_dir: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let dir = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    dir.hash(&mut hasher);
    format!("{}.d{:016x}", IDENTIFIER, hasher.finish())
}

/// The app's reverse-DNS identifier (tauri.conf.json's `identifier`).
pub const IDENTIFIER: &str = "io.github.productextractor";

/// Queues photos handed to the window (its launch paths, a second launch's) and tells it.
pub fn open_paths<R: Runtime>(app: &AppHandle<R>, open: Vec<PathBuf>) {
    if open.is_empty() {
        return;
    }
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let state = app.state::<AppState>().inner().clone();
        let queued = async {
            let queue = state.import_queue().await?;
            Ok::<_, pe_core::ErrorReport>(queue.enqueue_files(open, EnqueueOptions::interactive()).await?)
        }
        .await;
        match queued {
            Ok(enqueued) => {
                events::send::<events::Opened, _>(&app, enqueued.files.len());
            }
            Err(e) => tracing::error!("could not queue the photos handed to the window: {}", e.message),
        }
    });
}

fn show_window<R: Runtime>(app: &AppHandle<R>) {
    if let Some(window) = app.get_webview_window("main") {
        let _ = window.unminimize();
        let _ = window.show();
        let _ = window.set_focus();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_desktop_entry_offers_every_photo_type_intake_reads_and_folders() {
        let entry = include_str!("../../packaging/product-extractor.desktop");
        let mime: Vec<&str> = entry
            .lines()
            .find_map(|l| l.strip_prefix("MimeType="))
            .expect("a MimeType line")
            .split(';')
            .filter(|m| !m.is_empty())
            .collect();
        let mut expected: Vec<&str> = pe_core::intake::PHOTO_MIME_TYPES.to_vec();
        expected.push("inode/directory");
        assert_eq!(mime, expected);
        assert!(entry.contains("Exec={{exec}} %F"), "launched with the chosen files");
    }

    #[test]
    fn the_identifier_is_the_one_in_tauri_conf() {
        let conf: serde_json::Value = serde_json::from_str(include_str!("../../tauri.conf.json")).unwrap();
        assert_eq!(conf["identifier"], IDENTIFIER);
    }

    #[test]
    fn each_data_dir_is_its_own_instance() {
        let a = instance_id(Path::new("/tmp/catalog-a"));
        let b = instance_id(Path::new("/tmp/catalog-b"));
        assert_ne!(a, b);
        assert_eq!(a, instance_id(Path::new("/tmp/catalog-a")));
        // A valid D-Bus name: elements of [A-Za-z0-9_-], none starting with a digit.
        for element in a.split('.') {
            assert!(!element.is_empty() && !element.starts_with(|c: char| c.is_ascii_digit()), "{a}");
            assert!(element.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{a}");
        }
    }
}
