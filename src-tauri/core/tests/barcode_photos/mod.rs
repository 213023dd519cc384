//! The barcode test set, generated (no binary fixtures): real EAN-13, UPC-A, EAN-8 and UPC-E
//! symbols, encoded here from GS1's tables (independently of the decoder under test), drawn onto
//! product-photo-like 1536×1152 canvases — plain, rotated, small, blurred, on a curved label, low
//! contrast, noisy — then through a JPEG round trip like a prepared photo; photos without a
//! barcode, and photos with two.
//!
//! Shared by tests/barcode.rs (what must hold, and the read-rate table) and benches/barcode.rs
//! (CPU time, and the rxing / zxing-cpp comparison).

#![allow(dead_code)]

use image::{DynamicImage, GrayImage, Luma};
use pe_core::barcode::upce_to_upca;
use pe_core::product::check_gtin;

/// The prepared photo's size (intake's default long edge, 4:3).
pub const WIDTH: u32 = 1536;
pub const HEIGHT: u32 = 1152;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symbology {
    Ean13,
    UpcA,
    Ean8,
    UpcE,
}

/// A symbol to draw: its symbology and every digit it encodes (check digit included, right or
/// wrong), and the GTIN a reader should report for it (`None` when it must not be reported).
#[derive(Debug, Clone)]
pub struct Symbol {
    pub symbology: Symbology,
    pub digits: String,
    pub gtin: Option<String>,
}

/// The digit that makes `body` + it a valid GTIN, by the product's own rule (`check_gtin`).
pub fn check_digit(body: &str) -> char {
    (b'0'..=b'9').map(char::from).find(|d| check_gtin(&format!("{body}{d}")).is_ok()).expect("some digit checks out")
}

impl Symbol {
    /// A valid symbol from its digits without the check digit (UPC-E: number system + 6 digits).
    pub fn new(symbology: Symbology, body: &str) -> Self {
        match symbology {
            Symbology::UpcE => {
                let expanded = upce_to_upca(&format!("{body}0")).expect("a UPC-E body");
                let check = check_digit(&expanded[..11]);
                let gtin = format!("{}{check}", &expanded[..11]);
                Self { symbology, digits: format!("{body}{check}"), gtin: Some(gtin) }
            }
            _ => {
                let gtin = format!("{body}{}", check_digit(body));
                Self { symbology, digits: gtin.clone(), gtin: Some(gtin) }
            }
        }
    }

    /// The same symbol with its check digit off by one: decodable bars, an invalid GTIN.
    pub fn with_wrong_check_digit(mut self) -> Self {
        let last = self.digits.pop().expect("digits");
        let wrong = char::from(b'0' + (last as u8 - b'0' + 1) % 10);
        self.digits.push(wrong);
        self.gtin = None;
        self
    }

    /// The bars and spaces, one `true` per dark module, guards included, quiet zones excluded.
    pub fn modules(&self) -> Vec<bool> {
        let d: Vec<usize> = self.digits.bytes().map(|b| usize::from(b - b'0')).collect();
        let mut m = Vec::new();
        let mut put = |pattern: &str| m.extend(pattern.bytes().map(|b| b == b'1'));
        match self.symbology {
            Symbology::Ean13 | Symbology::UpcA => {
                let d: Vec<usize> =
                    if self.symbology == Symbology::UpcA { [0].into_iter().chain(d).collect() } else { d };
                put("101");
                for (i, &digit) in d[1..7].iter().enumerate() {
                    let even = EAN13_PARITY[d[0]].as_bytes()[i] == b'G';
                    put(&code(digit, if even { Set::G } else { Set::L }));
                }
                put("01010");
                for &digit in &d[7..13] {
                    put(&code(digit, Set::R));
                }
                put("101");
            }
            Symbology::Ean8 => {
                put("101");
                for &digit in &d[0..4] {
                    put(&code(digit, Set::L));
                }
                put("01010");
                for &digit in &d[4..8] {
                    put(&code(digit, Set::R));
                }
                put("101");
            }
            Symbology::UpcE => {
                let parity = UPCE_PARITY_NS0[d[7]].as_bytes();
                put("101");
                for (i, &digit) in d[1..7].iter().enumerate() {
                    // Number system 0 as in the table; number system 1 the other way round.
                    let even = (parity[i] == b'E') == (d[0] == 0);
                    put(&code(digit, if even { Set::G } else { Set::L }));
                }
                put("010101");
            }
        }
        m
    }
}

