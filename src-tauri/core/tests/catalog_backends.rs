//! The `Catalog` API on both backends (issue 13): one catalog, written through the API on SQLite,
//! copied to a real PostgreSQL server (`scripts/with-postgres`), then every query of a
//! data-driven table (each sort and direction, the filters, text, pages) asked of both, and the
//! same edits made on both: the answers must be the same. Then what only a server has: two
//! desktops editing one product (the second meets the revision conflict), and the live changes
//! one desktop hears when another saves.

use std::path::Path;
use std::time::Duration;

mod common;

use pe_core::barcode::{Barcode, BarcodeFormat, PixelBox};
use pe_core::catalog::server::testing::fresh_database;
use pe_core::catalog::server::{CatalogUrl, ServerCatalog, ServerUrl};
use pe_core::catalog::server_changes::CatalogChange;
use pe_core::catalog::{
    copy, Catalog, CatalogError, ExportFormat, NewPhoto, ProductQuery, RevisionSource, SaveProduct, SortDirection,
    SortKey, UpdateProduct,
};
use pe_core::catalog::{AttemptOutcome, AttemptUsage, NewAttempt, RANKED_MATCHES};
use pe_core::pricing::Usd;
use pe_core::product::{FieldSource, Price, Product};
use pe_core::{Coded, ErrorCode};

const T0: i64 = 1_700_000_000_000;

fn no_env(_: &str) -> Option<String> {
    None
}

/// Name, brand, category, price, GTIN, uncertain (flagged).
type Sample = (&'static str, Option<&'static str>, Option<&'static str>, Option<f64>, Option<&'static str>, bool);

const SAMPLES: &[Sample] = &[
    ("Crunchy Oat Bars", Some("ACME"), Some("Cereal bars"), Some(3.49), Some("4006381333931"), false),
    ("oat milk", Some("Oatly"), Some("Dairy alternatives"), Some(2.19), None, true),
    ("Crème fraîche", Some("Élan"), Some("Dairy"), None, Some("96385074"), false),
    ("Granola", Some("acme"), Some("cereal bars"), Some(4.99), None, false),
    ("Apple juice", None, Some("Drinks"), Some(1.29), Some("036000291452"), false),
    ("Vanilla ice cream", Some("Häagen"), None, Some(6.5), None, true),
    ("Espresso beans", Some("Lavazza"), Some("Coffee"), Some(12.0), Some("8000070012349"), false),
    ("Dark chocolate", None, None, None, None, false),
    ("Green tea", Some("Oatly"), Some("Drinks"), Some(2.19), None, false),
    ("Rice crackers", Some("ACME"), Some("Snacks"), Some(1.99), None, true),
    ("Zesty lemonade", Some("Fizz"), Some("drinks"), Some(0.99), None, false),
    ("Deleted granola", Some("Gone"), Some("Cereal bars"), Some(1.0), None, false),
];

