//! Products of several photos through the one engine: an import's shoot grouped into products
//! (`[import] group_by`), each product's photos in one request at the fake Gemini, the barcode
//! read on any of them, the photos recorded on the attempt and the saved product, and the queue's
//! dedupe rules per photo. Real SQLite file, real HTTP client, the fake on 127.0.0.1.

mod barcode_photos;

use std::path::PathBuf;
use std::time::Duration;

use fake_gemini::photos::sample_jpeg;
use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::catalog::Catalog;
use pe_core::config::{ApiKey, GeminiConfig, ImageConfig};
use pe_core::gemini::{GeminiClient, USER_PROMPT};
use pe_core::import::*;
use pe_core::pipeline::{system_clock, Pipeline};
use pe_core::product::FlagKind;
use pe_core::resilience::{ResilienceConfig, ResilienceStack};
use pe_core::ErrorCode;
use serde_json::Value;

struct Setup {
    fake: FakeGemini,
    dir: tempfile::TempDir,
    catalog: Catalog,
    queue: ImportQueue,
}

async fn setup() -> Setup {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(&Catalog::path_in(&dir.path().join("data"))).unwrap();
    let mut resilience = ResilienceConfig::default();
    resilience.retry.max_attempts = 1;
    let stack = ResilienceStack::new("gemini", resilience).unwrap();
    let config = GeminiConfig {
        base_url: fake.base_url(),
        api_key: ApiKey::new("test-key"),
        timeout: Duration::from_secs(10),
        ..GeminiConfig::default()
    };
    let client = GeminiClient::new(&config).unwrap();
    let pipeline = Pipeline::new(client, stack, catalog.clone(), ImageConfig::default(), system_clock());
    let queue = ImportQueue::open(pipeline, ImportOptions::default()).await.unwrap();
    Setup { fake, dir, catalog, queue }
}

impl Setup {
    /// Writes each named photo (a distinct generated JPEG) into `folder`; returns the folder.
    fn shoot(&self, folder: &str, names: &[&str], first_seed: u64) -> PathBuf {
        let dir = self.dir.path().join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        for (seed, name) in (first_seed..).zip(names) {
            std::fs::write(dir.join(name), sample_jpeg(seed, 320, 240, 85)).unwrap();
        }
        dir
    }

    async fn import(&self, paths: Vec<PathBuf>, grouping: Grouping) -> Enqueued {
        let options = EnqueueOptions { grouping, ..EnqueueOptions::default() };
        let enqueued = self.queue.enqueue_files(paths, options).await.unwrap();
        let settled =
            tokio::time::timeout(Duration::from_secs(30), self.queue.settled()).await.expect("settles within 30 s");
        assert!(!matches!(settled.status, ImportStatus::Stopped { .. }), "{:?}", settled.status);
        enqueued
    }

    /// The items that are products (not skipped), oldest first, with their details.
    async fn products(&self) -> Vec<ImportItemDetail> {
        let rows = self.queue.items(0, 1000, None).await.unwrap().rows;
        let mut out = Vec::new();
        for row in rows.into_iter().filter(|r| r.state != ItemState::Skipped) {
            out.push(self.queue.item(row.id).await.unwrap());
        }
        out
    }

    /// The generateContent bodies the fake received, in order.
    fn generate_bodies(&self) -> Vec<Value> {
        self.fake.requests().into_iter().filter(|r| r.path.ends_with(":generateContent")).map(|r| r.body).collect()
    }
}

fn stem(max_photos: usize) -> Grouping {
    Grouping { by: GroupBy::Stem, max_photos }
}

fn file_names(detail: &ImportItemDetail) -> Vec<&str> {
    detail.photos.iter().map(|p| p.file_name.as_str()).collect()
}

/// The images and the prompt text of one request body.
fn images_and_prompt(body: &Value) -> (usize, String) {
    let parts = body["contents"][0]["parts"].as_array().unwrap();
    let images = parts.iter().filter(|p| p.get("inlineData").is_some()).count();
    let text = parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(" ");
    (images, text)
}

