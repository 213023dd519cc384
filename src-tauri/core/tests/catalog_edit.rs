//! Editing saved products: revisions and their history, the revision conflict, soft delete and
//! undo, duplicates and re-extractions, against a real SQLite file in a temporary directory.

use pe_core::catalog::{
    local_user, AttemptOutcome, Catalog, CatalogError, ExportFormat, NewAttempt, PhotoId, ProductId, ProductQuery,
    ProductRecord, RevisionSource, SaveProduct, UpdateProduct,
};
use pe_core::product::{Attribute, FieldChange, FlagKind, Price, Product};
use pe_core::{Coded, ErrorCode, ErrorReport};

mod common;

use common::{open, photo, T0};

fn product(name: &str) -> Product {
    Product {
        name: name.into(),
        brand: Some("Oatly".into()),
        category: Some("Plant drink".into()),
        price: Some(Price { amount: 2.49, currency: "EUR".into() }),
        ..Default::default()
    }
}

fn proposal(photo_id: PhotoId, product: Product, started_at: i64) -> NewAttempt {
    NewAttempt {
        photo_id,
        model: "gemini-flash-latest".into(),
        started_at,
        latency_ms: 1_000,
        usage: None,
        raw_response: None,
        outcome: AttemptOutcome::Proposed { product },
        model_version: None,
        cost: None,
        batch: false,
        barcodes: None,
        more_photos: Vec::new(),
        sources: Vec::new(),
    }
}

fn change(field: &str, before: Option<&str>, after: Option<&str>) -> FieldChange {
    FieldChange { field: field.into(), before: before.map(Into::into), after: after.map(Into::into) }
}

/// Photo `n` with Gemini's proposal `proposed`, reviewed and saved as `saved` by `by` at `at`.
async fn reviewed(catalog: &Catalog, n: u32, proposed: Product, saved: Product, by: &str, at: i64) -> ProductRecord {
    let photo_id = catalog.record_photo(photo(n)).await.unwrap();
    let attempt = catalog.record_attempt(proposal(photo_id, proposed, at - 10)).await.unwrap();
    let save = SaveProduct { photo_id, attempt_id: Some(attempt), saved, saved_by: by.into(), saved_at: at };
    catalog.save_product(save).await.unwrap()
}

fn edit(record: &ProductRecord, saved: Product, by: &str, at: i64) -> UpdateProduct {
    UpdateProduct {
        id: record.id,
        expected_revision: record.revision,
        saved,
        attempt_id: None,
        source: RevisionSource::Edit,
        saved_by: by.into(),
        saved_at: at,
    }
}

async fn revisions_in_table(catalog: &Catalog, id: ProductId) -> i64 {
    catalog
        .with_connection(move |conn| {
            Ok(conn.query_row("SELECT count(*) FROM product_revisions WHERE product_id = ?1", [id], |r| r.get(0))?)
        })
        .await
        .unwrap()
}

async fn names(catalog: &Catalog, query: ProductQuery) -> (u64, Vec<String>) {
    let page = catalog.query_products(query).await.unwrap();
    (page.total, page.rows.into_iter().map(|r| r.name).collect())
}

