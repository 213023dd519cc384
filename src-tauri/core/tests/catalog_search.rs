//! Full-text search of saved products against a real SQLite file in a temporary directory.

use pe_core::catalog::migrations::{self, MIGRATIONS};
use pe_core::catalog::{
    Catalog, FacetValue, PhotoId, ProductQuery, ProductSummary, SaveProduct, SortDirection, SortKey, RANKED_MATCHES,
    SCHEMA_VERSION,
};
use pe_core::product::{Attribute, Price, Product};
use rusqlite::{params, Connection};

mod common;

use common::{open, photo, T0};

fn product(name: &str, description: Option<&str>) -> Product {
    Product {
        name: name.into(),
        brand: Some("Morning Field".into()),
        category: Some("Breakfast cereal".into()),
        description: description.map(Into::into),
        price: Some(Price { amount: 3.49, currency: "EUR".into() }),
        ..Default::default()
    }
}

/// Records photo `n` and saves `product` for it at `T0 + n`.
async fn add(catalog: &Catalog, n: u32, product: Product) -> i64 {
    let photo_id = catalog.record_photo(photo(n)).await.unwrap();
    let save = SaveProduct {
        photo_id,
        attempt_id: None,
        saved: product,
        saved_by: "tester".into(),
        saved_at: T0 + i64::from(n),
    };
    catalog.save_product(save).await.unwrap().id
}

async fn search(catalog: &Catalog, query: &str) -> Vec<String> {
    names(&catalog.search_products(query, 0, 100).await.unwrap())
}

fn names(rows: &[ProductSummary]) -> Vec<String> {
    rows.iter().map(|p| p.name.clone()).collect()
}

#[tokio::test]
async fn an_empty_file_is_migrated_to_the_search_schema() {
    let (_dir, catalog) = open();
    assert_eq!(catalog.schema_version().await.unwrap(), SCHEMA_VERSION);
    let tokenize: String = catalog
        .with_connection(|conn| {
            Ok(conn.query_row("SELECT sql FROM sqlite_schema WHERE name = 'products_fts'", [], |r| r.get(0))?)
        })
        .await
        .unwrap();
    assert!(tokenize.contains("remove_diacritics 2"), "{tokenize}");
    assert!(search(&catalog, "granola").await.is_empty());
    assert!(catalog.search_products("", 0, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn products_saved_at_version_1_are_searchable_after_the_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.sqlite3");
    {
        let mut conn = Connection::open(&path).unwrap();
        assert_eq!(migrations::apply(&mut conn, &MIGRATIONS[..1]).unwrap(), [1]);
        for (n, saved) in [
            (1, product("Crunchy Oat Granola", Some("Baked clusters with honey."))),
            (
                2,
                Product {
                    attributes: vec![Attribute { name: "Flavor".into(), value: "Vanilla".into() }],
                    ..product("Oat Drink", None)
                },
            ),
        ] {
            conn.execute(
                "INSERT INTO photos (id, sha256, original_path, file_bytes, width, height, format, thumbnail_jpeg,
                                     first_seen_at, last_seen_at)
                 VALUES (?1, ?2, 'x.jpg', 1, 1, 1, 'jpeg', x'FFD8', ?3, ?3)",
                params![n, format!("{n:064x}"), T0],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO products (photo_id, saved_json, revision, name, brand, category, created_at, updated_at)
                 VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?6)",
                params![n, serde_json::to_string(&saved).unwrap(), saved.name, saved.brand, saved.category, T0 + n],
            )
            .unwrap();
        }
        assert_eq!(migrations::schema_version(&conn).unwrap(), 1);
    }
    let catalog = Catalog::open(&path).unwrap();
    assert_eq!(catalog.schema_version().await.unwrap(), SCHEMA_VERSION);
    assert_eq!(search(&catalog, "granola").await, ["Crunchy Oat Granola"]);
    assert_eq!(search(&catalog, "honey").await, ["Crunchy Oat Granola"], "the description was backfilled");
    assert_eq!(search(&catalog, "vanilla").await, ["Oat Drink"], "the attributes were backfilled");
    assert_eq!(search(&catalog, "oat").await.len(), 2);
    // And products saved after the migration join them.
    add(&catalog, 3, product("Oat Flakes", None)).await;
    assert_eq!(search(&catalog, "oat").await.len(), 3);
}

