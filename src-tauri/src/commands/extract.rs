//! Dropping photos, their progress, review and save.

use std::path::PathBuf;
use std::sync::Arc;

use pe_core::catalog::ProductRecord;
use pe_core::pipeline::collect_photo_files;
use pe_core::product::{FieldFlag, Product};
use pe_core::{intake, ErrorCode, ErrorReport};
use tauri::ipc::Channel;
use tauri::State;

use crate::dto::{JobEvent, JobTicket, SaveInput};
use crate::jobs::{self, Sink};
use crate::state::AppState;

/// The long edge of the photo in the review pane.
const PREVIEW_LONG_EDGE: u32 = 1024;

/// Starts one job per photo (folders are expanded) and returns at once; progress streams on
/// `on_event`, starting with a `queued` event per photo.
pub async fn extract_photos(
    state: State<'_, AppState>,
    paths: Vec<String>,
    on_event: Channel<JobEvent>,
) -> Result<Vec<JobTicket>, ErrorReport> {
    let paths: Vec<PathBuf> = paths.into_iter().map(PathBuf::from).collect();
    let files = tokio::task::spawn_blocking(move || collect_photo_files(&paths)).await.map_err(join_error)?;
    let sink = channel_sink(on_event);
    let tickets: Vec<JobTicket> = files.into_iter().map(|f| jobs::ticket(state.next_job_id(), f)).collect();
    for ticket in &tickets {
        jobs::spawn(&state, ticket.clone(), sink.clone());
    }
    Ok(tickets)
}

/// Runs a finished or failed job again for the same file, under the same job id.
pub async fn reextract(
    state: State<'_, AppState>,
    job_id: u64,
    file: String,
    on_event: Channel<JobEvent>,
) -> Result<JobTicket, ErrorReport> {
    let ticket = jobs::ticket(job_id, PathBuf::from(file));
    jobs::spawn(&state, ticket.clone(), channel_sink(on_event));
    Ok(ticket)
}

pub async fn validate_product(product: Product) -> Result<Vec<FieldFlag>, ErrorReport> {
    Ok(product.normalized().validate())
}

pub async fn save_product(state: State<'_, AppState>, input: SaveInput) -> Result<ProductRecord, ErrorReport> {
    let record = state.pipeline().save(input.photo_id, Some(input.attempt_id), input.product).await?;
    tracing::info!(product_id = record.id, revision = record.revision, "product saved");
    Ok(record)
}

pub async fn preview_photo(state: State<'_, AppState>, file: String) -> Result<String, ErrorReport> {
    let config = state.effective_config().image;
    let url =
        tokio::task::spawn_blocking(move || intake::preview_data_url(&PathBuf::from(file), &config, PREVIEW_LONG_EDGE))
            .await
            .map_err(join_error)??;
    Ok(url)
}

fn channel_sink(channel: Channel<JobEvent>) -> Sink {
    Arc::new(move |event| {
        if let Err(e) = channel.send(event) {
            tracing::debug!("job event not delivered (window gone?): {e}");
        }
    })
}

fn join_error(e: tokio::task::JoinError) -> ErrorReport {
    ErrorReport::new(ErrorCode::Io, format!("a background task failed: {e}"))
}
