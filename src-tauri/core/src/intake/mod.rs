//! Image intake: everything that happens to a photo before any byte leaves the machine.
//!
//! 1. The file size is checked against `max_file_bytes` *before* the file is read.
//! 2. The format is detected from magic bytes, never from the extension: JPEG, PNG and WebP are
//!    prepared, GIF is converted (first frame), HEIC/HEIF/AVIF, TIFF, BMP, … are refused as
//!    unsupported with a message saying what to do, anything else is "not an image".
//! 3. The pixel dimensions are read from the header and checked against `max_pixels` *before*
//!    decoding (for non-JPEG formats also through [`image::Limits`]), so a decompression bomb
//!    never allocates its pixel buffer.
//! 4. The image is decoded, scaled so the long edge is at most `max_long_edge`, turned upright
//!    according to its EXIF orientation, and re-encoded as a baseline JPEG (`jpeg_quality`,
//!    4:2:0) that carries no metadata at all (no EXIF, no GPS, no ICC, no XMP).
//! 5. A SHA-256 of the original bytes and a 256 px thumbnail for the UI are computed.
//!
//! JPEG inputs (nearly every photo) take a fast path: libjpeg-turbo decodes directly at a reduced
//! size (DCT-domain scaling, 1/8…8/8), `fast_image_resize` (SIMD Lanczos3) scales to the exact
//! target, and the orientation is applied to the small image. Truncated or corrupt JPEGs are
//! errors, never a half-grey picture. CMYK and lossless JPEGs, and every other format, go
//! through the `image` crate with limits set before decoding.
//!
//! All of this is blocking CPU work: async callers use [`prepare_file_async`], which runs it on
//! tokio's blocking pool, never on a worker thread, and first takes the decode's share of a
//! [`DecodeBudget`] (its memory estimated from the header, [`decode_estimate`]), so concurrent
//! decodes of large images wait for each other instead of adding up past the budget.

use std::fmt;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use fast_image_resize as fr;
use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use ts_rs::TS;

use crate::barcode::{self, Barcode};
mod budget;
pub mod config;
mod decode;
mod exif;
mod format;

use crate::error::{Coded, ErrorCode};
pub use budget::*;
pub use config::{ImageConfig, IntakeConfig};
use decode::*;
pub use exif::*;
pub use format::*;

/// The long edge of [`PreparedImage::thumbnail_jpeg`], in pixels.
pub const THUMBNAIL_LONG_EDGE: u32 = 256;
/// JPEG quality of thumbnails and previews.
pub const THUMBNAIL_QUALITY: u8 = 80;
/// Progressive JPEGs with more scans than this are refused (libjpeg-turbo's guard against the
/// "many scans" denial of service; real encoders write about 10).
const MAX_JPEG_SCANS: u32 = 500;

/// Why a photo could not be prepared. Every message tells catalog staff what to do.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    #[error("The file is empty (0 bytes). Drop a JPEG, PNG or WebP photo.")]
    Empty,
    #[error("{}", not_an_image_message(*looks_like))]
    NotAnImage {
        /// What the file seems to be instead, e.g. "a PDF", when we can tell.
        looks_like: Option<&'static str>,
    },
    #[error("The {format} file is truncated (it ends before the image does) — copy or export the photo again and drop the new file.")]
    Truncated { format: SourceFormat },
    #[error(
        "The {format} file is damaged and cannot be read ({detail}). Export the photo again as JPEG and drop it again."
    )]
    Corrupt { format: SourceFormat, detail: String },
    #[error("{}", unsupported_message(format))]
    Unsupported {
        /// The format's name, e.g. "HEIC", "TIFF".
        format: String,
    },
    #[error("The photo is {}; the limit is {} (image.max_file_bytes in Settings).", megabytes(*bytes), megabytes(*max))]
    FileTooLarge { bytes: u64, max: u64 },
    #[error("The image is {width} × {height} pixels ({}); the limit is {} (image.max_pixels in Settings). Scale it down and drop it again.", megapixels(u64::from(*width) * u64::from(*height)), megapixels(*max))]
    TooManyPixels { width: u32, height: u32, max: u64 },
    #[error("{} is not a regular file. Drop a photo file, not a folder or device.", path.display())]
    NotAFile { path: PathBuf },
    #[error("Cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("Preparing the photo failed unexpectedly ({detail}). Try again; if it keeps failing, report it.")]
    Internal { detail: String },
}