/// Three attempts for `photo`: a priced proposal with a barcode and where its name was read, a
/// billed failure, and a failure Gemini did not bill.
fn attempts_of(photo: i64) -> Vec<NewAttempt> {
    let usage = AttemptUsage {
        prompt_tokens: 1_290,
        output_tokens: 85,
        thoughts_tokens: 310,
        total_tokens: 1_685,
        cached_tokens: 40,
    };
    let barcode = Barcode {
        gtin: "4006381333931".into(),
        format: BarcodeFormat::Ean13,
        photo: 0,
        bounds: PixelBox { x_min: 10, y_min: 20, x_max: 200, y_max: 90 },
        box_2d: [20, 10, 90, 200],
    };
    let proposal = NewAttempt {
        photo_id: photo,
        model: "gemini-2.5-flash".into(),
        started_at: T0 + 5_000,
        latency_ms: 2_345,
        usage: Some(usage),
        raw_response: Some("{\"candidates\":[]}".into()),
        outcome: AttemptOutcome::Proposed {
            product: Product { name: "Crunchy Oat Bars".into(), ..Product::default() },
        },
        model_version: Some("gemini-2.5-flash-001".into()),
        cost: Some(Usd::from_nanos(1_234_567)),
        batch: false,
        barcodes: Some(vec![barcode]),
        more_photos: Vec::new(),
        sources: vec![FieldSource { field: "name".into(), photo: 0, box_2d: [100, 100, 300, 900] }],
    };
    let billed_failure = NewAttempt {
        started_at: T0 + 9_000,
        outcome: AttemptOutcome::Failed { code: ErrorCode::Blocked, message: "blocked: SAFETY".into() },
        cost: Some(Usd::from_nanos(500_000)),
        barcodes: Some(Vec::new()),
        sources: Vec::new(),
        batch: true,
        ..proposal.clone()
    };
    let unbilled = NewAttempt {
        started_at: T0 + 12_000,
        usage: None,
        raw_response: None,
        cost: None,
        model_version: None,
        outcome: AttemptOutcome::Failed { code: ErrorCode::Timeout, message: "no answer within 30 s".into() },
        barcodes: None,
        ..billed_failure.clone()
    };
    vec![proposal, billed_failure, unbilled]
}

/// A SQLite catalog with [`SAMPLES`] saved (one edited twice, the last deleted), and the same
/// catalog copied to a fresh server database.
async fn both(label: &str, dir: &Path) -> (Catalog, Catalog, String) {
    let path = dir.join(format!("{label}.sqlite3"));
    let local = Catalog::open(&path).unwrap();
    for (i, (name, brand, category, price, gtin, uncertain)) in (1u32..).zip(SAMPLES) {
        let photo = local
            .record_photo(NewPhoto {
                sha256: format!("{i:064x}"),
                original_path: format!("/shoot/{i}.jpg"),
                original_path_bytes: None,
                file_bytes: 1000,
                width: 640,
                height: 480,
                format: "jpeg".into(),
                thumbnail_jpeg: vec![0xFF, 0xD8, 0xFF, i as u8],
                seen_at: T0,
            })
            .await
            .unwrap();
        let saved = Product {
            name: (*name).into(),
            brand: brand.map(Into::into),
            category: category.map(Into::into),
            price: price.map(|amount| Price { amount, currency: "EUR".into() }),
            gtin: gtin.map(Into::into),
            uncertain_fields: if *uncertain { vec!["name".into()] } else { Vec::new() },
            ..Product::default()
        };
        // Saved out of name order, at distinct times (the default sort is by update).
        let at = T0 + i64::from((i * 7919) % 101);
        let record = local
            .save_product(SaveProduct {
                photo_id: photo,
                attempt_id: None,
                saved,
                saved_by: "alice".into(),
                saved_at: at,
            })
            .await
            .unwrap();
        if name.starts_with("Deleted") {
            local.delete_product(record.id, "alice", at + 1).await.unwrap();
        }
    }
    let granola = local.get_product(4).await.unwrap();
    let mut edited = granola.saved.clone();
    edited.description = Some("Honey and almonds.".into());
    local.update_product(update(4, 1, edited.clone(), "bob", T0 + 500)).await.unwrap();
    edited.price = Some(Price { amount: 5.49, currency: "EUR".into() });
    local.update_product(update(4, 2, edited, "carol", T0 + 600)).await.unwrap();

    let url = fresh_database(label).await;
    let server = CatalogUrl::parse(&url).unwrap();
    copy::copy_catalog(&CatalogUrl::Sqlite(path), &server, &no_env).await.unwrap();
    (local, server_catalog(&url).await, url)
}

async fn server_catalog(url: &str) -> Catalog {
    let url = CatalogUrl::parse(url).unwrap();
    Catalog::open_url_with(&url, &no_env, None).await.unwrap()
}

fn update(id: i64, expected: u32, saved: Product, by: &str, at: i64) -> UpdateProduct {
    UpdateProduct {
        id,
        expected_revision: expected,
        saved,
        attempt_id: None,
        source: RevisionSource::Edit,
        saved_by: by.into(),
        saved_at: at,
    }
}

