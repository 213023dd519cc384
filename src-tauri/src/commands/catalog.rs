//! The saved products: the catalog table, a product's edits and history, exports and backups.
//! Each command takes `State`, calls one core function and converts the error.

use std::path::PathBuf;

use pe_core::catalog::{
    local_user, BackupSummary, ExportFormat, ExportSummary, Facets, PhotoRef, ProductPage, ProductQuery, ProductRecord,
    RestoreSummary, RevisionRecord, RevisionSource, UpdateProduct,
};
use pe_core::import::EnqueueOptions;
use pe_core::product::{self, diff, Product};
use pe_core::stored_path::StoredPath;
use pe_core::{ErrorCode, ErrorReport};
use tauri::State;

use crate::dto::{ReextractProposal, UpdateInput};
use crate::state::AppState;

/// The most rows one call returns.
const MAX_PAGE: u32 = 500;

pub async fn query_products(state: State<'_, AppState>, mut query: ProductQuery) -> Result<ProductPage, ErrorReport> {
    query.limit = query.limit.clamp(1, MAX_PAGE);
    Ok(state.catalog().query_products(query).await?)
}

pub async fn catalog_facets(state: State<'_, AppState>) -> Result<Facets, ErrorReport> {
    Ok(state.catalog().facets().await?)
}

pub async fn get_product(state: State<'_, AppState>, id: i64) -> Result<ProductRecord, ErrorReport> {
    Ok(state.catalog().get_product(id).await?)
}

/// Every photo of a product, in order (its first, then those it was extracted with).
pub async fn product_photos(state: State<'_, AppState>, id: i64) -> Result<Vec<PhotoRef>, ErrorReport> {
    Ok(state.catalog().product_photos(id).await?)
}

pub async fn product_history(state: State<'_, AppState>, id: i64) -> Result<Vec<RevisionRecord>, ErrorReport> {
    Ok(state.catalog().history(id).await?)
}

/// Saves an edit of a catalog product, refused when someone saved a newer revision meanwhile.
pub async fn update_product(state: State<'_, AppState>, input: UpdateInput) -> Result<ProductRecord, ErrorReport> {
    let source = if input.attempt_id.is_some() { RevisionSource::Reextract } else { RevisionSource::Edit };
    let record = state
        .catalog()
        .update_product(UpdateProduct {
            id: input.id,
            expected_revision: input.expected_revision,
            saved: input.product.normalized(),
            attempt_id: input.attempt_id,
            source,
            saved_by: local_user(),
            saved_at: state.now(),
        })
        .await?;
    tracing::info!(product_id = record.id, revision = record.revision, "product updated");
    Ok(record)
}

pub async fn delete_product(state: State<'_, AppState>, id: i64) -> Result<ProductRecord, ErrorReport> {
    Ok(state.catalog().delete_product(id, &local_user(), state.now()).await?)
}

pub async fn undelete_product(state: State<'_, AppState>, id: i64) -> Result<ProductRecord, ErrorReport> {
    Ok(state.catalog().undelete_product(id, &local_user(), state.now()).await?)
}

pub async fn duplicate_product(state: State<'_, AppState>, id: i64) -> Result<ProductRecord, ErrorReport> {
    Ok(state.catalog().duplicate_product(id, &local_user(), state.now()).await?)
}

/// Asks Gemini again for a saved product's photo. Nothing is saved: the answer comes back as a
/// diff against the saved product, for the reviewer to accept field by field.
pub async fn reextract_product(state: State<'_, AppState>, id: i64) -> Result<ReextractProposal, ErrorReport> {
    let record = state.catalog().get_product(id).await?;
    // Through the queue like every photo: interactive (the next free slot), forced (the bytes are
    // known: that is the point), every photo of the product in one request. Each file must still
    // hold the photo's bytes; on a team catalog a file that is not on this computer is sent as the
    // prepared photo the catalog keeps.
    let photos: Vec<(StoredPath, String)> = state
        .catalog()
        .product_photos(id)
        .await?
        .into_iter()
        .map(|p| (StoredPath::from_text_and_hex(&p.path, p.path_bytes.as_deref()), p.sha256))
        .collect();
    let queue = state.import_queue().await?;
    let options = EnqueueOptions { force: true, ..EnqueueOptions::interactive() };
    let enqueued = queue.enqueue_product(photos, options).await?;
    let Some(file) = enqueued.files.first() else {
        return Err(ErrorReport::new(ErrorCode::NotFound, format!("{} is not a photo file.", record.original_path)));
    };
    let item = queue.finished(file.result_of).await?;
    let (Some(proposal), Some(attempt)) = (item.proposal, item.attempt) else {
        let why = item.row.last_error.or_else(|| item.row.skipped.map(|s| ErrorReport::new(ErrorCode::Io, s.message)));
        return Err(why.unwrap_or_else(|| ErrorReport::new(ErrorCode::Io, "The photo could not be extracted again.")));
    };
    // The answer is taken here, as a diff; the item does not wait in Extract for a review too.
    queue.discard_item(item.row.id).await?;
    if item.row.photo_id != Some(record.photo_id) {
        return Err(ErrorReport::new(
            ErrorCode::Validation,
            format!(
                "The file at {} is no longer the photo this product was saved from (its content changed); \
                 extract it as a new photo instead.",
                record.original_path
            ),
        ));
    }
    let changes = diff(Some(&record.saved), &proposal);
    Ok(ReextractProposal { attempt_id: attempt.id, revision: record.revision, proposal, flags: item.flags, changes })
}

/// The saved product with the ticked changes of a re-extract taken from its proposal
/// (`FieldChange.field` names; see `pe_core::product::take_fields`). Nothing is saved.
pub async fn take_fields(saved: Product, proposal: Product, fields: Vec<String>) -> Result<Product, ErrorReport> {
    product::take_fields(&saved, &proposal, &fields).map_err(|e| ErrorReport::new(ErrorCode::Validation, e.to_string()))
}

/// Writes every saved product to `path` (a new file beside it, renamed when complete).
pub async fn export_catalog(
    state: State<'_, AppState>,
    format: ExportFormat,
    path: String,
) -> Result<ExportSummary, ErrorReport> {
    let path = PathBuf::from(path);
    Ok(state.catalog().export_to_file(format, &path).await?)
}

pub async fn backup_catalog(state: State<'_, AppState>, path: String) -> Result<BackupSummary, ErrorReport> {
    Ok(state.catalog().backup_to(&PathBuf::from(path)).await?)
}

pub async fn restore_catalog(state: State<'_, AppState>, path: String) -> Result<RestoreSummary, ErrorReport> {
    Ok(state.catalog().restore_from(&PathBuf::from(path), state.now()).await?)
}