#[derive(Clone, Copy)]
enum Set {
    L,
    G,
    R,
}

const L_CODES: [&str; 10] =
    ["0001101", "0011001", "0010011", "0111101", "0100011", "0110001", "0101111", "0111011", "0110111", "0001011"];
const EAN13_PARITY: [&str; 10] =
    ["LLLLLL", "LLGLGG", "LLGGLG", "LLGGGL", "LGLLGG", "LGGLLG", "LGGGLL", "LGLGLG", "LGLGGL", "LGGLGL"];
const UPCE_PARITY_NS0: [&str; 10] =
    ["EEEOOO", "EEOEOO", "EEOOEO", "EEOOOE", "EOEEOO", "EOOEEO", "EOOOEE", "EOEOEO", "EOEOOE", "EOOEOE"];

fn code(digit: usize, set: Set) -> String {
    let l = L_CODES[digit];
    let r: String = l.chars().map(|c| if c == '1' { '0' } else { '1' }).collect();
    match set {
        Set::L => l.to_owned(),
        Set::R => r,
        Set::G => r.chars().rev().collect(),
    }
}

/// Where and how a symbol is drawn.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// Centre of the symbol, in canvas pixels.
    pub center: (f32, f32),
    /// Width of one module, in pixels.
    pub module_px: f32,
    /// Counter-clockwise, degrees.
    pub angle_deg: f32,
    /// 0: a flat label. Otherwise the label is wrapped round a can: half the symbol's width spans
    /// this many degrees of the cylinder (the bars crowd towards its edges).
    pub curve_deg: f32,
    /// Bar and space luma.
    pub dark: u8,
    pub light: u8,
}

impl Placement {
    pub fn plain(center: (f32, f32)) -> Self {
        Self { center, module_px: 3.0, angle_deg: 0.0, curve_deg: 0.0, dark: 25, light: 235 }
    }
}

/// After drawing: blur, noise.
#[derive(Debug, Clone, Copy, Default)]
pub struct Effects {
    /// Gaussian sigma in pixels, 0 for none.
    pub blur_sigma: f32,
    /// Noise amplitude (≈ standard deviation) in luma levels, 0 for none.
    pub noise: f32,
}

/// A deterministic xorshift generator: the same photos on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A product-photo-like scene: a lit backdrop, a box with a coloured face, lines of "text" and a
/// logo block, all in luma; no barcode.
pub fn scene(seed: u64) -> GrayImage {
    let mut rng = Rng::new(seed);
    let (w, h) = (WIDTH as f32, HEIGHT as f32);
    let base = 150.0 + rng.unit() * 60.0;
    let mut img = GrayImage::from_fn(WIDTH, HEIGHT, |x, y| {
        let (fx, fy) = (x as f32 / w, y as f32 / h);
        Luma([(base - 50.0 * fy + 20.0 * (fx * 3.1).sin()) as u8])
    });
    // The box face.
    let (bx0, by0) = (w * (0.12 + rng.unit() * 0.08), h * (0.08 + rng.unit() * 0.08));
    let (bx1, by1) = (w * (0.82 + rng.unit() * 0.08), h * (0.86 + rng.unit() * 0.06));
    let face = 60.0 + rng.unit() * 120.0;
    fill(&mut img, (bx0, by0, bx1, by1), |fx, _| face + 25.0 * fx);
    // Lines of text: runs of small dark glyph blocks.
    for _ in 0..14 {
        let y = by0 + rng.unit() * (by1 - by0 - 40.0);
        let mut x = bx0 + 20.0 + rng.unit() * 100.0;
        let size = 10.0 + rng.unit() * 26.0;
        let ink = if face > 120.0 { 20.0 } else { 240.0 };
        let end = x + rng.unit() * (bx1 - x) * 0.8;
        while x < end {
            let glyph = size * (0.4 + rng.unit() * 0.5);
            fill(&mut img, (x, y, x + glyph, y + size), |_, _| ink);
            x += glyph + size * 0.25 + if rng.unit() < 0.15 { size } else { 0.0 };
        }
    }
    // A logo block with stripes (bar-like, but no symbol).
    let (lx, ly) = (bx0 + (bx1 - bx0) * rng.unit() * 0.5, by0 + (by1 - by0) * rng.unit() * 0.5);
    let stripes = 4.0 + rng.unit() * 8.0;
    fill(&mut img, (lx, ly, lx + 260.0, ly + 140.0), |fx, _| if (fx * stripes).fract() < 0.5 { 30.0 } else { 200.0 });
    img
}

