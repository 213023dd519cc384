//! `products show | delete | undelete | backup | restore`: one catalog call each, printed as text
//! or, with `--json`, as the same DTOs the window receives.

use std::path::Path;

use pe_core::barcode::GtinSource;
use pe_core::catalog::{local_user, ProductRecord, RevisionRecord};
use pe_core::product::FieldKind;
use pe_core::ErrorReport;
use serde_json::json;

use super::{EXIT_FAILED, EXIT_OK};
use crate::state::AppState;
use crate::terminal::{self, errln, field, outln};

fn failed(error: impl Into<ErrorReport>) -> i32 {
    errln!("error: {}", error.into());
    EXIT_FAILED
}

fn now_ms() -> i64 {
    (pe_core::pipeline::system_clock())()
}

/// `products show ID`: the saved fields, where they came from, and the history.
pub async fn show(state: &AppState, id: i64, json: bool) -> i32 {
    let catalog = state.catalog();
    let found = tokio::try_join!(catalog.get_product(id), catalog.history(id), catalog.product_photos(id));
    let (record, history, photos) = match found {
        Ok(found) => found,
        Err(e) => return failed(e),
    };
    if json {
        let _ = terminal::out_json(&json!({"product": record, "photos": photos, "history": history}));
        return EXIT_OK;
    }
    print_record(&record);
    if photos.len() > 1 {
        outln!("  {:<12} {}", "photos", photos.len());
        for photo in &photos {
            outln!("  {:<12} {}", "", field(&photo.path));
        }
    }
    outln!();
    outln!("history (newest first):");
    for revision in &history {
        print_revision(revision);
    }
    EXIT_OK
}

/// " (from the photo's barcode)", after a GTIN.
fn gtin_source_text(source: Option<GtinSource>) -> &'static str {
    match source {
        Some(GtinSource::Photo) => " (from the photo's barcode)",
        Some(GtinSource::Model) => " (read by Gemini)",
        Some(GtinSource::Review) => " (typed in review)",
        None => "",
    }
}

/// The saved fields, a line each (a description's own lines indented under it), every value a
/// [`field`]: a product's text came from a model, a photo's path from a file name.
fn print_record(record: &ProductRecord) {
    let p = &record.saved;
    outln!("#{} {}", record.id, field(&p.name));
    // The field table's values, one line each: the short ones, the long texts (a description's
    // lines indented under its label), then the photo. The name is the heading.
    let rows = p.display_rows();
    for (spec, value) in rows.iter().filter(|(f, _)| !f.required && f.kind != FieldKind::LongText) {
        let source = if spec.kind == FieldKind::Gtin { gtin_source_text(record.gtin_source) } else { "" };
        outln!("  {:<12} {}{source}", spec.label.to_lowercase(), field(value));
    }
    for (spec, value) in rows.iter().filter(|(f, _)| f.kind == FieldKind::LongText) {
        print_lines(&spec.label.to_lowercase(), value);
    }
    outln!("  {:<12} {}", "photo", field(&record.original_path));
    for attribute in &p.attributes {
        outln!("  {:<12} {}: {}", "attribute", field(&attribute.name), field(&attribute.value));
    }
    let by = if record.updated_by.is_empty() { String::new() } else { format!(" by {}", field(&record.updated_by)) };
    outln!("  revision {}, updated {}{by}", record.revision, format_time(record.updated_at));
    if let Some(original) = record.duplicate_of {
        outln!("  a duplicate of #{original}");
    }
    for flag in &record.flags {
        outln!("  flagged      {}: {}", field(&flag.field), field(&flag.message));
    }
}

/// A text of several lines (a description): its first line after the label, the others indented
/// under it, each line a [`field`] (a tab, CR or escape in it shown as an escape).
fn print_lines(label: &str, text: &str) {
    for (i, line) in text.split('\n').enumerate() {
        let label = if i == 0 { label } else { "" };
        outln!("  {label:<12} {}", field(line));
    }
}

fn print_revision(revision: &RevisionRecord) {
    let by = if revision.saved_by.is_empty() { "unknown".to_string() } else { field(&revision.saved_by).into_owned() };
    let source = serde_json::to_value(revision.source).ok().and_then(|v| v.as_str().map(str::to_owned));
    outln!(
        "  revision {} — {} by {by} ({})",
        revision.revision,
        format_time(revision.saved_at),
        source.unwrap_or_default()
    );
    if revision.changes.is_empty() {
        outln!("    no field changed");
    }
    for change in &revision.changes {
        outln!(
            "    {}: {} → {}",
            field(&change.field),
            field(change.before.as_deref().unwrap_or("(empty)")),
            field(change.after.as_deref().unwrap_or("(empty)"))
        );
    }
}

fn format_time(unix_ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(unix_ms)
        .map(|t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| unix_ms.to_string())
}

/// `products delete ID`: hidden from lists, search and exports; `products undelete ID` brings it back.
pub async fn delete(state: &AppState, id: i64, json: bool) -> i32 {
    match state.catalog().delete_product(id, &local_user(), now_ms()).await {
        Ok(record) if json => {
            let _ = terminal::out_json(&json!({"deleted": record.id, "name": record.saved.name}));
            EXIT_OK
        }
        Ok(record) => {
            outln!("deleted #{} {} (undo: products undelete {})", record.id, field(&record.saved.name), record.id);
            EXIT_OK
        }
        Err(e) => failed(e),
    }
}

/// `products undelete ID`: undoes a delete.
pub async fn undelete(state: &AppState, id: i64, json: bool) -> i32 {
    match state.catalog().undelete_product(id, &local_user(), now_ms()).await {
        Ok(record) if json => {
            let _ = terminal::out_json(&json!({"restored": record.id, "name": record.saved.name}));
            EXIT_OK
        }
        Ok(record) => {
            outln!("restored #{} {}", record.id, field(&record.saved.name));
            EXIT_OK
        }
        Err(e) => failed(e),
    }
}

/// `products backup FILE`: a consistent copy of the live catalog (SQLite's online backup).
pub async fn backup(state: &AppState, file: &Path, json: bool) -> i32 {
    match state.catalog().backup_to(file).await {
        Ok(summary) if json => {
            let _ = terminal::out_json(&json!({"backup": summary}));
            EXIT_OK
        }
        Ok(summary) => {
            outln!(
                "backed up {} products ({} bytes, schema {}) to {}",
                summary.products,
                summary.bytes,
                summary.schema_version,
                field(&summary.path)
            );
            EXIT_OK
        }
        Err(e) => failed(e),
    }
}

/// `products restore FILE`: replaces the catalog with a checked backup; the current catalog is
/// kept as a safety backup first.
pub async fn restore(state: &AppState, file: &Path, json: bool) -> i32 {
    match state.catalog().restore_from(file, now_ms()).await {
        Ok(summary) if json => {
            let _ = terminal::out_json(&json!({"restore": summary}));
            EXIT_OK
        }
        Ok(summary) => {
            outln!(
                "restored {} products from {} (schema {} → {}); the previous catalog is saved as {}",
                summary.products,
                terminal::path(file),
                summary.schema_version_before,
                summary.migrated_to,
                field(&summary.safety_backup)
            );
            if summary.held > 0 {
                outln!(
                    "{} photos that waited in its queue are not sent again until you retry them (the Import view)",
                    summary.held
                );
            }
            EXIT_OK
        }
        Err(e) => failed(e),
    }
}
