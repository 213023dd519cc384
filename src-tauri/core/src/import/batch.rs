//! Batch mode: the queue's items answered through the Gemini Batch API (half price).
//!
//! A batch-mode item is claimed, prepared and recorded like any other (`item.rs`), marked
//! `extracting`, and its request (the body a direct call sends, keyed by the item id) joins the
//! current **chunk** ([`BatchLane`]). One task ([`run`]) submits chunks and polls batches:
//!
//! 1. A chunk is submitted when it is full (`max_requests`, or the next request would pass
//!    `max_bytes`, base64 included: under the 20 MB inline limit), or when no batch-mode item is
//!    queued or being prepared any more, and only while the queue may send (not paused or held).
//! 2. Submitting: a `submitting` row in `batches` with a unique display name, linked to the
//!    chunk's items, is committed *before* the create call; the call goes through the resilience
//!    stack (and, when retried, first looks for the batch by its display name, so a retry never
//!    creates a second one); then one transaction stores the batch's name and marks its items
//!    `submitted`. If the process dies between the call and that transaction, the next run looks
//!    the display name up (`GET batches`) before anything is sent again: found, the batch is
//!    adopted; not found, its items go back to `queued`. A chunk is never submitted twice.
//! 3. Polling: every open batch is looked at each `poll_interval` (doubling, up to ten times,
//!    while the polls fail). Once it succeeded, each inlined response is mapped by its key into
//!    the same `ready`/`failed` outcome a direct call gives (`GeminiCall::into_outcome`); an item's
//!    own error concerns only that item: a transient one (`item::failed_batch_item`) puts it back
//!    to `queued` for the next chunk, any other fails it; the attempt is marked with the batch's
//!    name (batch price).
//!    A failed, cancelled or expired batch puts its unfinished items back to `queued`, with the
//!    reason.
//!
//! Memory: at most two chunks of requests (the one filling and the one being submitted) live at
//! once; an item task waits while both are taken.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::item::{failed_batch_item, failed_item};
use super::records::{BatchPhase, ItemId, ItemState};
use super::shared::{lock, Shared};
use super::store::{self, Finish, OpenBatch};
use super::ImportError;
use crate::error::{Coded, ErrorCode};
use crate::gemini::batch::{BatchState, BatchStatus, InlinedRequest, MAX_INLINE_BATCH_BYTES};
use crate::gemini::{GeminiClient, GeminiError};
use crate::pipeline::{ExtractError, GeminiCall, GeminiOutcome};
use crate::resilience::SlotPolicy;

/// How batch mode chunks and polls.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// How often an open batch is looked at (`[batch] poll_interval`).
    pub poll_interval: Duration,
    /// Requests in one batch at most.
    pub max_requests: usize,
    /// Bytes of one `batchGenerateContent` body at most (base64 images included).
    pub max_bytes: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(30),
            max_requests: 500,
            // Under the 20 MB limit, with room for the envelope around the requests.
            max_bytes: MAX_INLINE_BATCH_BYTES - 256 * 1024,
        }
    }
}

/// One prepared request waiting for its chunk.
pub(crate) struct Pending {
    pub id: ItemId,
    pub attempts: u32,
    pub request: InlinedRequest,
}

/// The chunk being filled, and the one waiting to be submitted.
#[derive(Default)]
pub(crate) struct BatchLane {
    chunks: std::sync::Mutex<Chunks>,
    /// Wakes the batch task: a chunk was sealed, or a request added.
    work: Notify,
    /// Wakes item tasks waiting for room.
    room: Notify,
}

#[derive(Default)]
struct Chunks {
    filling: Vec<(Pending, usize)>,
    bytes: usize,
    sealed: Option<Vec<(Pending, usize)>>,
}

impl Chunks {
    fn seal(&mut self) {
        if self.sealed.is_none() && !self.filling.is_empty() {
            self.sealed = Some(std::mem::take(&mut self.filling));
            self.bytes = 0;
        }
    }
}

impl BatchLane {
    /// Adds a request to the chunk being filled, sealing it when full; waits while a full chunk
    /// waits to be submitted.
    pub(crate) async fn add(&self, pending: Pending, options: &BatchOptions) {
        let size = GeminiClient::batch_request_bytes(&pending.request);
        let mut pending = Some(pending);
        loop {
            let room = self.room.notified();
            {
                let mut chunks = lock(&self.chunks);
                let full = !chunks.filling.is_empty()
                    && (chunks.filling.len() >= options.max_requests || chunks.bytes + size > options.max_bytes);
                if full {
                    chunks.seal();
                }
                if !full || chunks.sealed.is_none() {
                    if let Some(p) = pending.take() {
                        chunks.filling.push((p, size));
                        chunks.bytes += size;
                        if chunks.filling.len() >= options.max_requests {
                            chunks.seal();
                        }
                    }
                }
            }
            self.work.notify_one();
            if pending.is_none() {
                return;
            }
            room.await;
        }
    }