#[tokio::test]
async fn a_shoot_is_grouped_into_products_and_each_product_is_one_request() {
    let s = setup().await;
    let shoot = s.shoot(
        "shoot",
        &["sku1_back.jpg", "sku1_front.jpg", "sku2.jpg", "sku2-2.jpg", "SKU2 (3).jpg", "IMG_0001.jpg"],
        10,
    );
    let enqueued = s.import(vec![shoot.clone()], stem(6)).await;
    assert_eq!(
        enqueued.report,
        EnqueueReport { queued: 3, duplicates: 0, skipped: 0, unchanged: 0, ..EnqueueReport::default() }
    );
    assert_eq!(enqueued.files.len(), 6, "every file says where it went");

    let products = s.products().await;
    let groups: Vec<Vec<&str>> = products.iter().map(file_names).collect();
    // Groups in the order of their first file as listed (byte order: `SKU2 (3)` before `sku1_…`).
    assert_eq!(
        groups,
        [vec!["IMG_0001.jpg"], vec!["sku2.jpg", "sku2-2.jpg", "SKU2 (3).jpg"], vec!["sku1_front.jpg", "sku1_back.jpg"]],
        "one product per stem, front-like first; a camera counter stays whole"
    );
    assert!(products.iter().all(|p| p.row.state == ItemState::Ready), "{products:?}");
    assert_eq!(products.iter().map(|p| p.row.photo_count).collect::<Vec<_>>(), [1, 3, 2]);

    // One request per product, its photos in order, the prompt saying they are one product.
    let bodies = s.generate_bodies();
    assert_eq!(bodies.len(), 3, "one call per product, not per photo");
    let mut shapes: Vec<(usize, String)> = bodies.iter().map(images_and_prompt).collect();
    shapes.sort_by_key(|(n, _)| *n);
    assert_eq!(shapes[0], (1, USER_PROMPT.to_owned()), "a single photo keeps the one-photo prompt");
    assert_eq!(shapes[1].0, 2);
    assert!(shapes[1].1.starts_with("These 2 photos show one product"), "{}", shapes[1].1);
    assert_eq!(shapes[2].0, 3);
    // Every photo is billed: a 3-photo call's prompt counts 3 images.
    let three = products.iter().find(|p| p.photos.len() == 3).unwrap();
    let two = products.iter().find(|p| p.photos.len() == 2).unwrap();
    let prompt = |d: &ImportItemDetail| d.attempt.as_ref().unwrap().usage.unwrap().prompt_tokens;
    assert!(prompt(three) > prompt(two), "{} vs {}", prompt(three), prompt(two));

    // Every photo was recorded and is on the item; saving puts them all on the product.
    assert!(three.photos.iter().all(|p| p.photo_id.is_some()), "{:?}", three.photos);
    // (The fake's invented products may carry a GTIN with a wrong check digit: not this test's.)
    let reviewed = pe_core::product::Product { gtin: None, ..three.proposal.clone().unwrap() };
    let record = s.queue.save_item(three.row.id, reviewed).await.unwrap();
    let photos = s.catalog.product_photos(record.id).await.unwrap();
    let saved: Vec<_> = photos.iter().map(|p| Some(p.photo_id)).collect();
    assert_eq!(saved, three.photos.iter().map(|p| p.photo_id).collect::<Vec<_>>(), "the product's photos, in order");
    assert!(photos[2].path.ends_with("SKU2 (3).jpg"), "{photos:?}");

    // The same shoot again: nothing new, nothing sent.
    let again = s.import(vec![shoot.clone()], stem(6)).await;
    assert_eq!(
        again.report,
        EnqueueReport { queued: 0, duplicates: 0, skipped: 0, unchanged: 6, ..EnqueueReport::default() }
    );
    assert_eq!(s.generate_bodies().len(), 3);

    // A copy of a saved product's third photo elsewhere is already in the catalog.
    let copies = s.dir.path().join("copies");
    std::fs::create_dir_all(&copies).unwrap();
    std::fs::copy(shoot.join("SKU2 (3).jpg"), copies.join("other.jpg")).unwrap();
    let copy = s.import(vec![copies.join("other.jpg")], stem(6)).await;
    assert_eq!(copy.report.duplicates, 1, "{:?}", copy.report);
    let skipped = s.queue.item(copy.files[0].item).await.unwrap();
    assert_eq!(skipped.row.skipped.unwrap().duplicate_of_product, Some(record.id));
    assert_eq!(s.generate_bodies().len(), 3);
}

