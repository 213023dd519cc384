//! Intake benchmark: our `prepare_file` against `vipsthumbnail`, side by side, in one run.
//!
//! `cargo bench -p product-extractor-core --bench prepare`
//!
//! It generates a 4000×3000 photo-like JPEG (~5 MB, quality 95, 4:2:0, EXIF orientation 6),
//! then measures, alternating the two tools, each as its own child process so that CPU time
//! (user + system, all threads) and peak RSS come from `wait4`'s rusage:
//!
//! - `single`: one process per image, N times each (how a CLI is used; startup included);
//! - `batch`:  one process preparing N copies (startup amortized; steady-state cost per image).
//!
//! Both produce a 1536 px long edge, quality 85, 4:2:0, metadata stripped, auto-rotated output.
//! PASS requires our CPU time per image ≤ 0.8× vipsthumbnail's in both modes and our peak RSS
//! ≤ vipsthumbnail's in both modes. Our process also hashes the original (SHA-256) and makes the
//! 256 px thumbnail; vipsthumbnail does neither.
//!
//! Internally the binary re-invokes itself as `prepare --generate <file>` to make the input and
//! `prepare --child <outdir> <file>…` for our side. The parent never holds image data: on Linux a
//! child started with vfork/posix_spawn inherits its parent's peak RSS as the floor of its own
//! `ru_maxrss`, so a fat parent would hide the difference between the two tools.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pe_core::config::ImageConfig;
use pe_core::config::MediaResolution;
use pe_core::gemini::models;
use pe_core::intake;

const WIDTH: usize = 4000;
const HEIGHT: usize = 3000;
const SINGLE_RUNS: usize = 15;
const BATCH_IMAGES: usize = 10;
const BATCH_RUNS: usize = 3;
const CPU_RATIO_LIMIT: f64 = 0.8;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--generate") {
        std::fs::write(&args[2], synthetic_photo()).expect("write input");
        return;
    }
    // `cargo bench` passes `--bench`; a filter that does not match "prepare" skips us.
    if let Some(filter) = args.iter().skip(1).find(|a| !a.starts_with('-')) {
        if !"prepare".contains(filter.as_str()) {
            return;
        }
    }
    std::process::exit(if orchestrate() { 0 } else { 1 });
}

/// Our side: prepare each file (read + checks + decode + resize + orient + encode + SHA-256 +
/// thumbnail) and write the upload JPEG, like vipsthumbnail writes its output.
fn child(args: &[String]) {
    let outdir = PathBuf::from(&args[0]);
    let cfg = ImageConfig::default();
    for (i, input) in args[1..].iter().enumerate() {
        let prepared = intake::prepare_file(Path::new(input), &cfg).expect("prepare");
        std::fs::write(outdir.join(format!("ours_{i}.jpg")), &prepared.jpeg).expect("write");
        std::hint::black_box(&prepared.thumbnail_jpeg);
        std::hint::black_box(&prepared.sha256);
    }
}

#[derive(Clone, Copy, Default)]
struct Usage {
    cpu: Duration,
    wall: Duration,
    max_rss_kib: i64,
}

/// Runs a command to completion and returns its own rusage (via wait4).
fn measure(cmd: &mut Command) -> Usage {
    cmd.stdout(Stdio::null()).stderr(Stdio::inherit());
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain syscall on our own child; `rusage` is written by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let wall = start.elapsed();
    assert_eq!(rc, pid, "wait4 failed");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{cmd:?} failed (status {status})");
    std::mem::forget(child); // already reaped
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    Usage { cpu: tv(ru.ru_utime) + tv(ru.ru_stime), wall, max_rss_kib: ru.ru_maxrss }
}

fn ours(outdir: &Path, inputs: &[PathBuf]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.arg("--child").arg(outdir).args(inputs);
    cmd
}

fn vips(outdir: &Path, inputs: &[PathBuf]) -> Command {
    let mut cmd = Command::new("vipsthumbnail");
    cmd.args(inputs).args(["--size", "1536", "-o"]).arg(format!("{}/%s_vips.jpg[Q=85,strip]", outdir.display()));
    cmd
}

/// The first 64 KiB of a file: enough for a JPEG header, small enough to keep this process lean.
fn read_head(path: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path).unwrap().take(64 << 10).read_to_end(&mut head).unwrap();
    head
}

struct Stats {
    cpu_per_image_ms: f64,
    cpu_min_ms: f64,
    wall_per_image_ms: f64,
    max_rss_mib: f64,
}