/// Every query of the table answers the same on both: the same rows in the same order, the same
/// total (a relevance sort of a text search compares the rows as a set: bm25 and ts_rank score
/// differently).
#[tokio::test(flavor = "multi_thread")]
async fn every_query_of_the_catalog_table_answers_the_same_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let (local, server, _) = both("table", dir.path()).await;
    assert!(server.server().is_some() && local.server().is_none());

    let mut queries: Vec<ProductQuery> = Vec::new();
    for sort in [
        SortKey::Relevance,
        SortKey::Updated,
        SortKey::Name,
        SortKey::Brand,
        SortKey::Category,
        SortKey::Price,
        SortKey::Gtin,
    ] {
        for direction in [SortDirection::Asc, SortDirection::Desc] {
            queries.push(ProductQuery { sort, direction, ..Default::default() });
            // Pages of three, past the end too.
            for offset in [0, 3, 9, 12] {
                queries.push(ProductQuery { sort, direction, offset, limit: 3, ..Default::default() });
            }
        }
    }
    let filtered = [
        ProductQuery { category: Some("CEREAL BARS".into()), ..Default::default() },
        ProductQuery { category: Some("drinks".into()), sort: SortKey::Name, ..Default::default() },
        ProductQuery { brand: Some("acme".into()), sort: SortKey::Price, ..Default::default() },
        ProductQuery { flagged: Some(true), ..Default::default() },
        ProductQuery { flagged: Some(false), sort: SortKey::Gtin, direction: SortDirection::Asc, ..Default::default() },
        ProductQuery { price_min: Some(2.19), ..Default::default() },
        ProductQuery { price_max: Some(2.19), sort: SortKey::Price, ..Default::default() },
        ProductQuery { price_min: Some(1.0), price_max: Some(5.0), brand: Some("Oatly".into()), ..Default::default() },
        ProductQuery { text: "oat".into(), sort: SortKey::Name, ..Default::default() },
        ProductQuery { text: "creme".into(), ..Default::default() },
        ProductQuery { text: "ACME".into(), category: Some("snacks".into()), ..Default::default() },
        ProductQuery { text: "granola".into(), ..Default::default() },
        ProductQuery { text: "honey".into(), sort: SortKey::Updated, ..Default::default() },
        ProductQuery {
            text: "dr".into(),
            sort: SortKey::Category,
            direction: SortDirection::Asc,
            ..Default::default()
        },
        ProductQuery { text: "zzz".into(), ..Default::default() },
        ProductQuery { text: "( * :".into(), ..Default::default() },
        // Characters the app takes for a word and the server's parser does not (no term at all
        // on the server): nothing matches, with a filter's value numbered without the text.
        ProductQuery { text: "½".into(), ..Default::default() },
        ProductQuery { text: "²".into(), brand: Some("acme".into()), ..Default::default() },
        ProductQuery { text: "a".into(), sort: SortKey::Name, offset: 2, limit: 2, ..Default::default() },
        ProductQuery { text: "a".into(), direction: SortDirection::Asc, ..Default::default() },
    ];
    queries.extend(filtered);
    for query in queries {
        let a = local.query_products(query.clone()).await.unwrap();
        let b = server.query_products(query.clone()).await.unwrap();
        assert_eq!(b.total, a.total, "{query:?}: totals");
        let ids = |page: &pe_core::catalog::ProductPage| page.rows.iter().map(|r| r.id).collect::<Vec<_>>();
        let (mut x, mut y) = (ids(&a), ids(&b));
        if !query.text.trim().is_empty() && query.sort == SortKey::Relevance && query.limit >= 12 {
            x.sort_unstable();
            y.sort_unstable();
        }
        assert_eq!(y, x, "{query:?}: rows");
        if query.sort != SortKey::Relevance || query.text.is_empty() {
            assert_eq!(b.rows, a.rows, "{query:?}: the rows themselves");
        }
    }
    // A text search counts its matches only so far past the page (1,000 in the app, 2 here), the
    // same on both: "at least" until the page is near the end, then exact.
    let broad = ProductQuery { text: "a".into(), sort: SortKey::Name, limit: 2, ..Default::default() };
    let all = local.query_products(broad.clone()).await.unwrap().total;
    assert!(all >= 5, "'a' matches most of the samples: {all}");
    let all32 = u32::try_from(all).unwrap();
    for offset in [0, 1, all32 - 3, all32 - 2, all32 - 1, all32] {
        let query = ProductQuery { offset, ..broad.clone() };
        let a = local.query_products_counting(query.clone(), 2).await.unwrap();
        let b = server.query_products_counting(query.clone(), 2).await.unwrap();
        let at_least = u64::from(offset) + 2;
        let expected = if at_least < all { (at_least, true) } else { (all, false) };
        assert_eq!((a.total, a.total_capped), expected, "SQLite, offset {offset}");
        assert_eq!((b.total, b.total_capped), expected, "server, offset {offset}");
        assert_eq!(b.rows, a.rows, "offset {offset}");
    }
    // No text: the count is exact.
    let unfiltered = local.query_products_counting(ProductQuery::default(), 2).await.unwrap();
    assert_eq!((unfiltered.total, unfiltered.total_capped), (11, false));
    assert_eq!(server.facets().await.unwrap(), local.facets().await.unwrap());
    assert_eq!(server.count_products().await.unwrap(), 11);
    assert_eq!(server.list_products(0, 5).await.unwrap(), local.list_products(0, 5).await.unwrap());
    for id in 1..=12 {
        assert_eq!(server.get_product(id).await.unwrap(), local.get_product(id).await.unwrap(), "product {id}");
        assert_eq!(server.history(id).await.unwrap(), local.history(id).await.unwrap(), "history of {id}");
        assert_eq!(server.product_photos(id).await.unwrap(), local.product_photos(id).await.unwrap());
    }
    // A row names its photo by hash; the window loads the thumbnail by that hash. Anything that
    // is not a lowercase hash of a photo in the catalog has none (and is never a query).
    let row = local.list_products(0, 20).await.unwrap().into_iter().find(|r| r.photo_id == 3).unwrap();
    assert_eq!(row.photo_sha256, format!("{:064x}", 3));
    for catalog in [&local, &server] {
        assert_eq!(catalog.thumbnail_jpeg(&row.photo_sha256).await.unwrap(), Some(vec![0xFF, 0xD8, 0xFF, 3]));
        assert_eq!(catalog.thumbnail_jpeg(&format!("{:064x}", 10)).await.unwrap(), Some(vec![0xFF, 0xD8, 0xFF, 10]));
        for other in [format!("{:064x}", 99), format!("{:064X}", 10), "3".into(), "' OR 1=1 --".into()] {
            assert_eq!(catalog.thumbnail_jpeg(&other).await.unwrap(), None, "{other}");
        }
    }
    // Each photo says which computer its file is on (the copy carries it to the server).
    let host = pe_core::catalog::local_host();
    assert!(host.is_some(), "this machine has a host name");
    assert_eq!(server.get_product(3).await.unwrap().original_host, host);
    assert_eq!(server.product_for_photo(4).await.unwrap(), Some(4));
    let missing = server.get_product(99).await.unwrap_err();
    assert_eq!(missing.code(), ErrorCode::NotFound, "{missing}");
    // Every export format writes the same bytes.
    for format in [ExportFormat::Shopify, ExportFormat::Csv, ExportFormat::Json, ExportFormat::Jsonl] {
        let (a, b) = (dir.path().join("local.out"), dir.path().join("server.out"));
        let rows = local.export_to_file(format, &a).await.unwrap().rows;
        assert_eq!(server.export_to_file(format, &b).await.unwrap().rows, rows);
        assert_eq!(rows, 11);
        assert_eq!(std::fs::read_to_string(&b).unwrap(), std::fs::read_to_string(&a).unwrap(), "{format:?}");
    }
}

