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
pub mod config;

use crate::error::{Coded, ErrorCode};
pub use config::{ImageConfig, IntakeConfig};

/// The long edge of [`PreparedImage::thumbnail_jpeg`], in pixels.
pub const THUMBNAIL_LONG_EDGE: u32 = 256;
/// JPEG quality of thumbnails and previews.
pub const THUMBNAIL_QUALITY: u8 = 80;
/// Progressive JPEGs with more scans than this are refused (libjpeg-turbo's guard against the
/// "many scans" denial of service; real encoders write about 10).
const MAX_JPEG_SCANS: u32 = 500;

/// The format of the file that was dropped, detected from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum SourceFormat {
    Jpeg,
    Png,
    #[serde(rename = "webp")]
    #[ts(rename = "webp")]
    WebP,
    Gif,
}

impl SourceFormat {
    /// The format of a serialized name ([`SourceFormat::as_str`]).
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Jpeg, Self::Png, Self::WebP, Self::Gif].into_iter().find(|f| f.as_str() == name)
    }

    /// The serialized name: `jpeg`, `png`, `webp`, `gif`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Jpeg => "jpeg",
            Self::Png => "png",
            Self::WebP => "webp",
            Self::Gif => "gif",
        }
    }

    /// The name people know: `JPEG`, `PNG`, `WebP`, `GIF`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Jpeg => "JPEG",
            Self::Png => "PNG",
            Self::WebP => "WebP",
            Self::Gif => "GIF",
        }
    }

    fn image_format(self) -> ImageFormat {
        match self {
            Self::Jpeg => ImageFormat::Jpeg,
            Self::Png => ImageFormat::Png,
            Self::WebP => ImageFormat::WebP,
            Self::Gif => ImageFormat::Gif,
        }
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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

/// The file extensions a folder walk picks up, lower case: the one list of photo types for the
/// import queue's walker and the window (exported to the UI as `PHOTO_EXTENSIONS`). A file named
/// explicitly is always tried: intake decides by its bytes, not its name (HEIC and HEIF are
/// listed so that they are reported as unsupported rather than ignored).
pub const PHOTO_EXTENSIONS: &[&str] = &["jpg", "jpeg", "jfif", "png", "webp", "gif", "heic", "heif"];

/// The MIME types of the photos intake reads (HEIC/HEIF are recognised only to be refused): what
/// the desktop entry offers to open (packaging/product-extractor.desktop; a test compares them).
pub const PHOTO_MIME_TYPES: &[&str] = &["image/jpeg", "image/png", "image/webp", "image/gif"];

/// Whether a folder walk picks this file up (by extension, any case).
pub fn has_photo_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|ext| PHOTO_EXTENSIONS.iter().any(|p| p.eq_ignore_ascii_case(ext)))
}

/// Detects the format from the first bytes. Never looks at a file name.
pub fn detect_format(bytes: &[u8]) -> Result<SourceFormat, IntakeError> {
    let unsupported = |name: &str| Err(IntakeError::Unsupported { format: name.into() });
    let not_image = |kind: Option<&'static str>| Err(IntakeError::NotAnImage { looks_like: kind });
    let b = bytes;
    if b.is_empty() {
        return Err(IntakeError::Empty);
    }
    if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Ok(SourceFormat::Jpeg);
    }
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Ok(SourceFormat::Png);
    }
    if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        return Ok(SourceFormat::Gif);
    }
    if b.len() >= 12 && &b[0..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        return Ok(SourceFormat::WebP);
    }
    if b.len() >= 12 && &b[4..8] == b"ftyp" {
        // ISO base media: the major brand, then the compatible brands.
        let box_len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let end = box_len.clamp(12, 64).min(b.len());
        let brands: Vec<&[u8]> =
            std::iter::once(&b[8..12]).chain(b.get(16..end).unwrap_or_default().chunks_exact(4)).collect();
        let has = |names: &[&[u8; 4]]| brands.iter().any(|br| names.iter().any(|n| br == n));
        if has(&[b"avif", b"avis"]) {
            return unsupported("AVIF");
        }
        if has(&[b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"hevm", b"hevs"]) {
            return unsupported("HEIC");
        }
        if has(&[b"mif1", b"msf1"]) {
            return unsupported("HEIF");
        }
        if has(&[b"crx "]) {
            return unsupported("Canon RAW (CR3)");
        }
        if has(&[b"jp2 ", b"jpx "]) {
            return unsupported("JPEG 2000");
        }
        return not_image(Some("a video (MP4/MOV)"));
    }
    if b.starts_with(b"II*\0") || b.starts_with(b"MM\0*") {
        return unsupported("TIFF (or camera RAW)");
    }
    if b.starts_with(b"IIRO") || b.starts_with(b"IIU\0") {
        return unsupported("camera RAW");
    }
    if b.len() >= 18 && b.starts_with(b"BM") && matches!(b[14], 12 | 40 | 52 | 56 | 64 | 108 | 124) {
        return unsupported("BMP");
    }
    if b.starts_with(&[0xFF, 0x0A]) || b.starts_with(b"\0\0\0\x0cJXL \r\n\x87\n") {
        return unsupported("JPEG XL");
    }
    if b.starts_with(b"\0\0\0\x0cjP  \r\n\x87\n") || b.starts_with(&[0xFF, 0x4F, 0xFF, 0x51]) {
        return unsupported("JPEG 2000");
    }
    if b.starts_with(b"8BPS") {
        return unsupported("Photoshop (PSD)");
    }
    if b.starts_with(&[0, 0, 1, 0]) && b.len() >= 6 && b[4] != 0 {
        return unsupported("ICO");
    }
    if b.starts_with(b"qoif") {
        return unsupported("QOI");
    }
    if b.starts_with(b"#?RADIANCE") || b.starts_with(b"#?RGBE") {
        return unsupported("HDR");
    }
    if b.starts_with(b"\x76\x2f\x31\x01") {
        return unsupported("OpenEXR");
    }
    if b.starts_with(b"%PDF") {
        return not_image(Some("a PDF"));
    }
    if b.starts_with(b"PK\x03\x04") {
        return not_image(Some("a ZIP archive or Office document"));
    }
    if b.starts_with(b"\x7fELF") || b.starts_with(b"MZ") {
        return not_image(Some("a program"));
    }
    if b.starts_with(b"RIFF") {
        return not_image(Some("an audio or video file"));
    }
    // Text: SVG, HTML, plain text.
    let head = &b[..b.len().min(512)];
    let text = String::from_utf8_lossy(head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head)).to_ascii_lowercase();
    let trimmed = text.trim_start();
    if trimmed.starts_with("<svg") || (trimmed.starts_with("<?xml") && text.contains("<svg")) {
        return unsupported("SVG");
    }
    if trimmed.starts_with("<!doctype html") || trimmed.starts_with("<html") {
        return not_image(Some("a web page (HTML)"));
    }
    if std::str::from_utf8(head).is_ok() && !head.iter().any(|&c| c < 0x09 || (0x0E..0x20).contains(&c)) {
        return not_image(Some("a text file"));
    }
    not_image(None)
}

// ---------------------------------------------------------------------------------------------
// Public entry points
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

/// The memory budget that concurrent decodes share (`[intake] decode_budget_bytes`). Each decode
/// takes its [`decode_estimate`] before it starts and gives it back when it ends; an estimate
/// larger than the whole budget takes all of it, so one huge image still runs, alone. The
/// semaphore is fair: a large share waiting is not overtaken by small ones. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DecodeBudget {
    permits: Arc<tokio::sync::Semaphore>,
    /// The whole budget in [`BUDGET_UNIT`]s (one permit each).
    units: u32,
}

/// One permit of a [`DecodeBudget`].
const BUDGET_UNIT: u64 = 1024;

impl DecodeBudget {
    pub fn new(bytes: u64) -> Self {
        let units = Self::units_for(bytes);
        Self { permits: Arc::new(tokio::sync::Semaphore::new(units as usize)), units }
    }

    fn units_for(bytes: u64) -> u32 {
        (bytes / BUDGET_UNIT).clamp(1, u64::from(u32::MAX)) as u32
    }

    pub fn total_bytes(&self) -> u64 {
        u64::from(self.units) * BUDGET_UNIT
    }

    /// The budget for a new setting of `bytes`: this same budget when the size is unchanged, so
    /// that replacing the pipeline (Settings saved, demo mode) keeps the decodes in flight counted
    /// instead of opening a second, empty budget beside them. A new size is a new budget; until
    /// the decodes under the old one end, both bound memory.
    pub fn for_setting(current: Option<&DecodeBudget>, bytes: u64) -> DecodeBudget {
        match current {
            Some(budget) if budget.units == Self::units_for(bytes) => budget.clone(),
            _ => Self::new(bytes),
        }
    }

