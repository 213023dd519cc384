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

pub mod bindings;
pub mod cli;
pub mod commands;
pub mod dto;
pub mod events;
pub mod logging;
pub mod state;

use clap::Parser;
use tauri::Runtime;

use crate::state::{process_env, AppState};

/// Registers the plugin, the state and every command. Generic over the runtime so the commands
/// can be driven through Tauri's mock runtime in tests.
pub fn setup<R: Runtime>(builder: tauri::Builder<R>, state: AppState) -> tauri::Builder<R> {
    let bridge_state = state.clone();
    let import_state = state.clone();
    builder
        .plugin(tauri_plugin_dialog::init())
        .manage(state)
        .setup(move |app| {
            tauri::async_runtime::spawn(events::resilience_bridge(app.handle().clone(), bridge_state));
            // Opens the import queue, which resumes an import a previous session left unfinished
            // (crash-resume), and forwards its progress to the window.
            tauri::async_runtime::spawn(events::import_bridge(app.handle().clone(), import_state));
            Ok(())
        })
        .invoke_handler(commands::invoke_handler())
}

/// The process entry: a subcommand runs headless; otherwise the window opens. Returns the exit
/// code.
pub fn main_entry() -> i32 {
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
        None => run_window(&cli.global),
    }
}

fn run_window(global: &cli::Global) -> i32 {
    let paths = global.paths();
    let _log = logging::init(&paths.log_dir, true);
    tracing::info!(data_dir = %paths.data_dir.display(), "starting the window");
    let state = match AppState::open(paths, process_env()) {
        Ok(state) => state,
        Err(e) => {
            eprintln!("error: {}", e.message);
            return cli::EXIT_USAGE;
        }
    };
    match setup(tauri::Builder::default(), state).run(tauri::generate_context!("tauri.conf.json")) {
        Ok(()) => cli::EXIT_OK,
        Err(e) => {
            tracing::error!("the window failed: {e}");
            eprintln!("error: the window failed: {e}");
            cli::EXIT_FAILED
        }
    }
}