/// The same edits on both backends give the same products, revisions, histories and refusals.
#[tokio::test(flavor = "multi_thread")]
async fn edits_deletes_and_duplicates_behave_the_same_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let (local, server, _) = both("edits", dir.path()).await;
    for catalog in [&local, &server] {
        let oat = catalog.get_product(1).await.unwrap();
        let mut saved = oat.saved.clone();
        saved.name = "Crunchy Oat Bars, 6 pack".into();
        let edited = catalog.update_product(update(1, 1, saved.clone(), "bob", T0 + 1000)).await.unwrap();
        assert_eq!((edited.revision, edited.updated_by.as_str()), (2, "bob"));
        // Saving the same again writes nothing.
        let same = catalog.update_product(update(1, 2, saved.clone(), "bob", T0 + 1001)).await.unwrap();
        assert_eq!(same.revision, 2);
        // A stale editor is refused, naming who saved.
        let stale = catalog.update_product(update(1, 1, oat.saved.clone(), "carol", T0 + 1002)).await.unwrap_err();
        assert!(
            matches!(stale, CatalogError::Conflict { current: 2, expected: 1, ref updated_by, .. } if updated_by == "bob")
        );
        // Invalid fields are refused.
        let mut bad = saved.clone();
        bad.gtin = Some("123".into());
        let invalid = catalog.update_product(update(1, 2, bad, "bob", T0 + 1003)).await.unwrap_err();
        assert_eq!(invalid.code(), ErrorCode::Validation, "{invalid}");
        // Delete, refuse an edit of the deleted product, undo.
        catalog.delete_product(1, "bob", T0 + 1004).await.unwrap();
        assert!(matches!(catalog.delete_product(1, "bob", T0 + 1005).await, Err(CatalogError::Deleted { id: 1 })));
        assert!(matches!(
            catalog.update_product(update(1, 2, saved.clone(), "bob", T0 + 1006)).await,
            Err(CatalogError::Deleted { id: 1 })
        ));
        let back = catalog.undelete_product(1, "bob", T0 + 1007).await.unwrap();
        assert_eq!(back.deleted_at, None);
        assert_eq!(catalog.undelete_product(1, "bob", T0 + 1008).await.unwrap_err().code(), ErrorCode::Validation);
        let copy = catalog.duplicate_product(1, "dave", T0 + 1009).await.unwrap();
        assert_eq!(
            (copy.id, copy.duplicate_of, copy.saved.name.as_str()),
            (13, Some(1), "Crunchy Oat Bars, 6 pack (copy)")
        );
        assert_eq!(catalog.get_product(404).await.unwrap_err().code(), ErrorCode::NotFound);
    }
    for id in [1, 13] {
        assert_eq!(server.get_product(id).await.unwrap(), local.get_product(id).await.unwrap(), "product {id}");
        assert_eq!(server.history(id).await.unwrap(), local.history(id).await.unwrap(), "history of {id}");
    }
    let all = ProductQuery { limit: 100, ..Default::default() };
    assert_eq!(server.query_products(all.clone()).await.unwrap(), local.query_products(all).await.unwrap());
    // Search follows every write (the server's search table is kept by triggers): the new name,
    // the copy, a deleted product gone and an undeleted one back.
    server.delete_product(7, "bob", T0 + 2000).await.unwrap();
    local.delete_product(7, "bob", T0 + 2000).await.unwrap();
    for text in ["pack", "6 pack copy", "crunchy", "espresso", "lavazza", "granola"] {
        let query = ProductQuery { text: text.into(), sort: SortKey::Name, ..Default::default() };
        let (a, b) = (local.query_products(query.clone()).await.unwrap(), server.query_products(query).await.unwrap());
        assert_eq!(b, a, "{text:?} after the edits");
    }
    let gone = ProductQuery { text: "espresso".into(), ..Default::default() };
    assert_eq!(server.query_products(gone).await.unwrap().total, 0, "a deleted product leaves search");
    // The audit trail and the cost meter: the same attempts recorded on both (a proposal with its
    // barcodes and sources, a billed failure, one without usage) read back the same, and cost the same.
    for attempt in attempts_of(1) {
        let (a, b) =
            (local.record_attempt(attempt.clone()).await.unwrap(), server.record_attempt(attempt).await.unwrap());
        assert_eq!(a, b, "attempt ids follow the copied ones on both");
    }
    let (a, b) = (local.attempts(1).await.unwrap(), server.attempts(1).await.unwrap());
    assert_eq!(a.len(), 3);
    assert_eq!(b, a, "a photo's attempts");
    assert_eq!(server.photo_cost(1).await.unwrap(), local.photo_cost(1).await.unwrap());
    let spent = server.spent_between(T0, T0 + 86_400_000).await.unwrap();
    assert_eq!(spent, local.spent_between(T0, T0 + 86_400_000).await.unwrap());
    assert_eq!((spent.calls, spent.input_tokens, spent.output_tokens), (3, 2_580, 170));
    for offset in [0, 3_600_000, -36_000_000] {
        let (a, b) = (local.usage_by_day(T0, offset).await.unwrap(), server.usage_by_day(T0, offset).await.unwrap());
        assert!(!a.is_empty());
        assert_eq!(b, a, "the cost per day at a UTC offset of {offset} ms");
    }
    assert_eq!(
        server.measured_call("gemini-2.5-flash").await.unwrap(),
        local.measured_call("gemini-2.5-flash").await.unwrap()
    );
    // A backup of a server catalog is refused the same way (the server has its own: pg_dump).
    let backup = server.backup_to(&dir.path().join("server.sqlite3")).await.unwrap_err();
    assert!(matches!(backup, CatalogError::ServerNotSupported { .. }), "{backup}");
    let restore = server.restore_from(&dir.path().join("server.sqlite3"), T0).await.unwrap_err();
    assert!(matches!(restore, CatalogError::ServerNotSupported { .. }), "{restore}");
}