#[tokio::test]
async fn history_diffs_each_revision_and_the_first_against_geminis_proposal() {
    let (_dir, catalog) = open();
    let first = reviewed(&catalog, 1, product("Oat Drnk"), product("Oat Drink"), "alice", T0).await;
    assert_eq!((first.revision, first.updated_by.as_str(), first.updated_at), (1, "alice", T0));

    let cheaper = Product { price: Some(Price { amount: 1.99, currency: "EUR".into() }), ..first.saved.clone() };
    let second = catalog.update_product(edit(&first, cheaper, "bob", T0 + 100)).await.unwrap();
    assert_eq!((second.revision, second.updated_by.as_str(), second.updated_at), (2, "bob", T0 + 100));
    assert_eq!(second.created_at, T0);
    let flavored =
        Product { attributes: vec![Attribute { name: "Flavor".into(), value: "Oat".into() }], ..second.saved.clone() };
    let third = catalog
        .update_product(UpdateProduct { source: RevisionSource::Restore, ..edit(&second, flavored, "alice", T0 + 200) })
        .await
        .unwrap();
    assert_eq!(third.revision, 3);
    assert_eq!(third.proposed.as_ref().unwrap().name, "Oat Drnk", "an edit keeps the proposal");

    let history = catalog.history(first.id).await.unwrap();
    let summary: Vec<_> = history
        .iter()
        .map(|r| (r.revision, r.source, r.saved_by.as_str(), r.saved_at, r.saved.name.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            (3, RevisionSource::Restore, "alice", T0 + 200, "Oat Drink"),
            (2, RevisionSource::Edit, "bob", T0 + 100, "Oat Drink"),
            (1, RevisionSource::Review, "alice", T0, "Oat Drink"),
        ]
    );
    assert_eq!(history[0].changes, [change("attributes.Flavor", None, Some("Oat"))]);
    assert_eq!(history[1].changes, [change("price", Some("2.49 EUR"), Some("1.99 EUR"))]);
    assert_eq!(history[2].changes, [change("name", Some("Oat Drnk"), Some("Oat Drink"))], "against the proposal");
    assert_eq!(history[0].saved, third.saved);

    // What the UI receives.
    let json = serde_json::to_value(&history).unwrap();
    assert_eq!(json[0]["source"], "restore");
    assert_eq!(json[1]["changes"][0], serde_json::json!({"field": "price", "before": "2.49 EUR", "after": "1.99 EUR"}));

    // A product typed by hand has no proposal: its first revision adds every filled field.
    let photo_id = catalog.record_photo(photo(2)).await.unwrap();
    let manual = Product { name: "Rye Bread".into(), gtin: Some("4006381333931".into()), ..Default::default() };
    let save = SaveProduct { photo_id, attempt_id: None, saved: manual, saved_by: "carol".into(), saved_at: T0 };
    let record = catalog.save_product(save).await.unwrap();
    let history = catalog.history(record.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        history[0].changes,
        [change("name", None, Some("Rye Bread")), change("gtin", None, Some("4006381333931"))]
    );

    let err = catalog.history(999).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { what: "product", id: 999 }), "{err:?}");
}