    /// What no decode holds right now.
    pub fn available_bytes(&self) -> u64 {
        self.permits.available_permits() as u64 * BUDGET_UNIT
    }

    /// Waits until `bytes` (at most the whole budget) are free and holds them until the guard drops.
    pub async fn reserve(&self, bytes: u64) -> tokio::sync::OwnedSemaphorePermit {
        let units = bytes.div_ceil(BUDGET_UNIT).clamp(1, u64::from(self.units)) as u32;
        self.permits.clone().acquire_many_owned(units).await.expect("the decode budget is never closed")
    }
}

/// The memory a decode of `bytes` holds at its peak, estimated from the header alone: the decoded
/// buffer (width × height × bytes per pixel, 16-bit samples counted as two bytes; for the JPEG
/// fast path the DCT-scaled size) plus the 8-bit RGB copy it is converted to. Zero when the file
/// will be refused before any pixel buffer exists (not an image, unsupported, over `max_pixels`,
/// an unreadable header).
pub fn decode_estimate(bytes: &[u8], cfg: &ImageConfig) -> u64 {
    let Ok(format) = detect_format(bytes) else { return 0 };
    let long_edge = cfg.max_long_edge.max(1);
    let over_limit = |w: u64, h: u64| w.saturating_mul(h) > cfg.max_pixels;
    if format == SourceFormat::Jpeg {
        let Ok(mut dec) = turbojpeg::Decompressor::new() else { return 0 };
        let Ok(header) = dec.read_header(bytes) else { return 0 };
        let (w, h) = (header.width as u64, header.height as u64);
        if over_limit(w, h) {
            return 0;
        }
        if !matches!(header.colorspace, turbojpeg::Colorspace::CMYK | turbojpeg::Colorspace::YCCK)
            && !header.is_lossless
        {
            let scaled = header.scaled(jpeg_scaling(w as u32, h as u32, long_edge));
            return (scaled.width as u64) * (scaled.height as u64) * 3;
        }
    }
    let Ok(decoder) = ImageReader::with_format(Cursor::new(bytes), format.image_format()).into_decoder() else {
        return 0;
    };
    let (w, h) = decoder.dimensions();
    let (w, h) = (u64::from(w), u64::from(h));
    if over_limit(w, h) {
        return 0;
    }
    w * h * (u64::from(decoder.color_type().bytes_per_pixel()) + 3)
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

/// Packed 8-bit RGB pixels.
struct Rgb {
    width: u32,
    height: u32,
    data: Vec<u8>,
}

struct Decoded {
    /// Oriented and scaled to fit the requested long edge.
    image: Rgb,
    /// As displayed (after orientation), before scaling.
    original_width: u32,
    original_height: u32,
}

/// Decodes, scales so the long edge is at most `long_edge` (never up), and orients.
fn decode_scaled(bytes: &[u8], format: SourceFormat, max_pixels: u64, long_edge: u32) -> Result<Decoded, IntakeError> {
    let (image, stored_w, stored_h, orientation) = match format {
        SourceFormat::Jpeg => match decode_jpeg_turbo(bytes, max_pixels, long_edge)? {
            Some(done) => done,
            None => decode_with_image_crate(bytes, format, max_pixels, long_edge)?,
        },
        _ => decode_with_image_crate(bytes, format, max_pixels, long_edge)?,
    };
    let swaps = matches!(
        orientation,
        Orientation::Rotate90 | Orientation::Rotate270 | Orientation::Rotate90FlipH | Orientation::Rotate270FlipH
    );
    let image = apply_orientation(image, orientation);
    let (original_width, original_height) = if swaps { (stored_h, stored_w) } else { (stored_w, stored_h) };
    Ok(Decoded { image, original_width, original_height })
}

fn check_pixels(format: SourceFormat, width: u32, height: u32, max_pixels: u64) -> Result<(), IntakeError> {
    if width == 0 || height == 0 {
        return Err(IntakeError::Corrupt { format, detail: "it has no pixels".into() });
    }
    if u64::from(width) * u64::from(height) > max_pixels {
        return Err(IntakeError::TooManyPixels { width, height, max: max_pixels });
    }
    Ok(())
}

/// The size that fits `long_edge` keeping the aspect ratio; the input size if it already fits.
fn target_size(width: u32, height: u32, long_edge: u32) -> (u32, u32) {
    let long = width.max(height);
    if long <= long_edge {
        return (width, height);
    }
    let scale = f64::from(long_edge) / f64::from(long);
    let fit = |side: u32| ((f64::from(side) * scale).round() as u32).clamp(1, long_edge);
    if width >= height {
        (long_edge, fit(height))
    } else {
        (fit(width), long_edge)
    }
}

type DecodeResult = (Rgb, u32, u32, Orientation);

/// The fast path. `Ok(None)` means "not for libjpeg-turbo's scaled RGB path" (CMYK/YCCK, lossless).
fn decode_jpeg_turbo(bytes: &[u8], max_pixels: u64, long_edge: u32) -> Result<Option<DecodeResult>, IntakeError> {
    let corrupt = |e: turbojpeg::Error| jpeg_error(bytes, e);
    let mut dec = turbojpeg::Decompressor::new().map_err(|e| IntakeError::Internal { detail: e.to_string() })?;
    let header = dec.read_header(bytes).map_err(corrupt)?;
    let (w, h) = (
        u32::try_from(header.width).map_err(|_| IntakeError::NotAnImage { looks_like: None })?,
        u32::try_from(header.height).map_err(|_| IntakeError::NotAnImage { looks_like: None })?,
    );
    check_pixels(SourceFormat::Jpeg, w, h, max_pixels)?;
    if matches!(header.colorspace, turbojpeg::Colorspace::CMYK | turbojpeg::Colorspace::YCCK) || header.is_lossless {
        return Ok(None);
    }
    let orientation = jpeg_exif_orientation(bytes);
    let (tw, th) = target_size(w, h, long_edge);
    let factor = jpeg_scaling(w, h, long_edge);
    dec.set_scaling_factor(factor).map_err(corrupt)?;
    dec.set_scan_limit(MAX_JPEG_SCANS).map_err(corrupt)?;
    let scaled = header.scaled(factor);
    let mut pixels = vec![0u8; scaled.width * scaled.height * 3];
    let image = turbojpeg::Image {
        pixels: pixels.as_mut_slice(),
        width: scaled.width,
        pitch: scaled.width * 3,
        height: scaled.height,
        format: turbojpeg::PixelFormat::RGB,
    };
    match dec.decompress(bytes, image) {
        Ok(()) => {}
        // Many cameras and editors leave stray bytes before a marker; libjpeg-turbo warns and
        // still decodes every pixel. Refusing those photos would refuse real, intact work.
        Err(e) if is_harmless_jpeg_warning(&e) => tracing::debug!("JPEG decoded with a harmless warning: {e}"),
        Err(e) => return Err(corrupt(e)),
    }
    drop(dec);
    let decoded = Rgb { width: scaled.width as u32, height: scaled.height as u32, data: pixels };
    let image = resize_to(decoded, tw, th)?;
    Ok(Some((image, w, h, orientation)))
}

/// The largest DCT-domain reduction (n/8) that keeps the decoded long edge >= the target's.
fn jpeg_scaling(width: u32, height: u32, long_edge: u32) -> turbojpeg::ScalingFactor {
    let (tw, th) = target_size(width, height, long_edge);
    let long = width.max(height) as usize;
    let target_long = tw.max(th) as usize;
    (1..=8usize)
        .map(|n| turbojpeg::ScalingFactor::new(n, 8))
        .find(|f| f.scale(long) >= target_long)
        .unwrap_or(turbojpeg::ScalingFactor::ONE)
}

/// The one libjpeg warning after which the decoded image is complete: stray bytes between segments
/// (JWRN_EXTRANEOUS_DATA).
fn is_harmless_jpeg_warning(e: &turbojpeg::Error) -> bool {
    e.to_string().contains("extraneous bytes before marker")
}

/// libjpeg-turbo reports warnings (e.g. "Premature end of JPEG file") as errors in its TurboJPEG 3
/// API; apart from [`is_harmless_jpeg_warning`], a JPEG that decodes with a warning is damaged.
/// Truncated means the bytes stop early: a file that still ends with its EOI marker is whole, so
/// the decoder running short inside it ("Corrupt JPEG data: premature end of data segment", e.g.
/// zeroed bytes in the middle) is corrupt, not truncated.
fn jpeg_error(bytes: &[u8], e: turbojpeg::Error) -> IntakeError {
    let detail = e.to_string();
    let lower = detail.to_ascii_lowercase();
    let ends_with_eoi = bytes.ends_with(&[0xFF, 0xD9]);
    if !ends_with_eoi && (lower.contains("premature end") || lower.contains("no image")) {
        IntakeError::Truncated { format: SourceFormat::Jpeg }
    } else {
        let detail = detail.trim_start_matches("TurboJPEG error: ").to_string();
        let detail = detail.split_once("): ").map(|(_, rest)| rest.to_string()).unwrap_or(detail);
        IntakeError::Corrupt { format: SourceFormat::Jpeg, detail }
    }
}

/// Every non-JPEG format, and CMYK/lossless JPEGs: `image` with limits set before decoding.
fn decode_with_image_crate(
    bytes: &[u8],
    format: SourceFormat,
    max_pixels: u64,
    long_edge: u32,
) -> Result<DecodeResult, IntakeError> {
    let image_err = |e: image::ImageError| image_error(format, e);
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format.image_format());
    let mut limits = Limits::default();
    let side = u32::try_from(max_pixels).unwrap_or(u32::MAX);
    limits.max_image_width = Some(side);
    limits.max_image_height = Some(side);
    // Decoded buffer of the largest accepted image at 16-bit RGBA, plus decoder working memory.
    limits.max_alloc = Some(max_pixels.saturating_mul(8).saturating_add(64 << 20));
    reader.limits(limits);
    // `into_decoder` reads only the header and applies the limits.
    let mut decoder = match reader.into_decoder() {
        Ok(d) => d,
        Err(image::ImageError::Limits(_)) => {
            // A side alone exceeds the limit; report the real dimensions if the header is readable.
            let mut reader = ImageReader::with_format(Cursor::new(bytes), format.image_format());
            reader.no_limits();
            let (width, height) = reader.into_dimensions().unwrap_or((u32::MAX, u32::MAX));
            return Err(IntakeError::TooManyPixels { width, height, max: max_pixels });
        }
        Err(e) => return Err(image_err(e)),
    };
    let (w, h) = decoder.dimensions();
    check_pixels(format, w, h, max_pixels)?;
    let orientation = if format == SourceFormat::Jpeg {
        jpeg_exif_orientation(bytes)
    } else {
        decoder.orientation().unwrap_or(Orientation::NoTransforms)
    };
    let dynamic = DynamicImage::from_decoder(decoder).map_err(image_err)?;
    let rgb = to_rgb_on_white(dynamic);
    let (tw, th) = target_size(w, h, long_edge);
    let image = resize_to(rgb, tw, th)?;
    Ok((image, w, h, orientation))
}

