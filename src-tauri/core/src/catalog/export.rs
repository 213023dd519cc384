//! Streaming exports of the saved catalog: Shopify's product CSV, a flat CSV, JSON and JSON Lines.
//!
//! [`Catalog::export`] runs inside one read-only transaction (a consistent snapshot), on either
//! backend through the catalog's one seam ([`super::db::Db`]). It walks the live (not deleted)
//! `products` by id in chunks and writes each row as soon as its chunk is read, so memory stays
//! flat however large the catalog is. Every format is built from the *saved* product (`saved_json`), with the row's
//! id, revision and `updated_at` (ISO 8601, UTC, milliseconds).
//!
//! # CSV injection guard
//! Spreadsheets run a cell that starts with `=`, `+`, `-` or `@` as a formula (and some also
//! treat a leading tab or carriage return that way). Product text is untrusted (it came from a
//! photo, through a model), so in both CSV formats every *text* cell that starts with one of
//! those characters is written with a leading `'`, which spreadsheets show as text — also when
//! whitespace or invisible characters (a zero-width space, a BOM) come first, or the character
//! is a look-alike that NFKC folds into one of them (the fullwidth `＝`) ([`guard`]). Numbers we
//! format ourselves (prices, ids, revisions) are never prefixed. The guard is not reversible for
//! a value that itself starts with `'` followed by one of those characters; JSON and JSON Lines
//! carry the values unchanged.
//!
//! # Shopify
//! The columns of Shopify's product CSV import, one variant per product ("Default Title"), as a
//! draft. The price loses its currency (Shopify uses the store's); photos are local, so
//! `Image Src` is empty. The description is untrusted text: it is HTML-escaped inside a `<p>`.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::str::FromStr;

use rusqlite::params;
use serde::{Deserialize, Serialize};
use time::macros::format_description;
use time::OffsetDateTime;
use ts_rs::TS;

use super::db::{Contention, Db};
use super::{Catalog, CatalogError, ProductId};
use crate::error::{Coded, ErrorCode};
use crate::files::{Access, StagedFile};
use crate::product::{FieldKind, Product, ProductField, Value, PRODUCT_FIELDS};

/// What [`Catalog::export`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum ExportFormat {
    /// Shopify's product CSV import ([`SHOPIFY_HEADERS`]).
    Shopify,
    /// Every saved field flattened, one product a row ([`csv_headers`]).
    Csv,
    /// One JSON array of [`ExportedProduct`].
    Json,
    /// One [`ExportedProduct`] JSON object a line.
    Jsonl,
}

impl ExportFormat {
    /// The name used on the command line: `shopify`, `csv`, `json`, `jsonl`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shopify => "shopify",
            Self::Csv => "csv",
            Self::Json => "json",
            Self::Jsonl => "jsonl",
        }
    }
}

impl FromStr for ExportFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "shopify" => Ok(Self::Shopify),
            "csv" => Ok(Self::Csv),
            "json" => Ok(Self::Json),
            "jsonl" => Ok(Self::Jsonl),
            other => Err(format!("unknown export format {other:?}: expected shopify, csv, json or jsonl")),
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ExportSummary {
    /// Products written.
    #[ts(type = "number")]
    pub rows: u64,
}

/// A saved product as the JSON formats write it: the product's fields plus the row's identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedProduct {
    pub id: ProductId,
    pub revision: u32,
    /// ISO 8601, UTC, milliseconds: `2025-10-09T08:53:20.000Z`.
    pub updated_at: String,
    #[serde(flatten)]
    pub product: Product,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading the catalog failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// Writing the output failed (a full disk, a closed pipe).
    #[error("cannot write the export: {0}")]
    Write(#[from] std::io::Error),
}

impl From<rusqlite::Error> for ExportError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Catalog(CatalogError::Sqlite(e))
    }
}

impl From<serde_json::Error> for ExportError {
    fn from(e: serde_json::Error) -> Self {
        if e.is_io() {
            Self::Write(e.into())
        } else {
            Self::Catalog(CatalogError::Json(e))
        }
    }
}

impl From<csv::Error> for ExportError {
    fn from(e: csv::Error) -> Self {
        Self::Write(e.into())
    }
}

impl Coded for ExportError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::Catalog(e) => e.code(),
            Self::Write(_) => ErrorCode::Io,
        }
    }
}