#[tokio::test]
async fn the_same_bytes_in_a_group_are_sent_once_and_an_oversized_group_is_split_and_says_so() {
    let s = setup().await;
    // A product's photos (a side word among them: not a numbered sequence, which would be one
    // product a photo).
    let shoot = s.shoot("big", &["box_front.jpg", "box_2.jpg", "box_3.jpg", "box_4.jpg", "box_back.jpg"], 40);
    // box_back has the same bytes as box_front.
    std::fs::copy(shoot.join("box_front.jpg"), shoot.join("box_back.jpg")).unwrap();
    let enqueued = s.import(vec![shoot], stem(2)).await;
    assert_eq!(
        enqueued.report,
        EnqueueReport { queued: 2, duplicates: 1, skipped: 0, unchanged: 0, ..EnqueueReport::default() }
    );
    let products = s.products().await;
    let groups: Vec<Vec<&str>> = products.iter().map(file_names).collect();
    // box_back.jpg was split off into a third part, then found to be box_front's bytes: that part
    // is only the duplicate's skipped row, so two products were sent.
    assert_eq!(groups, [vec!["box_front.jpg", "box_2.jpg"], vec!["box_3.jpg", "box_4.jpg"]]);
    let splits: Vec<Option<SplitNote>> = products.iter().map(|p| p.group.as_ref().and_then(|g| g.split)).collect();
    assert_eq!(
        splits,
        [Some(SplitNote { part: 1, parts: 3, of_photos: 5 }), Some(SplitNote { part: 2, parts: 3, of_photos: 5 })]
    );
    let duplicate = enqueued.files.iter().find(|f| f.path.ends_with("box_back.jpg")).unwrap();
    assert_eq!(duplicate.result_of, products[0].row.id, "box_back's result is box_front's product");
    assert_eq!(s.generate_bodies().len(), 2);
}

#[tokio::test]
async fn a_broken_photo_fails_its_product_alone_and_names_the_file() {
    let s = setup().await;
    let shoot = s.shoot("mixed", &["tea_front.jpg", "tea_back.jpg", "soap.jpg"], 70);
    std::fs::write(shoot.join("tea_back.jpg"), b"this is not a photo").unwrap();
    s.import(vec![shoot], stem(6)).await;
    let products = s.products().await;
    let tea = products.iter().find(|p| p.photos.len() == 2).unwrap();
    assert_eq!(tea.row.state, ItemState::Failed);
    let error = tea.row.last_error.as_ref().unwrap();
    assert_eq!(error.code, ErrorCode::InvalidImage);
    assert!(error.message.starts_with("tea_back.jpg (photo 2 of this product): "), "{}", error.message);
    let soap = products.iter().find(|p| p.photos.len() == 1).unwrap();
    assert_eq!(soap.row.state, ItemState::Ready, "the other product goes on");
    assert_eq!(s.generate_bodies().len(), 1, "the broken product is never sent");
}

#[tokio::test]
async fn the_back_photos_barcode_is_the_products_gtin() {
    use barcode_photos::{draw, finish, scene, Effects, Placement, Symbol, Symbology};
    let s = setup().await;
    let dir = s.dir.path().join("cereal");
    std::fs::create_dir_all(&dir).unwrap();
    finish(scene(3), Effects::default(), 3).save(dir.join("cereal_front.png")).unwrap();
    let mut back = scene(4);
    draw(&mut back, &Symbol::new(Symbology::Ean13, "400638133393"), Placement::plain((768.0, 700.0)));
    finish(back, Effects::default(), 4).save(dir.join("cereal_back.png")).unwrap();
    s.fake.push(Behavior::Fixed(serde_json::json!({"name": "Crunchy cereal", "gtin": "0036000291452"})));
    s.import(vec![dir], stem(6)).await;
    let products = s.products().await;
    assert_eq!(products.len(), 1);
    let cereal = &products[0];
    assert_eq!(file_names(cereal), ["cereal_front.png", "cereal_back.png"]);
    let barcodes = cereal.barcodes.as_ref().unwrap();
    assert_eq!(barcodes.len(), 1, "{barcodes:?}");
    assert_eq!((barcodes[0].gtin.as_str(), barcodes[0].photo), ("4006381333931", 1), "read on the back, photo 1");
    let proposal = cereal.proposal.as_ref().unwrap();
    assert_eq!(proposal.gtin.as_deref(), Some("4006381333931"), "the barcode wins");
    let flag = cereal.flags.iter().find(|f| f.kind == FlagKind::Barcode).unwrap();
    assert!(flag.message.contains("Gemini read 0036000291452"), "{}", flag.message);
}

