//! Full-text search of saved products against a real SQLite file in a temporary directory.

use pe_core::catalog::migrations::{self, MIGRATIONS};
use pe_core::catalog::{Catalog, PhotoId, ProductSummary, SaveProduct, SCHEMA_VERSION};
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
    let save = SaveProduct { photo_id, attempt_id: None, saved: product, saved_at: T0 + i64::from(n) };
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
    let resave = SaveProduct { photo_id, attempt_id: None, saved: product("Spelt Muesli", None), saved_at: T0 + 10 };
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
