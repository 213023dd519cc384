//! Reading a product's barcode on the machine: EAN-13, EAN-8, UPC-A and UPC-E, from the prepared
//! photo's pixels, before anything is sent to Gemini.
//!
//! [`read_barcodes`] returns every distinct code read, each as the GTIN it carries and where it is
//! in the photo. Nothing here fails: a photo without a readable barcode gives an empty list, and a
//! code whose check digit is wrong is not reported (the check is [`product::check_gtin`], the one
//! GTIN rule).
//!
//! The GTIN is the one the symbol carries, as GS1 writes it: EAN-13 → GTIN-13, UPC-A → GTIN-12
//! (a 13-digit EAN starting with 0 *is* a UPC-A and is reported as one), EAN-8 → GTIN-8, UPC-E →
//! the GTIN-12 it is a compressed form of (zero-suppression expanded), so the same product reads
//! the same from a UPC-A and a UPC-E symbol. All of them pass `Product::validate`'s GTIN check.
//! To compare GTINs of different lengths, use [`product::gtin_key`].
//!
//! The decoder is rxing (the pure-Rust port of ZXing), restricted to its 1-D readers; BENCHMARKS.md
//! has the read rates, the CPU time and why it was chosen over zxing-cpp.

use std::collections::HashSet;

use image::{DynamicImage, GrayImage};
use rxing::common::GlobalHistogramBinarizer;
use rxing::oned::MultiFormatUPCEANReader;
use rxing::{BinaryBitmap, DecodeHints, Luma8Source};
use serde::{Deserialize, Serialize};

use ts_rs::TS;

use crate::product::{check_gtin, gtin_key, FieldFlag, FlagKind, Product};

/// The barcode symbologies we read: the ones a retail product carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum BarcodeFormat {
    Ean13,
    Ean8,
    UpcA,
    UpcE,
}

impl BarcodeFormat {
    fn from_rxing(format: rxing::BarcodeFormat) -> Option<Self> {
        match format {
            rxing::BarcodeFormat::EAN_13 => Some(Self::Ean13),
            rxing::BarcodeFormat::EAN_8 => Some(Self::Ean8),
            rxing::BarcodeFormat::UPC_A => Some(Self::UpcA),
            rxing::BarcodeFormat::UPC_E => Some(Self::UpcE),
            _ => None,
        }
    }
}

/// An axis-aligned box in the photo's pixels (the image given to [`read_barcodes`]), inclusive of
/// `min`, exclusive of `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[ts(export)]
pub struct PixelBox {
    pub x_min: u32,
    pub y_min: u32,
    pub x_max: u32,
    pub y_max: u32,
}

/// One barcode read from a photo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[ts(export)]
pub struct Barcode {
    /// The GTIN (8, 12 or 13 digits, check digit verified); see the module's notes.
    pub gtin: String,
    pub format: BarcodeFormat,
    /// Where the symbol is (its bars, estimated from the decoded scan line), in pixels.
    pub bounds: PixelBox,
    /// The same box in Gemini's form: `[y_min, x_min, y_max, x_max]`, normalized to 0–1000.
    pub box_2d: [u16; 4],
    /// Which of the product's photos it was read on (0: the first; a single-photo product's, and
    /// every barcode stored before products had several photos).
    #[serde(default)]
    pub photo: u32,
}

/// Every distinct EAN/UPC barcode readable in `image` (usually the prepared photo), in the order
/// found. Empty when there is none, or none is legible.
pub fn read_barcodes(image: &DynamicImage) -> Vec<Barcode> {
    match image {
        DynamicImage::ImageLuma8(luma) => read_barcodes_luma(luma),
        other => read_barcodes_luma(&other.to_luma8()),
    }
}

