//! Hostile inputs, data-driven: every file a catalog clerk (or a broken disk, or an attacker) can
//! hand the app, each with its expected typed outcome — prepared, or a specific error kind with a
//! message a person can act on — and never a panic. Then the whole set imported at once against the
//! fake Gemini: the good ones become ready, each bad one fails (or is skipped) alone with its kind.
//!
//! The fixtures are generated here (the `image`, `png` and `turbojpeg` encoders, or a few bytes
//! patched by hand) except `tests/fixtures/product.jpg`, the real photo the damaged cases start
//! from. The cases that need file permissions run as a user without privileges (`nobody`): as
//! root, the test runs itself again under `setpriv`, since root reads everything.

use std::ffi::OsStr;
use std::io::Cursor;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{FakeGemini, FakeOptions};
use image::{ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
use pe_core::catalog::Catalog;
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::GeminiClient;
use pe_core::import::{EnqueueOptions, ImportOptions, ImportQueue, ImportRow, ItemState, SkipReason};
use pe_core::intake::{self, IntakeError};
use pe_core::pipeline::{system_clock, Pipeline};
use pe_core::resilience::{ResilienceConfig, ResilienceStack};
use pe_core::{Coded, ErrorCode};

/// What a case must come to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Prepared for upload (and, in an import, extracted: `ready`).
    Prepared,
    /// Refused by intake with this kind and a message containing the text; in an import the item
    /// fails with the same kind.
    Fails(ErrorCode, &'static str),
    /// Listed by the folder walk as skipped, never prepared (its intake outcome, when it has a
    /// file to prepare, is the `Fails` of the second field).
    Skipped(SkipReason, Option<(ErrorCode, &'static str)>),
}

/// A file (or folder) of the hostile set: its name in the batch folder and how to make it.
struct Case {
    name: &'static [u8],
    make: fn(&Path),
    expect: Expect,
    /// Only as a user without privileges (file permissions).
    unprivileged: bool,
}

fn product_jpg() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/product.jpg")).unwrap()
}

fn encode(image: impl Into<image::DynamicImage>, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image.into().write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn gradient(w: u32, h: u32) -> RgbImage {
    RgbImage::from_fn(w, h, |x, y| Rgb([(x * 255 / w.max(1)) as u8, (y * 255 / h.max(1)) as u8, 128]))
}

/// A JPEG from libjpeg-turbo: `cmyk` pixels (a YCCK file, as print workflows write), `progressive`.
fn turbo_jpeg(w: usize, h: usize, cmyk: bool, progressive: bool) -> Vec<u8> {
    let channels = if cmyk { 4 } else { 3 };
    let pixels: Vec<u8> = (0..w * h * channels).map(|i| (i * 7 % 251) as u8).collect();
    let format = if cmyk { turbojpeg::PixelFormat::CMYK } else { turbojpeg::PixelFormat::RGB };
    let image = turbojpeg::Image { pixels: pixels.as_slice(), width: w, pitch: w * channels, height: h, format };
    let mut compressor = turbojpeg::Compressor::new().unwrap();
    compressor.set_quality(85).unwrap();
    compressor.set_progressive(progressive).unwrap();
    compressor.compress_to_vec(image).unwrap()
}

/// A palette (indexed) PNG: 4 colors, 2 bits a pixel.
fn palette_png(w: u32, h: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Indexed);
    encoder.set_depth(png::BitDepth::Two);
    encoder.set_palette(vec![255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255]);
    let mut writer = encoder.write_header().unwrap();
    let row = (w as usize).div_ceil(4);
    let data: Vec<u8> = (0..row * h as usize).map(|i| (i % 256) as u8).collect();
    writer.write_image_data(&data).unwrap();
    writer.finish().unwrap();
    out
}

fn animated_gif() -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = image::codecs::gif::GifEncoder::new(&mut out);
        encoder.set_repeat(image::codecs::gif::Repeat::Infinite).unwrap();
        let frames = (0..3u8).map(|i| {
            let buffer = RgbaImage::from_pixel(64, 48, Rgba([i * 80, 255 - i * 80, 40, 255]));
            image::Frame::from_parts(buffer, 0, 0, image::Delay::from_numer_denom_ms(100, 1))
        });
        encoder.encode_frames(frames).unwrap();
    }
    out
}

