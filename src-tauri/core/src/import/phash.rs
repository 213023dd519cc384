//! Near-duplicate hints: a 64-bit difference hash (dHash) of each prepared photo, and an in-memory
//! index to find the nearest known photo by Hamming distance.
//!
//! Why our own: `image_hasher` (the maintained `img_hash` fork) supports our `image` 0.25 but
//! needs Rust 1.87 (we promise 1.85) and brings a DCT stack; a dHash is a few lines. It is computed
//! from the prepared photo's thumbnail (already oriented and downscaled, so decoding it costs
//! about a millisecond): grayscale, resized to 9×8, one bit per horizontal neighbour pair
//! ("is the left pixel darker?"). Re-encoding, resizing and small exposure changes move few bits;
//! different photos differ in about half of them.
//!
//! The index holds 16 bytes per photo (hash and id) for the photos of saved products and of
//! queued items, so a lookup is a linear scan in memory instead of a query per item.

use image::imageops::FilterType;

use crate::catalog::PhotoId;

/// Two photos whose hashes differ in at most this many of 64 bits are flagged as looking alike.
/// Re-encoded, rescaled or slightly brightened copies of a photo stay within 3 bits in our tests;
/// unrelated product photos are typically 20–40 bits apart.
pub const NEAR_DUPLICATE_MAX_DISTANCE: u32 = 6;

/// The dHash of a JPEG (the photo's thumbnail); `None` when it cannot be decoded.
pub fn dhash_jpeg(jpeg: &[u8]) -> Option<u64> {
    let image = image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg).ok()?;
    let small = image::imageops::resize(&image.to_luma8(), 9, 8, FilterType::Triangle);
    let mut hash = 0u64;
    for y in 0..8 {
        for x in 0..8 {
            let left = small.get_pixel(x, y)[0];
            let right = small.get_pixel(x + 1, y)[0];
            hash = (hash << 1) | u64::from(left < right);
        }
    }
    Some(hash)
}

/// How the hash is stored in `photos.phash`: 16 lower-case hex digits.
pub fn to_hex(hash: u64) -> String {
    format!("{hash:016x}")
}

pub fn from_hex(text: &str) -> Option<u64> {
    (text.len() == 16).then(|| u64::from_str_radix(text, 16).ok()).flatten()
}

/// Known photos by hash: one hash per photo, the first one inserted (inserting is O(1): the
/// queue seeds the index with every hashed photo of the catalog when it opens, 100,000 at once in
/// a large catalog).
#[derive(Debug, Default)]
pub(crate) struct NearIndex {
    hashes: std::collections::HashMap<PhotoId, u64>,
}

impl NearIndex {
    pub(crate) fn insert(&mut self, photo: PhotoId, hash: u64) {
        self.hashes.entry(photo).or_insert(hash);
    }

    /// The nearest other photo within [`NEAR_DUPLICATE_MAX_DISTANCE`] (the same photo — the same
    /// bytes — is an exact duplicate, not a near one), and its distance.
    pub(crate) fn nearest(&self, photo: PhotoId, hash: u64) -> Option<(PhotoId, u32)> {
        self.hashes
            .iter()
            .filter(|(p, _)| **p != photo)
            .map(|(p, h)| (*p, (h ^ hash).count_ones()))
            .filter(|(_, d)| *d <= NEAR_DUPLICATE_MAX_DISTANCE)
            .min_by_key(|(p, d)| (*d, *p))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.hashes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageBuffer, Rgb, RgbImage};

    fn scene(seed: u32, w: u32, h: u32) -> RgbImage {
        ImageBuffer::from_fn(w, h, |x, y| {
            let v = ((x * (7 + seed % 5) + y * (3 + seed % 7)) / 4 + seed * 37) % 256;
            let block = ((x * 4 / w) + (y * 3 / h) * 4 + seed) % 3;
            Rgb([v as u8, (v as u8).wrapping_mul(block as u8 + 1), 255 - v as u8])
        })
    }

    fn jpeg(image: &RgbImage, quality: u8) -> Vec<u8> {
        let mut out = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality).encode_image(image).unwrap();
        out
    }

    #[test]
    fn re_encoded_and_rescaled_copies_are_near_different_scenes_are_not() {
        let a = scene(1, 256, 192);
        let original = dhash_jpeg(&jpeg(&a, 90)).unwrap();
        let lower_quality = dhash_jpeg(&jpeg(&a, 40)).unwrap();
        let smaller = dhash_jpeg(&jpeg(&image::imageops::resize(&a, 200, 150, FilterType::Triangle), 80)).unwrap();
        assert!((original ^ lower_quality).count_ones() <= 3);
        assert!((original ^ smaller).count_ones() <= 3);
        let other = dhash_jpeg(&jpeg(&scene(2, 256, 192), 90)).unwrap();
        assert!((original ^ other).count_ones() > NEAR_DUPLICATE_MAX_DISTANCE);
        assert_eq!(from_hex(&to_hex(original)), Some(original));
        assert_eq!(dhash_jpeg(b"not a jpeg"), None);
    }

    #[test]
    fn the_index_finds_the_nearest_other_photo() {
        let mut index = NearIndex::default();
        index.insert(1, 0b1111);
        index.insert(2, 0b0111);
        index.insert(3, u64::MAX);
        index.insert(2, 0);
        assert_eq!(index.len(), 3);
        assert_eq!(index.nearest(9, 0b1111), Some((1, 0)));
        assert_eq!(index.nearest(1, 0b1111), Some((2, 1)), "its own photo is not a near duplicate");
        assert_eq!(index.nearest(9, 0xFFFF_0000_0000_0000), None);
    }
}
