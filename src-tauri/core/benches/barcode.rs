//! Barcode reading benchmark: read rate and CPU time per case of the generated test set
//! (tests/barcode_photos), and the speed requirement on one 1536-px photo.
//!
//! `cargo bench -p product-extractor-core --bench barcode`
//! `cargo bench -p product-extractor-core --bench barcode --features zxing-cpp` (also zxing-cpp,
//! on the same photos, for the comparison in BENCHMARKS.md)
//!
//! CPU time is this thread's (`CLOCK_THREAD_CPUTIME_ID`); the readers are single-threaded. The
//! photos are decoded images already (`DynamicImage`, Luma8, after a JPEG round trip); the time
//! includes the reader's conversion to luma where it needs one.
//!
//! PASS: a 1536×1152 photo with a barcode reads in ≤ 50 ms CPU (mean), one without in ≤ 30 ms.

#[path = "../tests/barcode_photos/mod.rs"]
mod barcode_photos;

use barcode_photos::{draw, finish, scene, symbols, test_set, Effects, Placement, Score};
use image::DynamicImage;

const SPEED_RUNS: usize = 30;
const WITH_BARCODE_LIMIT_MS: f64 = 50.0;
const WITHOUT_BARCODE_LIMIT_MS: f64 = 30.0;

fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6
}

type ReadFn = fn(&DynamicImage) -> Vec<String>;

fn rxing(image: &DynamicImage) -> Vec<String> {
    pe_core::barcode::read_barcodes(image).into_iter().map(|b| b.gtin).collect()
}

#[cfg(feature = "zxing-cpp")]
fn zxing_cpp(image: &DynamicImage) -> Vec<String> {
    use zxingcpp::{BarcodeFormat, ImageFormat, ImageView};
    let luma = image.to_luma8();
    let Ok(view) = ImageView::from_slice(luma.as_raw(), luma.width(), luma.height(), ImageFormat::Lum) else {
        return vec![];
    };
    // Its defaults but inverted symbols (rxing is not asked for those either).
    let Ok(reader) = zxingcpp::read()
        .formats([BarcodeFormat::EAN13, BarcodeFormat::EAN8, BarcodeFormat::UPCA, BarcodeFormat::UPCE])
        .try_harder(true)
        .try_rotate(true)
        .try_downscale(true)
        .try_invert(false)
        .from(view)
    else {
        return vec![];
    };
    let mut out: Vec<String> = Vec::new();
    for b in reader {
        let text = b.text();
        // Normalize like ours: a UPC-E to its GTIN-12, a 13-digit code with a leading 0 (how
        // zxing-cpp may report a UPC-A) to the GTIN-12.
        let gtin = match (b.format(), text.len()) {
            (BarcodeFormat::UPCE, 8) => pe_core::barcode::upce_to_upca(&text),
            (BarcodeFormat::UPCE, 7) => pe_core::barcode::upce_to_upca(&format!("0{text}")),
            (_, 13) if text.starts_with('0') => Some(text[1..].to_string()),
            _ => Some(text),
        };
        if let Some(g) = gtin.filter(|g| pe_core::product::check_gtin(g).is_ok()) {
            if !out.contains(&g) {
                out.push(g);
            }
        }
    }
    out
}

fn readers() -> Vec<(&'static str, ReadFn)> {
    #[allow(unused_mut)]
    let mut r: Vec<(&'static str, ReadFn)> = vec![("rxing", rxing)];
    #[cfg(feature = "zxing-cpp")]
    r.push(("zxing-cpp", zxing_cpp));
    r
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(filter) = args.iter().skip(1).find(|a| !a.starts_with('-')) {
        if !"barcode".contains(filter.as_str()) {
            return;
        }
    }
    let set = test_set(true);
    for (name, read) in readers() {
        println!("## {name}: read rate and CPU time per case\n");
        let mut rows = Vec::new();
        for case in &set {
            let mut score = Score::default();
            for photo in &case.photos {
                let t0 = thread_cpu_ms();
                let got = read(&photo.image);
                score.cpu_ms.push(thread_cpu_ms() - t0);
                score.add(&photo.expected, &got);
            }
            rows.push((case.name, score));
        }
        println!("{}", barcode_photos::table(&rows));
    }

    // The speed requirement: one prepared-size photo with a barcode, one without.
    let symbol = &symbols()[0];
    let mut with = scene(77);
    draw(&mut with, symbol, Placement::plain((700.0, 640.0)));
    let with = DynamicImage::ImageRgb8(finish(with, Effects::default(), 77).to_rgb8());
    let without = DynamicImage::ImageRgb8(finish(scene(78), Effects::default(), 78).to_rgb8());
    let mut pass = true;
    println!("## one 1536×1152 RGB photo, {SPEED_RUNS} runs, CPU ms\n");
    println!("| reader | photo | mean | min | max | limit | |\n|---|---|---|---|---|---|---|");
    for (name, read) in readers() {
        for (label, photo, limit, expect) in [
            ("with an EAN-13", &with, WITH_BARCODE_LIMIT_MS, 1),
            ("without a barcode", &without, WITHOUT_BARCODE_LIMIT_MS, 0),
        ] {
            let mut ms = Vec::new();
            for _ in 0..SPEED_RUNS {
                let t0 = thread_cpu_ms();
                let got = read(photo);
                ms.push(thread_cpu_ms() - t0);
                assert_eq!(got.len(), expect, "{name} {label}");
            }
            let mean = ms.iter().sum::<f64>() / ms.len() as f64;
            let min = ms.iter().cloned().fold(f64::MAX, f64::min);
            let max = ms.iter().cloned().fold(0.0, f64::max);
            // Only our reader is held to the limit.
            let ok = name != "rxing" || mean <= limit;
            pass &= ok;
            let verdict = if name != "rxing" {
                ""
            } else if ok {
                "PASS"
            } else {
                "FAIL"
            };
            println!("| {name} | {label} | {mean:.1} | {min:.1} | {max:.1} | {limit} | {verdict} |");
        }
    }
    println!("\n{}", if pass { "PASS" } else { "FAIL" });
    std::process::exit(if pass { 0 } else { 1 });
}