/// [`read_barcodes`] on a grayscale image.
///
/// One symbol is decoded at a time (rxing's UPC/EAN reader, TryHarder: every few rows, both
/// directions, then the photo turned a quarter); each one found is painted over (its traced box,
/// with a margin) and the photo read again, up to [`MAX_SYMBOLS`] times. rxing's
/// `GenericMultipleBarcodeReader` found the second symbol by reading the four regions around the
/// first again, each turned too: about twice the CPU for a photo with one barcode, where one
/// more pass over the painted photo does.
pub fn read_barcodes_luma(luma: &GrayImage) -> Vec<Barcode> {
    let (width, height) = luma.dimensions();
    if width < MIN_SIDE || height < MIN_SIDE {
        return Vec::new();
    }
    let mut seen = HashSet::new();
    let mut barcodes = Vec::new();
    let mut painted: Option<GrayImage> = None;
    for _ in 0..MAX_SYMBOLS {
        let Some(result) = decode_one(painted.as_ref().unwrap_or(luma)) else {
            break;
        };
        let points = result.getPoints();
        let (Some(start), Some(end)) = (points.first(), points.last()) else {
            break;
        };
        let bounds = symbol_bounds(luma, (start.x, start.y), (end.x, end.y));
        let code = BarcodeFormat::from_rxing(*result.getBarcodeFormat())
            .and_then(|format| gtin_of(format, result.getText()).map(|gtin| (format, gtin)));
        if let Some((format, gtin)) = code {
            if seen.insert(gtin_key(&gtin)) {
                barcodes.push(Barcode { gtin, format, box_2d: box_2d(bounds, width, height), bounds, photo: 0 });
            }
        }
        let image = painted.get_or_insert_with(|| luma.clone());
        if !paint_over(image, bounds, (start.x, start.y), (end.x, end.y)) {
            break;
        }
    }
    barcodes
}

/// At most this many symbols are read from one photo (a product's front and back rarely show
/// more than two; each costs one more pass).
const MAX_SYMBOLS: usize = 4;

/// The first EAN/UPC symbol rxing finds in `luma`, if any.
fn decode_one(luma: &GrayImage) -> Option<rxing::RXingResult> {
    use rxing::Reader;
    let (width, height) = luma.dimensions();
    let source = Luma(Luma8Source::new_with_slice(luma.as_raw(), width, height).ok()?);
    let mut bitmap = BinaryBitmap::new(GlobalHistogramBinarizer::new(source));
    let hints = DecodeHints {
        PossibleFormats: Some(HashSet::from([
            rxing::BarcodeFormat::EAN_13,
            rxing::BarcodeFormat::EAN_8,
            rxing::BarcodeFormat::UPC_A,
            rxing::BarcodeFormat::UPC_E,
        ])),
        TryHarder: Some(true),
        ..DecodeHints::default()
    };
    let mut reader = MultiFormatUPCEANReader::new(&hints);
    // A decoder that panics on some pixels is a photo without a barcode, not a crashed import.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.decode_with_hints(&mut bitmap, &hints))).ok()?.ok()
}

/// Paints the symbol white: its traced box grown by a quiet zone, and the scan line it was read
/// on. False when nothing changed (the next pass would find it again).
fn paint_over(image: &mut GrayImage, bounds: PixelBox, start: (f32, f32), end: (f32, f32)) -> bool {
    let (w, h) = image.dimensions();
    let margin = (bounds.x_max - bounds.x_min).max(bounds.y_max - bounds.y_min) / 10 + 4;
    let line = PixelBox {
        x_min: clamp_px(start.0.min(end.0), w),
        y_min: clamp_px(start.1.min(end.1), h),
        x_max: clamp_px(start.0.max(end.0), w) + 1,
        y_max: clamp_px(start.1.max(end.1), h) + 1,
    };
    let mut changed = false;
    for b in [bounds, line] {
        let (x0, y0) = (b.x_min.saturating_sub(margin), b.y_min.saturating_sub(margin));
        let (x1, y1) = ((b.x_max + margin).min(w), (b.y_max + margin).min(h));
        for y in y0..y1 {
            for x in x0..x1 {
                let pixel = image.get_pixel_mut(x, y);
                changed |= pixel.0[0] != 255;
                pixel.0[0] = 255;
            }
        }
    }
    changed
}

