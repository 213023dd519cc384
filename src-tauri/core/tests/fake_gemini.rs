//! The fake Gemini (crate `fake-gemini`) against the core's own types: the fake does not depend
//! on the core, so what ties them together is checked here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fake_gemini::demo_photos::{self, DEMO_PHOTOS};
use fake_gemini::photos::sample_jpeg;
use fake_gemini::products::{catalog, fit_to_schema};
use fake_gemini::{FakeGemini, FakeOptions};
use pe_core::catalog::Catalog;
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::GeminiClient;
use pe_core::import::{
    dhash_jpeg, ClaimScope, EnqueueOptions, ImportOptions, ImportQueue, ItemState, NEAR_DUPLICATE_MAX_DISTANCE,
};
use pe_core::pipeline::{system_clock, Pipeline};
use pe_core::product::{self, check_gtin, FieldFlag, NetContent, Price, Product};
use pe_core::resilience::{ResilienceConfig, ResilienceStack};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

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

/// The demo's photos are recognized from what the client sends: every photo in tests/fixtures
/// that the client would send (the others fail intake) is prepared exactly as the pipeline does
/// and must be a known demo photo. Changing a fixture or the preparation fails here, instead of
/// the demo silently answering "invented" for its own photos.
#[test]
fn every_fixture_photo_the_client_sends_is_a_known_demo_photo() {
    let mut recognized = BTreeSet::new();
    let shoot = std::fs::read_dir(fixtures().join("demo-shoot")).unwrap();
    for entry in std::fs::read_dir(fixtures()).unwrap().chain(shoot) {
        let path = entry.unwrap().path();
        let file = path.strip_prefix(fixtures()).unwrap().to_string_lossy().into_owned();
        let Ok(prepared) = pe_core::intake::prepare_file(&path, &ImageConfig::default()) else { continue };
        let hash = demo_photos::sha256_hex(&prepared.jpeg);
        let photo = demo_photos::recognize(&prepared.jpeg).unwrap_or_else(|| {
            panic!(
                "tests/fixtures/{file} is now sent as a JPEG with SHA-256 {hash}, which the fake does not know: \
                 update DEMO_PHOTOS in src-tauri/fake-gemini/src/demo_photos.rs (and what the photo shows)"
            )
        });
        assert_eq!(photo.file, file, "{file} is recognized as another photo");
        recognized.insert(file);
    }
    let listed: BTreeSet<String> = DEMO_PHOTOS.iter().map(|p| p.file.to_string()).collect();
    assert_eq!(recognized, listed, "every demo photo is a fixture the client sends");
    assert!(recognized.contains("product.jpg") && recognized.contains("label.png"), "{recognized:?}");
}

#[test]
fn every_demo_product_fits_our_schema_and_has_nothing_to_flag() {
    let schema = product::response_json_schema();
    for photo in DEMO_PHOTOS {
        let source = photo.product();
        let fitted = fit_to_schema(&schema, Some(&source));
        let p: Product = serde_json::from_value(fitted.clone()).unwrap();
        assert_eq!(serde_json::to_value(&p).unwrap(), source, "round trip of {}: {fitted}", photo.file);
        assert_eq!(p.validate(), Vec::new(), "{}", photo.file);
        assert!(!p.name.contains("invented"), "{}", photo.file);
    }
}

/// The one engine (intake, the real client, the resilience stack, the catalog, through the
/// queue as `extract` runs it) against the fake.
async fn pipeline(fake: &FakeGemini, dir: &Path) -> Engine {
    let config = GeminiConfig {
        base_url: fake.base_url(),
        api_key: ApiKey::new("test-key"),
        timeout: Duration::from_secs(10),
        ..GeminiConfig::default()
    };
    let catalog = Catalog::open(&Catalog::path_in(dir)).unwrap();
    let stack = ResilienceStack::new("gemini", ResilienceConfig::default()).unwrap();
    let pipeline =
        Pipeline::new(GeminiClient::new(&config).unwrap(), stack, catalog, ImageConfig::default(), system_clock());
    let options = ImportOptions { claims: ClaimScope::Interactive, fail_fast: true, ..ImportOptions::default() };
    Engine(ImportQueue::open(pipeline, options).await.unwrap())
}

struct Engine(ImportQueue);

/// What one photo came back as.
struct Extracted {
    product: Product,
    flags: Vec<FieldFlag>,
}

impl Engine {
    async fn extract(&self, file: &Path) -> Extracted {
        let enqueued = self.0.enqueue_files(vec![file.to_path_buf()], EnqueueOptions::interactive()).await.unwrap();
        let item = self.0.finished(enqueued.files[0].result_of).await.unwrap();
        assert_eq!(item.row.state, ItemState::Ready, "{:?}", item.row.last_error);
        Extracted { product: item.proposal.unwrap(), flags: item.flags }
    }
}

#[tokio::test]
async fn the_demo_photos_extract_to_what_they_show() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pipeline = pipeline(&fake, dir.path()).await;

    let boxed = pipeline.extract(&fixtures().join("product.jpg")).await;
    let p = &boxed.product;
    assert_eq!((p.name.as_str(), p.brand.as_deref()), ("Crunchy Oat Bars", Some("ACME")));
    assert_eq!(p.gtin.as_deref(), Some("4006381333931"));
    assert_eq!(p.net_content, Some(NetContent { value: 210.0, unit: "g".into() }));
    assert_eq!(p.price, None, "the box shows no price");
    assert!(p.description.as_deref().unwrap().contains("oat bars"), "{p:?}");
    assert_eq!(boxed.flags, Vec::new());

    let label = pipeline.extract(&fixtures().join("label.png")).await;
    let p = &label.product;
    assert_eq!((p.name.as_str(), p.brand.as_deref()), ("Crunchy Oat Bars", Some("ACME")));
    assert_eq!(p.gtin.as_deref(), Some("4006381333931"));
    assert_eq!(p.price, Some(Price { amount: 3.49, currency: "EUR".into() }));
    assert_eq!(label.flags, Vec::new());
    assert_eq!(fake.generate_count(), 2);
}

#[tokio::test]
async fn any_other_photo_gets_an_answer_that_says_it_was_invented() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pipeline = pipeline(&fake, dir.path()).await;
    for seed in 0..3 {
        let path = dir.path().join(format!("mine-{seed}.jpg"));
        std::fs::write(&path, sample_jpeg(seed, 640, 480, 85)).unwrap();
        let p = pipeline.extract(&path).await.product;
        assert!(p.name.ends_with(" (invented by the demo)"), "{p:?}");
        let description = p.description.unwrap_or_default();
        assert!(description.starts_with("Invented by the demo: this photo is not one of the demo's sample photos"));
        assert!(!p.name.starts_with("Crunchy Oat Bars"), "{}", p.name);
    }
    // The match is exact: the label prepared with another JPEG quality is other bytes, so the
    // fake would invent (and say so) rather than guess.
    let original = std::fs::read(fixtures().join("label.png")).unwrap();
    let prepared = pe_core::intake::prepare_bytes(&original, &ImageConfig::default()).unwrap();
    let other_quality = ImageConfig { jpeg_quality: 70, ..ImageConfig::default() };
    let reencoded = pe_core::intake::prepare_bytes(&original, &other_quality).unwrap();
    assert!(demo_photos::recognize(&prepared.jpeg).is_some());
    assert!(demo_photos::recognize(&reencoded.jpeg).is_none());
}
