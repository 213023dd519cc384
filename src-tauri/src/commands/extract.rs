//! Photos dropped or added in the window. They go through the import queue like every photo, as
//! interactive items (claimed ahead of a bulk import, the next free slot theirs); the Extract view
//! shows them as cards driven by the queue's `import://item` events, and restores the ones still
//! waiting for review at start. Review, save, discard and re-extract are the queue's commands
//! (`commands::import`).

use std::collections::HashSet;
use std::path::PathBuf;

use pe_core::import::{EnqueueOptions, ImportRow};
use pe_core::product::{FieldFlag, Product};
use pe_core::stored_path::StoredPath;
use pe_core::{intake, ErrorReport};
use tauri::State;

use crate::state::AppState;

/// The long edge of the photo in the review pane.
const PREVIEW_LONG_EDGE: u32 = 1024;

/// Queues the photos (folders are expanded) as interactive items and returns a row per card: the
/// item that stands for each file (a photo whose bytes are queued or extracted already shows that
/// item, with no second call), in the order given.
pub async fn extract_photos(state: State<'_, AppState>, paths: Vec<String>) -> Result<Vec<ImportRow>, ErrorReport> {
    let queue = state.import_queue().await?;
    let paths = paths.into_iter().map(PathBuf::from).collect();
    let enqueued = queue.enqueue_files(paths, EnqueueOptions::interactive()).await?;
    let mut shown = HashSet::new();
    let mut rows = Vec::new();
    for file in enqueued.files {
        if shown.insert(file.result_of) {
            rows.push(queue.item(file.result_of).await?.row);
        }
    }
    Ok(rows)
}

/// The interactive items not saved or discarded yet (waiting, in progress, ready for review,
/// failed), oldest first: the Extract view's cards after a restart.
pub async fn extract_pending(state: State<'_, AppState>) -> Result<Vec<ImportRow>, ErrorReport> {
    let rows = state.import_queue().await?.interactive_open().await?;
    crate::mark_interactive();
    Ok(rows)
}

pub async fn validate_product(product: Product) -> Result<Vec<FieldFlag>, ErrorReport> {
    Ok(product.normalized().validate())
}

/// The review pane's photo. `file_bytes`: the row's `path_bytes` (the exact bytes of a name that
/// is not UTF-8, in hex). The decode takes its share of the decode budget like an import's.
/// The prepared photo a team catalog keeps of `photo_id`, as a `data:` URL: review's picture of
/// a photo whose file is on another computer. `not_found` when none is kept (a local catalog, or
/// a photo recorded before it kept them).
pub async fn kept_photo(state: State<'_, AppState>, photo_id: i64) -> Result<String, ErrorReport> {
    state.catalog().prepared_image_url(photo_id).await?.ok_or_else(|| {
        ErrorReport::new(pe_core::ErrorCode::NotFound, format!("no prepared copy of photo #{photo_id} is kept"))
    })
}

pub async fn preview_photo(
    state: State<'_, AppState>,
    file: String,
    file_bytes: Option<String>,
) -> Result<String, ErrorReport> {
    let config = state.effective_config().image;
    let path = StoredPath::from_text_and_hex(&file, file_bytes.as_deref()).to_path_buf();
    let budget = state.pipeline().decode_budget().clone();
    Ok(intake::preview_data_url_async(path, config, PREVIEW_LONG_EDGE, &budget).await?)
}