/// rxing's [`Luma8Source`] with a faster quarter turn. TryHarder reads a photo a second time
/// turned by 90° (a barcode standing upright); rxing's own turn writes the pixels one column
/// apart, a cache miss each, and was the largest single cost of reading a photo without a
/// barcode. This one moves 64×64 tiles, each read and written within the cache.
struct Luma<'a>(Luma8Source<'a>);

/// Pixels of the tiles [`Luma`] turns at a time.
const TILE: usize = 64;

impl rxing::LuminanceSource for Luma<'_> {
    const SUPPORTS_CROP: bool = true;
    const SUPPORTS_ROTATION: bool = true;

    fn get_row(&self, y: usize) -> Option<std::borrow::Cow<'_, [u8]>> {
        self.0.get_row(y)
    }

    fn get_column(&self, x: usize) -> std::borrow::Cow<'_, [u8]> {
        self.0.get_column(x)
    }

    fn get_matrix(&self) -> std::borrow::Cow<'_, [u8]> {
        self.0.get_matrix()
    }

    fn get_width(&self) -> usize {
        self.0.get_width()
    }

    fn get_height(&self) -> usize {
        self.0.get_height()
    }

    fn crop(&self, left: usize, top: usize, width: usize, height: usize) -> rxing::common::Result<Self> {
        self.0.crop(left, top, width, height).map(Luma)
    }

    fn invert(&mut self) {
        self.0.invert();
    }

    fn rotate_counter_clockwise(&self) -> rxing::common::Result<Self> {
        let (w, h) = (self.get_width(), self.get_height());
        let pixels = self.get_matrix();
        let turned = turn_counter_clockwise(&pixels, w, h);
        Luma8Source::new(turned, h as u32, w as u32).map(Luma)
    }

    fn get_luma8_point(&self, x: usize, y: usize) -> u8 {
        self.0.get_luma8_point(x, y)
    }
}

/// `pixels` (`w` × `h`, row after row) turned a quarter counter-clockwise: `h` × `w`, the pixel
/// at (x, y) moved to (y, w − 1 − x), as rxing's own turn does. Tile by tile.
fn turn_counter_clockwise(pixels: &[u8], w: usize, h: usize) -> Vec<u8> {
    let mut out = vec![0u8; w * h];
    for y0 in (0..h).step_by(TILE) {
        for x0 in (0..w).step_by(TILE) {
            for y in y0..(y0 + TILE).min(h) {
                let row = &pixels[y * w..y * w + w];
                for x in x0..(x0 + TILE).min(w) {
                    out[(w - 1 - x) * h + y] = row[x];
                }
            }
        }
    }
    out
}

/// Where a product's GTIN came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum GtinSource {
    /// A barcode read on the machine from the product's photo.
    Photo,
    /// Gemini's answer (no barcode was read, or it could not settle the GTIN).
    Model,
    /// Typed or changed by a person (neither the barcode's nor Gemini's).
    Review,
}

/// The barcode is the truth for `gtin`: the one rule for a proposal. `barcodes` are every barcode
/// read on the product's photos (one photo today; several later: pass them all).
///
/// - One distinct GTIN read (by [`gtin_key`], so a GTIN-12 and its GTIN-13 form are one): when
///   Gemini's GTIN is another or missing, the product takes the barcode's and the returned flag
///   (kind [`FlagKind::Barcode`], field `gtin`) says what Gemini read and what the barcode says.
///   Either way `gtin` leaves `uncertain_fields`: the barcode settled it.
/// - Two or more different GTINs read: nothing is overridden; the flag says which were read.
/// - None read: the product is left as it is, no flag.
pub fn apply_barcodes(product: &mut Product, barcodes: &[Barcode]) -> Option<FieldFlag> {
    let mut read: Vec<&str> = Vec::new();
    for barcode in barcodes {
        if !read.iter().any(|g| gtin_key(g) == gtin_key(&barcode.gtin)) {
            read.push(&barcode.gtin);
        }
    }
    let gemini = product.gtin.clone();
    let gemini_text = match &gemini {
        Some(g) => format!("Gemini read {g}"),
        None => "Gemini read no GTIN".to_owned(),
    };
    let flag = |message: String| FieldFlag { field: "gtin".into(), kind: FlagKind::Barcode, message };
    match read.as_slice() {
        [] => None,
        [only] => {
            product.uncertain_fields.retain(|f| f != "gtin");
            if gemini.as_deref().is_some_and(|g| gtin_key(g) == gtin_key(only)) {
                return None;
            }
            product.gtin = Some((*only).to_owned());
            Some(flag(format!("The photo's barcode reads {only}; {gemini_text}. The barcode's GTIN is used.")))
        }
        several => Some(flag(format!(
            "{} different barcodes were read ({}); {gemini_text}. Check which one is this product's.",
            several.len(),
            several.join(", ")
        ))),
    }
}