/// The header row of [`ExportFormat::Shopify`].
pub const SHOPIFY_HEADERS: [&str; 17] = [
    "Handle",
    "Title",
    "Body (HTML)",
    "Vendor",
    "Product Category",
    "Type",
    "Tags",
    "Published",
    "Option1 Name",
    "Option1 Value",
    "Variant SKU",
    "Variant Price",
    "Variant Barcode",
    "Variant Requires Shipping",
    "Variant Taxable",
    "Image Src",
    "Status",
];

/// The header row of [`ExportFormat::Csv`]: `id`, then every saved field of the field table
/// flattened ([`csv_columns`]), then `updated_at` and `revision`.
pub fn csv_headers() -> Vec<String> {
    let fields = PRODUCT_FIELDS.iter().flat_map(csv_columns);
    std::iter::once("id".to_owned()).chain(fields).chain(["updated_at".into(), "revision".into()]).collect()
}

/// A field's columns in [`ExportFormat::Csv`], by kind: one for a text or the attributes
/// ("Flavor: Oat; Vegan: yes"), two for an amount and its code (`price_amount`,
/// `price_currency`); none for the unsure list.
fn csv_columns(field: &ProductField) -> Vec<String> {
    match field.kind {
        FieldKind::FieldNames => Vec::new(),
        _ => field.column_names(),
    }
}

/// A field's cells of [`ExportFormat::Csv`], as [`csv_columns`] names them: every text behind the
/// injection [`guard`], numbers as Rust writes them (`2.5`).
fn csv_cells(p: &Product, field: &ProductField) -> Vec<String> {
    let pair = |number: Option<f64>, code: Option<&str>| {
        vec![number.map(|n| n.to_string()).unwrap_or_default(), guard(code.unwrap_or_default())]
    };
    match p.value(field.key) {
        Value::Text(text) => vec![guard(text.unwrap_or_default())],
        Value::Price(price) => pair(price.map(|p| p.amount), price.map(|p| p.currency.as_str())),
        Value::NetContent(content) => pair(content.map(|c| c.value), content.map(|c| c.unit.as_str())),
        Value::Attributes(attributes) => {
            let pairs: Vec<String> = attributes.iter().map(|a| format!("{}: {}", a.name, a.value)).collect();
            vec![guard(&pairs.join("; "))]
        }
        Value::FieldNames(_) => Vec::new(),
    }
}

impl Catalog {
    /// Writes every live (not deleted) product, ordered by id, to `out` in `format`, row by row as
    /// they are read (see the [module docs](self)): one read-only snapshot, read in chunks of
    /// [`EXPORT_CHUNK`] rows, so memory stays flat whatever the catalog's size. `out` is flushed
    /// at the end. On SQLite it runs on the catalog thread (other jobs wait until it finishes); on
    /// a server on the blocking pool, with a connection of its own.
    pub async fn export(&self, format: ExportFormat, out: Box<dyn Write + Send>) -> Result<ExportSummary, ExportError> {
        let mut out = Some(out);
        self.run_db(move |db| {
            // Runs once: an export is never run again (see its `Contention`), so `out` is here.
            let out = out.take().ok_or_else(|| CatalogError::Panicked { message: "an export ran twice".into() })?;
            export_rows(db, format, out)
        })
        .await
    }

    /// [`Self::export`] into the file `path`, written as a new file beside it and renamed once
    /// complete ([`StagedFile`]), so `path` is never a partial export (a failed export removes the
    /// new file and leaves an older `path` as it was), and nothing already in the folder (a
    /// `path.tmp`, a link) is written through.
    pub async fn export_to_file(&self, format: ExportFormat, path: &Path) -> Result<ExportSummary, ExportError> {
        let (staged, file) = StagedFile::create(path, Access::Default)?;
        let summary = self.export(format, Box::new(file)).await?;
        staged.commit()?;
        Ok(summary)
    }
}

/// An export is never run again: rows already written to its output cannot be taken back, and its
/// read-only snapshot never loses a race anyway.
impl Contention for ExportError {
    fn is_contention(&self) -> bool {
        false
    }
}

/// A row of the export query, parsed.
struct Row {
    id: ProductId,
    revision: u32,
    updated_at: i64,
    product: Product,
}

/// Rows read from the catalog at a time.
pub const EXPORT_CHUNK: i64 = 1000;

/// The export query: the next chunk of live products after id `?1`, by id, the saved product as
/// text (a keyset walk of the primary key: every chunk costs the same however deep).
const EXPORT_SQL: &str = "SELECT id, revision, updated_at, CAST(saved_json AS TEXT) FROM products
     WHERE deleted_at IS NULL AND id > ?1 ORDER BY id LIMIT ?2";