/// Two desktops on one server: saves of the same product at once are serialized (one wins, the
/// other meets the conflict), and each desktop hears what the other saved within a second.
#[tokio::test(flavor = "multi_thread")]
async fn two_desktops_edit_one_product_and_hear_each_others_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (_local, alice, url) = both("desktops", dir.path()).await;
    // Bob's desktop: its own pool, the same server.
    let bob =
        Catalog::on_server(ServerCatalog::connect_with(&ServerUrl::parse(&url).unwrap(), &no_env, None).await.unwrap());
    let mut heard = bob.subscribe_changes().expect("a server catalog has changes");
    assert!(Catalog::open(&dir.path().join("local.sqlite3")).unwrap().subscribe_changes().is_none());
    // LISTEN runs on its own connection: it says when it listens.
    let listening = tokio::time::timeout(Duration::from_secs(10), heard.recv()).await.expect("listening").unwrap();
    assert_eq!(listening, CatalogChange::Listening);

    let product = alice.get_product(2).await.unwrap();
    let mut saved = product.saved.clone();
    saved.brand = Some("Oatly Barista".into());
    let started = std::time::Instant::now();
    alice.update_product(update(2, 1, saved.clone(), "alice", T0 + 2000)).await.unwrap();
    let change = tokio::time::timeout(Duration::from_secs(1), heard.recv()).await.expect("heard within a second");
    assert_eq!(change.unwrap(), CatalogChange::Product(2));
    eprintln!("bob heard alice's save after {:?}", started.elapsed());
    // Bob's editor had revision 1 open: his save is refused, saying alice saved revision 2.
    let mut his = product.saved.clone();
    his.category = Some("Plant milk".into());
    let conflict = bob.update_product(update(2, 1, his.clone(), "bob", T0 + 2001)).await.unwrap_err();
    assert_eq!(conflict.code(), ErrorCode::RevisionConflict);
    assert!(conflict.to_string().contains("changed by alice at revision 2"), "{conflict}");

    // Both save revision 3 of the same product at once: exactly one wins.
    let mut theirs = saved.clone();
    theirs.description = Some("Alice's".into());
    his = saved.clone();
    his.description = Some("Bob's".into());
    let (a, b) = tokio::join!(
        alice.update_product(update(2, 2, theirs, "alice", T0 + 3000)),
        bob.update_product(update(2, 2, his, "bob", T0 + 3000)),
    );
    assert!(a.is_ok() != b.is_ok(), "one wins: {a:?} {b:?}");
    let loser = a.err().or(b.err()).unwrap();
    assert!(matches!(loser, CatalogError::Conflict { expected: 2, current: 3, .. }), "{loser}");
    assert_eq!(alice.get_product(2).await.unwrap().revision, 3);
    assert_eq!(alice.history(2).await.unwrap().len(), 3);
    // A delete and a duplicate are heard too; a refused write is not.
    alice.delete_product(3, "alice", T0 + 4000).await.unwrap();
    let copy = alice.duplicate_product(5, "alice", T0 + 4001).await.unwrap();
    let mut changes = Vec::new();
    while changes.len() < 3 {
        let change = tokio::time::timeout(Duration::from_secs(1), heard.recv()).await.expect("heard").unwrap();
        changes.push(change);
    }
    assert_eq!(changes[0], CatalogChange::Product(2), "the winning save of revision 3");
    assert_eq!(&changes[1..], [CatalogChange::Product(3), CatalogChange::Product(copy.id)]);
    assert!(tokio::time::timeout(Duration::from_millis(300), heard.recv()).await.is_err(), "nothing else");
}