/// Where `gtin` came from, given the proposal it was saved from (`proposed_gtin`, `None` without
/// one) and the barcodes read on the photo: a barcode's GTIN is the photo's; Gemini's proposed
/// GTIN (not a barcode's) the model's; any other a person's. `None` without a GTIN.
pub fn gtin_source(gtin: Option<&str>, proposed_gtin: Option<&str>, barcodes: &[Barcode]) -> Option<GtinSource> {
    let key = gtin_key(gtin?);
    if barcodes.iter().any(|b| gtin_key(&b.gtin) == key) {
        Some(GtinSource::Photo)
    } else if proposed_gtin.is_some_and(|p| gtin_key(p) == key) {
        Some(GtinSource::Model)
    } else {
        Some(GtinSource::Review)
    }
}

/// Below this many pixels a side, no EAN/UPC symbol (95 modules) fits.
const MIN_SIDE: u32 = 32;

/// The GTIN a decoded symbol's text carries, or `None` if it does not check out.
fn gtin_of(format: BarcodeFormat, text: &str) -> Option<String> {
    let gtin = match format {
        BarcodeFormat::Ean13 | BarcodeFormat::UpcA | BarcodeFormat::Ean8 => text.to_owned(),
        BarcodeFormat::UpcE => upce_to_upca(text)?,
    };
    let expected_len = match format {
        BarcodeFormat::Ean13 => 13,
        BarcodeFormat::UpcA | BarcodeFormat::UpcE => 12,
        BarcodeFormat::Ean8 => 8,
    };
    (gtin.len() == expected_len && check_gtin(&gtin).is_ok()).then_some(gtin)
}

/// A UPC-E symbol's 8 digits (number system, 6 digits, check digit) → the UPC-A (GTIN-12) they
/// abbreviate, by GS1's zero-suppression rules. `None` if it is not 8 digits with number
/// system 0 or 1.
pub fn upce_to_upca(upce: &str) -> Option<String> {
    let b = upce.as_bytes();
    if b.len() != 8 || !b.iter().all(u8::is_ascii_digit) || !matches!(b[0], b'0' | b'1') {
        return None;
    }
    let d = |i: usize| char::from(b[i]);
    let (ns, check) = (d(0), d(7));
    let body: String = match b[6] {
        b'0'..=b'2' => [d(1), d(2), d(6), '0', '0', '0', '0', d(3), d(4), d(5)].iter().collect(),
        b'3' => [d(1), d(2), d(3), '0', '0', '0', '0', '0', d(4), d(5)].iter().collect(),
        b'4' => [d(1), d(2), d(3), d(4), '0', '0', '0', '0', '0', d(5)].iter().collect(),
        _ => [d(1), d(2), d(3), d(4), d(5), '0', '0', '0', '0', d(6)].iter().collect(),
    };
    Some(format!("{ns}{body}{check}"))
}

/// A box in pixels → `[y_min, x_min, y_max, x_max]` in thousandths of the image's height and width.
pub fn box_2d(bounds: PixelBox, width: u32, height: u32) -> [u16; 4] {
    let scale = |v: u32, of: u32| -> u16 {
        if of == 0 {
            return 0;
        }
        let t = (u64::from(v.min(of)) * 1000 + u64::from(of) / 2) / u64::from(of);
        u16::try_from(t.min(1000)).unwrap_or(1000)
    };
    [scale(bounds.y_min, height), scale(bounds.x_min, width), scale(bounds.y_max, height), scale(bounds.x_max, width)]
}

