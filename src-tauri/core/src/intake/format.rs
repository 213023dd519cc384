//! What a file is, by its bytes: the photo formats and extensions the app takes, and the magic
//! bytes that decide (a name's extension never does).

use super::*;

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

    pub(super) fn image_format(self) -> ImageFormat {
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