/// More matches than relevance ranks ([`RANKED_MATCHES`]), on both backends: the newest matches
/// are ranked and the older ones follow newest first, pages walk one total order in both
/// directions, and a count capped past the page pages the same. Product k has id 13k (up to
/// 16,900), so the matches span five bands of the server's search index (pg/0011, 4,096 ids a
/// band). On the server every page is read each way a search can find its newest matches
/// (`SearchWay`, forced), and the way the app chooses (with every product a match: through the
/// index for the count to 10,000, since 1,300 < 10,001 wanted, and by walking for the count to
/// 100, see `server_listing::way`); the filtered search reads and scores through the words index.
/// The scores differ between the backends (bm25 and ts_rank), so the ranked part is compared as
/// a set.
#[tokio::test(flavor = "multi_thread")]
async fn a_broad_search_ranks_the_newest_matches_and_pages_the_same_on_both_backends() {
    use pe_core::catalog::server::testing::{force_search_way, SearchWay};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broad.sqlite3");
    let local = Catalog::open(&path).unwrap();
    let n = i64::from(RANKED_MATCHES) + 300;
    // Product n is the best match: its name is the word alone.
    common::granola_products_spread(&local, n, false, BROAD_STRIDE).await;
    let url = fresh_database("broad").await;
    copy::copy_catalog(&CatalogUrl::Sqlite(path), &CatalogUrl::parse(&url).unwrap(), &no_env).await.unwrap();
    let server = server_catalog(&url).await;

    broad_pages("SQLite", &local, n).await;
    for way in [None, Some(SearchWay::Index), Some(SearchWay::Bands), Some(SearchWay::Walk)] {
        force_search_way(way);
        let label = format!("server, {way:?}");
        broad_pages(&label, &server, n).await;
        // Both backends' older matches, and their totals, are the same page for page.
        let a = broad_walk(&local, |o| broad_query(SortDirection::Desc, o, None), 100).await;
        let b = broad_walk(&server, |o| broad_query(SortDirection::Desc, o, None), 100).await;
        assert_eq!(b.0, a.0, "{label}: the totals each page told");
        assert_eq!(b.1[RANKED_MATCHES as usize..], a.1[RANKED_MATCHES as usize..], "{label}");
    }
    force_search_way(None);
}