fn fill(img: &mut GrayImage, (x0, y0, x1, y1): (f32, f32, f32, f32), luma: impl Fn(f32, f32) -> f32) {
    let (w, h) = img.dimensions();
    let (xa, ya) = (x0.max(0.0) as u32, y0.max(0.0) as u32);
    let (xb, yb) = ((x1.max(0.0) as u32).min(w), (y1.max(0.0) as u32).min(h));
    for y in ya..yb {
        for x in xa..xb {
            let fx = (x as f32 - x0) / (x1 - x0).max(1.0);
            let fy = (y as f32 - y0) / (y1 - y0).max(1.0);
            img.put_pixel(x, y, Luma([luma(fx, fy).clamp(0.0, 255.0) as u8]));
        }
    }
}

/// Draws `symbol` on a white label (quiet zones of 11 modules, bars 60 modules tall) at
/// `placement`, supersampled 3×3.
pub fn draw(img: &mut GrayImage, symbol: &Symbol, p: Placement) {
    let modules = symbol.modules();
    let quiet = 11.0_f32;
    let span = modules.len() as f32 + 2.0 * quiet; // label width, modules
    let half_w = span * p.module_px / 2.0; // flat half-width, pixels
    let half_h = 36.0 * p.module_px; // label half-height (bars 60 modules + margins)
    let bar_half = 30.0 * p.module_px;
    let (sin, cos) = p.angle_deg.to_radians().sin_cos();
    // The cylinder: arc half-width half_w over curve_deg degrees.
    let curve = p.curve_deg.to_radians();
    let radius = if curve > 0.0 { half_w / curve } else { f32::INFINITY };
    let screen_half_w = if curve > 0.0 { radius * curve.sin() } else { half_w };
    let reach = (screen_half_w.powi(2) + half_h.powi(2)).sqrt() + 2.0;
    let (w, h) = img.dimensions();
    let x0 = (p.center.0 - reach).max(0.0) as u32;
    let x1 = ((p.center.0 + reach).max(0.0) as u32).min(w);
    let y0 = (p.center.1 - reach).max(0.0) as u32;
    let y1 = ((p.center.1 + reach).max(0.0) as u32).min(h);
    const SS: u32 = 3;
    for y in y0..y1 {
        for x in x0..x1 {
            let (mut sum, mut inside) = (0.0_f32, 0u32);
            for sy in 0..SS {
                for sx in 0..SS {
                    let dx = x as f32 + (sx as f32 + 0.5) / SS as f32 - p.center.0;
                    let dy = y as f32 + (sy as f32 + 0.5) / SS as f32 - p.center.1;
                    // Screen → label: undo the rotation (y grows downwards).
                    let lx = dx * cos - dy * sin;
                    let ly = dx * sin + dy * cos;
                    if lx.abs() > screen_half_w || ly.abs() > half_h {
                        continue;
                    }
                    // Undo the cylinder: screen x → arc length along the label.
                    let s = if curve > 0.0 { radius * (lx / radius).clamp(-1.0, 1.0).asin() } else { lx };
                    inside += 1;
                    let module = ((s + half_w) / p.module_px - quiet).floor();
                    let dark = ly.abs() <= bar_half
                        && module >= 0.0
                        && (module as usize) < modules.len()
                        && modules[module as usize];
                    // A curved label is shaded towards its edges.
                    let shade = if curve > 0.0 { 0.75 + 0.25 * (s / radius).cos() } else { 1.0 };
                    sum += f32::from(if dark { p.dark } else { p.light }) * shade;
                }
            }
            if inside > 0 {
                let under = f32::from(img.get_pixel(x, y).0[0]);
                let n = (SS * SS) as f32;
                let v = (sum + under * (n - inside as f32)) / n;
                img.put_pixel(x, y, Luma([v.clamp(0.0, 255.0) as u8]));
            }
        }
    }
}

