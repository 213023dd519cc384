//! Extraction jobs in the window: one task per photo, bounded by the state's job slots, each
//! reporting its stages to a sink (in the app, a `tauri::ipc::Channel`).

use std::path::PathBuf;
use std::sync::Arc;

use pe_core::pipeline::{PreparedSummary, Stage};
use pe_core::ErrorReport;

use crate::dto::{ExtractionView, JobEvent, JobFailure, JobStage, JobTicket, PreparedView};
use crate::state::AppState;

/// Where a job's events go.
pub type Sink = Arc<dyn Fn(JobEvent) + Send + Sync>;

pub fn ticket(job_id: u64, file: PathBuf) -> JobTicket {
    let file_name = file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
    JobTicket { job_id, file: file.to_string_lossy().into_owned(), file_name }
}

/// Announces the job (`queued`, always first on the sink), then runs it in the background.
pub fn spawn(state: &AppState, ticket: JobTicket, sink: Sink) {
    let job_id = ticket.job_id;
    let file = PathBuf::from(&ticket.file);
    sink(JobEvent::Queued(ticket));
    let state = state.clone();
    tauri::async_runtime::spawn(async move {
        let Ok(_slot) = state.job_slots().acquire_owned().await else {
            return;
        };
        let pipeline = state.pipeline();
        let result = pipeline
            .extract(&file, |stage| match stage {
                Stage::Preparing => sink(JobEvent::Preparing(JobStage { job_id })),
                Stage::Prepared(image) => {
                    sink(JobEvent::Prepared(PreparedView { job_id, summary: PreparedSummary::of(image) }))
                }
                Stage::Extracting => sink(JobEvent::Extracting(JobStage { job_id })),
            })
            .await;
        match result {
            Ok(extraction) => {
                tracing::info!(job_id, file = %file.display(), flags = extraction.flags.len(), "extraction ready");
                sink(JobEvent::Ready(Box::new(ExtractionView::of(job_id, extraction))));
            }
            Err(error) => {
                let error = ErrorReport::from(error);
                tracing::warn!(job_id, file = %file.display(), code = %error.code, "extraction failed: {}", error.message);
                sink(JobEvent::Failed(JobFailure { job_id, error }));
            }
        }
    });
}