#[tokio::test]
async fn group_by_folder_and_none() {
    let s = setup().await;
    let a = s.shoot("by-folder/a", &["x.jpg", "y.jpg"], 90);
    s.shoot("by-folder/b", &["z.jpg"], 95);
    let root = a.parent().unwrap().to_path_buf();
    s.import(vec![root], Grouping { by: GroupBy::Folder, max_photos: 6 }).await;
    let groups: Vec<Vec<String>> =
        s.products().await.iter().map(|d| file_names(d).into_iter().map(str::to_owned).collect()).collect();
    assert_eq!(groups, [vec!["x.jpg".to_owned(), "y.jpg".to_owned()], vec!["z.jpg".to_owned()]]);
    assert_eq!(s.generate_bodies().len(), 2);

    let s = setup().await;
    let c = s.shoot("none", &["sku9_1.jpg", "sku9_2.jpg"], 99);
    s.import(vec![c], Grouping::NONE).await;
    assert_eq!(s.products().await.len(), 2, "group_by none: every photo its own product");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_import_sends_each_product_as_one_entry_with_all_its_photos() {
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(&Catalog::path_in(&dir.path().join("data"))).unwrap();
    let config = GeminiConfig {
        base_url: fake.base_url(),
        api_key: ApiKey::new("test-key"),
        timeout: Duration::from_secs(10),
        ..GeminiConfig::default()
    };
    let stack = ResilienceStack::new("gemini", ResilienceConfig::default()).unwrap();
    let pipeline = Pipeline::new(
        GeminiClient::new(&config).unwrap(),
        stack,
        catalog.clone(),
        ImageConfig::default(),
        system_clock(),
    );
    let options = ImportOptions {
        batch: BatchOptions { poll_interval: Duration::from_millis(20), ..BatchOptions::default() },
        ..ImportOptions::default()
    };
    let queue = ImportQueue::open(pipeline, options).await.unwrap();
    let shoot = dir.path().join("shoot");
    std::fs::create_dir_all(&shoot).unwrap();
    for (seed, name) in (200..).zip(["jam_front.jpg", "jam_back.jpg", "jam_side.jpg", "honey.jpg"]) {
        std::fs::write(shoot.join(name), sample_jpeg(seed, 320, 240, 85)).unwrap();
    }
    let options = EnqueueOptions { batch: true, grouping: stem(6), ..EnqueueOptions::default() };
    assert_eq!(queue.enqueue(vec![shoot], options).await.unwrap().queued, 2);
    tokio::time::timeout(Duration::from_secs(30), queue.settled()).await.expect("settles within 30 s");

    let creates: Vec<Value> =
        fake.requests().into_iter().filter(|r| r.path.ends_with(":batchGenerateContent")).map(|r| r.body).collect();
    assert_eq!(creates.len(), 1, "one batch");
    let requests = creates[0]["batch"]["inputConfig"]["requests"]["requests"].as_array().unwrap();
    let mut images: Vec<usize> = requests.iter().map(|r| images_and_prompt(&r["request"]).0).collect();
    images.sort_unstable();
    assert_eq!(images, [1, 3], "one entry per product, every photo in it");
    assert_eq!(fake.generate_count(), 0, "nothing went the direct way");

    let rows = queue.items(0, 100, None).await.unwrap().rows;
    assert!(rows.iter().all(|r| r.state == ItemState::Ready), "{rows:?}");
    let jam = rows.iter().find(|r| r.photo_count == 3).unwrap();
    let detail = queue.item(jam.id).await.unwrap();
    assert_eq!(file_names(&detail), ["jam_front.jpg", "jam_side.jpg", "jam_back.jpg"]);
    // The attempt records every photo it sent (the audit trail).
    let attempt = detail.attempt.unwrap().id;
    let sent: i64 = catalog
        .with_connection(move |c| {
            Ok(c.query_row("SELECT count(*) FROM attempt_photos WHERE attempt_id = ?1", [attempt], |r| r.get(0))?)
        })
        .await
        .unwrap();
    assert_eq!(sent, 2, "the two photos after the first");
}

#[tokio::test]
async fn review_splits_and_merges_products_and_nothing_is_sent_until_asked() {
    let s = setup().await;
    let shoot = s.shoot("regroup", &["kit_1.jpg", "kit_2.jpg", "kit_3.jpg", "lone.jpg"], 300);
    s.import(vec![shoot], stem(6)).await;
    let products = s.products().await;
    let kit = products.iter().find(|p| p.photos.len() == 3).unwrap().row.id;
    let lone = products.iter().find(|p| p.photos.len() == 1).unwrap().row.id;
    assert_eq!(s.generate_bodies().len(), 2);

    // Split: kit_3.jpg becomes a product of its own.
    let changed = s.queue.move_photo(kit, 2, None).await.unwrap();
    assert_eq!(changed.len(), 2);
    let (split_off, state) = changed[1];
    assert_eq!(state, ItemState::Failed);
    let kit_now = s.queue.item(kit).await.unwrap();
    assert_eq!(file_names(&kit_now), ["kit_1.jpg", "kit_2.jpg"]);
    assert_eq!(kit_now.row.state, ItemState::Failed);
    assert_eq!(kit_now.row.last_error.as_ref().unwrap().code, ErrorCode::Regrouped);
    assert!(kit_now.proposal.is_none(), "the proposal was for other photos");
    assert_eq!(file_names(&s.queue.item(split_off).await.unwrap()), ["kit_3.jpg"]);

    // Merge: lone.jpg joins the kit.
    let changed = s.queue.move_photo(lone, 0, Some(kit)).await.unwrap();
    assert_eq!(changed, [(lone, ItemState::Skipped), (kit, ItemState::Failed)]);
    assert_eq!(file_names(&s.queue.item(kit).await.unwrap()), ["kit_1.jpg", "kit_2.jpg", "lone.jpg"]);
    let merged = s.queue.item(lone).await.unwrap();
    assert_eq!(merged.row.skipped.as_ref().unwrap().duplicate_of_item, Some(kit));

    // Nothing was sent for any of it: the queue settles with nothing to send.
    tokio::time::timeout(Duration::from_secs(30), s.queue.settled()).await.unwrap();
    assert_eq!(s.generate_bodies().len(), 2, "a changed group is extracted again only when asked");

    // Asked: each goes as one request with its new photos.
    s.queue.force_extract(kit).await.unwrap();
    s.queue.force_extract(split_off).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), s.queue.settled()).await.unwrap();
    let mut shapes: Vec<usize> = s.generate_bodies()[2..].iter().map(|b| images_and_prompt(b).0).collect();
    shapes.sort_unstable();
    assert_eq!(shapes, [1, 3]);
    let kit_now = s.queue.item(kit).await.unwrap();
    assert_eq!(kit_now.row.state, ItemState::Ready);
    assert!(kit_now.photos.iter().all(|p| p.photo_id.is_some()));

    // A saved product's photos are not moved from the queue.
    let reviewed = pe_core::product::Product { gtin: None, ..kit_now.proposal.clone().unwrap() };
    s.queue.save_item(kit, reviewed).await.unwrap();
    let refused = s.queue.move_photo(kit, 0, None).await.unwrap_err();
    assert_eq!(pe_core::Coded::code(&refused), ErrorCode::Conflict, "{refused}");
}