/// A pixel bomb: a real 1×1 PNG whose header declares 100,000 × 100,000 pixels (10 gigapixels,
/// 30 GB decoded) in a file of 70 bytes.
fn png_bomb() -> Vec<u8> {
    let mut png = encode(gradient(1, 1), ImageFormat::Png);
    // Signature (8), IHDR length (4), "IHDR" (4), width (4), height (4), ...; CRC after 13 bytes.
    png[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    png[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let crc = crc32fast::hash(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

/// The same for JPEG: a 16×16 JPEG whose frame header says 65,000 × 65,000.
fn jpeg_bomb() -> Vec<u8> {
    let mut jpeg = turbo_jpeg(16, 16, false, false);
    let sof = jpeg.windows(2).position(|w| w == [0xFF, 0xC0]).expect("a baseline SOF0");
    // FFC0, length (2), precision (1), height (2), width (2).
    jpeg[sof + 5..sof + 7].copy_from_slice(&65_000u16.to_be_bytes());
    jpeg[sof + 7..sof + 9].copy_from_slice(&65_000u16.to_be_bytes());
    jpeg
}

fn write(dir: &Path, name: &[u8], bytes: &[u8]) {
    std::fs::write(dir.join(OsStr::from_bytes(name)), bytes).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

const CASES: &[Case] = &[
    Case {
        name: b"good.jpg",
        make: |d| write(d, b"good.jpg", &sample_jpeg(1, 320, 240, 85)),
        expect: Expect::Prepared,
        unprivileged: false,
    },
    Case {
        name: b"cmyk.jpg",
        make: |d| write(d, b"cmyk.jpg", &turbo_jpeg(96, 64, true, false)),
        expect: Expect::Prepared,
        unprivileged: false,
    },
    Case {
        name: b"progressive.jpg",
        make: |d| write(d, b"progressive.jpg", &turbo_jpeg(400, 300, false, true)),
        expect: Expect::Prepared,
        unprivileged: false,
    },
    Case {
        name: b"deep-16-bit.png",
        make: |d| {
            let image = image::ImageBuffer::<Rgb<u16>, _>::from_fn(120, 80, |x, y| {
                Rgb([(x * 500) as u16, (y * 800) as u16, 30_000])
            });
            write(d, b"deep-16-bit.png", &encode(image, ImageFormat::Png));
        },
        expect: Expect::Prepared,
        unprivileged: false,
    },
    Case {
        name: b"alpha.png",
        make: |d| {
            let image = RgbaImage::from_fn(90, 60, |x, y| Rgba([200, (x * 2) as u8, (y * 4) as u8, (x + y) as u8]));
            write(d, b"alpha.png", &encode(image, ImageFormat::Png));
        },
        expect: Expect::Prepared,
        unprivileged: false,
    },
    Case {
        name: b"palette.png",
        make: |d| write(d, b"palette.png", &palette_png(80, 50)),
        expect: Expect::Prepared,
        unprivileged: false,
    },
    Case {
        name: b"animated.gif",
        make: |d| write(d, b"animated.gif", &animated_gif()),
        expect: Expect::Prepared,
        unprivileged: false,
    },
    Case {
        name: b"one-pixel.png",
        make: |d| write(d, b"one-pixel.png", &encode(gradient(1, 1), ImageFormat::Png)),
        expect: Expect::Prepared,
        unprivileged: false,
    },
    // Larger than the upload's long edge (1536): scaled down, not refused.
    Case {
        name: b"oversize-5000x3000.jpg",
        make: |d| write(d, b"oversize-5000x3000.jpg", &turbo_jpeg(5000, 3000, false, false)),
        expect: Expect::Prepared,
        unprivileged: false,
    },
    // Larger than max_file_bytes (20 MB; a sparse file): refused before it is read.
    Case {
        name: b"oversize-file.jpg",
        make: |d| {
            let path = d.join("oversize-file.jpg");
            std::fs::write(&path, sample_jpeg(2, 64, 64, 85)).unwrap();
            std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(25_000_000).unwrap();
        },
        expect: Expect::Fails(ErrorCode::ImageTooLarge, "image.max_file_bytes"),
        unprivileged: false,
    },
    Case {
        name: b"bomb.png",
        make: |d| write(d, b"bomb.png", &png_bomb()),
        expect: Expect::Fails(ErrorCode::ImageTooLarge, "100000 \u{d7} 100000 pixels"),
        unprivileged: false,
    },
    Case {
        name: b"bomb.jpg",
        make: |d| write(d, b"bomb.jpg", &jpeg_bomb()),
        expect: Expect::Fails(ErrorCode::ImageTooLarge, "65000 \u{d7} 65000 pixels"),
        unprivileged: false,
    },
    // 64 zeroed bytes inside the entropy-coded data are valid codes: libjpeg-turbo decodes them
    // without a warning (the pixels there are garbage, which the reviewer sees). Not "truncated".
    Case {
        name: b"zeroed-middle.jpg",
        make: |d| {
            let mut jpeg = product_jpg();
            let middle = jpeg.len() / 2;
            jpeg[middle..middle + 64].fill(0);
            write(d, b"zeroed-middle.jpg", &jpeg);
        },
        expect: Expect::Prepared,
        unprivileged: false,
    },
    // A marker where entropy-coded data should be (a restart marker the file never declared): a
    // decoder warning, so damaged — and not "truncated", since the file still ends whole.
    Case {
        name: b"corrupt-middle.jpg",
        make: |d| {
            let mut jpeg = product_jpg();
            let middle = jpeg.len() / 2;
            jpeg[middle..middle + 64].fill(0x5A);
            jpeg[middle + 62..middle + 64].copy_from_slice(&[0xFF, 0xD3]);
            write(d, b"corrupt-middle.jpg", &jpeg);
        },
        expect: Expect::Fails(ErrorCode::InvalidImage, "damaged"),
        unprivileged: false,
    },
    Case {
        name: b"truncated.jpg",
        make: |d| {
            let jpeg = product_jpg();
            write(d, b"truncated.jpg", &jpeg[..jpeg.len() / 2]);
        },
        expect: Expect::Fails(ErrorCode::InvalidImage, "truncated"),
        unprivileged: false,
    },
    Case {
        name: b"text.jpg",
        make: |d| write(d, b"text.jpg", b"Shopping list: oat milk, granola.\n"),
        expect: Expect::Fails(ErrorCode::InvalidImage, "not an image"),
        unprivileged: false,
    },
    Case {
        name: b"empty.jpg",
        make: |d| write(d, b"empty.jpg", b""),
        expect: Expect::Fails(ErrorCode::InvalidImage, "empty"),
        unprivileged: false,
    },
    Case {
        name: b"phone.heic",
        make: |d| write(d, b"phone.heic", b"\0\0\0\x18ftypheic\0\0\0\0mif1heic\0\0\0\x08free"),
        expect: Expect::Skipped(SkipReason::UnsupportedFormat, Some((ErrorCode::UnsupportedFormat, "HEIC"))),
        unprivileged: false,
    },
    Case {
        name: b"caf\xe9-\xff.jpg",
        make: |d| write(d, b"caf\xe9-\xff.jpg", &sample_jpeg(3, 200, 150, 85)),
        expect: Expect::Prepared,
        unprivileged: false,
    },
    // A link to its own folder: walking it would never end.
    Case {
        name: b"loop",
        make: |d| std::os::unix::fs::symlink(".", d.join("loop")).unwrap(),
        expect: Expect::Skipped(SkipReason::Unreadable, None),
        unprivileged: false,
    },
    // A link to itself: opening it fails (ELOOP).
    Case {
        name: b"self-link.jpg",
        make: |d| std::os::unix::fs::symlink("self-link.jpg", d.join("self-link.jpg")).unwrap(),
        expect: Expect::Skipped(SkipReason::Unreadable, Some((ErrorCode::Io, "self-link.jpg"))),
        unprivileged: false,
    },
    Case {
        name: b"locked.jpg",
        make: |d| {
            write(d, b"locked.jpg", &sample_jpeg(4, 64, 64, 85));
            chmod(&d.join("locked.jpg"), 0o000);
        },
        expect: Expect::Skipped(SkipReason::Unreadable, Some((ErrorCode::Io, "ermission denied"))),
        unprivileged: true,
    },
    Case {
        name: b"locked-folder",
        make: |d| {
            let folder = d.join("locked-folder");
            std::fs::create_dir(&folder).unwrap();
            write(&folder, b"inside.jpg", &sample_jpeg(5, 64, 64, 85));
            chmod(&folder, 0o000);
        },
        expect: Expect::Skipped(SkipReason::Unreadable, None),
        unprivileged: true,
    },
];

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The cases this process can run: as root, those that need no permissions.
fn cases() -> impl Iterator<Item = &'static Case> {
    let root = is_root();
    CASES.iter().filter(move |c| !(root && c.unprivileged))
}

fn make_all(dir: &Path) {
    for case in cases() {
        (case.make)(dir);
    }
}

fn shown(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// Each file straight through intake: the expected outcome, never a panic.
fn intake_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    make_all(dir.path());
    let cfg = ImageConfig::default();
    for case in cases() {
        let path = dir.path().join(OsStr::from_bytes(case.name));
        let expected = match case.expect {
            Expect::Prepared => None,
            Expect::Fails(code, text) | Expect::Skipped(_, Some((code, text))) => Some((code, text)),
            Expect::Skipped(_, None) => continue, // a folder or a loop: nothing to prepare
        };
        let name = shown(case.name);
        let outcome = std::panic::catch_unwind(|| intake::prepare_file(&path, &cfg))
            .unwrap_or_else(|_| panic!("{name}: intake panicked"));
        match (outcome, expected) {
            (Ok(prepared), None) => {
                assert!(prepared.width >= 1 && prepared.height >= 1, "{name}");
                assert!(prepared.width.max(prepared.height) <= cfg.max_long_edge, "{name}: scaled to the long edge");
                assert_eq!(&prepared.jpeg[..2], [0xFF, 0xD8], "{name}: uploaded as JPEG");
            }
            (Err(e), Some((code, text))) => {
                assert_eq!(e.code(), code, "{name}: {e}");
                let message = e.to_string();
                assert!(message.contains(text), "{name}: {message:?} should say {text:?}");
                assert!(!matches!(e, IntakeError::Internal { .. }), "{name}: an internal error is no answer: {e}");
            }
            (outcome, expected) => {
                panic!("{name}: expected {expected:?}, got {:?}", outcome.map(|p| (p.width, p.height)))
            }
        }
    }
}

struct Harness {
    fake: FakeGemini,
    data: tempfile::TempDir,
}

impl Harness {
    async fn start() -> Harness {
        Harness { fake: FakeGemini::start(FakeOptions::default()).await.unwrap(), data: tempfile::tempdir().unwrap() }
    }

    async fn queue(&self, autostart: bool) -> ImportQueue {
        let catalog = Catalog::open(&Catalog::path_in(self.data.path())).unwrap();
        let mut resilience = ResilienceConfig::default();
        resilience.retry.max_attempts = 1;
        let stack = ResilienceStack::new("gemini", resilience).unwrap();
        let config = GeminiConfig {
            base_url: self.fake.base_url(),
            api_key: ApiKey::new("test-key"),
            timeout: Duration::from_secs(10),
            ..GeminiConfig::default()
        };
        let pipeline =
            Pipeline::new(GeminiClient::new(&config).unwrap(), stack, catalog, ImageConfig::default(), system_clock());
        ImportQueue::open(pipeline, ImportOptions { autostart, ..ImportOptions::default() }).await.unwrap()
    }
}

async fn settled(queue: &ImportQueue) {
    tokio::time::timeout(Duration::from_secs(60), queue.settled()).await.expect("the import settles within 60 s");
}

/// The whole set as one folder import: every good photo ready, every bad one failed or skipped
/// with its own kind, none holding up the others, and only the good ones sent to Gemini.
async fn one_import_of_everything() {
    let h = Harness::start().await;
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("batch");
    std::fs::create_dir(&batch).unwrap();
    make_all(&batch);
    let queue = h.queue(true).await;
    queue.enqueue(vec![batch.clone()], EnqueueOptions::default()).await.unwrap();
    settled(&queue).await;
    let rows = queue.items(0, 1000, None).await.unwrap().rows;
    let row_for = |name: &[u8]| -> &ImportRow {
        let path = pe_core::stored_path::StoredPath::new(&batch.join(OsStr::from_bytes(name)));
        rows.iter().find(|r| r.stored_path() == path).unwrap_or_else(|| panic!("{} is listed: {rows:#?}", shown(name)))
    };
    let mut prepared = 0;
    for case in cases() {
        let name = shown(case.name);
        match case.expect {
            Expect::Skipped(SkipReason::Unreadable, None) if case.name == b"locked-folder" || case.name == b"loop" => {
                // A folder that cannot be listed, or a loop, is one skipped row (the folder's or
                // the link's own), with the reason.
                let row = row_for(case.name);
                let skip = row.skipped.as_ref().unwrap_or_else(|| panic!("{name}: {row:?}"));
                assert_eq!(skip.reason, SkipReason::Unreadable, "{name}: {row:?}");
                assert!(skip.message.contains(&name), "{name}: {}", skip.message);
            }
            Expect::Prepared => {
                let row = row_for(case.name);
                assert_eq!(row.state, ItemState::Ready, "{name}: {row:?}");
                prepared += 1;
            }
            Expect::Fails(code, _) => {
                let row = row_for(case.name);
                assert_eq!(row.state, ItemState::Failed, "{name}: {row:?}");
                assert_eq!(row.last_error.as_ref().map(|e| e.code), Some(code), "{name}: {row:?}");
            }
            Expect::Skipped(reason, _) => {
                let row = row_for(case.name);
                assert_eq!(row.state, ItemState::Skipped, "{name}: {row:?}");
                assert_eq!(row.skipped.as_ref().map(|s| s.reason), Some(reason), "{name}: {row:?}");
            }
        }
    }
    assert!(prepared >= 10, "the good photos: {prepared}");
    assert_eq!(h.fake.generate_count(), prepared, "only the good photos reach Gemini");
    queue.shutdown().await;
}

/// A file deleted after it was queued, before a worker prepares it: that item fails with `io`
/// and a message naming the file; the others go on.
async fn a_file_deleted_between_queueing_and_preparing_fails_alone() {
    let h = Harness::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (gone, kept) = (dir.path().join("gone.jpg"), dir.path().join("kept.jpg"));
    std::fs::write(&gone, sample_jpeg(40, 200, 150, 85)).unwrap();
    std::fs::write(&kept, sample_jpeg(41, 200, 150, 85)).unwrap();
    let queue = h.queue(false).await;
    let enqueued = queue.enqueue_files(vec![gone.clone(), kept.clone()], EnqueueOptions::default()).await.unwrap();
    assert_eq!(enqueued.report.queued, 2);
    std::fs::remove_file(&gone).unwrap();
    queue.resume();
    settled(&queue).await;
    let gone_row = queue.item(enqueued.files[0].item).await.unwrap().row;
    assert_eq!(gone_row.state, ItemState::Failed, "{gone_row:?}");
    let error = gone_row.last_error.unwrap();
    assert_eq!(error.code, ErrorCode::Io);
    assert!(error.message.contains("gone.jpg") && error.message.contains("No such file"), "{}", error.message);
    assert_eq!(queue.item(enqueued.files[1].item).await.unwrap().row.state, ItemState::Ready);
    queue.shutdown().await;
}

#[test]
fn every_hostile_file_has_its_typed_intake_outcome() {
    intake_outcomes();
}

#[tokio::test(flavor = "multi_thread")]
async fn one_import_of_the_hostile_set_fails_each_bad_file_alone() {
    one_import_of_everything().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_deleted_after_queueing_fails_alone() {
    a_file_deleted_between_queueing_and_preparing_fails_alone().await;
}

/// The environment variable that marks the run under `setpriv` (as `nobody`).
const UNPRIVILEGED_RUN: &str = "PE_HOSTILE_UNPRIVILEGED";

/// The permission cases: as root, this test runs the two tests above again as `nobody` (this
/// binary, under `setpriv`), where the locked file and folder really are unreadable.
#[test]
fn as_a_user_without_privileges_locked_files_and_folders_are_typed_too() {
    if std::env::var_os(UNPRIVILEGED_RUN).is_some() || !is_root() {
        // Not root: the tests above ran every case already.
        assert!(!is_root(), "the unprivileged run must not be root");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let check = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "id", "-u"])
        .output()
        .expect("setpriv (util-linux) runs the permission cases as a user without privileges");
    assert!(check.status.success() && String::from_utf8_lossy(&check.stdout).trim() != "0", "{check:?}");
    for test in
        ["every_hostile_file_has_its_typed_intake_outcome", "one_import_of_the_hostile_set_fails_each_bad_file_alone"]
    {
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(&exe)
            .args(["--exact", test, "--test-threads=1"])
            .env(UNPRIVILEGED_RUN, "1")
            // A temporary directory nobody may write to.
            .env("TMPDIR", "/tmp")
            .output()
            .unwrap();
        let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{test} as nobody:\n{report}");
        assert!(report.contains("1 passed"), "{test} ran as nobody:\n{report}");
    }
}
