//! The photos shipped for the demo (`tests/fixtures/`), and what each one shows.
//!
//! The fake cannot read a photo, so it recognizes these by a fingerprint of what arrives: the
//! SHA-256 of the image bytes in the request. The client never sends the file itself; it sends
//! the photo prepared (oriented, downscaled, re-encoded as a metadata-free JPEG), so the hashes
//! below are of those prepared bytes, with the default image settings.
//!
//! Why an exact hash and not a perceptual one: an exact match can never take someone's own photo
//! for a demo photo and answer with a product that photo does not show. Its cost is that any
//! change to a fixture or to the preparation (or image settings other than the defaults) changes
//! the bytes; such a photo then gets an answer marked as invented, never a wrong "real" one. The
//! core's `tests/fake_gemini.rs` prepares every photo in `tests/fixtures/` and fails, naming
//! the new hash, when one of them is not recognized here.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// A demo photo: its file, the fingerprint of its prepared upload, and what it shows.
#[derive(Debug, Clone, Copy)]
pub struct DemoPhoto {
    /// The file's path under `tests/fixtures/`.
    pub file: &'static str,
    /// Lowercase hex SHA-256 of the JPEG the client sends for it (default image settings).
    pub prepared_sha256: &'static str,
    product: fn() -> Value,
    /// Where fields are printed on it: a field's name and its `box_2d` (`[y_min, x_min, y_max,
    /// x_max]`, 0–1000), what the fake answers in `sources` when the request asks for them.
    pub sources: &'static [(&'static str, [u16; 4])],
}

impl DemoPhoto {
    /// What the photo shows, in the field names of the core's `Product`.
    pub fn product(&self) -> Value {
        (self.product)()
    }
}

/// Every demo photo. `not-an-image.jpg` and `truncated.jpg` are there too, but the client
/// refuses them before anything is sent.
pub const DEMO_PHOTOS: &[DemoPhoto] = &[
    DemoPhoto {
        file: "product.jpg",
        prepared_sha256: "7a089f73067e472ec9e9c70031d94b1638f6a2ffc398bc816b09ad5f49834aa6",
        product: oat_bars_box,
        sources: &[],
    },
    DemoPhoto {
        file: "label.png",
        prepared_sha256: "5d48bc3906d3a69cd00962f3c72f6d1e6f4537bd7aa60908d8053e536bf08ebd",
        product: oat_bars_label,
        sources: &[],
    },
    // The demo's product of two photos (`demo-shoot/`, one product by the stem rule): each side
    // shows part of it, the request with both shows it all (see `products::product_for_images`).
    DemoPhoto {
        file: "demo-shoot/oat-bars_front.jpg",
        prepared_sha256: "415569175c13dafda3f3273b345f4212ed64cddffdbfc1339833552394b813ff",
        product: oat_bars_front,
        // Measured on the image (1200 × 900): "ACME" and "Crunchy Oat Bars" on the box's panel.
        sources: &[
            ("brand", [333, 170, 433, 435]),
            ("name", [478, 170, 561, 755]),
            ("attributes", [594, 170, 656, 600]),
        ],
    },
    DemoPhoto {
        file: "demo-shoot/oat-bars_back.jpg",
        prepared_sha256: "a938e2e37b1a3ae6783c136897c8b3cc3437b6552de3467883c6f07ee84da533",
        product: oat_bars_back,
        // The title banner, the ingredients, the weight line and the barcode.
        sources: &[
            ("name", [33, 25, 111, 640]),
            ("net_content", [307, 25, 356, 578]),
            ("attributes", [178, 25, 272, 620]),
            ("gtin", [578, 467, 933, 954]),
        ],
    },
];