fn not_an_image_message(looks_like: Option<&str>) -> String {
    match looks_like {
        Some(kind) => format!("This file is not an image (it starts like {kind}). Drop a JPEG, PNG or WebP photo."),
        None => "This file is not an image we recognize. Drop a JPEG, PNG or WebP photo.".into(),
    }
}

fn unsupported_message(format: &str) -> String {
    match format {
        "HEIC" | "HEIF" => {
            format!("{format} photos are not supported yet — export the photo as JPEG and drop it again.")
        }
        _ => format!("{format} images are not supported — export the image as JPEG, PNG or WebP and drop it again."),
    }
}

/// "24.3 MB", "20 MB" (decimal megabytes, like file managers show).
fn megabytes(bytes: u64) -> String {
    let mb = bytes as f64 / 1e6;
    let s = format!("{mb:.1}");
    let s = s.strip_suffix(".0").unwrap_or(&s);
    if bytes < 1_000_000 && bytes != 0 {
        format!("{} KB", (bytes as f64 / 1e3).round())
    } else {
        format!("{s} MB")
    }
}

fn megapixels(pixels: u64) -> String {
    let mp = pixels as f64 / 1e6;
    let s = format!("{mp:.1}");
    format!("{} megapixels", s.strip_suffix(".0").unwrap_or(&s))
}

impl Coded for IntakeError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::Empty
            | Self::NotAnImage { .. }
            | Self::Truncated { .. }
            | Self::Corrupt { .. }
            | Self::NotAFile { .. }
            | Self::Internal { .. } => ErrorCode::InvalidImage,
            Self::Unsupported { .. } => ErrorCode::UnsupportedFormat,
            Self::FileTooLarge { .. } | Self::TooManyPixels { .. } => ErrorCode::ImageTooLarge,
            Self::Io { .. } => ErrorCode::Io,
        }
    }
}

/// A photo ready for upload.
#[derive(Clone, PartialEq, Eq)]
pub struct PreparedImage {
    /// The upload: a metadata-free baseline JPEG.
    pub jpeg: Vec<u8>,
    /// Of `jpeg`, after orientation and downscale.
    pub width: u32,
    pub height: u32,
    /// Of the original, as displayed (after orientation).
    pub original_width: u32,
    pub original_height: u32,
    pub source_format: SourceFormat,
    /// Size of the original file.
    pub file_bytes: u64,
    /// Lowercase hex SHA-256 of the original file bytes.
    pub sha256: String,
    /// Long edge [`THUMBNAIL_LONG_EDGE`] (or smaller if the photo is), oriented, no metadata.
    pub thumbnail_jpeg: Vec<u8>,
    /// The EAN/UPC barcodes read from the prepared pixels (before JPEG encoding), boxes in the
    /// prepared image's pixels; empty when none is legible (never an error).
    pub barcodes: Vec<Barcode>,
}

impl fmt::Debug for PreparedImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedImage")
            .field("jpeg", &format_args!("{} bytes", self.jpeg.len()))
            .field("width", &self.width)
            .field("height", &self.height)
            .field("original_width", &self.original_width)
            .field("original_height", &self.original_height)
            .field("source_format", &self.source_format)
            .field("file_bytes", &self.file_bytes)
            .field("sha256", &self.sha256)
            .field("thumbnail_jpeg", &format_args!("{} bytes", self.thumbnail_jpeg.len()))
            .field("barcodes", &self.barcodes)
            .finish()
    }
}

impl PreparedImage {
    pub const MIME_TYPE: &'static str = "image/jpeg";

    /// The thumbnail as a `data:image/jpeg;base64,…` URL for an `<img>`.
    pub fn thumbnail_data_url(&self) -> String {
        jpeg_data_url(&self.thumbnail_jpeg)
    }
}

fn jpeg_data_url(jpeg: &[u8]) -> String {
    let mut url = String::with_capacity(23 + jpeg.len().div_ceil(3) * 4);
    url.push_str("data:image/jpeg;base64,");
    base64::engine::general_purpose::STANDARD.encode_string(jpeg, &mut url);
    url
}

// ---------------------------------------------------------------------------------------------
// Format detection
// ---------------------------------------------------------------------------------------------

