//! Exports of the saved catalog, against a real SQLite file in a temporary directory.

use std::path::Path;

use pe_core::catalog::export::{csv_headers, guard, handle, iso_utc, SHOPIFY_HEADERS};
use pe_core::catalog::{Catalog, ExportFormat, ExportSummary, ExportedProduct, ProductRecord, SaveProduct};
use pe_core::product::{Attribute, NetContent, Price, Product};

mod common;

use common::{open, photo, T0};

fn full(name: &str) -> Product {
    Product {
        name: name.into(),
        brand: Some("Oatly".into()),
        category: Some("Plant drink".into()),
        description: Some("Creamy <oat> drink & more, \"barista\" edition".into()),
        price: Some(Price { amount: 2.5, currency: "EUR".into() }),
        gtin: Some("4006381333931".into()),
        color: Some("White".into()),
        size: Some("1 l".into()),
        material: Some("Carton".into()),
        net_content: Some(NetContent { value: 1.5, unit: "l".into() }),
        attributes: vec![
            Attribute { name: "Flavor".into(), value: "Oat".into() },
            Attribute { name: "Vegan".into(), value: "yes".into() },
        ],
        uncertain_fields: vec!["price".into()],
    }
}

fn bare(name: &str) -> Product {
    Product { name: name.into(), ..Default::default() }
}

/// Saves the products through the public API, one photo each, and returns the records.
async fn save_all(catalog: &Catalog, products: Vec<Product>) -> Vec<ProductRecord> {
    let mut records = Vec::new();
    for (n, saved) in products.into_iter().enumerate() {
        let photo_id = catalog.record_photo(photo(n as u32 + 1)).await.unwrap();
        let save = SaveProduct {
            photo_id,
            attempt_id: None,
            saved,
            saved_by: "tester".into(),
            saved_at: T0 + n as i64 * 1_001,
        };
        records.push(catalog.save_product(save).await.unwrap());
    }
    records
}

async fn export(catalog: &Catalog, dir: &Path, format: ExportFormat) -> (ExportSummary, String) {
    let path = dir.join(format!("export.{}", format.as_str()));
    let file = std::fs::File::create(&path).unwrap();
    let summary = catalog.export(format, Box::new(file)).await.unwrap();
    (summary, std::fs::read_to_string(&path).unwrap())
}

fn parse_csv(text: &str) -> (Vec<String>, Vec<csv::StringRecord>) {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().unwrap().iter().map(String::from).collect();
    let rows = reader.records().collect::<Result<_, _>>().unwrap();
    (headers, rows)
}

#[tokio::test]
async fn shopify_round_trip() {
    let (dir, catalog) = open();
    let records = save_all(&catalog, vec![full("Oat Drink Barista"), bare("Plain")]).await;
    let (summary, text) = export(&catalog, dir.path(), ExportFormat::Shopify).await;
    assert_eq!(summary.rows, 2);
    let (headers, rows) = parse_csv(&text);
    assert_eq!(headers, SHOPIFY_HEADERS);
    assert_eq!(
        headers.join(","),
        "Handle,Title,Body (HTML),Vendor,Product Category,Type,Tags,Published,Option1 Name,Option1 Value,\
         Variant SKU,Variant Price,Variant Barcode,Variant Requires Shipping,Variant Taxable,Image Src,Status"
    );
    assert_eq!(rows.len(), 2);
    let row: Vec<&str> = rows[0].iter().collect();
    assert_eq!(
        row,
        [
            format!("oat-drink-barista-{}", records[0].id).as_str(),
            "Oat Drink Barista",
            "<p>Creamy &lt;oat&gt; drink &amp; more, &quot;barista&quot; edition</p>",
            "Oatly",
            "",
            "Plant drink",
            "White, 1 l, Carton",
            "TRUE",
            "Title",
            "Default Title",
            "",
            "2.50",
            "4006381333931",
            "TRUE",
            "TRUE",
            "",
            "draft",
        ]
    );
    let plain: Vec<&str> = rows[1].iter().collect();
    assert_eq!(plain[0], format!("plain-{}", records[1].id));
    assert_eq!(plain[1], "Plain");
    assert_eq!(&plain[2..4], ["", ""]);
    assert_eq!(plain[6], "");
    assert_eq!(plain[11], "");
    assert_eq!(plain[16], "draft");
}

/// The plain CSV's columns, as scripts read them: written out here so that a change to the field
/// table that moves or renames a column fails this test.
const CSV_HEADERS: [&str; 16] = [
    "id",
    "name",
    "brand",
    "category",
    "description",
    "price_amount",
    "price_currency",
    "gtin",
    "color",
    "size",
    "material",
    "net_content_value",
    "net_content_unit",
    "attributes",
    "updated_at",
    "revision",
];