/// The demo's two-photo product (`tests/fixtures/demo-shoot`): the front and the back of one box
/// are one product, sent together; the barcode read on the back agrees with Gemini's GTIN, and the
/// answer combines both sides.
#[tokio::test]
async fn the_demo_shoot_is_one_product_of_two_photos() {
    let s = setup().await;
    let shoot = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/demo-shoot");
    s.import(vec![shoot], stem(6)).await;
    let products = s.products().await;
    assert_eq!(products.len(), 1);
    let oat = &products[0];
    assert_eq!(file_names(oat), ["oat-bars_front.jpg", "oat-bars_back.jpg"]);
    assert_eq!(oat.row.state, ItemState::Ready, "{:?}", oat.row.last_error);
    let barcodes = oat.barcodes.as_ref().unwrap();
    assert_eq!(barcodes.iter().map(|b| (b.gtin.as_str(), b.photo)).collect::<Vec<_>>(), [("4006381333931", 1)]);
    let p = oat.proposal.as_ref().unwrap();
    assert_eq!(
        (p.name.as_str(), p.brand.as_deref(), p.gtin.as_deref()),
        ("Crunchy Oat Bars", Some("ACME"), Some("4006381333931"))
    );
    assert_eq!(p.net_content.as_ref().map(|n| n.value), Some(210.0), "from the back");
    let attributes: Vec<&str> = p.attributes.iter().map(|a| a.name.as_str()).collect();
    assert!(attributes.contains(&"Flavor") && attributes.contains(&"Ingredients"), "{attributes:?}");
    assert!(oat.flags.iter().all(|f| f.kind != FlagKind::Barcode), "Gemini and the barcode agree: {:?}", oat.flags);
    // Where each value was read: Gemini's boxes, and the barcode's own for the GTIN.
    let at = |field: &str| oat.sources.iter().find(|s| s.field == field).map(|s| (s.photo, s.box_2d));
    assert_eq!(at("brand").map(|a| a.0), Some(0), "{:?}", oat.sources);
    assert_eq!(at("name").map(|a| a.0), Some(0), "the front shows it first");
    assert_eq!(at("net_content").map(|a| a.0), Some(1));
    assert_eq!(at("gtin"), Some((1, barcodes[0].box_2d)), "the barcode read on the machine");
    let record = s.queue.save_item(oat.row.id, p.clone()).await.unwrap();
    assert_eq!(record.gtin_source, Some(pe_core::barcode::GtinSource::Photo));
    assert_eq!(s.generate_bodies().len(), 1);
}