#[tokio::test]
async fn terms_match_word_prefixes_and_all_must_match() {
    let (_dir, catalog) = open();
    add(&catalog, 1, product("Crunchy Oat Granola", None)).await;
    add(&catalog, 2, product("Oat Drink", None)).await;
    add(&catalog, 3, Product { brand: Some("Stridewell".into()), ..product("Trail Runner 3", None) }).await;
    assert_eq!(search(&catalog, "gran").await, ["Crunchy Oat Granola"]);
    assert_eq!(search(&catalog, "GRAN").await, ["Crunchy Oat Granola"]);
    assert_eq!(search(&catalog, "oa gr").await, ["Crunchy Oat Granola"]);
    assert_eq!(search(&catalog, "stride").await, ["Trail Runner 3"], "brands are searched");
    assert!(search(&catalog, "ranola").await.is_empty(), "prefixes, not infixes");
    assert!(search(&catalog, "oat shoe").await.is_empty(), "every term must match");
}

#[tokio::test]
async fn diacritics_are_folded_both_ways() {
    let (_dir, catalog) = open();
    add(&catalog, 1, product("Crème Brûlée", None)).await;
    add(&catalog, 2, product("Bircher Musli", None)).await;
    assert_eq!(search(&catalog, "creme").await, ["Crème Brûlée"]);
    assert_eq!(search(&catalog, "brulee").await, ["Crème Brûlée"]);
    assert_eq!(search(&catalog, "CRÈ").await, ["Crème Brûlée"]);
    assert_eq!(search(&catalog, "müsli").await, ["Bircher Musli"]);
    assert_eq!(search(&catalog, "musli").await, ["Bircher Musli"]);
}

#[tokio::test]
async fn a_name_match_ranks_above_a_description_match() {
    let (_dir, catalog) = open();
    // The description-only match is saved last, so newest-first order alone would put it first.
    add(&catalog, 1, product("Honey Granola", None)).await;
    add(&catalog, 2, product("Plain Granola", Some("Tastes of honey, honey and more honey."))).await;
    assert_eq!(search(&catalog, "honey").await, ["Honey Granola", "Plain Granola"]);
    assert_eq!(search(&catalog, "granola").await.len(), 2);
}

