//! `[import]` and `[batch]`: how an import groups its photos into products, when it waits for disk
//! space, which links it follows, and how batch imports are polled and cut. `crate::config` reads
//! the file and composes the sections.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::grouping::{GroupBy, DEFAULT_MAX_PHOTOS_PER_PRODUCT};

/// How an import groups its photos into products (`import::grouping`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields, default)]
#[ts(export)]
pub struct ImportConfig {
    /// Which photos are one product: same stem in a folder, a whole folder, or each photo alone.
    pub group_by: GroupBy,
    /// A larger group is split into products of this many photos.
    #[ts(type = "number")]
    pub max_photos_per_product: usize,
    /// The import takes no more photos while the catalog's disk has less free than the smaller of
    /// this and `min_free_disk_percent` of the disk (what is in flight is still written); it goes
    /// on by itself once there is room.
    #[ts(type = "number")]
    pub min_free_disk_bytes: u64,
    pub min_free_disk_percent: f64,
    /// A link (symlink) in a dropped folder that leads outside the folder is followed; by
    /// default it is listed as skipped: a shared folder must not make the app read, send and
    /// store files elsewhere on this computer.
    pub follow_links_outside: bool,
}

/// The most photos one product's request may carry (`[import] max_photos_per_product`): ~1,000
/// input tokens each at the default resolution, so a request stays far below Gemini's limits.
pub const MAX_PHOTOS_PER_PRODUCT_LIMIT: usize = 16;

impl ImportConfig {
    /// The grouping a bulk import applies.
    pub fn grouping(&self) -> crate::import::grouping::Grouping {
        crate::import::grouping::Grouping { by: self.group_by, max_photos: self.max_photos_per_product.max(1) }
    }
}

impl Default for ImportConfig {
    fn default() -> Self {
        Self {
            group_by: GroupBy::default(),
            max_photos_per_product: DEFAULT_MAX_PHOTOS_PER_PRODUCT,
            min_free_disk_bytes: crate::disk::DEFAULT_MIN_FREE_BYTES,
            min_free_disk_percent: crate::disk::DEFAULT_MIN_FREE_PERCENT,
            follow_links_outside: false,
        }
    }
}

/// Batch imports through the Gemini Batch API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchConfig {
    /// How often a submitted batch's state is looked at.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Photos in one batch at most (each batch also stays under the 20 MB inline limit).
    pub max_requests: usize,
}

impl Default for BatchConfig {
    fn default() -> Self {
        let queue = crate::import::BatchOptions::default();
        Self { poll_interval: queue.poll_interval, max_requests: queue.max_requests }
    }
}

impl BatchConfig {
    /// The import queue's batch settings.
    pub fn import_options(&self) -> crate::import::BatchOptions {
        crate::import::BatchOptions {
            poll_interval: self.poll_interval.max(Duration::from_millis(10)),
            max_requests: self.max_requests.max(1),
            ..crate::import::BatchOptions::default()
        }
    }
}