fn image_error(format: SourceFormat, e: image::ImageError) -> IntakeError {
    use image::error::{ImageError as E, LimitErrorKind};
    match e {
        E::Limits(l) if matches!(l.kind(), LimitErrorKind::InsufficientMemory) => {
            IntakeError::Corrupt { format, detail: "it needs more memory than allowed to decode".into() }
        }
        E::Limits(l) => IntakeError::Corrupt { format, detail: l.to_string() },
        E::Unsupported(u) => IntakeError::Unsupported { format: format!("{format} ({u})") },
        E::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => IntakeError::Truncated { format },
        other => {
            let detail = other.to_string();
            let lower = detail.to_ascii_lowercase();
            if lower.contains("eof")
                || lower.contains("end of file")
                || lower.contains("unexpected end")
                || lower.contains("truncated")
                || lower.contains("no more data")
            {
                IntakeError::Truncated { format }
            } else {
                IntakeError::Corrupt { format, detail }
            }
        }
    }
}

/// Drops alpha by compositing over white (transparent product cut-outs stay white, not black).
fn to_rgb_on_white(image: DynamicImage) -> Rgb {
    let (width, height) = (image.width(), image.height());
    if !image.color().has_alpha() {
        return Rgb { width, height, data: image.into_rgb8().into_raw() };
    }
    let rgba = image.into_rgba8().into_raw();
    let mut data = Vec::with_capacity(width as usize * height as usize * 3);
    for px in rgba.chunks_exact(4) {
        let a = u32::from(px[3]);
        for &c in &px[..3] {
            data.push(((u32::from(c) * a + 255 * (255 - a) + 127) / 255) as u8);
        }
    }
    Rgb { width, height, data }
}

// ---------------------------------------------------------------------------------------------
// Resize, orientation, encoding
// ---------------------------------------------------------------------------------------------

fn resize_to(src: Rgb, width: u32, height: u32) -> Result<Rgb, IntakeError> {
    if (src.width, src.height) == (width, height) {
        return Ok(src);
    }
    let internal = |e: &dyn fmt::Display| IntakeError::Internal { detail: format!("resize: {e}") };
    let src_view =
        fr::images::ImageRef::new(src.width, src.height, &src.data, fr::PixelType::U8x3).map_err(|e| internal(&e))?;
    let mut dst = fr::images::Image::new(width, height, fr::PixelType::U8x3);
    let options = fr::ResizeOptions::new().resize_alg(fr::ResizeAlg::Convolution(fr::FilterType::Lanczos3));
    fr::Resizer::new().resize(&src_view, &mut dst, &options).map_err(|e| internal(&e))?;
    Ok(Rgb { width, height, data: dst.into_vec() })
}

/// A smaller copy if `image` is larger than `long_edge`, else `None`.
fn fit_within(image: &Rgb, long_edge: u32) -> Result<Option<Rgb>, IntakeError> {
    let (w, h) = target_size(image.width, image.height, long_edge);
    if (w, h) == (image.width, image.height) {
        return Ok(None);
    }
    let internal = |e: &dyn fmt::Display| IntakeError::Internal { detail: format!("resize: {e}") };
    let src = fr::images::ImageRef::new(image.width, image.height, &image.data, fr::PixelType::U8x3)
        .map_err(|e| internal(&e))?;
    let mut dst = fr::images::Image::new(w, h, fr::PixelType::U8x3);
    let options = fr::ResizeOptions::new().resize_alg(fr::ResizeAlg::Convolution(fr::FilterType::Lanczos3));
    fr::Resizer::new().resize(&src, &mut dst, &options).map_err(|e| internal(&e))?;
    Ok(Some(Rgb { width: w, height: h, data: dst.into_vec() }))
}

/// Turns the stored pixels upright. EXIF 6 (`Rotate90`) means "rotate 90° clockwise to display".
fn apply_orientation(src: Rgb, orientation: Orientation) -> Rgb {
    if orientation == Orientation::NoTransforms {
        return src;
    }
    let (w, h) = (src.width as usize, src.height as usize);
    let swaps = matches!(
        orientation,
        Orientation::Rotate90 | Orientation::Rotate270 | Orientation::Rotate90FlipH | Orientation::Rotate270FlipH
    );
    let (dw, dh) = if swaps { (h, w) } else { (w, h) };
    let mut data = vec![0u8; dw * dh * 3];
    // For the output pixel (dx, dy), the source pixel (sx, sy).
    let source = |dx: usize, dy: usize| -> (usize, usize) {
        match orientation {
            Orientation::NoTransforms => (dx, dy),
            Orientation::FlipHorizontal => (w - 1 - dx, dy),
            Orientation::Rotate180 => (w - 1 - dx, h - 1 - dy),
            Orientation::FlipVertical => (dx, h - 1 - dy),
            Orientation::Rotate90FlipH => (dy, dx),
            Orientation::Rotate90 => (dy, h - 1 - dx),
            Orientation::Rotate270FlipH => (w - 1 - dy, h - 1 - dx),
            Orientation::Rotate270 => (w - 1 - dy, dx),
        }
    };
    // Tiles keep both the reads and the writes in cache for the 90° cases.
    const TILE: usize = 32;
    for ty in (0..dh).step_by(TILE) {
        for tx in (0..dw).step_by(TILE) {
            for dy in ty..(ty + TILE).min(dh) {
                let row = dy * dw;
                for dx in tx..(tx + TILE).min(dw) {
                    let (sx, sy) = source(dx, dy);
                    let s = (sy * w + sx) * 3;
                    let d = (row + dx) * 3;
                    data[d..d + 3].copy_from_slice(&src.data[s..s + 3]);
                }
            }
        }
    }
    Rgb { width: dw as u32, height: dh as u32, data }
}

/// The luma plane (BT.601 weights, as JPEG's Y) of `image`, for the barcode reader.
fn luma_of(image: &Rgb) -> image::GrayImage {
    let luma = image
        .data
        .chunks_exact(3)
        .map(|px| ((77 * u32::from(px[0]) + 150 * u32::from(px[1]) + 29 * u32::from(px[2]) + 128) >> 8) as u8)
        .collect();
    image::GrayImage::from_raw(image.width, image.height, luma).unwrap_or_default()
}