/// Prepares the bytes of a photo file for upload. Blocking CPU work (tens of milliseconds for a
/// 12 MP JPEG): do not call it on an async worker thread.
pub fn prepare_bytes(bytes: &[u8], cfg: &ImageConfig) -> Result<PreparedImage, IntakeError> {
    guard_panics(|| prepare_bytes_inner(bytes, cfg, None))
}

/// Checks the file's size *before* reading it, then [`prepare_bytes`]. Blocking.
pub fn prepare_file(path: &Path, cfg: &ImageConfig) -> Result<PreparedImage, IntakeError> {
    prepare_file_known(path, cfg, None)
}

/// [`prepare_file`] for a file whose SHA-256 is known already (the import queue hashed it while
/// queueing): the bytes are read once more to decode, never hashed again. A file changed between
/// the two keeps the hash it was queued with.
pub fn prepare_file_known(
    path: &Path,
    cfg: &ImageConfig,
    sha256: Option<String>,
) -> Result<PreparedImage, IntakeError> {
    let bytes = read_checked(path, cfg)?;
    guard_panics(|| prepare_bytes_inner(&bytes, cfg, sha256))
}

/// [`prepare_file_known`] on tokio's blocking thread pool, inside the budget: the file is read
/// and its header looked at, the decode's estimated memory taken from `budget` (waiting while
/// other decodes hold it), then the photo decoded and the share given back.
pub async fn prepare_file_async(
    path: PathBuf,
    cfg: ImageConfig,
    sha256: Option<String>,
    budget: &DecodeBudget,
) -> Result<PreparedImage, IntakeError> {
    decode_within_budget(path, cfg, budget, move |bytes, cfg| prepare_bytes_inner(bytes, cfg, sha256)).await
}

/// [`preview_data_url`] on the blocking pool, inside the same budget as every other decode: the
/// review pane's preview of a large photo waits for its share like an import's decode does.
pub async fn preview_data_url_async(
    path: PathBuf,
    cfg: ImageConfig,
    long_edge: u32,
    budget: &DecodeBudget,
) -> Result<String, IntakeError> {
    decode_within_budget(path, cfg, budget, move |bytes, cfg| preview_bytes(bytes, cfg, long_edge)).await
}

/// The one way a decode takes memory: the file read and its header estimated on the blocking
/// pool, the estimate taken from `budget` (waiting while other decodes hold it), then `decode`
/// run on the blocking pool (a panic becomes [`IntakeError::Internal`]) and the share given back.
async fn decode_within_budget<T: Send + 'static>(
    path: PathBuf,
    cfg: ImageConfig,
    budget: &DecodeBudget,
    decode: impl FnOnce(&[u8], &ImageConfig) -> Result<T, IntakeError> + Send + 'static,
) -> Result<T, IntakeError> {
    let internal = |e: tokio::task::JoinError| IntakeError::Internal { detail: e.to_string() };
    let read_cfg = cfg.clone();
    let (bytes, estimate) = tokio::task::spawn_blocking(move || {
        let bytes = read_checked(&path, &read_cfg)?;
        let estimate = guard_panics(|| Ok(decode_estimate(&bytes, &read_cfg)))?;
        Ok::<_, IntakeError>((bytes, estimate))
    })
    .await
    .map_err(internal)??;
    let share = budget.reserve(estimate).await;
    tokio::task::spawn_blocking(move || {
        let decoded = guard_panics(|| decode(&bytes, &cfg));
        drop(bytes);
        drop(share);
        decoded
    })
    .await
    .map_err(internal)?
}

/// A `data:image/jpeg;base64,…` preview of the photo for the review pane: oriented, long edge at
/// most `long_edge` (e.g. 1024), metadata-free. Same checks as [`prepare_file`]. Blocking.
pub fn preview_data_url(path: &Path, cfg: &ImageConfig, long_edge: u32) -> Result<String, IntakeError> {
    let bytes = read_checked(path, cfg)?;
    guard_panics(|| preview_bytes(&bytes, cfg, long_edge))
}