/// The demo photo these image bytes are, if they are one.
pub fn recognize(image: &[u8]) -> Option<&'static DemoPhoto> {
    let hash = sha256_hex(image);
    DEMO_PHOTOS.iter().find(|p| p.prepared_sha256 == hash)
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `product.jpg`: a blue box with a label ("ACME", "Crunchy Oat Bars", "Honey & Almond · 6 × 35 g",
/// "NET WT 210 g (7.4 oz)") and an EAN-13 barcode printed 4 006381 333931. No price on it.
fn oat_bars_box() -> Value {
    json!({
        "name": "Crunchy Oat Bars", "brand": "ACME", "category": "Cereal bars",
        "description": "A box of six 35 g crunchy oat bars with honey and almond.",
        "price": null, "gtin": "4006381333931",
        "color": null, "size": null, "material": null,
        "net_content": {"value": 210.0, "unit": "g"},
        "attributes": [{"name": "Flavor", "value": "Honey & Almond"}, {"name": "Pack", "value": "6 × 35 g"},
                       {"name": "Net weight (US)", "value": "7.4 oz"}],
        "uncertain_fields": []
    })
}

/// `label.png`: the same product's flat label ("ACME", "Crunchy Oat Bars", "Honey & Almond ·
/// 6 × 35 g", "Price: EUR 3.49") with the same barcode. No total weight printed: 6 × 35 g.
fn oat_bars_label() -> Value {
    json!({
        "name": "Crunchy Oat Bars", "brand": "ACME", "category": "Cereal bars",
        "description": "Label of a pack of six 35 g crunchy oat bars with honey and almond.",
        "price": {"amount": 3.49, "currency": "EUR"}, "gtin": "4006381333931",
        "color": null, "size": null, "material": null,
        "net_content": {"value": 210.0, "unit": "g"},
        "attributes": [{"name": "Flavor", "value": "Honey & Almond"}, {"name": "Pack", "value": "6 × 35 g"}],
        "uncertain_fields": []
    })
}

/// `demo-shoot/oat-bars_front.jpg`: the front of the box ("ACME", "Crunchy Oat Bars", "Honey &
/// Almond · 6 × 35 g"). No barcode, no weight, no ingredients on this side.
fn oat_bars_front() -> Value {
    json!({
        "name": "Crunchy Oat Bars", "brand": "ACME", "category": "Cereal bars",
        "description": "A box of six 35 g crunchy oat bars with honey and almond.",
        "price": null, "gtin": null,
        "color": null, "size": null, "material": null,
        "net_content": null,
        "attributes": [{"name": "Flavor", "value": "Honey & Almond"}, {"name": "Pack", "value": "6 × 35 g"}],
        "uncertain_fields": []
    })
}

/// `demo-shoot/oat-bars_back.jpg`: the back of the same box: the name in a banner, the
/// ingredients, "6 × 35 g NET WT 210 g (7.4 oz)" and an EAN-13 barcode 4 006381 333931 (a real
/// one: the app reads it on the machine). No brand logo, no flavor line.
fn oat_bars_back() -> Value {
    json!({
        "name": "Crunchy Oat Bars", "brand": "ACME", "category": "Cereal bars",
        "description": "Oat bars with whole grain oats, honey and almonds.",
        "price": null, "gtin": "4006381333931",
        "color": null, "size": null, "material": null,
        "net_content": {"value": 210.0, "unit": "g"},
        "attributes": [{"name": "Ingredients", "value": "whole grain oats (48%), honey (12%), almonds (9%), sunflower oil, brown sugar, salt"},
                       {"name": "Net weight (US)", "value": "7.4 oz"}],
        "uncertain_fields": []
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_distinct_lowercase_sha256() {
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        for (i, p) in DEMO_PHOTOS.iter().enumerate() {
            assert!(p.prepared_sha256.len() == 64 && p.prepared_sha256.bytes().all(|c| c.is_ascii_hexdigit()));
            assert_eq!(p.prepared_sha256, p.prepared_sha256.to_ascii_lowercase());
            assert!(DEMO_PHOTOS[i + 1..].iter().all(|q| q.prepared_sha256 != p.prepared_sha256 && q.file != p.file));
        }
        assert!(recognize(b"any other photo").is_none());
    }
}
