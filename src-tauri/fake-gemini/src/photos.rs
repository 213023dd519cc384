//! Stand-ins for product photos, for tests and benchmarks that need many distinct ones: a
//! colored background with a few shapes, all drawn from the seed, so every seed gives different
//! bytes and a different perceptual hash (near-duplicate hints stay quiet), and the same seed the
//! same bytes.

/// A `width`×`height` baseline JPEG at `quality`, distinct for every `seed`.
pub fn sample_jpeg(seed: u64, width: u32, height: u32, quality: u8) -> Vec<u8> {
    let pixels = sample_rgb(seed, width, height);
    let mut compressor = turbojpeg::Compressor::new().expect("a JPEG compressor");
    compressor.set_quality(i32::from(quality)).expect("a JPEG quality of 1-100");
    compressor.set_subsamp(turbojpeg::Subsamp::Sub2x2).expect("4:2:0 subsampling");
    let image = turbojpeg::Image {
        pixels: pixels.as_slice(),
        width: width as usize,
        pitch: width as usize * 3,
        height: height as usize,
        format: turbojpeg::PixelFormat::RGB,
    };
    compressor.compress_to_vec(image).expect("JPEG encoding of an in-memory image")
}

/// The RGB pixels of [`sample_jpeg`]: a two-color gradient and a 4×4 grid of cells, each cell
/// lighter or darker by the seed's bits, so the coarse structure a difference hash sees changes
/// with the seed; plus a few rectangles and fine stripes.
pub fn sample_rgb(seed: u64, width: u32, height: u32) -> Vec<u8> {
    let mut rng = SplitMix(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03);
    let base = [rng.byte(), rng.byte(), rng.byte()];
    let tint = [rng.byte(), rng.byte(), rng.byte()];
    let cells = rng.next();
    let rects: Vec<(u32, u32, u32, u32, [u8; 3])> = (0..4)
        .map(|_| {
            let x = rng.next() as u32 % width.max(1);
            let y = rng.next() as u32 % height.max(1);
            let w = 1 + rng.next() as u32 % (width / 3).max(1);
            let h = 1 + rng.next() as u32 % (height / 3).max(1);
            (x, y, w, h, [rng.byte(), rng.byte(), rng.byte()])
        })
        .collect();
    let stripe = 2 + (rng.next() % 6) as u32;
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        for x in 0..width {
            let cell = (y * 4 / height.max(1)) * 4 + x * 4 / width.max(1);
            let lift: i32 = if cells >> cell & 1 == 1 { 70 } else { -70 };
            let t = (x + y) as f32 / (width + height).max(1) as f32;
            let mut px = [0u8; 3];
            for c in 0..3 {
                let v = f32::from(base[c]) * (1.0 - t) + f32::from(tint[c]) * t;
                px[c] = (v as i32 + lift).clamp(0, 255) as u8;
            }
            for &(rx, ry, rw, rh, color) in &rects {
                if x >= rx && x < rx + rw && y >= ry && y < ry + rh {
                    px = color;
                }
            }
            if (x / stripe + y / stripe) & 1 == 0 {
                px = px.map(|v| v.saturating_add(12));
            }
            pixels.extend_from_slice(&px);
        }
    }
    pixels
}

/// A small, fast, good-enough generator (SplitMix64).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn byte(&mut self) -> u8 {
        (self.next() >> 56) as u8
    }
}