    /// Drops every request not submitted (a cancel: their items go back to `queued`).
    pub(crate) fn clear(&self) {
        let mut chunks = lock(&self.chunks);
        *chunks = Chunks::default();
        drop(chunks);
        self.room.notify_waiters();
    }

    /// The chunk to submit now: the sealed one, or the one filling when `flush`.
    fn take(&self, flush: bool) -> Option<Vec<(Pending, usize)>> {
        let mut chunks = lock(&self.chunks);
        if flush {
            chunks.seal();
        }
        chunks.sealed.take()
    }

    /// Requests in the lane (filling and sealed).
    fn waiting(&self) -> usize {
        let chunks = lock(&self.chunks);
        chunks.filling.len() + chunks.sealed.as_ref().map_or(0, Vec::len)
    }

    fn made_room(&self) {
        self.room.notify_waiters();
    }
}

/// The batch task: submits chunks and polls batches while this process works the queue.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut backoff = Backoff::new(shared.options.batch.poll_interval);
    loop {
        match step(&shared, &mut backoff).await {
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(error = %e, "import: batch step failed");
                backoff.failed();
            }
        }
        let wait = backoff.next_look().min(Duration::from_millis(500));
        tokio::select! {
            () = shared.batch.work.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The poll interval, doubled (up to ten times) after each failed look.
struct Backoff {
    base: Duration,
    current: Duration,
    /// No poll before this (after a failure).
    not_before: tokio::time::Instant,
}

impl Backoff {
    fn new(base: Duration) -> Self {
        Self { base, current: base, not_before: tokio::time::Instant::now() }
    }

    fn failed(&mut self) {
        self.current = (self.current * 2).min(self.base * 10);
        self.not_before = tokio::time::Instant::now() + self.current;
    }

    fn succeeded(&mut self) {
        self.current = self.base;
    }

    fn may_poll(&self) -> bool {
        tokio::time::Instant::now() >= self.not_before
    }

    fn next_look(&self) -> Duration {
        self.not_before.saturating_duration_since(tokio::time::Instant::now()).max(Duration::from_millis(50))
    }
}

async fn step(shared: &Arc<Shared>, backoff: &mut Backoff) -> Result<(), ImportError> {
    // First what an earlier run left undecided: nothing is submitted while it is.
    let undecided = shared.store.run(store::submitting_batches).await?;
    let mut changed = false;
    if !undecided.is_empty() {
        if !backoff.may_poll() {
            return Ok(());
        }
        for (batch, display_name) in undecided {
            match resolve(shared, batch, &display_name).await {
                Ok(()) => backoff.succeeded(),
                Err(PollError::Gemini(e)) => {
                    tracing::warn!(error = %e, "import: could not look for a batch submitted before; trying later");
                    backoff.failed();
                    return Ok(());
                }
                Err(PollError::Import(e)) => return Err(e),
            }
            changed = true;
        }
    }
    // Submitting, while the queue may send.
    if *shared.gate.borrow() {
        // The last chunk goes when nothing else will join it: no batch item waits or is being
        // prepared, and every one marked `extracting` is in the lane already.
        let waiting = shared.batch.waiting();
        let flush = waiting > 0 && {
            let (coming, unlinked) = shared.store.run(store::batch_items_coming).await?;
            coming == 0 && unlinked <= waiting
        };
        if let Some(chunk) = shared.batch.take(flush) {
            shared.batch.made_room();
            submit(shared, chunk).await?;
            changed = true;
        }
    }
    // Polling the open batches that are due.
    if backoff.may_poll() {
        let now = shared.now();
        let interval = i64::try_from(shared.options.batch.poll_interval.as_millis()).unwrap_or(i64::MAX);
        for open in shared.store.run(store::open_batches).await? {
            let last = open.last_polled_at.unwrap_or(open.submitted_at);
            if now - last < interval {
                continue;
            }
            match poll(shared, &open).await {
                Ok(()) => backoff.succeeded(),
                Err(PollError::Gemini(e)) => {
                    tracing::warn!(batch = %open.name, error = %e, "import: could not look at a batch; trying later");
                    backoff.failed();
                    break;
                }
                Err(PollError::Import(e)) => return Err(e),
            }
            changed = true;
        }
    }
    if changed {
        publish_batches(shared).await?;
    }
    Ok(())
}

/// Reads the batches for the progress view.
pub(crate) async fn publish_batches(shared: &Shared) -> Result<(), ImportError> {
    let batches = shared.store.run(store::batch_infos).await?;
    shared.progress.send_modify(|p| p.batches = batches);
    Ok(())
}

/// A batch whose create call may have reached Gemini: adopted when Gemini has it (by its display
/// name), else its items go back to `queued`.
async fn resolve(shared: &Arc<Shared>, batch: i64, display_name: &str) -> Result<(), PollError> {
    let pipeline = shared.pipeline();
    let client = pipeline.gemini().clone();
    let name = display_name.to_string();
    let found = pipeline.stack().call(SlotPolicy::Wait, GeminiError::verdict, || client.batch_find(&name)).await;
    let now = shared.now();
    match found {
        Ok(Some(status)) => {
            tracing::info!(batch = %status.name, "import: a batch submitted before a restart was found; its photos wait for it");
            let phase = phase_of(&status.state).unwrap_or(BatchPhase::Pending);
            let name = status.name.clone();
            let counted = shared.counted(move |conn| store::batch_accepted(conn, batch, &name, phase, now)).await?;
            shared.publish(&counted, counted.value as u64);
            Ok(())
        }
        Ok(None) => {
            let error = (
                ErrorCode::BatchEnded,
                "The batch was not submitted (the app stopped while submitting it); the photo is queued again."
                    .to_string(),
            );
            let counted = shared
                .counted(move |conn| store::batch_abandoned(conn, batch, ItemState::Queued, false, &error, now))
                .await?;
            shared.publish(&counted, counted.value.len() as u64);
            shared.kick();
            Ok(())
        }
        Err(e) => Err(PollError::Gemini(ExtractError::from(e))),
    }
}

/// Submits one chunk (see the module's docs).
async fn submit(shared: &Arc<Shared>, chunk: Vec<(Pending, usize)>) -> Result<(), ImportError> {
    let pipeline = shared.pipeline();
    let now = shared.now();
    let display_name = format!("product-extractor-{now}-{:08x}", rand_suffix(&chunk));
    let ids: Vec<ItemId> = chunk.iter().map(|(p, _)| p.id).collect();
    let model = pipeline.gemini().model().to_string();
    let name = display_name.clone();
    let opened = shared.store.run(move |conn| store::open_batch(conn, &name, &model, &ids, now)).await?;
    let Some((batch, linked)) = opened else { return Ok(()) };
    let attempts = chunk.iter().filter(|(p, _)| linked.contains(&p.id)).map(|(p, _)| p.attempts).max().unwrap_or(0);
    let requests: Vec<InlinedRequest> =
        chunk.into_iter().filter(|(p, _)| linked.contains(&p.id)).map(|(p, _)| p.request).collect();
    let client = pipeline.gemini().clone();
    let tries = std::sync::atomic::AtomicU32::new(0);
    let created = pipeline
        .stack()
        .call(SlotPolicy::Wait, GeminiError::verdict, || {
            let (client, requests, display_name, tries) = (&client, &requests, &display_name, &tries);
            async move {
                // A retry first looks for the batch the failed try may have created.
                if tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0 {
                    if let Some(found) = client.batch_find(display_name).await? {
                        return Ok(found);
                    }
                }
                client.batch_create(display_name, requests).await
            }
        })
        .await;
    drop(requests);
    let now = shared.now();
    match created {
        Ok(status) => {
            tracing::info!(batch = %status.name, requests = linked.len(), "import: batch submitted");
            let phase = phase_of(&status.state).unwrap_or(BatchPhase::Pending);
            let counted =
                shared.counted(move |conn| store::batch_accepted(conn, batch, &status.name, phase, now)).await?;
            shared.publish(&counted, counted.value as u64);
        }
        Err(rejection) => {
            let error = ExtractError::from(rejection);
            // An answer from Gemini that the request was refused (or a rejection of the stack's):
            // nothing was created. Anything else (a timeout, a lost connection, a server error)
            // may have created it: the row stays `submitting` and is looked up before anything
            // is sent again.
            let refused = match &error {
                ExtractError::Gemini(e) => !e.is_retryable(),
                ExtractError::TimedOut(_) => false,
                _ => true,
            };
            tracing::warn!(error = %error, refused, "import: a batch could not be submitted");
            if refused {
                let (to, counted) = failed_item(shared, attempts, &error);
                let reason = (error.code(), error.to_string());
                let moved =
                    shared.counted(move |conn| store::batch_abandoned(conn, batch, to, counted, &reason, now)).await?;
                shared.publish(&moved, moved.value.len() as u64);
                shared.kick();
            }
        }
    }
    Ok(())
}

/// A number that makes two display names of the same millisecond differ.
fn rand_suffix(chunk: &[(Pending, usize)]) -> u32 {
    let first = chunk.first().map_or(0, |(p, _)| p.id);
    let pid = std::process::id();
    (first as u32).wrapping_mul(2_654_435_761) ^ pid
}

enum PollError {
    /// The call failed (after the stack's retries): looked at again later.
    Gemini(ExtractError),
    Import(ImportError),
}

impl From<ImportError> for PollError {
    fn from(e: ImportError) -> Self {
        Self::Import(e)
    }
}

/// Looks at one batch and, once it ended, settles its items.
async fn poll(shared: &Arc<Shared>, open: &OpenBatch) -> Result<(), PollError> {
    let pipeline = shared.pipeline();
    let client = pipeline.gemini().clone();
    let name = open.name.clone();
    let status = pipeline
        .stack()
        .call(SlotPolicy::Wait, GeminiError::verdict, || client.batch_get(&name))
        .await
        .map_err(|e| PollError::Gemini(ExtractError::from(e)))?;
    let now = shared.now();
    let batch = open.id;
    let phase = phase_of(&status.state);
    match phase {
        Some(BatchPhase::Succeeded) => settle(shared, open, status).await?,
        Some(phase @ (BatchPhase::Failed | BatchPhase::Cancelled | BatchPhase::Expired)) => {
            let reason = match phase {
                BatchPhase::Expired => {
                    "Gemini's batch expired (not done within 48 hours); the photo is queued again.".to_string()
                }
                BatchPhase::Cancelled => "The batch was cancelled; the photo is queued again.".to_string(),
                _ => format!(
                    "Gemini's batch failed ({}); the photo is queued again.",
                    status.error.as_deref().unwrap_or("no reason given")
                ),
            };
            let code = ErrorCode::BatchEnded;
            let max = shared.options.max_attempts_per_item;
            let counted = shared
                .counted(move |conn| {
                    store::batch_ended(
                        conn,
                        batch,
                        phase,
                        Some(&(code, reason.clone())),
                        phase != BatchPhase::Cancelled,
                        max,
                        now,
                    )
                })
                .await?;
            publish_batches(shared).await?;
            announce(shared, &counted);
            shared.kick();
        }
        Some(phase) => shared.store.run(move |conn| store::batch_polled(conn, batch, phase, now)).await?,
        None => shared.store.run(move |conn| store::batch_polled(conn, batch, BatchPhase::Running, now)).await?,
    }
    Ok(())
}

fn announce(shared: &Shared, counted: &store::Counted<Vec<(ItemId, ItemState)>>) {
    for (id, state) in &counted.value {
        if *state == ItemState::Failed {
            shared.record_finished();
        }
        shared.item_changed(*id, *state, counted);
    }
    if counted.value.is_empty() {
        shared.publish(counted, 0);
    }
}

/// A succeeded batch: each waiting item gets its response's outcome, read like a direct call's.
async fn settle(shared: &Arc<Shared>, open: &OpenBatch, status: BatchStatus) -> Result<(), ImportError> {
    let batch = open.id;
    let now = shared.now();
    shared.store.run(move |conn| store::batch_polled(conn, batch, BatchPhase::Succeeded, now)).await?;
    publish_batches(shared).await?;
    let items = shared.store.run(move |conn| store::batch_items(conn, batch)).await?;
    let pipeline = shared.pipeline();
    let model = pipeline.gemini().model().to_string();
    let mut by_key: std::collections::HashMap<String, crate::gemini::batch::BatchResponse> =
        status.responses.into_iter().filter_map(|r| Some((r.key.clone()?, r))).collect();
    for item in items {
        let Some(response) = by_key.remove(&item.id.to_string()) else { continue };
        let now = shared.now();
        let elapsed_ms = u64::try_from(now - open.submitted_at).unwrap_or(0);
        let call = GeminiCall {
            photo_id: item.photo_id,
            more_photos: item.more_photos,
            model: model.clone(),
            started_at: open.submitted_at,
            elapsed_ms,
            result: response
                .into_result(&model, Duration::from_millis(elapsed_ms), pipeline.gemini().max_output_tokens(), now)
                .map_err(crate::resilience::StackError::Call),
            pricing: pipeline.pricing_table(),
            batch: true,
            opened_by: None,
            barcodes: item.barcodes,
        };
        let finish = match call.into_outcome() {
            GeminiOutcome::Answered { attempt, answer, flags } => {
                let product = answer.product;
                Finish {
                    id: item.id,
                    from: ItemState::Submitted,
                    to: ItemState::Ready,
                    attempt: Some(attempt),
                    count_attempt: true,
                    proposal: Some((product, flags)),
                    error: None,
                    batch_name: Some(open.name.clone()),
                }
            }
            // The item's own error in the batch concerns only this item: a transient one sends
            // it again in the next chunk, any other fails it.
            GeminiOutcome::Failed { attempt, error } => Finish {
                id: item.id,
                from: ItemState::Submitted,
                to: failed_batch_item(shared, item.attempts, &error),
                attempt,
                count_attempt: true,
                proposal: None,
                error: Some((error.code(), error.to_string())),
                batch_name: Some(open.name.clone()),
            },
        };
        let (id, to) = (finish.id, finish.to);
        if to != ItemState::Queued {
            shared.record_finished();
        }
        // Billed like a direct call's answer: this import's running total counts it.
        if let Some(attempt) = &finish.attempt {
            shared.add_cost(attempt);
        }
        // An answer the catalog refuses fails its item, its attempt recorded all the same.
        let (counted, to) = match shared.write_outcome(finish.clone()).await {
            Ok(counted) => (counted, to),
            Err(error) => super::item::refused(shared, finish, error).await?,
        };
        if counted.value {
            shared.item_changed(id, to, &counted);
        } else {
            shared.publish(&counted, 0);
        }
    }
    // Items the batch gave no answer for go back to the queue; the batch is done.
    let (now, max) = (shared.now(), shared.options.max_attempts_per_item);
    let counted = shared
        .counted(move |conn| store::batch_ended(conn, batch, BatchPhase::Succeeded, None, true, max, now))
        .await?;
    announce(shared, &counted);
    // Items back in `queued` (a transient error of their own, or no answer) join the next chunk.
    shared.kick();
    Ok(())
}

/// Cancels every open batch (the user's cancel): Gemini is asked to cancel it, and its items go
/// back to `queued`.
pub(crate) async fn cancel_all(shared: &Arc<Shared>) -> Result<(), ImportError> {
    shared.batch.clear();
    let pipeline = shared.pipeline();
    for open in shared.store.run(store::open_batches).await? {
        let client = pipeline.gemini().clone();
        let name = open.name.clone();
        let cancelled =
            pipeline.stack().call(SlotPolicy::Wait, GeminiError::verdict, || client.batch_cancel(&name)).await;
        if let Err(e) = cancelled {
            tracing::warn!(batch = %open.name, error = %e, "import: Gemini did not confirm the batch's cancel");
        }
        let (batch, now, max) = (open.id, shared.now(), shared.options.max_attempts_per_item);
        let reason = (ErrorCode::BatchEnded, "The batch was cancelled; the photo is queued again.".to_string());
        let counted = shared
            .counted(move |conn| store::batch_ended(conn, batch, BatchPhase::Cancelled, Some(&reason), false, max, now))
            .await?;
        publish_batches(shared).await?;
        announce(shared, &counted);
    }
    publish_batches(shared).await
}

fn phase_of(state: &BatchState) -> Option<BatchPhase> {
    Some(match state {
        BatchState::Pending => BatchPhase::Pending,
        BatchState::Running => BatchPhase::Running,
        BatchState::Succeeded => BatchPhase::Succeeded,
        BatchState::Failed => BatchPhase::Failed,
        BatchState::Cancelled => BatchPhase::Cancelled,
        BatchState::Expired => BatchPhase::Expired,
        BatchState::Other(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The poll interval on tokio's paused clock: a failed look doubles the wait (up to ten times
    /// the base), a good one brings it back to the base.
    #[tokio::test(start_paused = true)]
    async fn a_failed_look_doubles_the_wait_up_to_ten_times_the_base() {
        let mut backoff = Backoff::new(Duration::from_secs(10));
        assert!(backoff.may_poll(), "the first look is at once");
        let mut waits = Vec::new();
        for _ in 0..6 {
            backoff.failed();
            assert!(!backoff.may_poll());
            let wait = backoff.next_look();
            waits.push(wait.as_secs());
            tokio::time::sleep(wait - Duration::from_millis(1)).await;
            assert!(!backoff.may_poll(), "not a moment early");
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert!(backoff.may_poll());
        }
        assert_eq!(waits, [20, 40, 80, 100, 100, 100]);
        backoff.succeeded();
        backoff.failed();
        assert_eq!(backoff.next_look(), Duration::from_secs(20), "a good look starts the doubling afresh");
    }
}
