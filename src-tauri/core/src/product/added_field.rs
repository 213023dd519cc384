//! Adding a field is one entry: with the `added-field-test` feature the table has one more field
//! (`shelf_life`, a text), and everything that goes field by field takes it without another change.
//! `make test` runs these tests (`cargo test -p product-extractor-core --features added-field-test
//! --lib added_field`).

#[cfg(test)]
mod tests {
    use crate::catalog::export::{csv_headers, ExportFormat};
    use crate::catalog::{Catalog, NewPhoto, SaveProduct};
    use crate::product::*;

    fn with_shelf_life(value: &str) -> Product {
        Product { name: "Oat Drink".into(), shelf_life: Some(value.into()), ..Default::default() }
    }

    #[test]
    fn the_table_and_what_gemini_is_given_have_it() {
        let spec = PRODUCT_FIELDS.iter().find(|f| f.name() == "shelf_life").expect("in the table");
        assert_eq!((spec.key, spec.label, spec.kind), (FieldKey::ShelfLife, "Shelf life", FieldKind::Text));
        assert_eq!(FieldKey::parse("shelf_life"), Some(FieldKey::ShelfLife));
        let schema = response_json_schema();
        let property = &schema["properties"]["shelf_life"];
        assert!(property["description"].as_str().unwrap().contains("keeps once opened"), "{property}");
        assert!(system_instruction().contains("- shelf_life: how long the product keeps once opened"));
        assert!(uncertain_field_names().any(|f| f == "shelf_life"));
        let sources =
            field_sources(&serde_json::json!([{"field": "shelf_life", "photo": 0, "box_2d": [1, 2, 3, 4]}]), 1);
        assert_eq!(sources.len(), 1, "a source may name it");
    }

    #[test]
    fn it_is_cleaned_checked_normalized_diffed_and_taken() {
        let (cleaned, flags) = with_shelf_life(&format!("3 days\u{0}{}", "x".repeat(80))).cleaned();
        let kinds: Vec<_> = flags.iter().map(|f| (f.field.as_str(), f.kind)).collect();
        assert_eq!(kinds, [("shelf_life", FlagKind::ControlCharactersRemoved), ("shelf_life", FlagKind::TooLong)]);
        assert_eq!(cleaned.shelf_life.as_deref().map(|s| s.chars().count()), Some(60));

        let long = with_shelf_life(&"x".repeat(61));
        assert_eq!(long.validate()[0].field, "shelf_life");
        assert_eq!(with_shelf_life("   ").normalized().shelf_life, None);

        let before = with_shelf_life("3 days");
        let after = with_shelf_life("5 days");
        let changes = diff(Some(&before), &after);
        assert_eq!(
            changes,
            [FieldChange { field: "shelf_life".into(), before: Some("3 days".into()), after: Some("5 days".into()) }]
        );
        let taken = take_fields(&before, &after, &["shelf_life".into()]).unwrap();
        assert_eq!(taken.shelf_life.as_deref(), Some("5 days"));
        let rows = after.display_rows();
        assert!(rows.iter().any(|(f, v)| f.label == "Shelf life" && v == "5 days"), "the CLI's lines");
    }

    #[tokio::test]
    async fn it_is_saved_and_exported() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(&Catalog::path_in(dir.path())).unwrap();
        let photo = NewPhoto {
            sha256: "ab".repeat(32),
            original_path: "/photos/oat.jpg".into(),
            original_path_bytes: None,
            file_bytes: 1_000,
            width: 640,
            height: 480,
            format: "jpeg".into(),
            thumbnail_jpeg: vec![0xFF, 0xD8, 0xFF],
            seen_at: 1,
        };
        let photo_id = catalog.record_photo(photo).await.unwrap();
        let save = SaveProduct {
            photo_id,
            attempt_id: None,
            saved: with_shelf_life("3 days"),
            saved_by: "tester".into(),
            saved_at: 1,
        };
        let saved = catalog.save_product(save).await.unwrap();
        assert_eq!(catalog.get_product(saved.id).await.unwrap().saved.shelf_life.as_deref(), Some("3 days"));
        let headers = csv_headers();
        let at = headers.iter().position(|h| h == "shelf_life").expect("a CSV column");
        let out = dir.path().join("out.csv");
        catalog.export(ExportFormat::Csv, Box::new(std::fs::File::create(&out).unwrap())).await.unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        let row: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
        assert_eq!(row[at], "3 days");
    }
}
