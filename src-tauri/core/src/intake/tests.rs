//! Intake's tests: formats, caps, orientation, decoding and the budget.

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
    assert_eq!(err.to_string(), "This file is not an image (it starts like a PDF). Drop a JPEG, PNG or WebP photo.");
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
    let img = image::RgbImage::from_fn(
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
    assert_eq!(hex::encode(Sha256::digest(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
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