fn export_rows(db: &Db<'_>, format: ExportFormat, out: Box<dyn Write + Send>) -> Result<ExportSummary, ExportError> {
    let tx = db.read_transaction().map_err(CatalogError::from)?;
    let mut chunk = std::collections::VecDeque::new();
    let mut after: ProductId = 0;
    let mut done = false;
    let rows = write_rows(format, out, || {
        if chunk.is_empty() && !done {
            let read = tx
                .query_map(EXPORT_SQL, params![after, EXPORT_CHUNK], |row| {
                    Ok((row.get::<ProductId>(0)?, row.get::<u32>(1)?, row.get::<i64>(2)?, row.get::<String>(3)?))
                })
                .map_err(CatalogError::from)?;
            done = (read.len() as i64) < EXPORT_CHUNK;
            if let Some(last) = read.last() {
                after = last.0;
            }
            chunk.extend(read);
        }
        let Some((id, revision, updated_at, saved)) = chunk.pop_front() else { return Ok(None) };
        Ok(Some(Row::parse(id, revision, updated_at, &saved)?))
    })?;
    tx.commit().map_err(CatalogError::from)?;
    Ok(ExportSummary { rows })
}

impl Row {
    fn parse(id: ProductId, revision: u32, updated_at: i64, saved_json: &str) -> Result<Row, CatalogError> {
        Ok(Row { id, revision, updated_at, product: serde_json::from_str(saved_json)? })
    }
}

/// Writes the rows `next` gives, in `format`; returns how many.
fn write_rows(
    format: ExportFormat,
    out: Box<dyn Write + Send>,
    mut next: impl FnMut() -> Result<Option<Row>, ExportError>,
) -> Result<u64, ExportError> {
    Ok(match format {
        ExportFormat::Shopify | ExportFormat::Csv => {
            let mut writer = csv::Writer::from_writer(out);
            let shopify = format == ExportFormat::Shopify;
            if shopify {
                writer.write_record(SHOPIFY_HEADERS)?;
            } else {
                writer.write_record(csv_headers())?;
            }
            let mut rows = 0;
            while let Some(row) = next()? {
                if shopify {
                    writer.write_record(shopify_record(&row))?;
                } else {
                    writer.write_record(csv_record(&row))?;
                }
                rows += 1;
            }
            writer.flush()?;
            rows
        }
        ExportFormat::Json | ExportFormat::Jsonl => {
            let mut out = BufWriter::new(out);
            let array = format == ExportFormat::Json;
            if array {
                out.write_all(b"[")?;
            }
            let mut rows = 0u64;
            while let Some(row) = next()? {
                if array {
                    out.write_all(if rows == 0 { b"\n" } else { b",\n" })?;
                }
                let item = ExportedProduct {
                    id: row.id,
                    revision: row.revision,
                    updated_at: iso_utc(row.updated_at),
                    product: row.product,
                };
                serde_json::to_writer(&mut out, &item)?;
                if !array {
                    out.write_all(b"\n")?;
                }
                rows += 1;
            }
            if array {
                out.write_all(if rows == 0 { b"]\n" } else { b"\n]\n" })?;
            }
            out.flush()?;
            rows
        }
    })
}

fn shopify_record(row: &Row) -> Vec<String> {
    let p = &row.product;
    let text = |value: &Option<String>| guard(value.as_deref().unwrap_or_default());
    let tags: Vec<&str> =
        [&p.color, &p.size, &p.material].into_iter().flatten().map(|t| t.trim()).filter(|t| !t.is_empty()).collect();
    let body = match p.description.as_deref().map(str::trim) {
        Some(description) if !description.is_empty() => format!("<p>{}</p>", html_escape(description)),
        _ => String::new(),
    };
    vec![
        handle(&p.name, row.id),
        guard(&p.name),
        guard(&body),
        text(&p.brand),
        String::new(),
        text(&p.category),
        guard(&tags.join(", ")),
        "TRUE".into(),
        "Title".into(),
        "Default Title".into(),
        String::new(),
        p.price.as_ref().map(|price| format!("{:.2}", price.amount)).unwrap_or_default(),
        text(&p.gtin),
        "TRUE".into(),
        "TRUE".into(),
        String::new(),
        "draft".into(),
    ]
}