/// Product k's id in the broad test.
const BROAD_STRIDE: i64 = 13;

fn broad_query(direction: SortDirection, offset: u32, brand: Option<&str>) -> ProductQuery {
    ProductQuery {
        text: "gran".into(),
        direction,
        offset,
        limit: 333,
        brand: brand.map(Into::into),
        ..Default::default()
    }
}

/// Every page of one order, with the total each page told, counting `cap` past the page.
async fn broad_walk(catalog: &Catalog, query: impl Fn(u32) -> ProductQuery, cap: u64) -> (Vec<(u64, bool)>, Vec<i64>) {
    let (mut totals, mut ids, mut offset) = (Vec::new(), Vec::new(), 0);
    loop {
        let page = catalog.query_products_counting(query(offset), cap).await.unwrap();
        totals.push((page.total, page.total_capped));
        if page.rows.is_empty() {
            return (totals, ids);
        }
        ids.extend(page.rows.iter().map(|r| r.id));
        offset += 333;
    }
}

/// The broad test's pages on one catalog of `n` granolas.
async fn broad_pages(label: &str, catalog: &Catalog, n: i64) {
    let id = |k: i64| k * BROAD_STRIDE;
    let cutoff = n - i64::from(RANKED_MATCHES) + 1;
    let (totals, best_first) = broad_walk(catalog, |o| broad_query(SortDirection::Desc, o, None), 10_000).await;
    assert!(totals.iter().all(|t| *t == (n as u64, false)), "{label}: {totals:?}");
    let mut ranked = best_first[..RANKED_MATCHES as usize].to_vec();
    assert_eq!(ranked[0], id(n), "{label}: the best match first");
    ranked.sort_unstable();
    assert_eq!(ranked, (cutoff..=n).map(id).collect::<Vec<_>>(), "{label}: the newest matches are the ranked ones");
    let older = &best_first[RANKED_MATCHES as usize..];
    assert_eq!(older, (1..cutoff).rev().map(id).collect::<Vec<_>>(), "{label}: then the older ones, newest first");
    for offset in [0, RANKED_MATCHES - 10, n as u32 - 50] {
        let rows = catalog.search_products("gran", offset, 50).await.unwrap();
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        assert_eq!(ids, best_first[offset as usize..offset as usize + 50], "{label}: search_products at {offset}");
    }
    let (_, worst_first) = broad_walk(catalog, |o| broad_query(SortDirection::Asc, o, None), 10_000).await;
    assert_eq!(worst_first, best_first.iter().rev().copied().collect::<Vec<_>>(), "{label}: ascending");
    // A count capped 100 past the page: "at least" on every page but the last ones, and the
    // same pages.
    let (capped_totals, capped) = broad_walk(catalog, |o| broad_query(SortDirection::Desc, o, None), 100).await;
    assert_eq!(capped, best_first, "{label}: the pages of a capped count");
    assert_eq!(capped_totals[0], (100, true), "{label}");
    assert_eq!(*capped_totals.last().unwrap(), (n as u64, false), "{label}");
    let (_, capped_asc) = broad_walk(catalog, |o| broad_query(SortDirection::Asc, o, None), 100).await;
    assert_eq!(capped_asc, worst_first, "{label}: ascending, capped");
    // A filter narrows the matches to fewer than are ranked: all of them ranked, the best first.
    let (totals, even) = broad_walk(catalog, |o| broad_query(SortDirection::Desc, o, Some("even")), 10_000).await;
    assert_eq!(totals[0], (n as u64 / 2, false), "{label}");
    assert_eq!(even[0], id(n), "{label}");
    let mut sorted = even.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=n).filter(|k| k % 2 == 0).map(id).collect::<Vec<_>>(), "{label}: every even match once");
}
