//! Pixels: the DCT-scaled JPEG decode (libjpeg-turbo) and the image crate's for the other formats,
//! the pixel cap checked from the header, transparency on white, orientation, the resize and the
//! metadata-free JPEG encode.

use super::*;

/// Packed 8-bit RGB pixels.
pub(super) struct Rgb {
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) data: Vec<u8>,
}

pub(super) struct Decoded {
    /// Oriented and scaled to fit the requested long edge.
    pub(super) image: Rgb,
    /// As displayed (after orientation), before scaling.
    pub(super) original_width: u32,
    pub(super) original_height: u32,
}

/// Decodes, scales so the long edge is at most `long_edge` (never up), and orients.
pub(super) fn decode_scaled(
    bytes: &[u8],
    format: SourceFormat,
    max_pixels: u64,
    long_edge: u32,
) -> Result<Decoded, IntakeError> {
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

pub(super) fn check_pixels(format: SourceFormat, width: u32, height: u32, max_pixels: u64) -> Result<(), IntakeError> {
    if width == 0 || height == 0 {
        return Err(IntakeError::Corrupt { format, detail: "it has no pixels".into() });
    }
    if u64::from(width) * u64::from(height) > max_pixels {
        return Err(IntakeError::TooManyPixels { width, height, max: max_pixels });
    }
    Ok(())
}

/// The size that fits `long_edge` keeping the aspect ratio; the input size if it already fits.
pub(super) fn target_size(width: u32, height: u32, long_edge: u32) -> (u32, u32) {
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
pub(super) fn decode_jpeg_turbo(
    bytes: &[u8],
    max_pixels: u64,
    long_edge: u32,
) -> Result<Option<DecodeResult>, IntakeError> {
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
pub(super) fn jpeg_scaling(width: u32, height: u32, long_edge: u32) -> turbojpeg::ScalingFactor {
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
pub(super) fn is_harmless_jpeg_warning(e: &turbojpeg::Error) -> bool {
    e.to_string().contains("extraneous bytes before marker")
}

/// libjpeg-turbo reports warnings (e.g. "Premature end of JPEG file") as errors in its TurboJPEG 3
/// API; apart from [`is_harmless_jpeg_warning`], a JPEG that decodes with a warning is damaged.
/// Truncated means the bytes stop early: a file that still ends with its EOI marker is whole, so
/// the decoder running short inside it ("Corrupt JPEG data: premature end of data segment", e.g.
/// zeroed bytes in the middle) is corrupt, not truncated.
pub(super) fn jpeg_error(bytes: &[u8], e: turbojpeg::Error) -> IntakeError {
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
pub(super) fn decode_with_image_crate(
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

pub(super) fn image_error(format: SourceFormat, e: image::ImageError) -> IntakeError {
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
pub(super) fn to_rgb_on_white(image: DynamicImage) -> Rgb {
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

pub(super) fn resize_to(src: Rgb, width: u32, height: u32) -> Result<Rgb, IntakeError> {
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
pub(super) fn fit_within(image: &Rgb, long_edge: u32) -> Result<Option<Rgb>, IntakeError> {
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
pub(super) fn apply_orientation(src: Rgb, orientation: Orientation) -> Rgb {
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
pub(super) fn luma_of(image: &Rgb) -> image::GrayImage {
    let luma = image
        .data
        .chunks_exact(3)
        .map(|px| ((77 * u32::from(px[0]) + 150 * u32::from(px[1]) + 29 * u32::from(px[2]) + 128) >> 8) as u8)
        .collect();
    image::GrayImage::from_raw(image.width, image.height, luma).unwrap_or_default()
}

/// Baseline JPEG, 4:2:0, no metadata (TurboJPEG writes only a JFIF APP0 header).
pub(super) fn encode_jpeg(image: &Rgb, quality: u8) -> Result<Vec<u8>, IntakeError> {
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