/// Baseline JPEG, 4:2:0, no metadata (TurboJPEG writes only a JFIF APP0 header).
fn encode_jpeg(image: &Rgb, quality: u8) -> Result<Vec<u8>, IntakeError> {
    let internal = |e: turbojpeg::Error| IntakeError::Internal { detail: format!("JPEG encoder: {e}") };
    let mut compressor = turbojpeg::Compressor::new().map_err(internal)?;
    compressor.set_quality(i32::from(quality)).map_err(internal)?;
    compressor.set_subsamp(turbojpeg::Subsamp::Sub2x2).map_err(internal)?;
    let view = turbojpeg::Image {
        pixels: image.data.as_slice(),
        width: image.width as usize,
        pitch: image.width as usize * 3,
        height: image.height as usize,
        format: turbojpeg::PixelFormat::RGB,
    };
    compressor.compress_to_vec(view).map_err(internal)
}

// ---------------------------------------------------------------------------------------------
// EXIF orientation of a JPEG (APP1 "Exif"), read without decoding
// ---------------------------------------------------------------------------------------------

/// The EXIF orientation of a JPEG; `NoTransforms` when absent or unreadable.
fn jpeg_exif_orientation(bytes: &[u8]) -> Orientation {
    find_jpeg_exif(bytes)
        .and_then(exif_orientation)
        .and_then(Orientation::from_exif)
        .unwrap_or(Orientation::NoTransforms)
}

/// The TIFF payload of the first APP1 Exif segment before the image data.
fn find_jpeg_exif(bytes: &[u8]) -> Option<&[u8]> {
    let mut i = 2; // after SOI
    loop {
        // Markers may be preceded by any number of 0xFF fill bytes.
        while *bytes.get(i)? == 0xFF && *bytes.get(i + 1)? == 0xFF {
            i += 1;
        }
        if *bytes.get(i)? != 0xFF {
            return None;
        }
        let marker = *bytes.get(i + 1)?;
        i += 2;
        match marker {
            0x01 | 0xD0..=0xD7 => continue,
            0xD9 | 0xDA => return None, // EOI or start of scan: no more headers
            _ => {}
        }
        let len = usize::from(u16::from_be_bytes([*bytes.get(i)?, *bytes.get(i + 1)?]));
        if len < 2 {
            return None;
        }
        let segment = bytes.get(i + 2..i + len)?;
        if marker == 0xE1 {
            if let Some(tiff) = segment.strip_prefix(b"Exif\0\0") {
                return Some(tiff);
            }
        }
        i += len;
    }
}

/// Orientation tag (0x0112) of IFD0 in a TIFF structure.
fn exif_orientation(tiff: &[u8]) -> Option<u8> {
    let big_endian = match tiff.get(0..2)? {
        b"MM" => true,
        b"II" => false,
        _ => return None,
    };
    let u16_at = |o: usize| -> Option<u16> {
        let b = [*tiff.get(o)?, *tiff.get(o + 1)?];
        Some(if big_endian { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) })
    };
    let u32_at = |o: usize| -> Option<u32> {
        let b: [u8; 4] = tiff.get(o..o + 4)?.try_into().ok()?;
        Some(if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    };
    if u16_at(2)? != 42 {
        return None;
    }
    let ifd = u32_at(4)? as usize;
    let count = usize::from(u16_at(ifd)?);
    for n in 0..count.min(512) {
        let entry = ifd.checked_add(2 + n * 12)?;
        if u16_at(entry)? == 0x0112 {
            let value = match u16_at(entry + 2)? {
                3 => u16_at(entry + 8)?,                   // SHORT, as it should be
                4 => u32_at(entry + 8)? as u16,            // LONG, seen in the wild
                1 | 7 => u16::from(*tiff.get(entry + 8)?), // BYTE / UNDEFINED
                _ => return None,
            };
            return u8::try_from(value).ok().filter(|v| (1..=8).contains(v));
        }
    }
    None
}

/// Builds an APP1 Exif segment (marker included) holding only IFD0 Orientation. For tests,
/// fixtures and the benchmark.
#[doc(hidden)]
pub fn exif_orientation_segment(orientation: u8) -> Vec<u8> {
    let mut tiff = Vec::new();
    tiff.extend_from_slice(b"MM\0\x2a\0\0\0\x08"); // big-endian TIFF, IFD0 at 8
    tiff.extend_from_slice(&1u16.to_be_bytes()); // one entry
    tiff.extend_from_slice(&0x0112u16.to_be_bytes());
    tiff.extend_from_slice(&3u16.to_be_bytes()); // SHORT
    tiff.extend_from_slice(&1u32.to_be_bytes()); // count
    tiff.extend_from_slice(&u16::from(orientation).to_be_bytes());
    tiff.extend_from_slice(&[0, 0]);
    tiff.extend_from_slice(&0u32.to_be_bytes()); // no next IFD
    let mut seg = vec![0xFF, 0xE1];
    seg.extend_from_slice(&((2 + 6 + tiff.len()) as u16).to_be_bytes());
    seg.extend_from_slice(b"Exif\0\0");
    seg.extend_from_slice(&tiff);
    seg
}