fn preview_bytes(bytes: &[u8], cfg: &ImageConfig, long_edge: u32) -> Result<String, IntakeError> {
    let format = detect_format(bytes)?;
    let decoded = decode_scaled(bytes, format, cfg.max_pixels, long_edge.max(1))?;
    let jpeg = encode_jpeg(&decoded.image, cfg.jpeg_quality.clamp(1, 100))?;
    Ok(jpeg_data_url(&jpeg))
}

/// Reads a file, refusing non-regular files and files over `max_file_bytes` before reading.
fn read_checked(path: &Path, cfg: &ImageConfig) -> Result<Vec<u8>, IntakeError> {
    let io_err = |source| IntakeError::Io { path: path.to_path_buf(), source };
    // Stat the path first: opening a FIFO or device could block or never end.
    let meta = std::fs::metadata(path).map_err(io_err)?;
    if !meta.is_file() {
        return Err(IntakeError::NotAFile { path: path.to_path_buf() });
    }
    check_file_len(meta.len(), cfg)?;
    let file = std::fs::File::open(path).map_err(io_err)?;
    // The file may have changed since the stat: re-check on the open handle and cap the read.
    let len = file.metadata().map_err(io_err)?.len();
    check_file_len(len, cfg)?;
    read_capped(file, len, cfg).map_err(|e| match e {
        Capped::Io(source) => io_err(source),
        Capped::Refused(e) => e,
    })
}

enum Capped {
    Io(std::io::Error),
    Refused(IntakeError),
}

/// Reads at most one byte more than `max_file_bytes`, whatever the file said its size was: a file
/// that grows while it is read (a camera still writing, a hostile share) is refused, never read
/// without end.
fn read_capped(reader: impl Read, len_hint: u64, cfg: &ImageConfig) -> Result<Vec<u8>, Capped> {
    let mut bytes = Vec::with_capacity(len_hint.min(cfg.max_file_bytes) as usize);
    reader.take(cfg.max_file_bytes.saturating_add(1)).read_to_end(&mut bytes).map_err(Capped::Io)?;
    check_file_len(bytes.len() as u64, cfg).map_err(Capped::Refused)?;
    Ok(bytes)
}

fn check_file_len(len: u64, cfg: &ImageConfig) -> Result<(), IntakeError> {
    if len == 0 {
        return Err(IntakeError::Empty);
    }
    if len > cfg.max_file_bytes {
        return Err(IntakeError::FileTooLarge { bytes: len, max: cfg.max_file_bytes });
    }
    Ok(())
}

/// Decoders are third-party code: a panic on a hostile file must become an error, not a crash.
fn guard_panics<T>(f: impl FnOnce() -> Result<T, IntakeError>) -> Result<T, IntakeError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let detail = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "decoder panic".into());
        tracing::error!(%detail, "image decoder panicked");
        Err(IntakeError::Internal { detail })
    })
}

fn prepare_bytes_inner(bytes: &[u8], cfg: &ImageConfig, sha256: Option<String>) -> Result<PreparedImage, IntakeError> {
    check_file_len(bytes.len() as u64, cfg)?;
    let source_format = detect_format(bytes)?;
    let decoded = decode_scaled(bytes, source_format, cfg.max_pixels, cfg.max_long_edge.max(1))?;
    let jpeg = encode_jpeg(&decoded.image, cfg.jpeg_quality.clamp(1, 100))?;
    let thumb = fit_within(&decoded.image, THUMBNAIL_LONG_EDGE)?;
    let thumbnail_jpeg = encode_jpeg(thumb.as_ref().unwrap_or(&decoded.image), THUMBNAIL_QUALITY)?;
    let barcodes = barcode::read_barcodes_luma(&luma_of(&decoded.image));
    let sha256 = sha256.unwrap_or_else(|| hex::encode(Sha256::digest(bytes)));
    tracing::debug!(
        format = %source_format,
        original = %format_args!("{}x{}", decoded.original_width, decoded.original_height),
        prepared = %format_args!("{}x{}", decoded.image.width, decoded.image.height),
        jpeg_bytes = jpeg.len(),
        barcodes = barcodes.len(),
        "photo prepared"
    );
    Ok(PreparedImage {
        width: decoded.image.width,
        height: decoded.image.height,
        jpeg,
        original_width: decoded.original_width,
        original_height: decoded.original_height,
        source_format,
        file_bytes: bytes.len() as u64,
        sha256,
        thumbnail_jpeg,
        barcodes,
    })
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests;
