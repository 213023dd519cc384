//! `[image]` and `[intake]`: how photos are prepared before upload, and the memory their decodes
//! share. `crate::config` reads the file and composes the sections.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// How photos are prepared before upload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields, default)]
#[ts(export)]
pub struct ImageConfig {
    /// The long edge of the uploaded image, in pixels.
    pub max_long_edge: u32,
    /// JPEG quality of the uploaded image, 1–100.
    pub jpeg_quality: u8,
    /// Files larger than this are refused before they are read.
    #[ts(type = "number")]
    pub max_file_bytes: u64,
    /// Images with more pixels than this are refused before they are decoded.
    #[ts(type = "number")]
    pub max_pixels: u64,
}

impl Default for ImageConfig {
    fn default() -> Self {
        Self { max_long_edge: 1536, jpeg_quality: 85, max_file_bytes: 20_000_000, max_pixels: 50_000_000 }
    }
}

/// How photos are taken in (`[intake]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IntakeConfig {
    /// The memory that concurrent decodes share, estimated from each image's header
    /// (`intake::DecodeBudget`); one image larger than this still decodes, alone.
    pub decode_budget_bytes: u64,
}

impl Default for IntakeConfig {
    fn default() -> Self {
        Self { decode_budget_bytes: 1 << 30 }
    }
}
