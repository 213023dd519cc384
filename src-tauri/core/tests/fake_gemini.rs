//! The fake Gemini (crate `fake-gemini`) against the core's own types: the fake does not depend
//! on the core, so what ties them together is checked here.

use fake_gemini::photos::sample_jpeg;
use fake_gemini::products::{catalog, fit_to_schema};
use pe_core::config::ImageConfig;
use pe_core::import::{dhash_jpeg, NEAR_DUPLICATE_MAX_DISTANCE};
use pe_core::product::{self, check_gtin, Product};

#[test]
fn every_product_fits_our_schema_and_reads_back() {
    let schema = product::response_json_schema();
    let mut invalid_gtins = 0;
    let mut uncertain = 0;
    for source in catalog() {
        let fitted = fit_to_schema(&schema, Some(&source));
        let p: Product = serde_json::from_value(fitted.clone()).unwrap();
        assert_eq!(p.name, source["name"].as_str().unwrap(), "{fitted}");
        assert_eq!(serde_json::to_value(&p).unwrap(), source, "round trip of {fitted}");
        if p.gtin.as_deref().is_some_and(|g| check_gtin(g).is_err()) {
            invalid_gtins += 1;
        }
        uncertain += usize::from(!p.uncertain_fields.is_empty());
    }
    assert_eq!((invalid_gtins, uncertain), (1, 1));
}

#[test]
fn sample_photos_are_distinct_and_do_not_look_alike() {
    assert_eq!(sample_jpeg(7, 64, 48, 80), sample_jpeg(7, 64, 48, 80));
    let hashes: Vec<u64> = (0..60)
        .map(|seed| {
            let prepared = pe_core::intake::prepare_bytes(&sample_jpeg(seed, 320, 240, 85), &ImageConfig::default());
            dhash_jpeg(&prepared.unwrap().thumbnail_jpeg).unwrap()
        })
        .collect();
    for (i, a) in hashes.iter().enumerate() {
        for b in &hashes[i + 1..] {
            assert!((a ^ b).count_ones() > NEAR_DUPLICATE_MAX_DISTANCE, "{a:016x} vs {b:016x}");
        }
    }
}