/// Blur, noise, then a JPEG round trip at the prepared photo's quality.
pub fn finish(img: GrayImage, effects: Effects, seed: u64) -> DynamicImage {
    let mut img = if effects.blur_sigma > 0.0 { image::imageops::blur(&img, effects.blur_sigma) } else { img };
    if effects.noise > 0.0 {
        let mut rng = Rng::new(seed ^ 0xA5A5);
        for px in img.pixels_mut() {
            // Sum of three uniforms: roughly normal, σ ≈ amplitude.
            let n = (rng.unit() + rng.unit() + rng.unit() - 1.5) * 2.0 * effects.noise;
            px.0[0] = (f32::from(px.0[0]) + n).clamp(0.0, 255.0) as u8;
        }
    }
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 85)
        .encode_image(&DynamicImage::ImageLuma8(img))
        .expect("encode");
    image::load_from_memory(&jpeg).expect("decode")
}

/// One photo of the test set and the GTINs it must read as.
pub struct Photo {
    pub image: DynamicImage,
    pub expected: Vec<String>,
}

/// A case of the test set: several photos drawn the same way.
pub struct Case {
    pub name: &'static str,
    /// Every photo here must read fully (the assertions); otherwise the rate is only recorded.
    pub must_read: bool,
    pub photos: Vec<Photo>,
}

/// Two symbols of each symbology.
pub fn symbols() -> Vec<Symbol> {
    vec![
        Symbol::new(Symbology::Ean13, "400638133393"),
        Symbol::new(Symbology::Ean13, "871234567890"),
        Symbol::new(Symbology::UpcA, "03600029145"),
        Symbol::new(Symbology::UpcA, "88530901234"),
        Symbol::new(Symbology::Ean8, "9638507"),
        Symbol::new(Symbology::Ean8, "5012345"),
        Symbol::new(Symbology::UpcE, "0123456"),
        Symbol::new(Symbology::UpcE, "1654321"),
    ]
}

fn one_symbol_case(
    name: &'static str,
    must_read: bool,
    placement: impl Fn(usize) -> Placement,
    effects: Effects,
) -> Case {
    let photos = symbols()
        .into_iter()
        .enumerate()
        .map(|(i, symbol)| {
            let seed = (i as u64 + 1) * 7919 + name.len() as u64;
            let mut img = scene(seed);
            draw(&mut img, &symbol, placement(i));
            Photo { image: finish(img, effects, seed), expected: symbol.gtin.into_iter().collect() }
        })
        .collect();
    Case { name, must_read, photos }
}