#[tokio::test]
async fn updates_and_deletes_keep_the_index_in_sync() {
    let (_dir, catalog) = open();
    let id = add(&catalog, 1, product("Crunchy Oat Granola", None)).await;
    add(&catalog, 2, product("Oat Drink", None)).await;
    let photo_id: PhotoId = 1;
    let resave = SaveProduct {
        photo_id,
        attempt_id: None,
        saved: product("Spelt Muesli", None),
        saved_by: "tester".into(),
        saved_at: T0 + 10,
    };
    assert_eq!(catalog.save_product(resave).await.unwrap().id, id);
    assert!(search(&catalog, "granola").await.is_empty(), "the old name is gone from the index");
    assert_eq!(search(&catalog, "spelt").await, ["Spelt Muesli"]);
    assert_eq!(search(&catalog, "oat").await, ["Oat Drink"]);

    let removed = catalog
        .with_connection(move |conn| Ok(conn.execute("DELETE FROM products WHERE id = ?1", [id])?))
        .await
        .unwrap();
    assert_eq!(removed, 1);
    assert!(search(&catalog, "spelt").await.is_empty());
    let indexed: i64 = catalog
        .with_connection(|conn| Ok(conn.query_row("SELECT count(*) FROM products_fts", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(indexed, 1);
    let check: String = catalog
        .with_connection(|conn| {
            conn.execute("INSERT INTO products_fts (products_fts, rank) VALUES ('integrity-check', 1)", [])?;
            Ok(conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
        })
        .await
        .unwrap();
    assert_eq!(check, "ok");
}

#[tokio::test]
async fn hostile_input_is_searched_as_text() {
    let (_dir, catalog) = open();
    add(&catalog, 1, product("Oat Drink", None)).await;
    add(&catalog, 2, product("AND Or Not", None)).await;
    for query in [
        "\"",
        "\"oat",
        "oat\"",
        "\"\"",
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "oat AND",
        "AND oat",
        "NOT oat",
        "*",
        "oat*",
        "*oat",
        "(",
        ")",
        "(oat",
        "oat)",
        "-",
        "-oat",
        "oat -drink",
        ":",
        "name:oat",
        "{name}: oat",
        "^oat",
        "+",
        "NEAR(oat drink)",
        "oat OR drink",
        "'",
        "%",
        "\\",
        "oat \"drink\"",
        "\0",
    ] {
        let result = catalog.search_products(query, 0, 10).await;
        assert!(result.is_ok(), "{query:?}: {result:?}");
    }
    // Operators are plain words: "and" finds the product named "AND Or Not", and nothing else.
    assert_eq!(search(&catalog, "AND").await, ["AND Or Not"]);
    assert_eq!(search(&catalog, "oat OR drink").await, Vec::<String>::new(), "OR is a term, not an operator");
    // Punctuation around a term does not stop it matching.
    assert_eq!(search(&catalog, "(oat)").await, ["Oat Drink"]);
    assert_eq!(search(&catalog, "\"oat\"").await, ["Oat Drink"]);
    assert_eq!(search(&catalog, "name:oat").await, Vec::<String>::new(), "not a column filter: \"name oat\"");
    // Nothing searchable is a plain listing.
    assert_eq!(search(&catalog, " * ( - : ").await, ["AND Or Not", "Oat Drink"]);
    assert_eq!(search(&catalog, "   ").await, ["AND Or Not", "Oat Drink"]);
}

#[tokio::test]
async fn results_are_paginated() {
    let (_dir, catalog) = open();
    for n in 1..=5 {
        add(&catalog, n, product(&format!("Granola {n}"), None)).await;
    }
    add(&catalog, 6, product("Oat Drink", None)).await;
    let page = |offset, limit| {
        let catalog = catalog.clone();
        async move { names(&catalog.search_products("granola", offset, limit).await.unwrap()) }
    };
    // Equal scores: newest first.
    assert_eq!(page(0, 2).await, ["Granola 5", "Granola 4"]);
    assert_eq!(page(2, 2).await, ["Granola 3", "Granola 2"]);
    assert_eq!(page(4, 2).await, ["Granola 1"]);
    assert!(page(6, 2).await.is_empty());
    // A blank query pages like list_products.
    assert_eq!(catalog.search_products("", 1, 2).await.unwrap(), catalog.list_products(1, 2).await.unwrap());
}

/// The catalog table's fixture: varied brands (two spellings of one), categories, prices (one tie,
/// other currencies), GTINs and flags, with gaps in every nullable column.
async fn table(catalog: &Catalog) -> Vec<i64> {
    type Row = (
        &'static str,
        Option<&'static str>,
        Option<&'static str>,
        Option<(f64, &'static str)>,
        Option<&'static str>,
        &'static [&'static str],
    );
    let rows: [Row; 6] = [
        ("apple Juice", Some("Sunny"), Some("Drinks"), Some((1.99, "EUR")), Some("4006381333931"), &[]),
        ("Banana Chips", Some("sunny"), Some("Snacks"), Some((3.5, "EUR")), None, &["price"]),
        ("cherry Jam", None, Some("Spreads"), None, Some("96385074"), &[]),
        ("Date Bar", Some("Nutri"), Some("snacks"), Some((0.99, "USD")), Some("036000291452"), &["gtin", "brand"]),
        ("Elderflower Soda", Some("Fizz"), None, Some((1.99, "EUR")), None, &[]),
        ("fig Spread", Some("Nutri"), Some("Spreads"), Some((4.25, "GBP")), Some("5901234123457"), &[]),
    ];
    let mut ids = Vec::new();
    for (n, (name, brand, category, price, gtin, uncertain)) in rows.into_iter().enumerate() {
        let saved = Product {
            name: name.into(),
            brand: brand.map(Into::into),
            category: category.map(Into::into),
            price: price.map(|(amount, currency)| Price { amount, currency: currency.into() }),
            gtin: gtin.map(Into::into),
            uncertain_fields: uncertain.iter().map(|f| f.to_string()).collect(),
            ..Default::default()
        };
        ids.push(add(catalog, n as u32 + 1, saved).await);
    }
    ids
}

async fn query(catalog: &Catalog, query: ProductQuery) -> (u64, Vec<String>) {
    let page = catalog.query_products(query).await.unwrap();
    (page.total, names(&page.rows))
}

/// What SQLite's NOCASE sort with nulls last and ties by id should give, computed in Rust.
fn expected_order(rows: &[ProductSummary], sort: SortKey, direction: SortDirection) -> Vec<String> {
    fn text(value: &Option<String>) -> Option<String> {
        value.as_ref().map(|v| v.to_ascii_lowercase())
    }
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| {
        let (x, y): (Option<String>, Option<String>) = match sort {
            SortKey::Name => (Some(a.name.to_ascii_lowercase()), Some(b.name.to_ascii_lowercase())),
            SortKey::Brand => (text(&a.brand), text(&b.brand)),
            SortKey::Category => (text(&a.category), text(&b.category)),
            SortKey::Gtin => (a.gtin.clone(), b.gtin.clone()),
            SortKey::Price => {
                let cents = |r: &ProductSummary| r.price.as_ref().map(|p| format!("{:012.3}", p.amount));
                (cents(a), cents(b))
            }
            SortKey::Updated | SortKey::Relevance => {
                (Some(format!("{:020}", a.updated_at)), Some(format!("{:020}", b.updated_at)))
            }
        };
        let by_value = match (x, y) {
            (Some(x), Some(y)) if direction == SortDirection::Asc => x.cmp(&y),
            (Some(x), Some(y)) => y.cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        let by_id = if direction == SortDirection::Asc { a.id.cmp(&b.id) } else { b.id.cmp(&a.id) };
        by_value.then(by_id)
    });
    names(&rows)
}

#[tokio::test]
async fn every_sort_key_both_ways_with_missing_values_last_and_stable_pages() {
    let (_dir, catalog) = open();
    let ids = table(&catalog).await;
    // cherry Jam is edited last, so it is the most recently updated.
    let resave = SaveProduct {
        photo_id: 3,
        attempt_id: None,
        saved: Product {
            name: "cherry Jam".into(),
            category: Some("Spreads".into()),
            gtin: Some("96385074".into()),
            ..Default::default()
        },
        saved_by: "tester".into(),
        saved_at: T0 + 100,
    };
    assert_eq!(catalog.save_product(resave).await.unwrap().id, ids[2]);
    let all = catalog.query_products(ProductQuery { limit: 100, ..Default::default() }).await.unwrap().rows;
    assert_eq!(all.len(), 6);
    for sort in [
        SortKey::Relevance,
        SortKey::Name,
        SortKey::Brand,
        SortKey::Category,
        SortKey::Price,
        SortKey::Gtin,
        SortKey::Updated,
    ] {
        for direction in [SortDirection::Asc, SortDirection::Desc] {
            let expected = expected_order(&all, sort, direction);
            let whole = ProductQuery { sort, direction, ..Default::default() };
            assert_eq!(query(&catalog, whole.clone()).await, (6, expected.clone()), "{sort:?} {direction:?}");
            // Pages of two add up to the whole list, each with the full total.
            let mut paged = Vec::new();
            for offset in [0, 2, 4, 6] {
                let (total, rows) = query(&catalog, ProductQuery { offset, limit: 2, ..whole.clone() }).await;
                assert_eq!(total, 6);
                paged.extend(rows);
            }
            assert_eq!(paged, expected, "{sort:?} {direction:?} paged");
        }
    }
    // Spot checks of what the reference order means.
    let by = |sort, direction| {
        let catalog = catalog.clone();
        async move { query(&catalog, ProductQuery { sort, direction, ..Default::default() }).await.1 }
    };
    assert_eq!(by(SortKey::Name, SortDirection::Asc).await[..3], ["apple Juice", "Banana Chips", "cherry Jam"]);
    assert_eq!(by(SortKey::Brand, SortDirection::Asc).await.last().unwrap(), "cherry Jam", "no brand: last");
    assert_eq!(by(SortKey::Brand, SortDirection::Desc).await.last().unwrap(), "cherry Jam", "no brand: last");
    assert_eq!(
        by(SortKey::Price, SortDirection::Asc).await,
        ["Date Bar", "apple Juice", "Elderflower Soda", "Banana Chips", "fig Spread", "cherry Jam"]
    );
    assert_eq!(
        by(SortKey::Price, SortDirection::Desc).await,
        ["fig Spread", "Banana Chips", "Elderflower Soda", "apple Juice", "Date Bar", "cherry Jam"]
    );
    assert_eq!(by(SortKey::Updated, SortDirection::Desc).await[0], "cherry Jam");
    assert_eq!(
        by(SortKey::Relevance, SortDirection::Desc).await,
        by(SortKey::Updated, SortDirection::Desc).await,
        "no text: newest first"
    );
}

#[tokio::test]
async fn filters_combine_with_the_text_and_the_total_counts_every_match() {
    let (_dir, catalog) = open();
    table(&catalog).await;
    let q = |f: fn(&mut ProductQuery)| {
        let mut query = ProductQuery { sort: SortKey::Name, direction: SortDirection::Asc, ..Default::default() };
        f(&mut query);
        query
    };
    let cases: Vec<(ProductQuery, Vec<&str>)> = vec![
        (q(|q| q.category = Some("SNACKS".into())), vec!["Banana Chips", "Date Bar"]),
        (q(|q| q.category = Some("snack".into())), vec![]),
        (q(|q| q.brand = Some("sunny".into())), vec!["apple Juice", "Banana Chips"]),
        (q(|q| q.flagged = Some(true)), vec!["Banana Chips", "Date Bar"]),
        (q(|q| q.flagged = Some(false)), vec!["apple Juice", "cherry Jam", "Elderflower Soda", "fig Spread"]),
        (
            q(|q| (q.price_min, q.price_max) = (Some(1.99), Some(3.5))),
            vec!["apple Juice", "Banana Chips", "Elderflower Soda"],
        ),
        (q(|q| q.price_min = Some(4.0)), vec!["fig Spread"]),
        (q(|q| q.price_max = Some(1.0)), vec!["Date Bar"]),
        (q(|q| (q.brand, q.category) = (Some("NUTRI".into()), Some("spreads".into()))), vec!["fig Spread"]),
        (q(|q| (q.text, q.flagged) = ("ba".into(), Some(true))), vec!["Banana Chips", "Date Bar"]),
        (q(|q| (q.text, q.price_max) = ("spread".into(), Some(10.0))), vec!["fig Spread"]),
    ];
    for (query_, expected) in cases {
        let page = catalog.query_products(query_.clone()).await.unwrap();
        assert_eq!(
            (page.total, names(&page.rows)),
            (expected.len() as u64, expected.iter().map(|s| s.to_string()).collect()),
            "{query_:?}"
        );
        // The total does not depend on the page.
        let one = catalog.query_products(ProductQuery { limit: 1, ..query_.clone() }).await.unwrap();
        assert_eq!(one.total, page.total);
        assert_eq!(catalog.query_products(ProductQuery { limit: 0, ..query_ }).await.unwrap().rows, []);
    }

    // Relevance ranks the name match first, exactly like search_products.
    let spread = ProductQuery { text: "spread".into(), ..Default::default() };
    assert_eq!(query(&catalog, spread.clone()).await, (2, vec!["fig Spread".to_string(), "cherry Jam".to_string()]));
    assert_eq!(
        catalog.query_products(spread.clone()).await.unwrap().rows,
        catalog.search_products("spread", 0, 100).await.unwrap()
    );
    let least_first = ProductQuery { direction: SortDirection::Asc, ..spread.clone() };
    assert_eq!(query(&catalog, least_first).await.1, ["cherry Jam", "fig Spread"]);
    let by_name = ProductQuery { sort: SortKey::Name, direction: SortDirection::Asc, ..spread };
    assert_eq!(query(&catalog, by_name).await.1, ["cherry Jam", "fig Spread"], "text with another sort");
}

#[tokio::test]
async fn facets_count_live_products_case_insensitively() {
    let (_dir, catalog) = open();
    let ids = table(&catalog).await;
    let facets = catalog.facets().await.unwrap();
    let values = |list: &[FacetValue]| list.iter().map(|f| (f.value.clone(), f.count)).collect::<Vec<_>>();
    let pairs = |list: &[(&str, u64)]| list.iter().map(|(v, c)| (v.to_string(), *c)).collect::<Vec<_>>();
    assert_eq!(values(&facets.categories), pairs(&[("Snacks", 2), ("Spreads", 2), ("Drinks", 1)]));
    assert_eq!(values(&facets.brands), pairs(&[("Nutri", 2), ("Sunny", 2), ("Fizz", 1)]));
    catalog.delete_product(ids[0], "tester", T0 + 50).await.unwrap();
    let facets = catalog.facets().await.unwrap();
    assert_eq!(values(&facets.brands), pairs(&[("Nutri", 2), ("Fizz", 1), ("sunny", 1)]));
    let json = serde_json::to_value(&facets).unwrap();
    assert_eq!(json["categories"][0], serde_json::json!({"value": "Snacks", "count": 2}));
}

#[test]
fn the_ui_may_send_a_partial_query() {
    let empty: ProductQuery = serde_json::from_str("{}").unwrap();
    assert_eq!(empty, ProductQuery::default());
    assert_eq!(
        (empty.sort, empty.direction, empty.offset, empty.limit),
        (SortKey::Relevance, SortDirection::Desc, 0, 100)
    );
    let some: ProductQuery = serde_json::from_str(
        r#"{"text":"oat","sort":"price","direction":"asc","flagged":true,"price_max":5,"category":null}"#,
    )
    .unwrap();
    assert_eq!(
        some,
        ProductQuery {
            text: "oat".into(),
            sort: SortKey::Price,
            direction: SortDirection::Asc,
            flagged: Some(true),
            price_max: Some(5.0),
            ..Default::default()
        }
    );
    assert!(serde_json::from_str::<ProductQuery>(r#"{"sort":"sideways"}"#).is_err());
}

/// More matches than relevance ranks (`RANKED_MATCHES`): the newest ones are ranked by bm25,
/// the older ones follow newest first, and pages walk one total order in both directions.
#[tokio::test]
async fn a_broad_search_ranks_the_newest_matches_and_pages_through_all() {
    let (_dir, catalog) = open();
    let n = i64::from(RANKED_MATCHES) + 300;
    // Product 1 and product n are the best matches: their names are the word alone.
    common::granola_products(&catalog, n, true).await;
    let granola =
        |direction, offset, limit| ProductQuery { text: "gran".into(), direction, offset, limit, ..Default::default() };
    let walk = |direction, brand: Option<&'static str>| {
        let catalog = catalog.clone();
        async move {
            let mut ids = Vec::new();
            let mut offset = 0;
            loop {
                let page = catalog
                    .query_products(ProductQuery { brand: brand.map(Into::into), ..granola(direction, offset, 333) })
                    .await
                    .unwrap();
                if page.rows.is_empty() {
                    return (page.total, ids);
                }
                ids.extend(page.rows.iter().map(|r| r.id));
                offset += 333;
            }
        }
    };
    let (total, best_first) = walk(SortDirection::Desc, None).await;
    assert_eq!(total, n as u64);
    let mut unique = best_first.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len() as i64, n, "every match exactly once");
    let cutoff = n - i64::from(RANKED_MATCHES) + 1;
    let ranked = &best_first[..RANKED_MATCHES as usize];
    assert!(ranked.iter().all(|id| *id >= cutoff), "the newest matches are ranked first");
    assert_eq!(ranked[0], n, "the best of them first");
    let older = &best_first[RANKED_MATCHES as usize..];
    assert_eq!(older, (1..cutoff).rev().collect::<Vec<_>>(), "then the older ones, newest first");
    assert_eq!(
        catalog.search_products("gran", 0, 50).await.unwrap().iter().map(|r| r.id).collect::<Vec<_>>(),
        best_first[..50]
    );
    // Ascending is the exact reverse, page by page.
    let (_, worst_first) = walk(SortDirection::Asc, None).await;
    assert_eq!(worst_first, best_first.iter().rev().copied().collect::<Vec<_>>());
    // A filter narrows the matches first: the even products are few enough to be ranked whole,
    // so product n (the best, and even) leads and the rest are ranked by score.
    let (even_total, even) = walk(SortDirection::Desc, Some("even")).await;
    assert_eq!(even_total, n as u64 / 2);
    assert_eq!(even[0], n);
    let mut sorted = even.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=n).filter(|id| id % 2 == 0).collect::<Vec<_>>(), "every even match once");
    let (_, even_reversed) = walk(SortDirection::Asc, Some("even")).await;
    assert_eq!(even_reversed, even.into_iter().rev().collect::<Vec<_>>());
    // A filter that keeps more matches than are ranked (every product is unflagged) gives the
    // same order as no filter, through the joined query.
    // (Counted to 10,000: the app's count stops 1,000 past the page's start.)
    let unflagged = |direction| ProductQuery { flagged: Some(false), limit: 5000, ..granola(direction, 0, 5000) };
    let page = catalog.query_products_counting(unflagged(SortDirection::Desc), 10_000).await.unwrap();
    assert_eq!(page.total, n as u64);
    assert_eq!(page.rows.iter().map(|r| r.id).collect::<Vec<_>>(), best_first);
    let page = catalog
        .query_products(ProductQuery { offset: RANKED_MATCHES - 10, limit: 20, ..unflagged(SortDirection::Desc) })
        .await
        .unwrap();
    let boundary = RANKED_MATCHES as usize;
    let across = &best_first[boundary - 10..boundary + 10];
    assert_eq!(page.rows.iter().map(|r| r.id).collect::<Vec<_>>(), across, "across the boundary");
    let page = catalog.query_products(unflagged(SortDirection::Asc)).await.unwrap();
    assert_eq!(page.rows.iter().map(|r| r.id).collect::<Vec<_>>(), worst_first);
}