fn stats(runs: &[Usage], images_per_run: usize) -> Stats {
    let n = (runs.len() * images_per_run) as f64;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Stats {
        cpu_per_image_ms: runs.iter().map(|u| ms(u.cpu)).sum::<f64>() / n,
        cpu_min_ms: runs.iter().map(|u| ms(u.cpu)).fold(f64::INFINITY, f64::min) / images_per_run as f64,
        wall_per_image_ms: runs.iter().map(|u| ms(u.wall)).sum::<f64>() / n,
        max_rss_mib: runs.iter().map(|u| u.max_rss_kib).max().unwrap_or(0) as f64 / 1024.0,
    }
}

fn orchestrate() -> bool {
    let vips_version = Command::new("vipsthumbnail").arg("--vips-version").output();
    let Ok(vips_version) = vips_version else {
        eprintln!("vipsthumbnail not found (apt-get install libvips-tools)");
        return false;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.jpg");
    let t = Instant::now();
    let mut generate = Command::new(std::env::current_exe().unwrap());
    measure(generate.arg("--generate").arg(&input));
    let input_bytes = std::fs::metadata(&input).unwrap().len();
    let header = turbojpeg::read_header(&read_head(&input)).unwrap();
    println!("== Image intake benchmark ==");
    println!(
        "input: {}x{} JPEG, {:.2} MB, {:?}, EXIF orientation 6 (generated in {:.1} s)",
        header.width,
        header.height,
        input_bytes as f64 / 1e6,
        header.subsamp,
        t.elapsed().as_secs_f64()
    );
    println!("vipsthumbnail: {}", String::from_utf8_lossy(&vips_version.stdout).trim());
    println!("cores: {}", std::thread::available_parallelism().map_or(1, |n| n.get()));

    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // Warm up both (page cache, dynamic linking).
    measure(&mut ours(&out, std::slice::from_ref(&input)));
    measure(&mut vips(&out, std::slice::from_ref(&input)));

    // Single: one image per process, alternating.
    let (mut o1, mut v1) = (Vec::new(), Vec::new());
    for _ in 0..SINGLE_RUNS {
        o1.push(measure(&mut ours(&out, std::slice::from_ref(&input))));
        v1.push(measure(&mut vips(&out, std::slice::from_ref(&input))));
    }
    // Batch: N copies per process, alternating.
    let copies: Vec<PathBuf> = (0..BATCH_IMAGES)
        .map(|i| {
            let p = dir.path().join(format!("in_{i}.jpg"));
            std::fs::copy(&input, &p).unwrap();
            p
        })
        .collect();
    let (mut o2, mut v2) = (Vec::new(), Vec::new());
    for _ in 0..BATCH_RUNS {
        o2.push(measure(&mut ours(&out, &copies)));
        v2.push(measure(&mut vips(&out, &copies)));
    }

    // The outputs: same size, no metadata.
    let ours_out = std::fs::read(out.join("ours_0.jpg")).unwrap();
    let vips_out = std::fs::read(out.join("input_vips.jpg")).unwrap();
    let oh = turbojpeg::read_header(&ours_out).unwrap();
    let vh = turbojpeg::read_header(&vips_out).unwrap();
    let has_meta = |j: &[u8]| j.windows(4).any(|w| w == b"Exif") || j.windows(2).any(|w| w == [0xFF, 0xE1]);
    println!(
        "output ours: {}x{} {:?}, {:.0} KB, metadata: {}",
        oh.width,
        oh.height,
        oh.subsamp,
        ours_out.len() as f64 / 1e3,
        if has_meta(&ours_out) { "PRESENT" } else { "none" }
    );
    println!(
        "output vips: {}x{} {:?}, {:.0} KB, metadata: {}",
        vh.width,
        vh.height,
        vh.subsamp,
        vips_out.len() as f64 / 1e3,
        if has_meta(&vips_out) { "PRESENT" } else { "none" }
    );
    let tokens = models::image_tokens(None, MediaResolution::ModelDefault, oh.width as u32, oh.height as u32);
    println!("estimated Gemini input tokens for the prepared image (2.5, default resolution): {tokens}");
    let same_output = (oh.width, oh.height) == (vh.width, vh.height) && oh.width.max(oh.height) == 1536;

    let mut pass = same_output && !has_meta(&ours_out);
    println!();
    println!(
        "{:<7} {:>5} {:>14} {:>14} {:>12} {:>12} {:>7} {:>10} {:>10}",
        "mode", "runs", "ours cpu ms", "vips cpu ms", "ours wall", "vips wall", "ratio", "ours RSS", "vips RSS"
    );
    for (mode, o, v, per) in [("single", &o1, &v1, 1), ("batch", &o2, &v2, BATCH_IMAGES)] {
        let (so, sv) = (stats(o, per), stats(v, per));
        let ratio = so.cpu_per_image_ms / sv.cpu_per_image_ms;
        let ok = ratio <= CPU_RATIO_LIMIT && so.max_rss_mib <= sv.max_rss_mib;
        pass &= ok;
        println!(
            "{:<7} {:>5} {:>7.1} ({:>5.1}) {:>7.1} ({:>5.1}) {:>10.1}ms {:>10.1}ms {:>7.2} {:>7.1}MiB {:>7.1}MiB  {}",
            mode,
            o.len(),
            so.cpu_per_image_ms,
            so.cpu_min_ms,
            sv.cpu_per_image_ms,
            sv.cpu_min_ms,
            so.wall_per_image_ms,
            sv.wall_per_image_ms,
            ratio,
            so.max_rss_mib,
            sv.max_rss_mib,
            if ok { "ok" } else { "FAIL" }
        );
    }
    println!("(cpu ms = user+sys CPU time per image, mean (min); RSS = peak resident set of the process)");
    println!(
        "{}: CPU ≤ {CPU_RATIO_LIMIT}× vipsthumbnail and peak RSS ≤ vipsthumbnail's, same {}x{} output",
        if pass { "PASS" } else { "FAIL" },
        oh.width,
        oh.height
    );
    pass
}

/// A 4000×3000 photo-like picture: lit background, a product box with a label, text-like
/// strokes, a barcode, sensor noise; JPEG quality 95, 4:2:0, with EXIF orientation 6.
fn synthetic_photo() -> Vec<u8> {
    let (w, h) = (WIDTH, HEIGHT);
    let mut rgb = vec![0u8; w * h * 3];
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
            // Background: vignetted warm grey with a soft light falloff.
            let d = ((fx - 0.45).powi(2) + (fy - 0.4).powi(2)).sqrt();
            let mut c = [200.0 - 120.0 * d, 190.0 - 115.0 * d, 175.0 - 110.0 * d];
            // The box: a blue carton with a white label, printed text and a barcode.
            if (0.25..0.75).contains(&fx) && (0.15..0.85).contains(&fy) {
                let shade = 1.0 - 0.3 * (fx - 0.25);
                c = [40.0 * shade, 90.0 * shade, 170.0 * shade];
                if (0.32..0.68).contains(&fx) && (0.3..0.6).contains(&fy) {
                    c = [235.0, 235.0, 228.0];
                    let row = ((fy - 0.3) * 60.0) as u32;
                    let glyph = ((x / 23) as u32).wrapping_mul(2_654_435_761) ^ row.wrapping_mul(40_503);
                    let ink = (row & 1) == 0 && (x / 7 + y / 9) % 3 > 0 && !glyph.is_multiple_of(5);
                    if ink {
                        c = [25.0, 25.0, 30.0];
                    }
                }
                if (0.4..0.6).contains(&fx) && (0.66..0.78).contains(&fy) {
                    let bar = ((x as u32 / 6).wrapping_mul(2_654_435_761) >> 7) % 3 < 1;
                    c = if bar { [10.0, 10.0, 10.0] } else { [250.0, 250.0, 250.0] };
                }
            }
            // Texture (paper grain, fabric) and sensor noise.
            let texture = ((x as f32 * 0.37).sin() * (y as f32 * 0.23).cos()) * 10.0;
            let i = (y * w + x) * 3;
            let r = rand();
            for (k, ch) in c.iter().enumerate() {
                let noise = ((r >> (k * 16)) & 0xFF) as f32 / 255.0 * 20.0 - 10.0;
                rgb[i + k] = (ch + texture + noise).clamp(0.0, 255.0) as u8;
            }
        }
    }
    let mut c = turbojpeg::Compressor::new().unwrap();
    c.set_quality(95).unwrap();
    c.set_subsamp(turbojpeg::Subsamp::Sub2x2).unwrap();
    let img =
        turbojpeg::Image { pixels: &rgb[..], width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB };
    let jpeg = c.compress_to_vec(img).unwrap();
    intake::insert_jpeg_segment(&jpeg, &intake::exif_orientation_segment(6))
}
