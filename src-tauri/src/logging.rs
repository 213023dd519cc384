//! Logs go through `tracing` to a daily-rotated file in `<data_dir>/logs` (the last 14 kept).
//! `RUST_LOG` sets the filter (default `info`). The API key never reaches a log line: the config
//! types print it masked, and no request URL carries it.
//!
//! The data dir and the logs are this user's only: the data dir is made 0700 here, before
//! anything else writes to it (an older install's looser one is tightened, and the log says so),
//! and each day's log file is 0600 ([`PrivateLogFiles`]).

use std::io;
use std::path::{Path, PathBuf};

use pe_core::files::{self, PrivateDir};
use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{RollingFileAppender, Rotation};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;
use tracing_subscriber::{fmt, EnvFilter};

use crate::state::Paths;

const KEEP_FILES: usize = 14;
const FILE_PREFIX: &str = "product-extractor";
const FILE_SUFFIX: &str = "log";

/// Makes the data dir private, then starts logging to the rotating file in `paths.log_dir`; with
/// `also_stderr`, warnings go to stderr too. Keep the guard alive until exit, or buffered lines are
/// lost. Returns `None` when the log directory cannot be created (the app still runs, without a
/// log file).
pub fn init(paths: &Paths, also_stderr: bool) -> Option<WorkerGuard> {
    let data_dir = files::ensure_private_dir(&paths.data_dir);
    // The appender prunes old files at start and complains when the directory is missing.
    let _ = files::create_private_dir(&paths.log_dir);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (file_layer, guard) = match PrivateLogFiles::open(&paths.log_dir) {
        Ok(appender) => {
            let (writer, guard) = tracing_appender::non_blocking(appender);
            (Some(fmt::layer().with_ansi(false).with_writer(writer)), Some(guard))
        }
        Err(e) => {
            crate::terminal::errln!("warning: cannot write logs to {}: {e}", crate::terminal::path(&paths.log_dir));
            (None, None)
        }
    };
    let stderr_layer = also_stderr.then(|| fmt::layer().with_writer(std::io::stderr).with_filter(LevelFilter::WARN));
    let _ = tracing_subscriber::registry().with(filter).with(file_layer).with(stderr_layer).try_init();
    let dir = paths.data_dir.display();
    match data_dir {
        Ok(PrivateDir::Tightened { was }) => tracing::warn!(
            data_dir = %dir,
            was = %format!("{was:04o}"),
            "the data dir was open to other users; it is yours only now (0700)"
        ),
        Ok(PrivateDir::Created | PrivateDir::AlreadyPrivate) => {}
        Err(e) => tracing::warn!(data_dir = %dir, error = %e, "cannot make the data dir private (0700)"),
    }
    guard
}

/// The daily-rotated appender whose files only this user reads: the appender creates each day's
/// file as any new file (0644 with the usual umask), so each day's file is created 0600 first (or
/// tightened, when the appender was quicker at midnight).
pub struct PrivateLogFiles {
    inner: RollingFileAppender,
    dir: PathBuf,
    /// The day (since the epoch, UTC: the appender's rotation) whose file was made private.
    day: u64,
}

impl PrivateLogFiles {
    /// The appender on `dir`, today's file made private before the appender opens it.
    pub fn open(dir: &Path) -> Result<Self, tracing_appender::rolling::InitError> {
        let day = today();
        make_private(dir, day);
        let inner = RollingFileAppender::builder()
            .rotation(Rotation::DAILY)
            .filename_prefix(FILE_PREFIX)
            .filename_suffix(FILE_SUFFIX)
            .max_log_files(KEEP_FILES)
            .build(dir)?;
        Ok(Self { inner, dir: dir.to_path_buf(), day })
    }
}

impl io::Write for PrivateLogFiles {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let day = today();
        if day != self.day {
            make_private(&self.dir, day);
            self.day = day;
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Days since the epoch, UTC.
fn today() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400)
}

/// The file the appender writes on `day` (`product-extractor.YYYY-MM-DD.log`), made 0600.
fn make_private(dir: &Path, day: u64) {
    let Some(date) = i64::try_from(day * 86_400).ok().and_then(|secs| chrono::DateTime::from_timestamp(secs, 0)) else {
        return;
    };
    let path = dir.join(format!("{FILE_PREFIX}.{}.{FILE_SUFFIX}", date.format("%Y-%m-%d")));
    if let Err(e) = files::private_file(&path) {
        crate::terminal::errln!("warning: cannot make the log file {} private: {e}", crate::terminal::path(&path));
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn log_files_are_the_users_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut logs = PrivateLogFiles::open(dir.path()).unwrap();
        logs.write_all(b"a line\n").unwrap();
        logs.flush().unwrap();
        let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(std::fs::read_to_string(&files[0]).unwrap(), "a line\n");
        assert_eq!(std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777, 0o600);

        // The appender was quicker at midnight: the file it made is tightened on the next line.
        std::fs::set_permissions(&files[0], std::fs::Permissions::from_mode(0o644)).unwrap();
        logs.day -= 1;
        logs.write_all(b"the next day\n").unwrap();
        assert_eq!(std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
