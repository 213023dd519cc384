//! The bulk import: queue folders, control the runner, list the queue, review its ready items.
//! The queue itself (`pe_core::import::ImportQueue`) is opened when the window starts, so an
//! unfinished import resumes by itself; these commands only translate.

use std::path::PathBuf;

use pe_core::catalog::ProductRecord;
use pe_core::import::{
    EnqueueOptions, EnqueueReport, ImportItemDetail, ImportPage, ImportProgress, ItemId, ItemState, UndoReport,
};
use pe_core::product::Product;
use pe_core::{ErrorCode, ErrorReport};
use tauri::State;

use crate::dto::ImportControl;
use crate::state::AppState;

/// The most rows one call returns (the review list asks for every ready item's id at once).
const MAX_PAGE: u32 = 100_000;

/// True when any of `paths` is a folder: a drop with a folder goes to the import queue.
pub async fn contains_folder(paths: Vec<String>) -> Result<bool, ErrorReport> {
    tokio::task::spawn_blocking(move || paths.iter().any(|p| std::path::Path::new(p).is_dir()))
        .await
        .map_err(|e| ErrorReport::new(ErrorCode::Io, format!("a background task failed: {e}")))
}

/// Queues files and folders (recursively); the runner starts on them at once. `batch`: through
/// the Gemini Batch API ("Overnight", half price).
pub async fn import_paths(
    state: State<'_, AppState>,
    paths: Vec<String>,
    batch: bool,
) -> Result<EnqueueReport, ErrorReport> {
    let queue = state.import_queue().await?;
    let paths = paths.into_iter().map(PathBuf::from).collect();
    let grouping = state.effective_config().import.grouping();
    Ok(queue.enqueue(paths, EnqueueOptions { batch, grouping, ..EnqueueOptions::default() }).await?)
}

pub async fn import_progress(state: State<'_, AppState>) -> Result<ImportProgress, ErrorReport> {
    Ok(state.import_queue().await?.progress().borrow().clone())
}

pub async fn import_items(
    state: State<'_, AppState>,
    offset: u32,
    limit: u32,
    states: Option<Vec<ItemState>>,
) -> Result<ImportPage, ErrorReport> {
    Ok(state.import_queue().await?.items(offset, limit.clamp(1, MAX_PAGE), states).await?)
}

pub async fn import_item(state: State<'_, AppState>, id: ItemId) -> Result<ImportItemDetail, ErrorReport> {
    Ok(state.import_queue().await?.item(id).await?)
}

/// Review's split and merge: photo `index` of item `from` to item `to`, or to a product of its
/// own; returns the items changed (the new one last). Nothing is sent until asked.
pub async fn import_move_photo(
    state: State<'_, AppState>,
    from: ItemId,
    index: u32,
    to: Option<ItemId>,
) -> Result<Vec<ItemId>, ErrorReport> {
    let queue = state.import_queue().await?;
    let index = usize::try_from(index).unwrap_or(usize::MAX);
    Ok(queue.move_photo(from, index, to).await?.into_iter().map(|(id, _)| id).collect())
}

/// Pause, resume, cancel (items stay queued), retry failed, clear done; returns the progress after.
pub async fn import_control(state: State<'_, AppState>, action: ImportControl) -> Result<ImportProgress, ErrorReport> {
    let queue = state.import_queue().await?;
    match action {
        ImportControl::Pause => queue.pause(),
        ImportControl::Resume => queue.resume(),
        ImportControl::Cancel => queue.cancel().await?,
        ImportControl::RetryFailed => {
            queue.retry_failed().await?;
        }
        ImportControl::ClearDone => {
            queue.clear_done().await?;
        }
    }
    Ok(queue.progress().borrow().clone())
}

/// Review's accept: the product is saved and the item marked saved, in one transaction.
pub async fn import_save_item(
    state: State<'_, AppState>,
    id: ItemId,
    product: Product,
) -> Result<ProductRecord, ErrorReport> {
    Ok(state.import_queue().await?.save_item(id, product.normalized()).await?)
}

pub async fn import_discard_item(state: State<'_, AppState>, id: ItemId) -> Result<(), ErrorReport> {
    Ok(state.import_queue().await?.discard_item(id).await?)
}

/// Saves every ready item with nothing to check; returns their ids for the Undo.
pub async fn import_save_all_ready(state: State<'_, AppState>) -> Result<Vec<ItemId>, ErrorReport> {
    Ok(state.import_queue().await?.save_all_ready_unflagged().await?)
}

pub async fn import_undo_save_all(state: State<'_, AppState>, ids: Vec<ItemId>) -> Result<UndoReport, ErrorReport> {
    Ok(state.import_queue().await?.undo_save_all(ids).await?)
}

/// Extracts a duplicate (or discarded, or failed) item anyway.
pub async fn import_force(state: State<'_, AppState>, id: ItemId) -> Result<(), ErrorReport> {
    Ok(state.import_queue().await?.force_extract(id).await?)
}