/// Inserts an APP1 segment right after the SOI of a JPEG. For tests, fixtures and the benchmark.
#[doc(hidden)]
pub fn insert_jpeg_segment(jpeg: &[u8], segment: &[u8]) -> Vec<u8> {
    let split = if jpeg.starts_with(&[0xFF, 0xD8]) { 2 } else { 0 };
    let mut out = Vec::with_capacity(jpeg.len() + segment.len());
    out.extend_from_slice(&jpeg[..split]);
    out.extend_from_slice(segment);
    out.extend_from_slice(&jpeg[split..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    // Counts this thread's allocations, to prove a bomb is refused without allocating.
    struct CountingAlloc;
    thread_local! {
        static ALLOCATED: Cell<u64> = const { Cell::new(0) };
        static LARGEST: Cell<u64> = const { Cell::new(0) };
    }
    unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
        unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
            let size = layout.size() as u64;
            let _ = ALLOCATED.try_with(|a| a.set(a.get() + size));
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
            unsafe { std::alloc::System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
            unsafe { std::alloc::System.dealloc(ptr, layout) }
        }
    }
    #[global_allocator]
    static GLOBAL: CountingAlloc = CountingAlloc;

    fn cfg() -> ImageConfig {
        ImageConfig::default()
    }

    /// A test pattern: gradients plus a little structure, so JPEG sizes are realistic.
    fn pattern(w: u32, h: u32) -> Vec<u8> {
        let mut v = Vec::with_capacity((w * h * 3) as usize);
        for y in 0..h {
            for x in 0..w {
                v.push((x * 255 / w.max(1)) as u8);
                v.push((y * 255 / h.max(1)) as u8);
                v.push(if (x / 16 + y / 16) % 2 == 0 { 40 } else { 200 });
            }
        }
        v
    }

    fn jpeg_from_rgb(w: u32, h: u32, rgb: &[u8], progressive: bool) -> Vec<u8> {
        let mut c = turbojpeg::Compressor::new().unwrap();
        c.set_quality(92).unwrap();
        c.set_progressive(progressive).unwrap();
        let img = turbojpeg::Image {
            pixels: rgb,
            width: w as usize,
            pitch: w as usize * 3,
            height: h as usize,
            format: turbojpeg::PixelFormat::RGB,
        };
        c.compress_to_vec(img).unwrap()
    }

    fn jpeg(w: u32, h: u32) -> Vec<u8> {
        jpeg_from_rgb(w, h, &pattern(w, h), false)
    }

    fn encode_with_image(img: DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    fn png(w: u32, h: u32) -> Vec<u8> {
        let buf = image::RgbImage::from_raw(w, h, pattern(w, h)).unwrap();
        encode_with_image(DynamicImage::ImageRgb8(buf), ImageFormat::Png)
    }

    fn decode_rgb(jpeg: &[u8]) -> image::RgbImage {
        image::load_from_memory_with_format(jpeg, ImageFormat::Jpeg).unwrap().into_rgb8()
    }

    fn assert_close(actual: &image::Rgb<u8>, expected: [u8; 3], what: &str) {
        let ok = actual.0.iter().zip(expected).all(|(&a, e)| (i16::from(a) - i16::from(e)).abs() <= 40);
        assert!(ok, "{what}: got {:?}, expected about {expected:?}", actual.0);
    }

    /// Every marker of a JPEG before the scan data.
    fn jpeg_markers(jpeg: &[u8]) -> Vec<u8> {
        let mut markers = Vec::new();
        let mut i = 2;
        while i + 4 <= jpeg.len() && jpeg[i] == 0xFF {
            let m = jpeg[i + 1];
            markers.push(m);
            if m == 0xDA {
                break;
            }
            i += 2 + usize::from(u16::from_be_bytes([jpeg[i + 2], jpeg[i + 3]]));
        }
        markers
    }

    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    // --- bad inputs -------------------------------------------------------------------------

    #[test]
    fn intake_empty_bytes_and_zero_byte_file() {
        assert!(matches!(prepare_bytes(&[], &cfg()), Err(IntakeError::Empty)));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.jpg");
        std::fs::write(&path, b"").unwrap();
        let err = prepare_file(&path, &cfg()).unwrap_err();
        assert!(matches!(err, IntakeError::Empty), "{err:?}");
        assert_eq!(err.code(), ErrorCode::InvalidImage);
    }

    #[test]
    fn intake_text_file_named_jpg() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("photo.jpg");
        std::fs::write(&path, "Product: Acme Widget\nPrice: 9.99\n").unwrap();
        let err = prepare_file(&path, &cfg()).unwrap_err();
        assert!(matches!(err, IntakeError::NotAnImage { looks_like: Some("a text file") }), "{err:?}");
        assert_eq!(err.code(), ErrorCode::InvalidImage);
        assert!(err.to_string().contains("Drop a JPEG, PNG or WebP photo"), "{err}");
    }

    #[test]
    fn intake_pdf_is_not_an_image() {
        let err = prepare_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", &cfg()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "This file is not an image (it starts like a PDF). Drop a JPEG, PNG or WebP photo."
        );
        assert_eq!(err.code(), ErrorCode::InvalidImage);
        let err = prepare_bytes(&[0x13, 0x37, 0x00, 0x01, 0xFE], &cfg()).unwrap_err();
        assert!(matches!(err, IntakeError::NotAnImage { looks_like: None }), "{err:?}");
    }

    #[test]
    fn intake_truncated_jpeg_is_an_error_not_a_grey_image() {
        for progressive in [false, true] {
            let full = jpeg_from_rgb(640, 480, &pattern(640, 480), progressive);
            let half = &full[..full.len() / 2];
            let err = prepare_bytes(half, &cfg()).unwrap_err();
            assert!(
                matches!(err, IntakeError::Truncated { format: SourceFormat::Jpeg }),
                "progressive={progressive}: {err:?}"
            );
            assert_eq!(err.code(), ErrorCode::InvalidImage);
            // Cut inside the header, too.
            let err = prepare_bytes(&full[..40], &cfg()).unwrap_err();
            assert!(matches!(err, IntakeError::Truncated { .. } | IntakeError::Corrupt { .. }), "{err:?}");
        }
    }

    #[test]
    fn intake_zeroed_bytes_inside_a_full_length_jpeg_are_corrupt_not_truncated() {
        for progressive in [false, true] {
            let mut bytes = jpeg_from_rgb(640, 480, &pattern(640, 480), progressive);
            let middle = bytes.len() / 2;
            bytes[middle..middle + 64].fill(0);
            assert!(bytes.ends_with(&[0xFF, 0xD9]));
            // libjpeg may decode zeroed entropy data silently; when it reports an error, a file
            // that still ends with EOI is never "truncated".
            if let Err(err) = prepare_bytes(&bytes, &cfg()) {
                assert!(!matches!(err, IntakeError::Truncated { .. }), "progressive={progressive}: {err:?}");
            }
        }
    }

    #[test]
    fn intake_stray_bytes_before_a_marker_are_tolerated() {
        let mut bytes = jpeg(200, 100);
        assert!(bytes.ends_with(&[0xFF, 0xD9]));
        bytes.splice(bytes.len() - 2..bytes.len() - 2, [0u8, 0, 0]);
        let prepared = prepare_bytes(&bytes, &cfg()).expect("a stray-byte JPEG is intact");
        assert_eq!((prepared.width, prepared.height), (200, 100));
    }

    #[test]
    fn intake_truncated_png() {
        let full = png(300, 200);
        for cut in [full.len() / 2, 40, 12] {
            let err = prepare_bytes(&full[..cut], &cfg()).unwrap_err();
            assert!(matches!(err, IntakeError::Truncated { .. } | IntakeError::Corrupt { .. }), "cut {cut}: {err:?}");
            assert_eq!(err.code(), ErrorCode::InvalidImage);
        }
        let err = prepare_bytes(&full[..full.len() / 2], &cfg()).unwrap_err();
        assert!(matches!(err, IntakeError::Truncated { format: SourceFormat::Png }), "{err:?}");
    }

    #[test]
    fn intake_heic_is_unsupported_with_a_clear_message() {
        let mut heic = Vec::new();
        heic.extend_from_slice(&24u32.to_be_bytes());
        heic.extend_from_slice(b"ftypheic\0\0\0\0mif1heic");
        heic.extend_from_slice(&[0; 64]);
        let err = detect_format(&heic).unwrap_err();
        assert!(matches!(&err, IntakeError::Unsupported { format } if format == "HEIC"), "{err:?}");
        assert_eq!(err.code(), ErrorCode::UnsupportedFormat);
        assert_eq!(err.to_string(), "HEIC photos are not supported yet — export the photo as JPEG and drop it again.");
        // A HEIF whose major brand is mif1, and AVIF.
        let mut heif = heic.clone();
        heif[8..12].copy_from_slice(b"mif1");
        heif[16..24].copy_from_slice(b"mif1miaf");
        assert!(matches!(detect_format(&heif), Err(IntakeError::Unsupported { format }) if format == "HEIF"));
        let mut avif = heif.clone();
        avif[8..12].copy_from_slice(b"avif");
        assert!(matches!(detect_format(&avif), Err(IntakeError::Unsupported { format }) if format == "AVIF"));
        // And through the whole pipeline.
        assert!(matches!(prepare_bytes(&heic, &cfg()), Err(IntakeError::Unsupported { .. })));
    }

    #[test]
    fn intake_other_formats_named() {
        let cases: [(&[u8], &str); 4] = [
            (b"II*\0\x08\0\0\0", "TIFF (or camera RAW)"),
            (b"MM\0*\0\0\0\x08", "TIFF (or camera RAW)"),
            (b"BM\x36\0\0\0\0\0\0\0\x36\0\0\0\x28\0\0\0", "BMP"),
            (b"8BPS\0\x01", "Photoshop (PSD)"),
        ];
        for (bytes, name) in cases {
            match detect_format(bytes) {
                Err(IntakeError::Unsupported { format }) => assert_eq!(format, name),
                other => panic!("{name}: {other:?}"),
            }
        }
        assert!(matches!(
            detect_format(b"<svg xmlns=\"http://www.w3.org/2000/svg\">"),
            Err(IntakeError::Unsupported { .. })
        ));
        assert!(matches!(detect_format(b"PK\x03\x04\x14\0"), Err(IntakeError::NotAnImage { looks_like: Some(_) })));
    }

    #[test]
    fn intake_file_over_max_file_bytes_is_refused_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.jpg");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(24_300_000).unwrap(); // sparse: nothing is written
        drop(file);
        let before = ALLOCATED.with(Cell::get);
        let err = prepare_file(&path, &cfg()).unwrap_err();
        let allocated = ALLOCATED.with(Cell::get) - before;
        assert!(matches!(err, IntakeError::FileTooLarge { bytes: 24_300_000, max: 20_000_000 }), "{err:?}");
        assert!(allocated < 1_000_000, "read the file anyway? allocated {allocated} bytes");
        assert_eq!(err.code(), ErrorCode::ImageTooLarge);
        assert_eq!(err.to_string(), "The photo is 24.3 MB; the limit is 20 MB (image.max_file_bytes in Settings).");
        // The same limit applies to bytes handed over directly.
        let small = ImageConfig { max_file_bytes: 100, ..cfg() };
        assert!(matches!(prepare_bytes(&jpeg(64, 64), &small), Err(IntakeError::FileTooLarge { .. })));
        assert!(matches!(preview_data_url(&path, &cfg(), 1024), Err(IntakeError::FileTooLarge { .. })));
    }

    /// Issue 32, what held: a FIFO or a device is refused from its metadata, before anything
    /// opens it (opening a FIFO blocks until a writer comes; /dev/zero never ends).
    #[cfg(unix)]
    #[test]
    fn fifos_and_devices_are_refused_without_being_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("photo.jpg");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(matches!(prepare_file(&fifo, &cfg()), Err(IntakeError::NotAFile { .. })));
        assert!(matches!(prepare_file(Path::new("/dev/zero"), &cfg()), Err(IntakeError::NotAFile { .. })));
    }

    /// Issue 32, what held: a file that grows while it is read (its size said it was small) is
    /// refused at the limit, never read without end.
    #[test]
    fn a_file_that_grows_while_read_is_refused_at_the_limit() {
        let small = ImageConfig { max_file_bytes: 1_000, ..cfg() };
        let endless = std::io::repeat(0xFF);
        assert!(matches!(read_capped(endless, 10, &small), Err(Capped::Refused(IntakeError::FileTooLarge { .. }))));
        let fits = std::io::repeat(0xFF).take(1_000);
        assert_eq!(read_capped(fits, 10, &small).ok().map(|b| b.len()), Some(1_000));
    }

    #[test]
    fn intake_directory_is_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = prepare_file(dir.path(), &cfg()).unwrap_err();
        assert!(matches!(err, IntakeError::NotAFile { .. }), "{err:?}");
        let err = prepare_file(&dir.path().join("missing.jpg"), &cfg()).unwrap_err();
        assert!(matches!(err, IntakeError::Io { .. }), "{err:?}");
        assert_eq!(err.code(), ErrorCode::Io);
    }

    fn png_bomb(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = png(8, 8);
        // IHDR data is at 16..29, its CRC at 29..33 (over the type and data, 12..29).
        bytes[16..20].copy_from_slice(&width.to_be_bytes());
        bytes[20..24].copy_from_slice(&height.to_be_bytes());
        let crc = crc32(&bytes[12..29]);
        bytes[29..33].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    fn jpeg_bomb(width: u16, height: u16) -> Vec<u8> {
        let mut bytes = jpeg(16, 16);
        let sof = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        bytes[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
        bytes[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
        bytes
    }

    #[test]
    fn intake_decompression_bomb_fails_fast_without_allocating() {
        let cases = [
            (png_bomb(30_000, 30_000), 30_000, 30_000),
            (png_bomb(1_000_000, 60), 1_000_000, 60),
            (jpeg_bomb(30_000, 30_000), 30_000, 30_000),
            (jpeg_bomb(65_000, 65_000), 65_000, 65_000),
        ];
        for (bytes, w, h) in cases {
            LARGEST.with(|l| l.set(0));
            let start = Instant::now();
            let err = prepare_bytes(&bytes, &cfg()).unwrap_err();
            let elapsed = start.elapsed();
            let largest = LARGEST.with(Cell::get);
            match &err {
                IntakeError::TooManyPixels { width, height, max } => {
                    assert_eq!((*width, *height, *max), (w, h, 50_000_000));
                }
                other => panic!("{w}x{h}: {other:?}"),
            }
            assert_eq!(err.code(), ErrorCode::ImageTooLarge);
            assert!(elapsed < Duration::from_millis(500), "{w}x{h} took {elapsed:?}");
            assert!(largest < 4_000_000, "{w}x{h}: allocated a {largest}-byte block");
        }
        let err = prepare_bytes(&png_bomb(30_000, 30_000), &cfg()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "The image is 30000 × 30000 pixels (900 megapixels); the limit is 50 megapixels \
             (image.max_pixels in Settings). Scale it down and drop it again."
        );
    }

    #[test]
    fn intake_max_pixels_is_configurable() {
        let tight = ImageConfig { max_pixels: 640 * 480 - 1, ..cfg() };
        assert!(matches!(prepare_bytes(&jpeg(640, 480), &tight), Err(IntakeError::TooManyPixels { .. })));
        assert!(matches!(prepare_bytes(&png(640, 480), &tight), Err(IntakeError::TooManyPixels { .. })));
        let exact = ImageConfig { max_pixels: 640 * 480, ..cfg() };
        assert!(prepare_bytes(&jpeg(640, 480), &exact).is_ok());
        assert!(prepare_bytes(&png(640, 480), &exact).is_ok());
    }

    #[test]
    fn intake_never_panics_on_garbage() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let gif = encode_with_image(
            DynamicImage::ImageRgb8(image::RgbImage::from_raw(40, 30, pattern(40, 30)).unwrap()),
            ImageFormat::Gif,
        );
        let webp = {
            let img = image::RgbaImage::from_fn(40, 30, |x, y| image::Rgba([x as u8 * 6, y as u8 * 8, 90, 255]));
            encode_with_image(DynamicImage::ImageRgba8(img), ImageFormat::WebP)
        };
        let seeds = [jpeg(64, 48), jpeg_from_rgb(64, 48, &pattern(64, 48), true), png(64, 48), gif, webp];
        for _ in 0..300 {
            // Pure noise, optionally behind a valid magic.
            let len = (next() % 2048) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let magic: &[u8] = match next() % 5 {
                0 => &[0xFF, 0xD8, 0xFF],
                1 => b"\x89PNG\r\n\x1a\n",
                2 => b"GIF89a",
                3 => b"RIFF\0\0\0\0WEBPVP8 ",
                _ => b"",
            };
            bytes.splice(0..0, magic.iter().copied());
            check_no_panic(&bytes);
        }
        for seed_bytes in &seeds {
            for _ in 0..60 {
                let mut bytes = seed_bytes.clone();
                match next() % 3 {
                    0 => bytes.truncate((next() as usize) % bytes.len()),
                    1 => {
                        for _ in 0..1 + next() % 8 {
                            let i = (next() as usize) % bytes.len();
                            bytes[i] ^= 1 << (next() % 8);
                        }
                    }
                    _ => {
                        let i = (next() as usize) % bytes.len();
                        bytes[i] = next() as u8;
                        bytes.truncate(bytes.len() - (next() as usize % 16).min(bytes.len() - 1));
                    }
                }
                check_no_panic(&bytes);
            }
        }
    }

    fn check_no_panic(bytes: &[u8]) {
        match prepare_bytes(bytes, &cfg()) {
            Err(IntakeError::Internal { detail }) => {
                panic!("decoder panicked on {} bytes: {detail}", bytes.len())
            }
            Ok(p) => assert!(p.width > 0 && p.height > 0 && p.jpeg.starts_with(&[0xFF, 0xD8])),
            Err(_) => {}
        }
    }

    // --- formats ----------------------------------------------------------------------------

    #[test]
    fn intake_format_comes_from_magic_not_extension() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("actually-a-png.jpg");
        std::fs::write(&path, png(320, 240)).unwrap();
        let p = prepare_file(&path, &cfg()).unwrap();
        assert_eq!(p.source_format, SourceFormat::Png);
        assert_eq!((p.width, p.height), (320, 240));
        let path = dir.path().join("photo.png");
        std::fs::write(&path, jpeg(320, 240)).unwrap();
        assert_eq!(prepare_file(&path, &cfg()).unwrap().source_format, SourceFormat::Jpeg);
    }

    #[test]
    fn intake_gif_is_converted() {
        let img =
            image::RgbImage::from_fn(
                120,
                80,
                |x, _| {
                    if x < 60 {
                        image::Rgb([255, 0, 0])
                    } else {
                        image::Rgb([0, 0, 255])
                    }
                },
            );
        let gif = encode_with_image(DynamicImage::ImageRgb8(img), ImageFormat::Gif);
        assert_eq!(detect_format(&gif).unwrap(), SourceFormat::Gif);
        let p = prepare_bytes(&gif, &cfg()).unwrap();
        assert_eq!(p.source_format, SourceFormat::Gif);
        assert_eq!((p.width, p.height), (120, 80));
        let out = decode_rgb(&p.jpeg);
        assert_close(out.get_pixel(10, 40), [255, 0, 0], "left");
        assert_close(out.get_pixel(110, 40), [0, 0, 255], "right");
    }

    #[test]
    fn intake_webp_works_and_transparency_becomes_white() {
        let img = image::RgbaImage::from_fn(200, 100, |x, _| {
            if x < 100 {
                image::Rgba([0, 128, 0, 255])
            } else {
                image::Rgba([0, 0, 0, 0])
            }
        });
        let webp = encode_with_image(DynamicImage::ImageRgba8(img.clone()), ImageFormat::WebP);
        assert_eq!(detect_format(&webp).unwrap(), SourceFormat::WebP);
        let p = prepare_bytes(&webp, &cfg()).unwrap();
        assert_eq!(p.source_format, SourceFormat::WebP);
        assert_eq!((p.width, p.height), (200, 100));
        let out = decode_rgb(&p.jpeg);
        assert_close(out.get_pixel(20, 50), [0, 128, 0], "opaque");
        assert_close(out.get_pixel(180, 50), [255, 255, 255], "transparent");
        // Transparent PNG too.
        let png = encode_with_image(DynamicImage::ImageRgba8(img), ImageFormat::Png);
        let out = decode_rgb(&prepare_bytes(&png, &cfg()).unwrap().jpeg);
        assert_close(out.get_pixel(180, 50), [255, 255, 255], "transparent png");
    }

    #[test]
    fn intake_grayscale_progressive_and_cmyk_jpegs() {
        // Grayscale.
        let gray: Vec<u8> = (0..300 * 200).map(|i| (i % 300) as u8).collect();
        let mut c = turbojpeg::Compressor::new().unwrap();
        c.set_subsamp(turbojpeg::Subsamp::Gray).unwrap();
        let g = c
            .compress_to_vec(turbojpeg::Image {
                pixels: &gray[..],
                width: 300,
                pitch: 300,
                height: 200,
                format: turbojpeg::PixelFormat::GRAY,
            })
            .unwrap();
        let p = prepare_bytes(&g, &cfg()).unwrap();
        assert_eq!((p.width, p.height), (300, 200));
        // Progressive, large enough to be DCT-scaled.
        let prog = jpeg_from_rgb(3200, 1600, &pattern(3200, 1600), true);
        let p = prepare_bytes(&prog, &cfg()).unwrap();
        assert_eq!((p.width, p.height), (1536, 768));
        // CMYK (Adobe, stored inverted as Photoshop does): white paper with a cyan block.
        let cmyk: Vec<u8> = (0..200 * 100)
            .flat_map(|i| if i % 200 < 100 { [0u8, 255, 255, 255] } else { [255u8, 255, 255, 255] })
            .collect();
        let mut c = turbojpeg::Compressor::new().unwrap();
        c.set_quality(95).unwrap();
        let k = c
            .compress_to_vec(turbojpeg::Image {
                pixels: &cmyk[..],
                width: 200,
                pitch: 800,
                height: 100,
                format: turbojpeg::PixelFormat::CMYK,
            })
            .unwrap();
        let p = prepare_bytes(&k, &cfg()).unwrap();
        assert_eq!((p.width, p.height), (200, 100));
        let out = decode_rgb(&p.jpeg);
        assert_close(out.get_pixel(20, 50), [0, 255, 255], "cyan ink");
        assert_close(out.get_pixel(180, 50), [255, 255, 255], "paper");
    }

    // --- geometry ---------------------------------------------------------------------------

    const RED: [u8; 3] = [230, 20, 20];
    const GREEN: [u8; 3] = [20, 200, 20];
    const BLUE: [u8; 3] = [20, 20, 230];
    const YELLOW: [u8; 3] = [240, 230, 20];

    /// Quadrants: red top-left, green top-right, blue bottom-left, yellow bottom-right.
    fn quadrants(w: u32, h: u32) -> Vec<u8> {
        let mut v = Vec::with_capacity((w * h * 3) as usize);
        for y in 0..h {
            for x in 0..w {
                let c = match (x < w / 2, y < h / 2) {
                    (true, true) => RED,
                    (false, true) => GREEN,
                    (true, false) => BLUE,
                    (false, false) => YELLOW,
                };
                v.extend_from_slice(&c);
            }
        }
        v
    }

    #[test]
    fn intake_exif_orientation_6_is_applied() {
        let plain = jpeg_from_rgb(200, 100, &quadrants(200, 100), false);
        let rotated = insert_jpeg_segment(&plain, &exif_orientation_segment(6));
        assert_eq!(jpeg_exif_orientation(&rotated), Orientation::Rotate90);
        let p = prepare_bytes(&rotated, &cfg()).unwrap();
        assert_eq!((p.width, p.height), (100, 200));
        assert_eq!((p.original_width, p.original_height), (100, 200));
        let out = decode_rgb(&p.jpeg);
        // Rotated 90° clockwise: top-left (red) is now top-right, bottom-left (blue) top-left.
        assert_close(out.get_pixel(95, 5), RED, "top-right");
        assert_close(out.get_pixel(5, 5), BLUE, "top-left");
        assert_close(out.get_pixel(95, 195), GREEN, "bottom-right");
        assert_close(out.get_pixel(5, 195), YELLOW, "bottom-left");
        // The thumbnail is oriented too.
        let thumb = decode_rgb(&p.thumbnail_jpeg);
        assert_eq!(thumb.dimensions(), (100, 200));
        assert_close(thumb.get_pixel(95, 5), RED, "thumbnail top-right");
    }

    #[test]
    fn intake_every_exif_orientation() {
        let plain = jpeg_from_rgb(200, 100, &quadrants(200, 100), false);
        // Which colour ends up top-left, top-right, bottom-left for each orientation.
        type Case = (u8, (u32, u32), [[u8; 3]; 3]);
        let expected: [Case; 8] = [
            (1, (200, 100), [RED, GREEN, BLUE]),
            (2, (200, 100), [GREEN, RED, YELLOW]),
            (3, (200, 100), [YELLOW, BLUE, GREEN]),
            (4, (200, 100), [BLUE, YELLOW, RED]),
            (5, (100, 200), [RED, BLUE, GREEN]),
            (6, (100, 200), [BLUE, RED, YELLOW]),
            (7, (100, 200), [YELLOW, GREEN, BLUE]),
            (8, (100, 200), [GREEN, YELLOW, RED]),
        ];
        for (o, dims, [tl, tr, bl]) in expected {
            let bytes = insert_jpeg_segment(&plain, &exif_orientation_segment(o));
            let p = prepare_bytes(&bytes, &cfg()).unwrap();
            assert_eq!((p.width, p.height), dims, "orientation {o}");
            let out = decode_rgb(&p.jpeg);
            let (w, h) = dims;
            assert_close(out.get_pixel(5, 5), tl, &format!("orientation {o} top-left"));
            assert_close(out.get_pixel(w - 5, 5), tr, &format!("orientation {o} top-right"));
            assert_close(out.get_pixel(5, h - 5), bl, &format!("orientation {o} bottom-left"));
        }
    }

    #[test]
    fn intake_downscales_long_edge_to_max() {
        let p = prepare_bytes(&jpeg(4000, 1000), &cfg()).unwrap();
        assert_eq!((p.width, p.height), (1536, 384));
        assert_eq!((p.original_width, p.original_height), (4000, 1000));
        assert_eq!(decode_rgb(&p.jpeg).dimensions(), (1536, 384));
        let p = prepare_bytes(&png(1000, 4000), &cfg()).unwrap();
        assert_eq!((p.width, p.height), (384, 1536));
        let small = ImageConfig { max_long_edge: 500, ..cfg() };
        let p = prepare_bytes(&jpeg(4000, 3000), &small).unwrap();
        assert_eq!((p.width, p.height), (500, 375));
        // Rotated: the long edge is measured after orientation.
        let rotated = insert_jpeg_segment(&jpeg(4000, 3000), &exif_orientation_segment(6));
        let p = prepare_bytes(&rotated, &cfg()).unwrap();
        assert_eq!((p.width, p.height), (1152, 1536));
        assert_eq!((p.original_width, p.original_height), (3000, 4000));
    }

    #[test]
    fn intake_does_not_upscale_small_images() {
        let p = prepare_bytes(&jpeg(300, 200), &cfg()).unwrap();
        assert_eq!((p.width, p.height), (300, 200));
        assert_eq!((p.original_width, p.original_height), (300, 200));
        let p = prepare_bytes(&png(1, 1), &cfg()).unwrap();
        assert_eq!((p.width, p.height), (1, 1));
        assert_eq!(decode_rgb(&p.thumbnail_jpeg).dimensions(), (1, 1));
    }

    // --- output -----------------------------------------------------------------------------

    #[test]
    fn intake_output_has_no_metadata() {
        let mut input = jpeg(800, 600);
        // EXIF with orientation, a GPS-looking APP1, XMP, ICC and a comment.
        let mut gps = vec![0xFF, 0xE1, 0, 0];
        gps.extend_from_slice(b"Exif\0\0MM\0*\0\0\0\x08GPSLatitude 52.52 GPSLongitude 13.40");
        let len = (gps.len() - 2) as u16;
        gps[2..4].copy_from_slice(&len.to_be_bytes());
        input = insert_jpeg_segment(&input, &gps);
        let mut com = vec![0xFF, 0xFE, 0, 0];
        com.extend_from_slice(b"Serial 12345 secret comment");
        let len = (com.len() - 2) as u16;
        com[2..4].copy_from_slice(&len.to_be_bytes());
        input = insert_jpeg_segment(&input, &com);
        input = insert_jpeg_segment(&input, &exif_orientation_segment(3));
        let p = prepare_bytes(&input, &cfg()).unwrap();
        for out in [&p.jpeg, &p.thumbnail_jpeg] {
            let markers = jpeg_markers(out);
            assert!(markers.iter().all(|m| !matches!(m, 0xE1..=0xEF | 0xFE)), "metadata markers: {markers:02X?}");
            for needle in [&b"Exif"[..], b"GPS", b"secret", b"http://ns.adobe.com", b"ICC_PROFILE"] {
                assert!(
                    !out.windows(needle.len()).any(|w| w == needle),
                    "{:?} in the output",
                    String::from_utf8_lossy(needle)
                );
            }
            // Baseline (SOF0), not progressive.
            assert!(markers.contains(&0xC0), "{markers:02X?}");
        }
        let header = turbojpeg::read_header(&p.jpeg).unwrap();
        assert!(!header.is_progressive);
        assert_eq!(header.subsamp, turbojpeg::Subsamp::Sub2x2);
    }

    #[test]
    fn intake_sha256_is_of_the_original_bytes() {
        let input = jpeg(640, 480);
        let p = prepare_bytes(&input, &cfg()).unwrap();
        assert_eq!(p.sha256, hex::encode(Sha256::digest(&input)));
        assert_eq!(p.sha256.len(), 64);
        assert!(p.sha256.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(
            hex::encode(Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(p.file_bytes, input.len() as u64);
        assert_ne!(p.sha256, hex::encode(Sha256::digest(&p.jpeg)));
    }

    #[test]
    fn intake_thumbnail_long_edge_256_and_data_url() {
        let p = prepare_bytes(&jpeg(4000, 3000), &cfg()).unwrap();
        assert_eq!(decode_rgb(&p.thumbnail_jpeg).dimensions(), (256, 192));
        let p = prepare_bytes(&png(600, 1200), &cfg()).unwrap();
        assert_eq!(decode_rgb(&p.thumbnail_jpeg).dimensions(), (128, 256));
        let url = p.thumbnail_data_url();
        let b64 = url.strip_prefix("data:image/jpeg;base64,").unwrap();
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(b64).unwrap(), p.thumbnail_jpeg);
        assert_eq!(PreparedImage::MIME_TYPE, "image/jpeg");
    }

    #[test]
    fn intake_quality_setting_is_used() {
        let input = jpeg(1200, 900);
        let low = prepare_bytes(&input, &ImageConfig { jpeg_quality: 30, ..cfg() }).unwrap();
        let high = prepare_bytes(&input, &ImageConfig { jpeg_quality: 95, ..cfg() }).unwrap();
        assert!(low.jpeg.len() * 2 < high.jpeg.len(), "{} vs {}", low.jpeg.len(), high.jpeg.len());
    }

    #[test]
    fn intake_preview_data_url() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jpg");
        std::fs::write(&path, insert_jpeg_segment(&jpeg(3000, 2000), &exif_orientation_segment(8))).unwrap();
        let url = preview_data_url(&path, &cfg(), 1024).unwrap();
        let b64 = url.strip_prefix("data:image/jpeg;base64,").unwrap();
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        assert_eq!(decode_rgb(&bytes).dimensions(), (683, 1024));
    }

    /// The e2e/demo fixtures in tests/fixtures/ stay what their README says.
    #[test]
    fn intake_fixtures() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        let p = prepare_file(&dir.join("product.jpg"), &cfg()).unwrap();
        assert_eq!((p.source_format, p.width, p.height), (SourceFormat::Jpeg, 1200, 900));
        assert!(p.file_bytes < 300_000);
        let p = prepare_file(&dir.join("label.png"), &cfg()).unwrap();
        assert_eq!((p.source_format, p.width, p.height), (SourceFormat::Png, 800, 500));
        let err = prepare_file(&dir.join("not-an-image.jpg"), &cfg()).unwrap_err();
        assert!(matches!(err, IntakeError::NotAnImage { looks_like: Some("a text file") }), "{err:?}");
        let err = prepare_file(&dir.join("truncated.jpg"), &cfg()).unwrap_err();
        assert!(matches!(err, IntakeError::Truncated { format: SourceFormat::Jpeg }), "{err:?}");
    }

    #[tokio::test]
    async fn intake_prepare_file_async_runs_on_the_blocking_pool() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.webp");
        let img = image::RgbaImage::from_fn(64, 32, |_, _| image::Rgba([1, 2, 3, 255]));
        std::fs::write(&path, encode_with_image(DynamicImage::ImageRgba8(img), ImageFormat::WebP)).unwrap();
        let budget = DecodeBudget::new(1 << 30);
        let p = prepare_file_async(path, cfg(), None, &budget).await.unwrap();
        assert_eq!((p.width, p.height, p.source_format), (64, 32, SourceFormat::WebP));
        let err = prepare_file_async(dir.path().join("nope.png"), cfg(), None, &budget).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::Io);
        assert_eq!(budget.available_bytes(), 1 << 30, "every share is given back");
    }

    /// The review pane's preview waits for its share of the budget like an import's decode.
    #[tokio::test(flavor = "multi_thread")]
    async fn intake_the_preview_takes_its_share_of_the_decode_budget() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jpg");
        std::fs::write(&path, jpeg(3000, 2000)).unwrap();
        let budget = DecodeBudget::new(64 << 20);
        let everything = budget.reserve(u64::MAX).await;
        let preview = preview_data_url_async(path, cfg(), 1024, &budget);
        tokio::pin!(preview);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(300), &mut preview).await;
        assert!(waited.is_err(), "the preview waits while the budget is held");
        drop(everything);
        let url = preview.await.unwrap();
        assert!(url.starts_with("data:image/jpeg;base64,"));
        assert_eq!(budget.available_bytes(), 64 << 20, "its share is given back");
    }

    /// Settings saved with the same budget keep the budget the decodes in flight hold.
    #[tokio::test]
    async fn the_same_budget_setting_keeps_the_budget_in_use() {
        let budget = DecodeBudget::new(64 << 20);
        let _held = budget.reserve(10 << 20).await;
        let same = DecodeBudget::for_setting(Some(&budget), 64 << 20);
        assert_eq!(same.available_bytes(), 54 << 20, "one budget, not a second empty one");
        let other = DecodeBudget::for_setting(Some(&budget), 128 << 20);
        assert_eq!(other.available_bytes(), 128 << 20);
        assert_eq!(DecodeBudget::for_setting(None, 64 << 20).available_bytes(), 64 << 20);
    }

    #[test]
    fn decode_estimate_counts_bytes_per_pixel_from_the_header() {
        let rgba16 = encode_with_image(
            DynamicImage::ImageRgba16(image::ImageBuffer::from_pixel(300, 200, image::Rgba([1u16, 2, 3, 4]))),
            ImageFormat::Png,
        );
        assert_eq!(decode_estimate(&rgba16, &cfg()), 300 * 200 * (8 + 3));
        assert_eq!(decode_estimate(&png(300, 200), &cfg()), 300 * 200 * (3 + 3));
        // Over max_pixels, refused before decoding: nothing to reserve.
        let small = ImageConfig { max_pixels: 1000, ..cfg() };
        assert_eq!(decode_estimate(&rgba16, &small), 0);
        assert_eq!(decode_estimate(b"just text", &cfg()), 0);
        // The JPEG fast path decodes DCT-scaled: 4000x3000 to a 1536 long edge decodes at 1/2.
        let big = jpeg(4000, 3000);
        assert_eq!(decode_estimate(&big, &cfg()), 2000 * 1500 * 3);
    }

    #[tokio::test]
    async fn decode_budget_shares_are_capped_and_fair() {
        let budget = DecodeBudget::new(10 * 1024);
        assert_eq!(budget.total_bytes(), 10 * 1024);
        // An estimate over the whole budget takes all of it, and still runs.
        let whole = budget.reserve(u64::MAX).await;
        assert_eq!(budget.available_bytes(), 0);
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.reserve(4096).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a share waits while the budget is taken");
        drop(whole);
        let share = waiting.await.unwrap();
        assert_eq!(budget.available_bytes(), 6 * 1024);
        drop(share);
        assert_eq!(budget.available_bytes(), 10 * 1024);
    }

    #[test]
    fn intake_source_format_serde_and_display() {
        assert_eq!(serde_json::to_value(SourceFormat::WebP).unwrap(), serde_json::json!("webp"));
        assert_eq!(serde_json::to_value(SourceFormat::Jpeg).unwrap(), serde_json::json!("jpeg"));
        for f in [SourceFormat::Jpeg, SourceFormat::Png, SourceFormat::WebP, SourceFormat::Gif] {
            assert_eq!(serde_json::to_value(f).unwrap(), serde_json::json!(f.as_str()));
        }
        assert_eq!(SourceFormat::WebP.to_string(), "WebP");
        assert_eq!(megabytes(20_000_000), "20 MB");
        assert_eq!(megabytes(24_300_000), "24.3 MB");
    }

    #[test]
    fn photo_extensions_match_any_case() {
        assert!(has_photo_extension(Path::new("a/B.JPG")) && !has_photo_extension(Path::new("notes.txt")));
    }
}