/// The test set, in the order of the table: the cases that must read fully, and with `recorded`
/// also those whose rate is only recorded (harder: steeper angles, small, blur, curve, noise).
pub fn test_set(recorded: bool) -> Vec<Case> {
    let at = |i: usize| -> (f32, f32) {
        // Spread the symbols over the photo.
        let spots =
            [(0.5, 0.55), (0.35, 0.4), (0.65, 0.7), (0.4, 0.65), (0.6, 0.35), (0.5, 0.45), (0.3, 0.55), (0.7, 0.5)];
        let (fx, fy) = spots[i % spots.len()];
        (fx * WIDTH as f32, fy * HEIGHT as f32)
    };
    let rotated = |deg: f32| move |i: usize| Placement { angle_deg: deg, ..Placement::plain(at(i)) };
    let none = Effects::default();
    let mut cases = vec![
        one_symbol_case("plain", true, |i| Placement::plain(at(i)), none),
        one_symbol_case("rotated 7°", true, rotated(7.0), none),
        one_symbol_case("rotated 90°", true, rotated(90.0), none),
        one_symbol_case("rotated 180°", true, rotated(180.0), none),
    ];
    let recorded_cases = || {
        vec![
            one_symbol_case("rotated 20°", false, rotated(20.0), none),
            one_symbol_case("rotated 45°", false, rotated(45.0), none),
            // ~8% of the width: EAN-13's 95 + 22 quiet modules in ~123 px.
            one_symbol_case(
                "small (8% of width)",
                false,
                |i| Placement { module_px: 0.08 * WIDTH as f32 / 117.0, ..Placement::plain(at(i)) },
                none,
            ),
            one_symbol_case(
                "blurred σ=1.5",
                false,
                |i| Placement::plain(at(i)),
                Effects { blur_sigma: 1.5, noise: 0.0 },
            ),
            one_symbol_case("blurred σ=3", false, |i| Placement::plain(at(i)), Effects { blur_sigma: 3.0, noise: 0.0 }),
            one_symbol_case(
                "curved label (±45°)",
                false,
                |i| Placement { curve_deg: 45.0, ..Placement::plain(at(i)) },
                none,
            ),
            one_symbol_case(
                "curved label (±65°)",
                false,
                |i| Placement { curve_deg: 65.0, ..Placement::plain(at(i)) },
                none,
            ),
            one_symbol_case(
                "low contrast (95 vs 150)",
                false,
                |i| Placement { dark: 95, light: 150, ..Placement::plain(at(i)) },
                none,
            ),
            one_symbol_case("noise σ≈20", false, |i| Placement::plain(at(i)), Effects { blur_sigma: 0.0, noise: 20.0 }),
            one_symbol_case(
                "small + blurred + noise",
                false,
                |i| Placement { module_px: 1.6, angle_deg: 4.0, ..Placement::plain(at(i)) },
                Effects { blur_sigma: 1.0, noise: 10.0 },
            ),
        ]
    };
    if recorded {
        cases.extend(recorded_cases());
    }
    // Two different symbols on one photo (a box's side and its multipack label).
    let all = symbols();
    let two = (0..4)
        .map(|i| {
            let (a, b) = (&all[i], &all[(i + 3) % all.len()]);
            let seed = 31 + i as u64;
            let mut img = scene(seed);
            draw(
                &mut img,
                a,
                Placement { module_px: 2.5, ..Placement::plain((0.3 * WIDTH as f32, 0.35 * HEIGHT as f32)) },
            );
            draw(
                &mut img,
                b,
                Placement { module_px: 2.5, ..Placement::plain((0.7 * WIDTH as f32, 0.72 * HEIGHT as f32)) },
            );
            let expected = [a, b].iter().filter_map(|s| s.gtin.clone()).collect();
            Photo { image: finish(img, Effects::default(), seed), expected }
        })
        .collect();
    cases.push(Case { name: "two barcodes", must_read: true, photos: two });
    cases.push(Case {
        name: "no barcode",
        must_read: true,
        photos: (0..8)
            .map(|i| Photo { image: finish(scene(1000 + i), Effects::default(), i), expected: vec![] })
            .collect(),
    });
    // Bars whose check digit is wrong: drawn like plain ones, never reported.
    let wrong = symbols()
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let mut img = scene(2000 + i as u64);
            draw(&mut img, &s.with_wrong_check_digit(), Placement::plain(at(i)));
            Photo { image: finish(img, Effects::default(), i as u64), expected: vec![] }
        })
        .collect();
    cases.push(Case { name: "wrong check digit", must_read: true, photos: wrong });
    cases
}

/// How a reader did on a case.
#[derive(Debug, Clone, Default)]
pub struct Score {
    pub photos: usize,
    pub expected: usize,
    pub read: usize,
    /// GTINs reported that the photo does not carry.
    pub false_positives: usize,
    /// Per photo, CPU milliseconds (filled by the caller that times).
    pub cpu_ms: Vec<f64>,
}

impl Score {
    pub fn add(&mut self, expected: &[String], got: &[String]) {
        self.photos += 1;
        self.expected += expected.len();
        self.read += expected.iter().filter(|e| got.contains(e)).count();
        self.false_positives += got.iter().filter(|g| !expected.contains(g)).count();
    }

    pub fn rate(&self) -> String {
        if self.expected == 0 {
            "—".into()
        } else {
            format!("{}/{} ({:.0}%)", self.read, self.expected, 100.0 * self.read as f64 / self.expected as f64)
        }
    }
}

/// A Markdown table row per case.
pub fn table(rows: &[(&str, Score)]) -> String {
    let mut out =
        String::from("| case | photos | read | false positives | CPU ms/photo mean (max) |\n|---|---|---|---|---|\n");
    for (name, s) in rows {
        let cpu = if s.cpu_ms.is_empty() {
            "—".into()
        } else {
            let mean = s.cpu_ms.iter().sum::<f64>() / s.cpu_ms.len() as f64;
            let max = s.cpu_ms.iter().cloned().fold(0.0, f64::max);
            format!("{mean:.1} ({max:.1})")
        };
        out += &format!("| {name} | {} | {} | {} | {cpu} |\n", s.photos, s.rate(), s.false_positives);
    }
    out
}