#[tokio::test]
async fn csv_round_trip_field_by_field() {
    let (dir, catalog) = open();
    let records = save_all(&catalog, vec![full("Oat Drink"), bare("Plain")]).await;
    let (summary, text) = export(&catalog, dir.path(), ExportFormat::Csv).await;
    assert_eq!(summary.rows, 2);
    let (headers, rows) = parse_csv(&text);
    assert_eq!(headers, CSV_HEADERS);
    assert_eq!(headers, csv_headers(), "the field table's columns");
    assert_eq!(rows.len(), 2);
    let r = &records[0];
    let row: Vec<&str> = rows[0].iter().collect();
    let expected = [
        r.id.to_string(),
        "Oat Drink".into(),
        "Oatly".into(),
        "Plant drink".into(),
        "Creamy <oat> drink & more, \"barista\" edition".into(),
        "2.5".into(),
        "EUR".into(),
        "4006381333931".into(),
        "White".into(),
        "1 l".into(),
        "Carton".into(),
        "1.5".into(),
        "l".into(),
        "Flavor: Oat; Vegan: yes".into(),
        iso_utc(r.updated_at),
        "1".into(),
    ];
    assert_eq!(row, expected.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(row[14], "2025-10-09T08:53:20.000Z");
    let plain: Vec<&str> = rows[1].iter().collect();
    assert_eq!(plain[0], records[1].id.to_string());
    assert_eq!(plain[1], "Plain");
    assert!(plain[2..14].iter().all(|cell| cell.is_empty()), "{plain:?}");
}

#[tokio::test]
async fn json_parses_back_into_the_saved_products() {
    let (dir, catalog) = open();
    let records = save_all(&catalog, vec![full("Oat Drink"), bare("Plain"), full("Third")]).await;
    // A second save bumps the revision; the export shows the latest.
    let mut again = full("Oat Drink v2");
    again.price = Some(Price { amount: 3.0, currency: "USD".into() });
    let resaved = catalog
        .save_product(SaveProduct {
            photo_id: records[0].photo_id,
            attempt_id: None,
            saved: again,
            saved_by: "tester".into(),
            saved_at: T0 + 9_000,
        })
        .await
        .unwrap();
    let (summary, text) = export(&catalog, dir.path(), ExportFormat::Json).await;
    assert_eq!(summary.rows, 3);
    let exported: Vec<ExportedProduct> = serde_json::from_str(&text).unwrap();
    let expected: Vec<ExportedProduct> = [resaved, records[1].clone(), records[2].clone()]
        .into_iter()
        .map(|r| ExportedProduct {
            id: r.id,
            revision: r.revision,
            updated_at: iso_utc(r.updated_at),
            product: r.saved,
        })
        .collect();
    assert_eq!(exported, expected);
    assert_eq!(exported[0].revision, 2);
    assert_eq!(exported[0].updated_at, "2025-10-09T08:53:29.000Z");
}

#[tokio::test]
async fn jsonl_writes_one_object_a_line() {
    let (dir, catalog) = open();
    let records = save_all(&catalog, (0..5).map(|i| full(&format!("Item {i}"))).collect()).await;
    let (summary, text) = export(&catalog, dir.path(), ExportFormat::Jsonl).await;
    assert_eq!(summary.rows, 5);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(text.ends_with('\n'));
    for (line, record) in lines.iter().zip(&records) {
        let item: ExportedProduct = serde_json::from_str(line).unwrap();
        assert_eq!(item.id, record.id);
        assert_eq!(item.product, record.saved);
    }
}

#[tokio::test]
async fn an_empty_catalog_gives_headers_only_or_an_empty_array() {
    let (dir, catalog) = open();
    let (summary, text) = export(&catalog, dir.path(), ExportFormat::Shopify).await;
    assert_eq!(summary.rows, 0);
    assert_eq!(text, format!("{}\n", SHOPIFY_HEADERS.join(",")));
    let (_, text) = export(&catalog, dir.path(), ExportFormat::Csv).await;
    assert_eq!(text, format!("{}\n", csv_headers().join(",")));
    let (summary, text) = export(&catalog, dir.path(), ExportFormat::Json).await;
    assert_eq!(summary.rows, 0);
    assert_eq!(serde_json::from_str::<Vec<ExportedProduct>>(&text).unwrap(), []);
    assert_eq!(text.trim(), "[]");
    let (_, text) = export(&catalog, dir.path(), ExportFormat::Jsonl).await;
    assert_eq!(text, "");
}

#[tokio::test]
async fn formula_cells_are_guarded_in_both_csv_formats() {
    let (dir, catalog) = open();
    let mut evil = bare("=HYPERLINK(\"http://x\",\"y\")");
    evil.brand = Some("+cmd".into());
    evil.category = Some("-2+3".into());
    evil.color = Some("@SUM(A1)".into());
    evil.description = Some("\tTabbed".into());
    evil.material = Some("\rCR".into());
    evil.gtin = None;
    let records = save_all(&catalog, vec![evil]).await;

    let (_, text) = export(&catalog, dir.path(), ExportFormat::Csv).await;
    let (_, rows) = parse_csv(&text);
    let row: Vec<&str> = rows[0].iter().collect();
    assert_eq!(row[1], "'=HYPERLINK(\"http://x\",\"y\")");
    assert_eq!(row[2], "'+cmd");
    assert_eq!(row[3], "'-2+3");
    assert_eq!(row[4], "'\tTabbed");
    assert_eq!(row[8], "'@SUM(A1)");
    assert_eq!(row[10], "'\rCR");

    let (_, text) = export(&catalog, dir.path(), ExportFormat::Shopify).await;
    let (_, rows) = parse_csv(&text);
    let row: Vec<&str> = rows[0].iter().collect();
    assert_eq!(row[0], format!("hyperlink-http-x-y-{}", records[0].id));
    assert_eq!(row[1], "'=HYPERLINK(\"http://x\",\"y\")");
    assert_eq!(row[3], "'+cmd");
    assert_eq!(row[5], "'-2+3");
    // Tags and the body are trimmed; the body starts with "<p>", so it is never a formula.
    assert_eq!(row[6], "'@SUM(A1), CR");
    assert_eq!(row[2], "<p>Tabbed</p>");

    // JSON carries the values unchanged.
    let (_, text) = export(&catalog, dir.path(), ExportFormat::Json).await;
    let exported: Vec<ExportedProduct> = serde_json::from_str(&text).unwrap();
    assert_eq!(exported[0].product, records[0].saved);
    assert_eq!(guard("plain"), "plain");
}

#[tokio::test]
async fn commas_quotes_and_newlines_survive_the_csv_round_trip() {
    let (dir, catalog) = open();
    let name = "Oat \"Barista\", 1 l\nline two\r\nline, three";
    let mut product = full(name);
    product.attributes = vec![Attribute { name: "Note".into(), value: "a, \"b\"\nc".into() }];
    let records = save_all(&catalog, vec![product]).await;
    for format in [ExportFormat::Csv, ExportFormat::Shopify] {
        let (_, text) = export(&catalog, dir.path(), format).await;
        let (_, rows) = parse_csv(&text);
        assert_eq!(rows.len(), 1, "{format:?}");
        assert_eq!(&rows[0][1], name, "{format:?}");
    }
    let (_, text) = export(&catalog, dir.path(), ExportFormat::Csv).await;
    let (_, rows) = parse_csv(&text);
    assert_eq!(&rows[0][13], "Note: a, \"b\"\nc");
    assert_eq!(handle(name, records[0].id), format!("oat-barista-1-l-line-two-line-three-{}", records[0].id));
}

/// A folder other users write to (sticky, like /tmp): a link or another user's file under the old
/// temporary name (`X.tmp`) is neither followed nor used, and a link at `X` itself is replaced.
#[cfg(unix)]
#[tokio::test]
async fn an_export_into_a_shared_folder_ignores_what_others_made_there() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let (dir, catalog) = open();
    save_all(&catalog, vec![bare("Oat Drink")]).await;
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let out = shared.join("products.csv");
    let tmp = shared.join("products.csv.tmp");
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let is_the_export = |path: &Path| {
        let meta = std::fs::symlink_metadata(path).unwrap();
        assert!(meta.file_type().is_file(), "{meta:?}");
        assert_eq!(meta.uid(), std::fs::metadata(dir.path()).unwrap().uid(), "this user's");
        assert_eq!(meta.mode() & 0o022, 0, "nobody else may change it: {:o}", meta.mode());
        assert!(std::fs::read_to_string(path).unwrap().contains("Oat Drink"));
    };

    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    catalog.export_to_file(ExportFormat::Csv, &out).await.unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "the link's target is untouched");
    assert!(std::fs::symlink_metadata(&tmp).unwrap().file_type().is_symlink());
    is_the_export(&out);

    std::fs::remove_file(&tmp).unwrap();
    std::fs::write(&tmp, "theirs").unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::os::unix::fs::chown(&tmp, Some(65534), None).unwrap();
    std::fs::remove_file(&out).unwrap();
    std::os::unix::fs::symlink(&victim, &out).unwrap();
    catalog.export_to_file(ExportFormat::Csv, &out).await.unwrap();
    assert_eq!(std::fs::read_to_string(&tmp).unwrap(), "theirs", "their file did not become the export");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "a link at the target is replaced");
    is_the_export(&out);
    let mut left: Vec<_> = std::fs::read_dir(&shared).unwrap().map(|e| e.unwrap().file_name()).collect();
    left.sort();
    assert_eq!(left, ["products.csv", "products.csv.tmp"], "nothing else is left in the folder");
}