#[tokio::test]
async fn the_second_of_two_editors_gets_a_conflict_and_saves_nothing() {
    let (_dir, catalog) = open();
    let opened = reviewed(&catalog, 1, product("Oat Drnk"), product("Oat Drink"), "carol", T0).await;
    // Alice and Bob both open revision 1; Alice saves first.
    let alice = catalog.update_product(edit(&opened, product("Oat Drink Barista"), "alice", T0 + 100)).await.unwrap();
    assert_eq!(alice.revision, 2);
    let err = catalog.update_product(edit(&opened, product("Oat Drink Light"), "bob", T0 + 200)).await.unwrap_err();
    match &err {
        CatalogError::Conflict { id, expected, current, updated_by, updated_at } => {
            assert_eq!(
                (*id, *expected, *current, updated_by.as_str(), *updated_at),
                (opened.id, 1, 2, "alice", T0 + 100)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.code(), ErrorCode::RevisionConflict);
    assert_eq!(
        err.to_string(),
        format!(
            "product {} was changed by alice at revision 2 since you opened revision 1; reload to see their changes",
            opened.id
        )
    );
    let report = serde_json::to_value(ErrorReport::from(err)).unwrap();
    assert_eq!(report["code"], "revision_conflict");

    // Bob's edit was not saved; reloading and editing the current revision works.
    let now = catalog.get_product(opened.id).await.unwrap();
    assert_eq!((now.revision, now.saved.name.as_str()), (2, "Oat Drink Barista"));
    assert_eq!(revisions_in_table(&catalog, opened.id).await, 2);
    let bob = catalog.update_product(edit(&now, product("Oat Drink Light"), "bob", T0 + 300)).await.unwrap();
    assert_eq!((bob.revision, bob.updated_by.as_str()), (3, "bob"));

    // A review save (no expected revision) always wins and is a revision too.
    let photo_id = opened.photo_id;
    let save =
        SaveProduct { photo_id, attempt_id: None, saved: product("Oat"), saved_by: "dave".into(), saved_at: T0 + 400 };
    assert_eq!(catalog.save_product(save).await.unwrap().revision, 4);
    let err = catalog.update_product(edit(&bob, product("Late"), "bob", T0 + 500)).await.unwrap_err();
    assert!(err.to_string().contains("changed by dave at revision 4 since you opened revision 3"), "{err}");
}

#[tokio::test]
async fn an_invalid_edit_saves_nothing_and_an_unchanged_one_writes_no_revision() {
    let (_dir, catalog) = open();
    let record = reviewed(&catalog, 1, product("Oat Drnk"), product("Oat Drink"), "alice", T0).await;
    let bad = Product { name: " ".into(), gtin: Some("4006381333932".into()), ..product("x") };
    let err = catalog.update_product(edit(&record, bad, "bob", T0 + 100)).await.unwrap_err();
    match &err {
        CatalogError::Invalid { fields, message, .. } => {
            assert_eq!(fields, &["name", "gtin"]);
            assert!(message.contains("check digit"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.code(), ErrorCode::Validation);
    assert_eq!(catalog.get_product(record.id).await.unwrap(), record);
    assert_eq!(revisions_in_table(&catalog, record.id).await, 1);

    let same = catalog.update_product(edit(&record, record.saved.clone(), "bob", T0 + 200)).await.unwrap();
    assert_eq!(same, record, "nothing changed, nothing written");
    assert_eq!(catalog.history(record.id).await.unwrap().len(), 1);

    // Behind the API, SQLite refuses a new saved_json without a new revision.
    let id = record.id;
    let raw = catalog
        .with_connection(move |conn| {
            Ok(conn.execute("UPDATE products SET saved_json = '{\"name\":\"Sneaky\"}' WHERE id = ?1", [id])?)
        })
        .await
        .unwrap_err();
    assert!(raw.to_string().contains("without a new revision"), "{raw}");
}

#[tokio::test]
async fn delete_is_soft_and_can_be_undone() {
    let (_dir, catalog) = open();
    let record = reviewed(&catalog, 1, product("Oat Drnk"), product("Oat Drink"), "alice", T0).await;
    reviewed(&catalog, 2, product("Rye"), product("Rye Bread"), "alice", T0 + 1).await;

    let deleted = catalog.delete_product(record.id, "bob", T0 + 100).await.unwrap();
    assert_eq!((deleted.deleted_at, deleted.deleted_by.as_deref()), (Some(T0 + 100), Some("bob")));
    assert_eq!((deleted.revision, deleted.updated_at, deleted.updated_by.as_str()), (1, T0, "alice"));
    assert_eq!(catalog.get_product(record.id).await.unwrap(), deleted, "a deleted product can still be opened");
    assert_eq!(catalog.count_products().await.unwrap(), 1);
    assert_eq!(catalog.history(record.id).await.unwrap().len(), 1, "it keeps its history");

    // Deleting again, editing or duplicating it is refused (code not_found).
    for err in [
        catalog.delete_product(record.id, "bob", T0 + 101).await.unwrap_err(),
        catalog.update_product(edit(&record, product("Edited"), "bob", T0 + 102)).await.unwrap_err(),
        catalog.duplicate_product(record.id, "bob", T0 + 103).await.unwrap_err(),
    ] {
        assert!(matches!(err, CatalogError::Deleted { id } if id == record.id), "{err:?}");
        assert_eq!(err.code(), ErrorCode::NotFound);
        assert!(err.to_string().contains("undo the delete"), "{err}");
    }
    let err = catalog.delete_product(999, "bob", T0).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { what: "product", id: 999 }), "{err:?}");

    let back = catalog.undelete_product(record.id, "bob", T0 + 200).await.unwrap();
    assert_eq!((back.deleted_at, back.deleted_by.as_deref()), (None, None));
    assert_eq!(back, record, "undo restores it as it was, revision included");
    assert_eq!(catalog.count_products().await.unwrap(), 2);
    let err = catalog.undelete_product(record.id, "bob", T0 + 201).await.unwrap_err();
    assert!(matches!(&err, CatalogError::Invalid { fields, .. } if fields == &["id"]), "{err:?}");
    let err = catalog.undelete_product(999, "bob", T0).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { .. }), "{err:?}");

    // Saving the photo again over a deleted product brings it back as a new revision.
    catalog.delete_product(record.id, "bob", T0 + 300).await.unwrap();
    let save = SaveProduct {
        photo_id: record.photo_id,
        attempt_id: None,
        saved: product("Oat Drink again"),
        saved_by: "carol".into(),
        saved_at: T0 + 400,
    };
    let resaved = catalog.save_product(save).await.unwrap();
    assert_eq!((resaved.id, resaved.revision, resaved.deleted_at), (record.id, 2, None));
    assert_eq!(catalog.count_products().await.unwrap(), 2);
}

#[tokio::test]
async fn deleted_products_are_left_out_of_queries_search_facets_exports_and_counts() {
    let (dir, catalog) = open();
    let oat = reviewed(&catalog, 1, product("Oat Drink"), product("Oat Drink"), "alice", T0).await;
    let soy = Product { brand: Some("Alpro".into()), ..product("Soy Drink") };
    reviewed(&catalog, 2, soy.clone(), soy, "alice", T0 + 1).await;
    catalog.delete_product(oat.id, "bob", T0 + 100).await.unwrap();

    let everything = ProductQuery::default();
    assert_eq!(names(&catalog, everything.clone()).await, (1, vec!["Soy Drink".to_string()]));
    let drink = ProductQuery { text: "drink".into(), ..Default::default() };
    assert_eq!(names(&catalog, drink.clone()).await, (1, vec!["Soy Drink".to_string()]));
    let oatly = ProductQuery { brand: Some("oatly".into()), ..Default::default() };
    assert_eq!(names(&catalog, oatly.clone()).await.0, 0);
    assert!(catalog.search_products("oat", 0, 10).await.unwrap().is_empty());
    assert_eq!(catalog.list_products(0, 10).await.unwrap().len(), 1);
    assert_eq!(catalog.count_products().await.unwrap(), 1);
    let facets = catalog.facets().await.unwrap();
    assert_eq!(facets.brands.iter().map(|f| (f.value.as_str(), f.count)).collect::<Vec<_>>(), [("Alpro", 1)]);
    let path = dir.path().join("export.jsonl");
    let summary = catalog.export(ExportFormat::Jsonl, Box::new(std::fs::File::create(&path).unwrap())).await.unwrap();
    assert_eq!(summary.rows, 1);
    assert!(!std::fs::read_to_string(&path).unwrap().contains("Oat Drink"));
    let indexed: i64 = catalog
        .with_connection(|conn| Ok(conn.query_row("SELECT count(*) FROM products_fts", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(indexed, 1, "a deleted product leaves the full-text index");

    catalog.undelete_product(oat.id, "bob", T0 + 200).await.unwrap();
    assert_eq!(names(&catalog, drink).await.0, 2);
    assert_eq!(names(&catalog, oatly).await, (1, vec!["Oat Drink".to_string()]));
    assert_eq!(catalog.search_products("oat", 0, 10).await.unwrap().len(), 1, "back in the index");
    assert_eq!(catalog.count_products().await.unwrap(), 2);
}

#[tokio::test]
async fn a_duplicate_shares_the_photo_and_starts_its_own_history() {
    let (_dir, catalog) = open();
    let original = reviewed(&catalog, 1, product("Oat Drnk"), product("Oat Drink"), "alice", T0).await;
    let copy = catalog.duplicate_product(original.id, "bob", T0 + 100).await.unwrap();
    assert_ne!(copy.id, original.id);
    assert_eq!(copy.photo_id, original.photo_id);
    assert_eq!(copy.duplicate_of, Some(original.id));
    assert_eq!(copy.saved, Product { name: "Oat Drink (copy)".into(), ..original.saved.clone() });
    assert_eq!((copy.revision, copy.proposed.as_ref(), copy.attempt_id), (1, None, None));
    assert_eq!((copy.created_at, copy.updated_at, copy.updated_by.as_str()), (T0 + 100, T0 + 100, "bob"));
    let history = catalog.history(copy.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].source, RevisionSource::Duplicate);
    assert_eq!(history[0].changes.first(), Some(&change("name", None, Some("Oat Drink (copy)"))));
    assert_eq!(catalog.count_products().await.unwrap(), 2);
    assert_eq!(catalog.search_products("copy", 0, 10).await.unwrap().len(), 1);

    // The photo's extracted product is still the original: saving the photo updates it, not the copy.
    assert_eq!(catalog.product_for_photo(original.photo_id).await.unwrap(), Some(original.id));
    let save = SaveProduct {
        photo_id: original.photo_id,
        attempt_id: None,
        saved: product("Oat Drink 1 l"),
        saved_by: "alice".into(),
        saved_at: T0 + 200,
    };
    assert_eq!(catalog.save_product(save).await.unwrap().id, original.id);
    assert_eq!(catalog.get_product(copy.id).await.unwrap().saved.name, "Oat Drink (copy)");
    // A copy of a copy, and each can be edited and deleted on its own.
    let second = catalog.duplicate_product(copy.id, "bob", T0 + 300).await.unwrap();
    assert_eq!((second.duplicate_of, second.saved.name.as_str()), (Some(copy.id), "Oat Drink (copy) (copy)"));
    catalog.delete_product(copy.id, "bob", T0 + 400).await.unwrap();
    catalog.update_product(edit(&second, product("Oat Drink Kids"), "bob", T0 + 500)).await.unwrap();
    catalog.undelete_product(copy.id, "bob", T0 + 600).await.unwrap();
    assert_eq!(catalog.count_products().await.unwrap(), 3);

    // SQLite itself allows one extracted product per photo, however many duplicates.
    let photo_id = original.photo_id;
    let raw = catalog
        .with_connection(move |conn| {
            Ok(conn.execute(
                "INSERT INTO products (photo_id, saved_json, revision, name, created_at, updated_at)
                 VALUES (?1, '{}', 1, 'Second', 0, 0)",
                [photo_id],
            )?)
        })
        .await
        .unwrap_err();
    assert!(raw.to_string().contains("UNIQUE"), "{raw}");
}

#[tokio::test]
async fn a_reextraction_replaces_the_proposal_and_an_attempt_must_fit() {
    let (_dir, catalog) = open();
    let record = reviewed(&catalog, 1, product("Oat Drnk"), product("Oat Drink"), "alice", T0).await;
    let first_attempt = record.attempt_id.unwrap();
    let again = catalog.record_attempt(proposal(record.photo_id, product("Oat Drink 1 l"), T0 + 50)).await.unwrap();
    let update = UpdateProduct {
        attempt_id: Some(again),
        source: RevisionSource::Reextract,
        ..edit(&record, product("Oat Drink 1 l"), "bob", T0 + 100)
    };
    let updated = catalog.update_product(update).await.unwrap();
    assert_eq!((updated.revision, updated.attempt_id), (2, Some(again)));
    assert_eq!(updated.proposed.as_ref().unwrap().name, "Oat Drink 1 l");
    let history = catalog.history(record.id).await.unwrap();
    assert_eq!(history[0].source, RevisionSource::Reextract);
    // Each revision keeps the proposal and attempt in force then.
    let id = record.id;
    let kept: Vec<(u32, Option<i64>, String)> = catalog
        .with_connection(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT revision, attempt_id, json_extract(proposed_json, '$.name') FROM product_revisions
                 WHERE product_id = ?1 ORDER BY revision",
            )?;
            let rows = stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap();
    assert_eq!(kept, [(1, Some(first_attempt), "Oat Drnk".into()), (2, Some(again), "Oat Drink 1 l".into())]);

    // An attempt of another photo, a failed attempt, a missing one: refused, nothing saved.
    let other_photo = catalog.record_photo(photo(2)).await.unwrap();
    let theirs = catalog.record_attempt(proposal(other_photo, product("Rye"), T0)).await.unwrap();
    let failed = catalog
        .record_attempt(NewAttempt {
            outcome: AttemptOutcome::Failed { code: ErrorCode::Timeout, message: "timed out".into() },
            model_version: None,
            cost: None,
            batch: false,
            barcodes: None,
            more_photos: Vec::new(),
            sources: Vec::new(),
            ..proposal(record.photo_id, product("x"), T0 + 60)
        })
        .await
        .unwrap();
    for (attempt, expected) in [(theirs, "belongs to photo"), (failed, "no proposal")] {
        let update = UpdateProduct { attempt_id: Some(attempt), ..edit(&updated, product("Wrong"), "bob", T0 + 200) };
        let err = catalog.update_product(update).await.unwrap_err();
        match &err {
            CatalogError::Invalid { fields, message, .. } => {
                assert_eq!(fields, &["attempt_id"]);
                assert!(message.contains(expected), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    let update = UpdateProduct { attempt_id: Some(999), ..edit(&updated, product("Wrong"), "bob", T0 + 200) };
    let err = catalog.update_product(update).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { what: "attempt", id: 999 }), "{err:?}");
    assert_eq!(catalog.get_product(record.id).await.unwrap(), updated);
    let err =
        catalog.update_product(UpdateProduct { id: 999, ..edit(&updated, product("x"), "bob", T0) }).await.unwrap_err();
    assert!(matches!(err, CatalogError::NotFound { what: "product", id: 999 }), "{err:?}");
}

#[tokio::test]
async fn flagged_fields_are_counted_for_the_table() {
    let (_dir, catalog) = open();
    let unsure = Product {
        uncertain_fields: vec!["price".into(), "gtin".into(), "price".into(), "bogus".into()],
        ..product("Oat Drink")
    };
    let record = reviewed(&catalog, 1, unsure.clone(), unsure, "alice", T0).await;
    let flagged: Vec<_> = record.flags.iter().map(|f| (f.field.as_str(), f.kind)).collect();
    assert_eq!(flagged, [("price", FlagKind::Uncertain), ("gtin", FlagKind::Uncertain)]);
    reviewed(&catalog, 2, product("Rye"), product("Rye"), "alice", T0 + 1).await;
    let rows = catalog.query_products(ProductQuery::default()).await.unwrap().rows;
    assert_eq!(rows.iter().map(|r| (r.name.as_str(), r.flagged)).collect::<Vec<_>>(), [("Rye", 0), ("Oat Drink", 2)]);
    // Resolving the doubts clears the count.
    let sure = catalog.update_product(edit(&record, product("Oat Drink"), "bob", T0 + 100)).await.unwrap();
    assert!(sure.flags.is_empty());
    let flagged = ProductQuery { flagged: Some(true), ..Default::default() };
    assert_eq!(catalog.query_products(flagged).await.unwrap().total, 0);
}

#[test]
fn the_local_user_has_a_name() {
    let user = local_user();
    assert!(!user.trim().is_empty());
    if let Ok(expected) = std::env::var("USER") {
        if !expected.trim().is_empty() {
            assert_eq!(user, expected.trim());
        }
    }
}
