//! Logs go through `tracing` to a daily-rotated file in `<data_dir>/logs` (the last 14 kept).
//! `RUST_LOG` sets the filter (default `info`). The API key never reaches a log line: the config
//! types print it masked, and no request URL carries it.

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{RollingFileAppender, Rotation};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;
use tracing_subscriber::{fmt, EnvFilter};

const KEEP_FILES: usize = 14;

/// Starts logging to the rotating file; with `also_stderr`, warnings go to stderr too. Keep the
/// guard alive until exit, or buffered lines are lost. Returns `None` when the log directory
/// cannot be created (the app still runs, without a log file).
pub fn init(log_dir: &Path, also_stderr: bool) -> Option<WorkerGuard> {
    // The appender prunes old files at start and complains when the directory is missing.
    let _ = std::fs::create_dir_all(log_dir);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let appender = RollingFileAppender::builder()
        .rotation(Rotation::DAILY)
        .filename_prefix("product-extractor")
        .filename_suffix("log")
        .max_log_files(KEEP_FILES)
        .build(log_dir);
    let (file_layer, guard) = match appender {
        Ok(appender) => {
            let (writer, guard) = tracing_appender::non_blocking(appender);
            (Some(fmt::layer().with_ansi(false).with_writer(writer)), Some(guard))
        }
        Err(e) => {
            crate::terminal::errln!("warning: cannot write logs to {}: {e}", crate::terminal::path(log_dir));
            (None, None)
        }
    };
    let stderr_layer = also_stderr.then(|| fmt::layer().with_writer(std::io::stderr).with_filter(LevelFilter::WARN));
    let _ = tracing_subscriber::registry().with(filter).with(file_layer).with(stderr_layer).try_init();
    guard
}