/// Gemini's boxes are stored with the attempt; one that is not a box, or names a photo that was not
/// sent, is dropped and the answer is used all the same.
#[tokio::test]
async fn invalid_boxes_are_dropped_not_fatal() {
    let s = setup().await;
    let shoot = s.shoot("boxes", &["jar_front.jpg", "jar_back.jpg"], 400);
    s.fake.push(Behavior::Fixed(serde_json::json!({"name": "Jam", "brand": "Mira", "sources": [
        {"field": "name", "photo": 1, "box_2d": [100, 100, 200, 300]},
        {"field": "brand", "photo": 5, "box_2d": [100, 100, 200, 300]},
        {"field": "category", "photo": 0, "box_2d": [900, 100, 200, 300]},
        {"field": "color", "photo": 0, "box_2d": "everywhere"}
    ]})));
    s.import(vec![shoot], stem(6)).await;
    let products = s.products().await;
    assert_eq!(products[0].row.state, ItemState::Ready, "{:?}", products[0].row.last_error);
    let kept: Vec<(&str, u32)> = products[0].sources.iter().map(|s| (s.field.as_str(), s.photo)).collect();
    assert_eq!(kept, [("name", 1)]);
    assert_eq!(products[0].proposal.as_ref().unwrap().name, "Jam");
}