/// The symbol's box, from the scan line the decoder read it on (`start` and `end` are the middles
/// of its outer guard patterns): the line is widened by the guards and quiet part it leaves out,
/// then followed across the bars in both directions while the luma profile along it stays the
/// same (tolerating a small sideways drift, for a tilted symbol), which is where the bars end.
fn symbol_bounds(luma: &GrayImage, start: (f32, f32), end: (f32, f32)) -> PixelBox {
    let (w, h) = luma.dimensions();
    let (dx, dy) = (end.0 - start.0, end.1 - start.1);
    let len = (dx * dx + dy * dy).sqrt();
    if !len.is_finite() || len < 2.0 {
        let (x, y) = (clamp_px(start.0, w), clamp_px(start.1, h));
        return PixelBox { x_min: x, y_min: y, x_max: (x + 1).min(w), y_max: (y + 1).min(h) };
    }
    let u = (dx / len, dy / len);
    let n = (-u.1, u.0);
    // Guard middles to the symbol's edges: 1.5 of EAN-13's ~92 modules in between, each side.
    let pad = len * 0.02;
    let a = (start.0 - u.0 * pad, start.1 - u.1 * pad);
    let b = (end.0 + u.0 * pad, end.1 + u.1 * pad);

    let samples = (len.ceil() as usize).clamp(8, 4096);
    let profile = |offset: f32, shift: f32| -> Vec<f32> {
        (0..samples)
            .map(|i| {
                let t = len * i as f32 / samples as f32 + shift;
                let x = start.0 + u.0 * t + n.0 * offset;
                let y = start.1 + u.1 * t + n.1 * offset;
                if x < 0.0 || y < 0.0 || x >= w as f32 || y >= h as f32 {
                    f32::NAN
                } else {
                    f32::from(luma.get_pixel(x as u32, y as u32).0[0])
                }
            })
            .collect()
    };
    let base = profile(0.0, 0.0);
    let step = 2.0_f32;
    let max_reach = len * 1.5;
    let mut corners = vec![a, b];
    for side in [-1.0_f32, 1.0] {
        let (mut prev, mut shift, mut reach) = (base.clone(), 0.0_f32, 0.0_f32);
        while reach + step <= max_reach {
            let offset = side * (reach + step);
            let best = [-1.0_f32, 0.0, 1.0]
                .into_iter()
                .map(|ds| {
                    let p = profile(offset, shift + ds);
                    (correlation(&prev, &p), shift + ds, p)
                })
                .max_by(|x, y| x.0.total_cmp(&y.0));
            match best {
                Some((c, s, p)) if c >= 0.6 => {
                    reach += step;
                    shift = s;
                    prev = p;
                }
                _ => break,
            }
        }
        let off = (n.0 * side * reach + u.0 * shift, n.1 * side * reach + u.1 * shift);
        corners.push((a.0 + off.0, a.1 + off.1));
        corners.push((b.0 + off.0, b.1 + off.1));
    }
    let (mut x0, mut y0, mut x1, mut y1) = (f32::MAX, f32::MAX, f32::MIN, f32::MIN);
    for (x, y) in corners {
        x0 = x0.min(x);
        y0 = y0.min(y);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    PixelBox {
        x_min: clamp_px(x0.floor(), w),
        y_min: clamp_px(y0.floor(), h),
        x_max: clamp_px(x1.ceil() + 1.0, w.saturating_add(1)).min(w),
        y_max: clamp_px(y1.ceil() + 1.0, h.saturating_add(1)).min(h),
    }
}

fn clamp_px(v: f32, limit: u32) -> u32 {
    if v.is_nan() || v <= 0.0 {
        0
    } else {
        (v as u32).min(limit.saturating_sub(1))
    }
}

/// Pearson correlation of two profiles, over the samples both have (inside the image); 0 when
/// either is flat or too few samples overlap.
fn correlation(a: &[f32], b: &[f32]) -> f32 {
    let pairs = || a.iter().zip(b).filter(|(x, y)| !x.is_nan() && !y.is_nan());
    let count = pairs().count();
    if count < 8 || count * 2 < a.len() {
        return 0.0;
    }
    let n = count as f32;
    let (ma, mb) = pairs().fold((0.0, 0.0), |(sa, sb), (x, y)| (sa + x, sb + y));
    let (ma, mb) = (ma / n, mb / n);
    let (mut cov, mut va, mut vb) = (0.0_f32, 0.0_f32, 0.0_f32);
    for (x, y) in pairs() {
        cov += (x - ma) * (y - mb);
        va += (x - ma) * (x - ma);
        vb += (y - mb) * (y - mb);
    }
    if va <= f32::EPSILON || vb <= f32::EPSILON {
        0.0
    } else {
        cov / (va.sqrt() * vb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(gtin: &str) -> Barcode {
        let bounds = PixelBox { x_min: 0, y_min: 0, x_max: 10, y_max: 10 };
        Barcode { gtin: gtin.into(), format: BarcodeFormat::Ean13, bounds, box_2d: [0, 0, 10, 10], photo: 0 }
    }

    fn gemini(gtin: Option<&str>) -> Product {
        Product {
            name: "Soup".into(),
            gtin: gtin.map(str::to_owned),
            uncertain_fields: vec!["gtin".into(), "brand".into()],
            ..Product::default()
        }
    }

    #[test]
    fn the_tiled_quarter_turn_is_rxings_own() {
        use rxing::LuminanceSource;
        let (w, h) = (130usize, 70usize);
        let pixels: Vec<u8> = (0..w * h).map(|i| (i * 7 % 251) as u8).collect();
        let theirs = Luma8Source::new(pixels.clone(), w as u32, h as u32).unwrap().rotate_counter_clockwise().unwrap();
        let ours = Luma(Luma8Source::new(pixels, w as u32, h as u32).unwrap()).rotate_counter_clockwise().unwrap();
        assert_eq!((ours.get_width(), ours.get_height()), (theirs.get_width(), theirs.get_height()));
        assert_eq!(ours.get_matrix(), theirs.get_matrix());
        // Twice more round the other way: a cropped view turns too.
        let cropped = ours.crop(3, 5, 40, 90).unwrap().rotate_counter_clockwise().unwrap();
        let reference = theirs.crop(3, 5, 40, 90).unwrap().rotate_counter_clockwise().unwrap();
        assert_eq!(cropped.get_matrix(), reference.get_matrix());
    }

    #[test]
    fn the_barcode_overrides_a_wrong_or_missing_gtin_with_a_flag() {
        for (said, read_as) in [(Some("4006381333932"), "Gemini read 4006381333932"), (None, "Gemini read no GTIN")] {
            let mut product = gemini(said);
            let flag = apply_barcodes(&mut product, &[read("4006381333931")]).expect("a flag");
            assert_eq!(product.gtin.as_deref(), Some("4006381333931"));
            assert_eq!((flag.field.as_str(), flag.kind), ("gtin", FlagKind::Barcode));
            assert!(flag.message.contains("barcode reads 4006381333931") && flag.message.contains(read_as), "{flag:?}");
            assert_eq!(product.uncertain_fields, ["brand"], "the barcode settled the GTIN");
        }
    }

    #[test]
    fn a_matching_gtin_stands_without_a_flag_in_either_length() {
        for said in ["0036000291452", "036000291452"] {
            let mut product = gemini(Some(said));
            assert_eq!(apply_barcodes(&mut product, &[read("036000291452")]), None);
            assert_eq!(product.gtin.as_deref(), Some(said), "Gemini's form of the same code is kept");
            assert_eq!(product.uncertain_fields, ["brand"]);
        }
    }

    #[test]
    fn no_barcode_leaves_the_proposal_alone() {
        let mut product = gemini(Some("4006381333932"));
        assert_eq!(apply_barcodes(&mut product, &[]), None);
        assert_eq!(product, gemini(Some("4006381333932")));
    }

    #[test]
    fn two_different_barcodes_override_nothing_and_say_so() {
        let mut product = gemini(Some("4006381333932"));
        // The same code twice (12 and 13 digits) is one barcode.
        let reads = [read("4006381333931"), read("036000291452"), read("0036000291452")];
        let flag = apply_barcodes(&mut product, &reads).expect("a flag");
        assert_eq!(product, gemini(Some("4006381333932")));
        assert_eq!(flag.kind, FlagKind::Barcode);
        assert!(flag.message.starts_with("2 different barcodes were read (4006381333931, 036000291452)"));
    }

    #[test]
    fn the_gtin_source_is_the_photo_the_model_or_a_person() {
        let reads = [read("036000291452")];
        assert_eq!(gtin_source(Some("0036000291452"), Some("1"), &reads), Some(GtinSource::Photo));
        assert_eq!(gtin_source(Some("4006381333931"), Some("4006381333931"), &reads), Some(GtinSource::Model));
        assert_eq!(gtin_source(Some("4006381333931"), Some("4006381333931"), &[]), Some(GtinSource::Model));
        assert_eq!(gtin_source(Some("4006381333931"), None, &[]), Some(GtinSource::Review));
        assert_eq!(gtin_source(None, Some("4006381333931"), &reads), None);
    }

    #[test]
    fn upc_e_expands_by_gs1_zero_suppression() {
        // The GS1 examples, one per last-digit rule.
        assert_eq!(upce_to_upca("01234505").as_deref(), Some("012000003455"));
        assert_eq!(upce_to_upca("04252614").as_deref(), Some("042100005264"));
        assert_eq!(upce_to_upca("01234531").as_deref(), Some("012300000451"));
        assert_eq!(upce_to_upca("01234543").as_deref(), Some("012340000053"));
        assert_eq!(upce_to_upca("01234565").as_deref(), Some("012345000065"));
        assert_eq!(upce_to_upca("21234565"), None, "number system 0 or 1 only");
        assert_eq!(upce_to_upca("0123456"), None);
        assert_eq!(upce_to_upca("0123456x"), None);
        assert_eq!(upce_to_upca("é123456"), None);
    }

    #[test]
    fn only_valid_gtins_of_the_symbols_length_are_reported() {
        assert_eq!(gtin_of(BarcodeFormat::Ean13, "4006381333931").as_deref(), Some("4006381333931"));
        assert_eq!(gtin_of(BarcodeFormat::Ean13, "4006381333932"), None, "check digit");
        assert_eq!(gtin_of(BarcodeFormat::UpcA, "036000291452").as_deref(), Some("036000291452"));
        assert_eq!(gtin_of(BarcodeFormat::UpcA, "4006381333931"), None, "length");
        assert_eq!(gtin_of(BarcodeFormat::Ean8, "96385074").as_deref(), Some("96385074"));
        assert_eq!(gtin_of(BarcodeFormat::Ean8, "96385075"), None);
        assert_eq!(gtin_of(BarcodeFormat::UpcE, "01234565").as_deref(), Some("012345000065"));
        assert_eq!(gtin_of(BarcodeFormat::UpcE, "01234568"), None);
    }

    #[test]
    fn boxes_are_thousandths_in_gemini_order() {
        let b = PixelBox { x_min: 100, y_min: 50, x_max: 300, y_max: 150 };
        assert_eq!(box_2d(b, 1000, 500), [100, 100, 300, 300]);
        assert_eq!(box_2d(b, 0, 0), [0, 0, 0, 0]);
        let whole = PixelBox { x_min: 0, y_min: 0, x_max: 7, y_max: 3 };
        assert_eq!(box_2d(whole, 7, 3), [0, 0, 1000, 1000]);
    }

    #[test]
    fn tiny_flat_and_noisy_images_read_nothing() {
        for (w, h) in [(0, 0), (1, 1), (31, 500), (500, 31), (64, 64)] {
            assert!(read_barcodes_luma(&GrayImage::new(w, h)).is_empty(), "{w}×{h}");
        }
        let mut state = 0x2545_f491_u32;
        let noise = GrayImage::from_fn(400, 300, |_, _| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            image::Luma([state as u8])
        });
        assert!(read_barcodes_luma(&noise).is_empty());
        assert!(read_barcodes(&DynamicImage::ImageLuma8(noise)).is_empty());
    }
}
