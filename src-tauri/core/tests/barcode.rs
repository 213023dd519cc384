//! Reading barcodes from generated product photos (tests/barcode_photos): what must hold, and the
//! read rate per case (BENCHMARKS.md; printed with `--nocapture`).

mod barcode_photos;

use barcode_photos::{draw, finish, scene, symbols, test_set, Effects, Placement, Score, HEIGHT, WIDTH};
use pe_core::barcode::{read_barcodes, BarcodeFormat};

/// Clean symbols (plain, rotated 7°, 90°, 180°, two on a photo) all read; photos without a
/// barcode, and bars whose check digit is wrong, report nothing.
#[test]
fn clean_symbols_read_and_nothing_else_is_reported() {
    read_rates(false);
}

/// The whole test set's table, the harder cases too (their rates are recorded, not asserted):
/// `cargo test --workspace --test barcode -- --ignored --nocapture`. The benchmark prints the
/// same table with CPU times, from a release build.
#[test]
#[ignore = "slow in a debug build; prints the read-rate table"]
fn read_rate_table() {
    read_rates(true);
}

fn read_rates(recorded: bool) {
    let mut rows = Vec::new();
    for case in test_set(recorded) {
        let mut score = Score::default();
        for photo in &case.photos {
            let got: Vec<String> = read_barcodes(&photo.image).into_iter().map(|b| b.gtin).collect();
            score.add(&photo.expected, &got);
        }
        rows.push((case.name, case.must_read, score));
    }
    let table: Vec<(&str, Score)> = rows.iter().map(|(n, _, s)| (*n, s.clone())).collect();
    println!("{}", barcode_photos::table(&table));
    for (name, must_read, score) in &rows {
        if *must_read {
            assert_eq!(score.read, score.expected, "{name}: every code reads");
            assert_eq!(score.false_positives, 0, "{name}: nothing else is reported");
        }
    }
}

#[test]
fn each_symbology_reads_as_its_gtin_with_its_format_and_place() {
    let formats = [
        BarcodeFormat::Ean13,
        BarcodeFormat::Ean13,
        BarcodeFormat::UpcA,
        BarcodeFormat::UpcA,
        BarcodeFormat::Ean8,
        BarcodeFormat::Ean8,
        BarcodeFormat::UpcE,
        BarcodeFormat::UpcE,
    ];
    for (symbol, format) in symbols().into_iter().zip(formats) {
        for angle in [0.0_f32, 90.0] {
            let center = (0.45 * WIDTH as f32, 0.55 * HEIGHT as f32);
            let mut img = scene(5);
            let placement = Placement { angle_deg: angle, ..Placement::plain(center) };
            draw(&mut img, &symbol, placement);
            let photo = finish(img, Effects::default(), 5);
            let read = read_barcodes(&photo);
            assert_eq!(read.len(), 1, "{symbol:?} at {angle}°: {read:?}");
            let b = &read[0];
            assert_eq!(Some(&b.gtin), symbol.gtin.as_ref());
            assert_eq!(b.format, format);
            assert!(pe_core::product::check_gtin(&b.gtin).is_ok());

            // The box holds the bars: about their size, around their centre.
            let bars_long = symbol.modules().len() as f32 * placement.module_px;
            let bars_short = 60.0 * placement.module_px;
            let (bw, bh) = ((b.bounds.x_max - b.bounds.x_min) as f32, (b.bounds.y_max - b.bounds.y_min) as f32);
            let (along, across) = if angle == 0.0 { (bw, bh) } else { (bh, bw) };
            assert!((0.9..1.2).contains(&(along / bars_long)), "{symbol:?} {angle}°: {along} along vs {bars_long}");
            assert!(
                (0.5..1.25).contains(&(across / bars_short)),
                "{symbol:?} {angle}°: {across} across vs {bars_short}"
            );
            let inside = |v: f32, lo: u32, hi: u32| (lo as f32) < v && v < hi as f32;
            assert!(
                inside(center.0, b.bounds.x_min, b.bounds.x_max) && inside(center.1, b.bounds.y_min, b.bounds.y_max)
            );
            // The same box in thousandths, Gemini's order.
            let [y0, x0, y1, x1] = b.box_2d;
            assert!(y0 < y1 && x0 < x1 && y1 <= 1000 && x1 <= 1000);
            assert!((i32::from(x0) - (b.bounds.x_min * 1000 / WIDTH) as i32).abs() <= 1);
            assert!((i32::from(y1) - (b.bounds.y_max * 1000 / HEIGHT) as i32).abs() <= 1);
        }
    }
}

#[test]
fn the_same_code_twice_on_a_photo_is_reported_once() {
    let symbol = &symbols()[0];
    let mut img = scene(9);
    draw(&mut img, symbol, Placement { module_px: 2.5, ..Placement::plain((400.0, 350.0)) });
    draw(&mut img, symbol, Placement { module_px: 2.5, ..Placement::plain((1100.0, 800.0)) });
    let read = read_barcodes(&finish(img, Effects::default(), 9));
    assert_eq!(read.iter().map(|b| b.gtin.as_str()).collect::<Vec<_>>(), [symbol.gtin.as_deref().unwrap()]);
}

#[test]
fn colour_photos_read_like_their_luma() {
    let symbol = &symbols()[2];
    let mut img = scene(11);
    draw(&mut img, symbol, Placement::plain((700.0, 600.0)));
    let rgb = image::DynamicImage::ImageRgb8(finish(img, Effects::default(), 11).to_rgb8());
    assert_eq!(
        read_barcodes(&rgb).into_iter().map(|b| b.gtin).collect::<Vec<_>>(),
        symbol.gtin.iter().cloned().collect::<Vec<_>>()
    );
}
