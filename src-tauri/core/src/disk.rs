//! Free space on the disk that holds the catalog (and the data dir): what the import queue checks
//! before it takes more work, so that a full disk pauses the queue with a message that names it
//! instead of failing item after item with an I/O error, and so that the answers already paid
//! for still have room to be written.
//!
//! The watermark is the smaller of a size and a share of the disk (`[import] min_free_disk_bytes`,
//! 1 GiB, and `min_free_disk_percent`, 5 %), as Elasticsearch's flood stage is: a small disk is
//! not held to a gigabyte, a large one not to 5 % of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A disk's space, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreeSpace {
    /// What this process may still write (the blocks available to unprivileged users).
    pub available: u64,
    pub total: u64,
}

/// Reads the free space of the disk holding a path. Injected, so tests can fill a disk without
/// filling one.
#[derive(Clone)]
pub struct FreeSpaceProbe(Arc<ProbeFn>);

type ProbeFn = dyn Fn(&Path) -> std::io::Result<FreeSpace> + Send + Sync;

impl FreeSpaceProbe {
    /// The operating system's answer (`statvfs`).
    pub fn system() -> Self {
        Self(Arc::new(system_free_space))
    }

    /// Any function: a test's disk.
    pub fn new(probe: impl Fn(&Path) -> std::io::Result<FreeSpace> + Send + Sync + 'static) -> Self {
        Self(Arc::new(probe))
    }

    pub fn free_space(&self, path: &Path) -> std::io::Result<FreeSpace> {
        (self.0)(path)
    }
}

impl Default for FreeSpaceProbe {
    fn default() -> Self {
        Self::system()
    }
}

impl std::fmt::Debug for FreeSpaceProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FreeSpaceProbe")
    }
}

#[cfg(unix)]
fn system_free_space(path: &Path) -> std::io::Result<FreeSpace> {
    let stat = rustix::fs::statvfs(path)?;
    let block = stat.f_frsize.max(1);
    Ok(FreeSpace { available: stat.f_bavail.saturating_mul(block), total: stat.f_blocks.saturating_mul(block) })
}

/// Elsewhere the space is not known: the queue never holds for it (SQLite's own `SQLITE_FULL`
/// still does).
#[cfg(not(unix))]
fn system_free_space(_path: &Path) -> std::io::Result<FreeSpace> {
    Ok(FreeSpace { available: u64::MAX, total: u64::MAX })
}

/// `[import] min_free_disk_bytes`'s default: 1 GiB.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 1 << 30;
/// `[import] min_free_disk_percent`'s default.
pub const DEFAULT_MIN_FREE_PERCENT: f64 = 5.0;

/// What the import queue keeps free on the disk of `dir`, and how often it looks again while it
/// waits for space.
#[derive(Debug, Clone)]
pub struct DiskCheck {
    /// The folder whose disk is checked (the catalog's, or the data dir of a team catalog's
    /// desktop); `None`: not checked.
    pub dir: Option<PathBuf>,
    pub min_free_bytes: u64,
    pub min_free_percent: f64,
    /// How long to wait before looking at the disk again while it is too full.
    pub recheck: Duration,
    pub probe: FreeSpaceProbe,
}

impl Default for DiskCheck {
    fn default() -> Self {
        Self {
            dir: None,
            min_free_bytes: DEFAULT_MIN_FREE_BYTES,
            min_free_percent: DEFAULT_MIN_FREE_PERCENT,
            recheck: Duration::from_secs(5),
            probe: FreeSpaceProbe::system(),
        }
    }
}

/// A disk too full to take more work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskTooFull {
    pub dir: PathBuf,
    pub free: FreeSpace,
    /// The watermark it is under.
    pub needed: u64,
}

impl DiskTooFull {
    /// What the window and the CLI say.
    pub fn message(&self) -> String {
        format!(
            "The disk holding the catalog ({}) has {} free, less than the {} the import keeps free.",
            self.dir.display(),
            bytes_text(self.free.available),
            bytes_text(self.needed),
        )
    }
}

impl DiskCheck {
    /// The watermark for a disk of `total` bytes: the smaller of the size and the share.
    pub fn watermark(&self, total: u64) -> u64 {
        let share = (total as f64 * self.min_free_percent.clamp(0.0, 100.0) / 100.0) as u64;
        self.min_free_bytes.min(share)
    }

    /// `Some` when the disk of `dir` has less free than the watermark. A disk that cannot be
    /// read is taken as having room (SQLite's own `SQLITE_FULL` still holds the queue).
    pub fn too_full(&self) -> Option<DiskTooFull> {
        let dir = self.dir.as_ref()?;
        let free = match self.probe.free_space(dir) {
            Ok(free) => free,
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "could not read the disk's free space");
                return None;
            }
        };
        let needed = self.watermark(free.total);
        (free.available < needed).then(|| DiskTooFull { dir: dir.clone(), free, needed })
    }
}

/// "312 MB", "1.5 GB", "800 kB": decimal units, as file managers show them.
pub fn bytes_text(bytes: u64) -> String {
    const UNITS: [(&str, f64); 4] = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    let b = bytes as f64;
    for (unit, size) in UNITS {
        if b >= size {
            let value = b / size;
            return if value < 10.0 { format!("{value:.1} {unit}") } else { format!("{value:.0} {unit}") };
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watermark_is_the_smaller_of_the_size_and_the_share() {
        let check = DiskCheck::default();
        // A 10 GB disk: 5 % is 500 MB, under 1 GiB.
        assert_eq!(check.watermark(10_000_000_000), 500_000_000);
        // A 1 TB disk: 1 GiB, under 5 %.
        assert_eq!(check.watermark(1_000_000_000_000), 1 << 30);
        let none = DiskCheck { min_free_bytes: 0, ..DiskCheck::default() };
        assert_eq!(none.watermark(1_000_000_000_000), 0);
    }

    #[test]
    fn a_disk_under_the_watermark_is_too_full_and_says_how_much_is_free() {
        let free = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(5_000_000_000));
        let seen = free.clone();
        let check = DiskCheck {
            dir: Some(PathBuf::from("/data")),
            probe: FreeSpaceProbe::new(move |_| {
                Ok(FreeSpace { available: seen.load(std::sync::atomic::Ordering::SeqCst), total: 100_000_000_000 })
            }),
            ..DiskCheck::default()
        };
        assert_eq!(check.too_full(), None);
        free.store(312_000_000, std::sync::atomic::Ordering::SeqCst);
        let full = check.too_full().expect("under 1 GiB");
        assert_eq!(full.needed, 1 << 30);
        assert_eq!(
            full.message(),
            "The disk holding the catalog (/data) has 312 MB free, less than the 1.1 GB the import keeps free."
        );
        // Without a folder nothing is checked.
        assert_eq!(DiskCheck { dir: None, ..check.clone() }.too_full(), None);
    }

    #[cfg(unix)]
    #[test]
    fn the_system_probe_reads_a_real_disk() {
        let free = FreeSpaceProbe::system().free_space(Path::new("/")).unwrap();
        assert!(free.total > 0 && free.available <= free.total, "{free:?}");
    }

    #[test]
    fn sizes_read_as_a_file_manager_shows_them() {
        assert_eq!(bytes_text(312_000_000), "312 MB");
        assert_eq!(bytes_text(1_500_000_000), "1.5 GB");
        assert_eq!(bytes_text(999), "999 bytes");
        assert_eq!(bytes_text(2_000), "2.0 kB");
    }
}