/// Whatever the naming rule, photos whose barcodes read the same GTIN are one product: the one
/// prepared second joins the first (not sent on its own) and says so; a photo without the barcode
/// stays its own product.
#[tokio::test]
async fn photos_with_the_same_barcode_are_one_product_whatever_their_names() {
    use barcode_photos::{draw, finish, scene, Effects, Placement, Symbol, Symbology};
    let s = setup().await;
    let dir = s.dir.path().join("by-barcode");
    std::fs::create_dir_all(&dir).unwrap();
    for (seed, name) in [(11, "IMG_0042.png"), (12, "IMG_0043.png")] {
        let mut img = scene(seed);
        draw(&mut img, &Symbol::new(Symbology::Ean13, "400638133393"), Placement::plain((768.0, 700.0)));
        finish(img, Effects::default(), seed).save(dir.join(name)).unwrap();
    }
    finish(scene(13), Effects::default(), 13).save(dir.join("IMG_0044.png")).unwrap();
    s.import(vec![dir], stem(6)).await;

    let rows = s.queue.items(0, 100, None).await.unwrap().rows;
    assert_eq!(s.generate_bodies().len(), 2, "the second photo with the barcode was not sent: {rows:#?}");
    let joined = rows.iter().find(|r| r.state == ItemState::Skipped).expect("one item joined another");
    let skip = joined.skipped.as_ref().unwrap();
    assert_eq!(skip.reason, SkipReason::AlreadyQueued, "its product is in the queue");
    assert!(skip.message.contains("4006381333931"), "{}", skip.message);
    let into = skip.duplicate_of_item.unwrap();
    let product = s.queue.item(into).await.unwrap();
    assert_eq!(product.row.state, ItemState::Ready);
    let mut names = file_names(&product);
    names.sort_unstable();
    assert_eq!(names, ["IMG_0042.png", "IMG_0043.png"]);
    assert!(product.photos.iter().all(|p| p.photo_id.is_some()));
    let on: Vec<u32> = product.barcodes.as_ref().unwrap().iter().map(|b| b.photo).collect();
    assert_eq!(on, [0, 1], "each photo's barcode, at its place");
    assert_eq!(product.group.as_ref().unwrap().joined_by_barcode, ["4006381333931"]);
    assert_eq!(product.row.photo_count, 2);
    // Saved, the product has both photos.
    let reviewed = pe_core::product::Product { gtin: None, ..product.proposal.clone().unwrap() };
    let record = s.queue.save_item(into, reviewed).await.unwrap();
    assert_eq!(s.catalog.product_photos(record.id).await.unwrap().len(), 2);
    // The same folder again: nothing new.
    let again = s.import(vec![s.dir.path().join("by-barcode")], stem(6)).await;
    assert_eq!(again.report.queued, 0, "{:?}", again.report);
    assert_eq!(s.generate_bodies().len(), 2);
}

/// A saved product of two photos extracted again (a catalog re-extract): both photos in one
/// request again, each file hashed again; a file that changed fails with what to do, and one that
/// is gone says so (a local catalog keeps no copy of the prepared photo).
#[tokio::test]
async fn a_catalog_product_of_two_photos_is_extracted_again_from_both_files() {
    let s = setup().await;
    let shoot = s.shoot("shoot", &["sku9_front.jpg", "sku9_back.jpg"], 70);
    s.import(vec![shoot.clone()], stem(6)).await;
    let product = s.products().await.remove(0);
    let saved = s.queue.save_item(product.row.id, product.proposal.clone().unwrap()).await.unwrap();
    let photos: Vec<_> = s
        .catalog
        .product_photos(saved.id)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (pe_core::stored_path::StoredPath::from_text_and_hex(&p.path, p.path_bytes.as_deref()), p.sha256))
        .collect();
    assert_eq!(photos.len(), 2);
    let forced = EnqueueOptions { force: true, ..EnqueueOptions::interactive() };

    let again = s.queue.enqueue_product(photos.clone(), forced).await.unwrap();
    let item = s.queue.finished(again.files[0].item).await.unwrap();
    assert_eq!(item.row.state, ItemState::Ready, "{:?}", item.row.last_error);
    assert_eq!(item.row.photo_id, Some(saved.photo_id));
    let bodies = s.generate_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(images_and_prompt(&bodies[1]).0, 2, "both photos in the one request");
    assert_eq!(bodies[0], bodies[1], "the same upload as the first time");
    s.queue.discard_item(item.row.id).await.unwrap();

    std::fs::write(shoot.join("sku9_back.jpg"), sample_jpeg(999, 320, 240, 85)).unwrap();
    let again = s.queue.enqueue_product(photos.clone(), forced).await.unwrap();
    let item = s.queue.finished(again.files[0].item).await.unwrap();
    assert_eq!(item.row.state, ItemState::Failed);
    let error = item.row.last_error.unwrap();
    assert!(error.message.contains("sku9_back.jpg has changed since it was added"), "{}", error.message);

    std::fs::remove_file(shoot.join("sku9_front.jpg")).unwrap();
    let again = s.queue.enqueue_product(photos, forced).await.unwrap();
    let item = s.queue.finished(again.files[0].item).await.unwrap();
    assert_eq!(item.row.state, ItemState::Failed);
    let error = item.row.last_error.unwrap();
    assert_eq!(error.code, ErrorCode::Io, "{error:?}");
    assert_eq!(s.generate_bodies().len(), 2, "nothing more was sent");
}
