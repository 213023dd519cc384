//! `products show | delete | undelete | backup | restore`: one catalog call each, printed as text
//! or, with `--json`, as the same DTOs the window receives.

use std::path::Path;

use pe_core::barcode::GtinSource;
use pe_core::catalog::{local_user, ProductRecord, RevisionRecord};
use pe_core::ErrorReport;
use serde_json::json;

use super::{EXIT_FAILED, EXIT_OK};
use crate::state::AppState;

fn failed(error: impl Into<ErrorReport>) -> i32 {
    eprintln!("error: {}", error.into());
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
        println!("{}", json!({"product": record, "photos": photos, "history": history}));
        return EXIT_OK;
    }
    print_record(&record);
    if photos.len() > 1 {
        println!("  {:<12} {}", "photos", photos.len());
        for photo in &photos {
            println!("  {:<12} {}", "", photo.path);
        }
    }
    println!();
    println!("history (newest first):");
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

fn print_record(record: &ProductRecord) {
    let p = &record.saved;
    println!("#{} {}", record.id, p.name);
    let rows: [(&str, Option<String>); 10] = [
        ("brand", p.brand.clone()),
        ("category", p.category.clone()),
        ("price", p.price.as_ref().map(|pr| format!("{:.2} {}", pr.amount, pr.currency))),
        ("gtin", p.gtin.as_ref().map(|g| format!("{g}{}", gtin_source_text(record.gtin_source)))),
        ("color", p.color.clone()),
        ("size", p.size.clone()),
        ("material", p.material.clone()),
        ("net content", p.net_content.as_ref().map(|n| format!("{} {}", n.value, n.unit))),
        ("description", p.description.clone()),
        ("photo", Some(record.original_path.clone())),
    ];
    for (label, value) in rows {
        if let Some(value) = value {
            println!("  {label:<12} {value}");
        }
    }
    for attribute in &p.attributes {
        println!("  {:<12} {}: {}", "attribute", attribute.name, attribute.value);
    }
    let by = if record.updated_by.is_empty() { String::new() } else { format!(" by {}", record.updated_by) };
    println!("  revision {}, updated {}{by}", record.revision, format_time(record.updated_at));
    if let Some(original) = record.duplicate_of {
        println!("  a duplicate of #{original}");
    }
    for flag in &record.flags {
        println!("  flagged      {}: {}", flag.field, flag.message);
    }
}

fn print_revision(revision: &RevisionRecord) {
    let by = if revision.saved_by.is_empty() { "unknown".to_string() } else { revision.saved_by.clone() };
    let source = serde_json::to_value(revision.source).ok().and_then(|v| v.as_str().map(str::to_owned));
    println!(
        "  revision {} — {} by {by} ({})",
        revision.revision,
        format_time(revision.saved_at),
        source.unwrap_or_default()
    );
    if revision.changes.is_empty() {
        println!("    no field changed");
    }
    for change in &revision.changes {
        println!(
            "    {}: {} → {}",
            change.field,
            change.before.as_deref().unwrap_or("(empty)"),
            change.after.as_deref().unwrap_or("(empty)")
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
            println!("{}", json!({"deleted": record.id, "name": record.saved.name}));
            EXIT_OK
        }
        Ok(record) => {
            println!("deleted #{} {} (undo: products undelete {})", record.id, record.saved.name, record.id);
            EXIT_OK
        }
        Err(e) => failed(e),
    }
}

/// `products undelete ID`: undoes a delete.
pub async fn undelete(state: &AppState, id: i64, json: bool) -> i32 {
    match state.catalog().undelete_product(id, &local_user(), now_ms()).await {
        Ok(record) if json => {
            println!("{}", json!({"restored": record.id, "name": record.saved.name}));
            EXIT_OK
        }
        Ok(record) => {
            println!("restored #{} {}", record.id, record.saved.name);
            EXIT_OK
        }
        Err(e) => failed(e),
    }
}

/// `products backup FILE`: a consistent copy of the live catalog (SQLite's online backup).
pub async fn backup(state: &AppState, file: &Path, json: bool) -> i32 {
    match state.catalog().backup_to(file).await {
        Ok(summary) if json => {
            println!("{}", json!({"backup": summary}));
            EXIT_OK
        }
        Ok(summary) => {
            println!(
                "backed up {} products ({} bytes, schema {}) to {}",
                summary.products, summary.bytes, summary.schema_version, summary.path
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
            println!("{}", json!({"restore": summary}));
            EXIT_OK
        }
        Ok(summary) => {
            println!(
                "restored {} products from {} (schema {} → {}); the previous catalog is saved as {}",
                summary.products,
                file.display(),
                summary.schema_version_before,
                summary.migrated_to,
                summary.safety_backup
            );
            if summary.held > 0 {
                println!(
                    "{} photos that waited in its queue are not sent again until you retry them (the Import view)",
                    summary.held
                );
            }
            EXIT_OK
        }
        Err(e) => failed(e),
    }
}