fn csv_record(row: &Row) -> Vec<String> {
    let fields = PRODUCT_FIELDS.iter().flat_map(|field| csv_cells(&row.product, field));
    std::iter::once(row.id.to_string())
        .chain(fields)
        .chain([iso_utc(row.updated_at), row.revision.to_string()])
        .collect()
}

/// The CSV injection guard (see the module docs): a text cell that starts with `=`, `+`, `-`, `@`,
/// tab or carriage return gets a leading `'`. It looks at the cell as a spreadsheet may read it:
/// past leading whitespace and invisible characters (a zero-width space, a BOM, a bidi mark:
/// [`crate::text::is_invisible`]) and with compatibility look-alikes folded (NFKC: the fullwidth
/// `＝`, the small `﹢`, the superscript `⁺` are `=`, `+`, `+`). The cell itself is kept as it is,
/// behind the `'`.
pub fn guard(text: &str) -> String {
    if starts_like_a_formula(text) {
        format!("'{text}")
    } else {
        text.to_owned()
    }
}

fn starts_like_a_formula(text: &str) -> bool {
    use unicode_normalization::UnicodeNormalization;
    if text.starts_with(['\t', '\r']) {
        return true;
    }
    let rest = text.trim_start_matches(|c: char| c.is_whitespace() || crate::text::is_invisible(c));
    matches!(rest.nfkc().next(), Some('=' | '+' | '-' | '@'))
}

/// Shopify's handle: the name's ASCII letters and digits, lower-cased, other runs as one dash,
/// then the id (handles must be unique): "Oat Drink Barista!" #7 → `oat-drink-barista-7`.
pub fn handle(name: &str, id: ProductId) -> String {
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    if slug.is_empty() {
        slug.push_str("product-");
    } else if !slug.ends_with('-') {
        slug.push('-');
    }
    format!("{slug}{id}")
}

fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Unix ms as ISO 8601 UTC with milliseconds, e.g. `2025-10-09T08:53:20.000Z`.
pub fn iso_utc(unix_ms: i64) -> String {
    let format = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(unix_ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_else(|| unix_ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_guards_and_times() {
        assert_eq!(handle("Oat Drink — Barista!", 7), "oat-drink-barista-7");
        assert_eq!(handle("Crème brûlée", 2), "cr-me-br-l-e-2");
        assert_eq!(handle("***", 3), "product-3");
        for bad in ["=1+1", "+1", "-2", "@SUM(A1)", "\tx", "\rx"] {
            assert_eq!(guard(bad), format!("'{bad}"));
        }
        assert_eq!(guard("Oat 1=1"), "Oat 1=1");
        assert_eq!(iso_utc(1_760_000_000_123), "2025-10-09T08:53:20.123Z");
        assert_eq!(html_escape("<b>\"A&B'</b>"), "&lt;b&gt;&quot;A&amp;B&#39;&lt;/b&gt;");
        assert_eq!("JSONL".parse::<ExportFormat>(), Ok(ExportFormat::Jsonl));
    }

    /// A formula behind what a spreadsheet does not show or folds: a compatibility look-alike
    /// of `=`, `+`, `-`, `@` (NFKC), a leading zero-width space, BOM, bidi mark or whitespace.
    /// The cell is kept as it is behind the `'`; text that only holds such a character later on,
    /// or another character that merely looks similar (U+2212 MINUS SIGN), is left alone.
    #[test]
    fn the_guard_sees_through_look_alikes_and_invisible_characters() {
        let guarded = [
            "\u{FF1D}SUM(A1:A9)",
            "\u{FF0B}1",
            "\u{FF0D}2",
            "\u{FF20}SUM(A1)",
            "\u{FE66}1+1",
            "\u{FE62}1",
            "\u{FE63}1",
            "\u{207A}1",
            "\u{207C}1",
            "\u{200B}=1+1",
            "\u{FEFF}=1+1",
            "\u{FEFF}\u{200B}\u{2060}\u{200D}@SUM(A1)",
            "\u{202E}=1+1",
            "\u{2066}-1",
            " =1+1",
            "\u{A0}=1+1",
            "\u{3000}\u{FF1D}1",
            "\n=1+1",
            "\u{200B} \u{FF1D}HYPERLINK(\"http://x\")",
        ];
        for cell in guarded {
            assert_eq!(guard(cell), format!("'{cell}"), "{cell:?}");
        }
        for cell in ["Oat \u{FF1D} drink", "\u{2212}5 °C", "A\u{200B}=1", "\u{200B}", "", "  ", "\u{FF21}BC"] {
            assert_eq!(guard(cell), cell, "{cell:?}");
        }
    }
}
