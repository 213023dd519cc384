//! `import` and `import status`: the bulk-import queue, headless, in the data dir.
//!
//! `import PATH...` queues the files (folders recursively), resumes whatever an interrupted run
//! left, and works the queue until nothing more can move: one line per item finished in this run
//! on stdout (with `--json`, `extract --json`'s object plus `"state"` and `"item_id"`), a progress
//! line on stderr when it is a terminal, a line on stderr at each change of the queue's state
//! (paused for the breaker, waiting for the quota, stopped, going on; terminal or not), then a
//! summary line. `--save` saves every proposal without an invalid field, including those left
//! ready by an earlier run.
//!
//! Exit codes: 0 when everything went fine; 1 when an item failed (or, with `--save`, could not be
//! saved), or the run was interrupted; 2 on a usage or config error, including a key Gemini
//! rejects: the import stops and the items stay queued for the next run; 3 when nothing
//! progressed for `--give-up-after` (Gemini kept failing): the items stay queued too.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use pe_core::catalog::CostTotal;
use pe_core::import::{
    EnqueueOptions, GroupBy, Grouping, ImportItemDetail, ImportOptions, ImportProgress, ImportQueue, ImportStatus,
    ImportStore, ItemChanged, ItemId, ItemState, SequenceNote, SkipInfo, SkipReason, StopAdvice,
};
use pe_core::pipeline::{checked_for_save, Pipeline};
use pe_core::resilience::ResilienceStack;
use pe_core::{ErrorCode, ErrorReport};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use pe_core::stored_path::StoredPath;

use super::{
    barcode_gtins, cost_json, cost_text, put_file, usage_error, usage_json, EXIT_FAILED, EXIT_GAVE_UP, EXIT_OK,
    EXIT_USAGE,
};
use crate::state::{AppState, STACK_NAME};
use crate::terminal::{self, errln, field};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub command: Option<ImportCommand>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// Save every successful extraction to the catalog without review (proposals with an invalid
    /// field stay ready for review).
    #[arg(long)]
    pub save: bool,
    /// How many Gemini calls run at once for this run (the bulkhead's max_concurrent_calls).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: Option<u32>,
    /// Through the Gemini Batch API: half price, answered within 24 hours (usually much sooner).
    /// Waits for the results, looking every `[batch] poll_interval`; a restart goes on waiting.
    #[arg(long)]
    pub batch: bool,
    /// Which photos are one product, over `[import] group_by`: `stem` (same name but for a
    /// trailing number or side word, in one folder), `folder` (a folder per product) or `none`.
    #[arg(long, value_name = "RULE", value_parser = parse_group_by)]
    pub group_by: Option<GroupBy>,
    /// Give up after this long without progress (no item answered by Gemini or finished for a
    /// reason of its own), e.g. while Gemini keeps failing: exit 3, the items stay queued.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = humantime::parse_duration)]
    pub give_up_after: Duration,
    /// Photo files and folders (searched recursively).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// The import queue: the items per state, then every item.
    Status {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// How often the stderr progress line is redrawn at most.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

pub async fn run(state: &AppState, args: ImportArgs) -> i32 {
    if let Some(ImportCommand::Status { json }) = args.command {
        return status(state, json).await;
    }
    if state.effective_config().gemini.api_key.is_none() {
        return usage_error(
            "no Gemini API key: set GEMINI_API_KEY, or add api_key under [gemini] in the config file \
             (the window's Settings do that for you)",
        );
    }
    let pipeline = match with_concurrency(state.pipeline(), args.concurrency) {
        Ok(pipeline) => pipeline,
        Err(invalid) => return usage_error(&format!("--concurrency: {invalid}")),
    };
    let run_started = (pipeline.clock())();
    // A terminal has no Resume button: a stop says to run the command again.
    let options = ImportOptions { stop_advice: StopAdvice::RunAgain, ..state.import_options() };
    let queue = match ImportQueue::open(pipeline.clone(), options).await {
        Ok(queue) => queue,
        Err(e) => return usage_error(&e.to_string()),
    };
    let mut run = Run {
        queue: queue.clone(),
        json: args.json,
        save: args.save,
        batch: args.batch,
        grouping: {
            let import = &state.effective_config().import;
            Grouping { by: args.group_by.unwrap_or(import.group_by), ..import.grouping() }
        },
        printed: HashSet::new(),
        failed: 0,
        lines_cost: CostTotal::default(),
        give_up: GiveUp::new(args.give_up_after),
        gave_up: None,
        sequences: Vec::new(),
        given: HashSet::new(),
    };
    let code = run.work(args.paths, run_started).await;
    let progress = queue.progress().borrow().clone();
    // This process's billed calls (retries and failures included) when it worked the queue;
    // otherwise what the printed lines' attempts cost.
    let cost = if queue.is_working() { progress.cost } else { run.lines_cost };
    queue.shutdown().await;
    if code == EXIT_USAGE {
        return code;
    }
    let summary = summary(&progress, &cost, &pipeline, args.json, run.gave_up.as_deref(), &run.sequences);
    let written = if args.json { terminal::out_json(&summary) } else { terminal::out(&summary) };
    if written.is_err() {
        return EXIT_FAILED;
    }
    code
}

/// The state's pipeline, with a stack of `k` bulkhead slots when asked.
fn with_concurrency(pipeline: Pipeline, k: Option<u32>) -> Result<Pipeline, pe_core::resilience::InvalidSetting> {
    let Some(k) = k else { return Ok(pipeline) };
    let mut config = pipeline.stack().config().clone();
    config.bulkhead.max_concurrent_calls = k;
    let stack = ResilienceStack::new(STACK_NAME, config)?;
    Ok(Pipeline::new(
        pipeline.gemini().clone(),
        stack,
        pipeline.catalog().clone(),
        pipeline.image_config().clone(),
        pipeline.clock().clone(),
    )
    .with_pricing(pipeline.pricing().clone())
    .with_decode_budget(pipeline.decode_budget().clone()))
}

struct Run {
    queue: ImportQueue,
    json: bool,
    save: bool,
    /// Batch mode for the photos queued.
    batch: bool,
    /// Which photos are one product.
    grouping: Grouping,
    /// Items with a line already (an item is printed once per run).
    printed: HashSet<ItemId>,
    /// Lines with `ok: false` that are not skips.
    failed: usize,
    /// What the printed lines' attempts cost.
    lines_cost: CostTotal,
    /// `--give-up-after`, from the last progress.
    give_up: GiveUp,
    /// Why the run gave up, for the summary.
    gave_up: Option<String>,
    /// The numbered sequences the grouping found (each photo its own product), for the summary.
    sequences: Vec<SequenceNote>,
    /// The paths on the command line, absolute as the queue stores them: one of them that cannot
    /// be read or listed is an error (exit 1), not a skip.
    given: HashSet<StoredPath>,
}

impl Run {
    /// Queues the paths and works until settled; returns the exit code (the summary is printed by
    /// the caller).
    async fn work(&mut self, paths: Vec<PathBuf>, run_started: i64) -> i32 {
        let mut events = self.queue.subscribe();
        self.given =
            paths.iter().map(|p| StoredPath::new(&std::path::absolute(p).unwrap_or_else(|_| p.clone()))).collect();
        let enqueued = match self
            .queue
            .enqueue_files(
                paths,
                EnqueueOptions { batch: self.batch, grouping: self.grouping, ..EnqueueOptions::default() },
            )
            .await
        {
            Ok(enqueued) => enqueued,
            Err(e) => {
                errln!("error: {}", ErrorReport::from(e));
                return EXIT_FAILED;
            }
        };
        // Photos numbered in sequence were queued one product each: say so (stderr, and the
        // summary's `sequences`), as the window's Import view does.
        for note in &enqueued.report.sequences {
            errln!("note: {}", field(&note.message));
        }
        self.sequences = enqueued.report.sequences.clone();
        // A given path that cannot be read is an error line in every run, also when an earlier
        // run listed it already (its row is not new, so no event and no catch-up would print it).
        let given: Vec<ItemId> =
            enqueued.files.iter().filter(|f| self.given.contains(&f.stored_path())).map(|f| f.item).collect();
        for item in given {
            if self.queue.item(item).await.is_ok_and(|d| unreadable_given(&d, true).is_some()) {
                self.print(item).await;
            }
        }
        if self.save {
            // Ready items an earlier (interrupted) run left: saved now, printed below.
            if let Err(e) = self.queue.save_all_ready_valid().await {
                errln!("error: {}", ErrorReport::from(e));
                return EXIT_FAILED;
            }
        }
        let mut progress = self.queue.progress();
        let terminal = std::io::stderr().is_terminal();
        let mut drawn = Instant::now() - PROGRESS_EVERY;
        let mut shown: Option<ImportStatus> = None;
        self.give_up.progressed();
        let mut disk_full: Option<String> = None;
        let interrupted = loop {
            let status = {
                let p = progress.borrow_and_update();
                if p.is_settled() {
                    break false;
                }
                p.status.clone()
            };
            // A full disk ends a terminal's run (its state line says why): the photos stay queued
            // for the next run, once there is room.
            if let ImportStatus::PausedDisk { message, .. } = &status {
                if let Some(line) = state_line(shown.as_ref(), &status) {
                    if terminal {
                        terminal::clear_line();
                    }
                    errln!("{}", field(&line));
                }
                disk_full = Some(message.clone());
                break false;
            }
            // A new pause time is a change too: the breaker opened again.
            if shown.as_ref() != Some(&status) {
                if let Some(line) = state_line(shown.as_ref(), &status) {
                    if terminal {
                        terminal::clear_line();
                    }
                    errln!("{}", field(&line));
                }
                shown = Some(status.clone());
            }
            let give_up_at = self.give_up.deadline();
            tokio::select! {
                event = events.recv() => match event {
                    Ok(event) => self.on_event(event).await,
                    // Missed events are caught up below, from the queue itself.
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break false,
                },
                changed = progress.changed() => {
                    if changed.is_err() {
                        break false;
                    }
                    if terminal && drawn.elapsed() >= PROGRESS_EVERY {
                        drawn = Instant::now();
                        terminal::redraw(&progress_line(&progress.borrow()));
                    }
                }
                _ = tokio::signal::ctrl_c() => break true,
                _ = tokio::time::sleep_until(give_up_at) => {
                    let why = match &status {
                        ImportStatus::PausedBreaker { message, .. }
                        | ImportStatus::WaitingServer { message, .. }
                        | ImportStatus::WaitingQuota { message, .. }
                        | ImportStatus::Stopped { message, .. } => message.clone(),
                        _ => "no item finished".into(),
                    };
                    let after = humantime::format_duration(self.give_up.after);
                    self.gave_up = Some(format!("gave up after {after} without progress ({why})"));
                    break false;
                }
            }
        };
        if terminal {
            terminal::clear_line();
        }
        while let Ok(event) = events.try_recv() {
            self.on_event(event).await;
        }
        if interrupted {
            errln!("interrupted: run the same command again to resume");
            return EXIT_FAILED;
        }
        if let Some(message) = disk_full {
            self.gave_up = Some(message.clone());
            errln!("error: {message}");
            return EXIT_FAILED;
        }
        if let Some(why) = &self.gave_up {
            errln!("stopped: {}; the items stay queued: run the same command again to resume", field(why));
            return EXIT_GAVE_UP;
        }
        if let Err(e) = self.catch_up(run_started).await {
            errln!("error: {}", ErrorReport::from(e));
            return EXIT_FAILED;
        }
        let settled = self.queue.progress().borrow().clone();
        if let ImportStatus::Stopped { code, message } = &settled.status {
            errln!("error: {message}");
            return match code {
                ErrorCode::GeminiAuth
                | ErrorCode::GeminiNotFound
                | ErrorCode::GeminiNotAvailable
                | ErrorCode::Config => EXIT_USAGE,
                _ => EXIT_FAILED,
            };
        }
        if self.failed == 0 {
            EXIT_OK
        } else {
            EXIT_FAILED
        }
    }

    async fn on_event(&mut self, event: ItemChanged) {
        match event.state {
            ItemState::Ready if self.save => {
                let detail = self.queue.item(event.id).await;
                let Some(product) = detail.ok().and_then(|d| d.proposal) else { return };
                // Saved: its own event prints it. Refused: printed by the catch-up as not saved.
                let _ = self.queue.save_item(event.id, product).await;
            }
            ItemState::Ready | ItemState::Saved | ItemState::Failed | ItemState::Skipped => self.print(event.id).await,
            ItemState::Queued | ItemState::Preparing | ItemState::Extracting | ItemState::Submitted => {}
        }
    }

    /// Everything finished in this run without a line yet: items skipped while queueing, events
    /// missed, ready items `--save` could not save.
    async fn catch_up(&mut self, run_started: i64) -> Result<(), pe_core::import::ImportError> {
        if self.save {
            self.queue.save_all_ready_valid().await?;
        }
        const PAGE: u32 = 500;
        let finished = vec![ItemState::Ready, ItemState::Saved, ItemState::Failed, ItemState::Skipped];
        let mut offset = 0;
        loop {
            let page = self.queue.items(offset, PAGE, Some(finished.clone())).await?;
            for row in &page.rows {
                // With --save, every item still ready was tried now and could not be saved.
                let this_run = row.updated_at >= run_started || (self.save && row.state == ItemState::Ready);
                if this_run && !self.printed.contains(&row.id) {
                    self.print(row.id).await;
                }
            }
            if page.rows.len() < PAGE as usize {
                return Ok(());
            }
            offset += PAGE;
        }
    }

    async fn print(&mut self, id: ItemId) {
        if !self.printed.insert(id) {
            return;
        }
        let Ok(detail) = self.queue.item(id).await else { return };
        if let Some(attempt) = &detail.attempt {
            self.lines_cost.add(attempt.usage.map(|u| u.billed()), attempt.cost_usd);
        }
        if is_progress(&detail) {
            self.give_up.progressed();
        }
        let given = self.given.contains(&detail.row.stored_path());
        let (line, failed) =
            if self.json { json_line(&detail, self.save, given) } else { text_line(&detail, self.save, given) };
        self.failed += usize::from(failed);
        let _ = if self.json { terminal::out_json(&line) } else { terminal::out(&line) };
    }
}

/// `--give-up-after`: the run gives up once no item made progress for `after`. On tokio's clock,
/// so its rule is tested on paused time.
struct GiveUp {
    after: Duration,
    last_progress: tokio::time::Instant,
}

impl GiveUp {
    fn new(after: Duration) -> Self {
        Self { after, last_progress: tokio::time::Instant::now() }
    }

    /// An item made progress (see [`is_progress`]): the wait starts again.
    fn progressed(&mut self) {
        self.last_progress = tokio::time::Instant::now();
    }

    /// When the run gives up unless something progresses first.
    fn deadline(&self) -> tokio::time::Instant {
        self.last_progress + self.after
    }
}

/// Whether an item finishing counts as progress for `--give-up-after`: Gemini answered it, or it
/// ended for a reason of its own. An item failed by the service (after its attempts) does not:
/// a permanent 503 fails items one by one, which is no progress.
fn is_progress(d: &ImportItemDetail) -> bool {
    match d.row.state {
        ItemState::Ready | ItemState::Saved | ItemState::Skipped => true,
        ItemState::Failed => !d.row.last_error.as_ref().is_some_and(|e| {
            matches!(
                e.code,
                ErrorCode::GeminiUnavailable
                    | ErrorCode::GeminiApiError
                    | ErrorCode::GeminiQuota
                    | ErrorCode::Timeout
                    | ErrorCode::Network
                    | ErrorCode::ResponseTooLarge
                    | ErrorCode::CircuitOpen
                    | ErrorCode::BatchEnded
            )
        }),
        ItemState::Queued | ItemState::Preparing | ItemState::Extracting | ItemState::Submitted => false,
    }
}

/// The stderr line for a change of the queue's state, from the queue's own message ("Paused:
/// Gemini is failing (circuit open) — next probe at 14:03:20." → "paused: Gemini is failing …");
/// `None` for changes not worth a line (starting, finishing: the item lines and the summary say
/// those).
fn state_line(before: Option<&ImportStatus>, now: &ImportStatus) -> Option<String> {
    let held = |s: &ImportStatus| {
        matches!(
            s,
            ImportStatus::PausedBreaker { .. }
                | ImportStatus::WaitingQuota { .. }
                | ImportStatus::PausedBudget { .. }
                | ImportStatus::PausedDisk { .. }
                | ImportStatus::WaitingServer { .. }
                | ImportStatus::Stopped { .. }
                | ImportStatus::PausedByUser
        )
    };
    let line = |message: &str| {
        let message = message.trim().trim_end_matches('.');
        let mut chars = message.chars();
        chars.next().map(|first| first.to_lowercase().chain(chars).collect::<String>()).unwrap_or_default()
    };
    Some(match now {
        ImportStatus::PausedBreaker { message, .. }
        | ImportStatus::WaitingQuota { message, .. }
        | ImportStatus::PausedBudget { message, .. } => line(message),
        ImportStatus::PausedDisk { message, .. } => format!("stopped: {}", message.trim().trim_end_matches('.')),
        ImportStatus::WaitingServer { message, .. } => line(message),
        ImportStatus::Stopped { message, .. } => format!("stopped: {}", message.trim().trim_end_matches('.')),
        ImportStatus::PausedByUser => "paused by the user in the window".into(),
        ImportStatus::WorkedElsewhere => {
            "following: another product-extractor works this catalog's queue; this one waits for its items".into()
        }
        ImportStatus::Running if before.is_some_and(held) => "going on: Gemini answers again".into(),
        ImportStatus::Running | ImportStatus::Idle | ImportStatus::Finished => return None,
    })
}

/// Resolves with the message once the queue holds for a full disk (a terminal's command then
/// ends, its photos queued); never otherwise.
pub(crate) async fn disk_full(queue: &ImportQueue) -> String {
    let mut progress = queue.progress();
    let held = progress.wait_for(|p| matches!(p.status, ImportStatus::PausedDisk { .. })).await;
    match held.as_deref().map(|p| &p.status) {
        Ok(ImportStatus::PausedDisk { message, .. }) => message.clone(),
        _ => std::future::pending().await,
    }
}

/// A path from the command line that could not be read or listed: an error, not a skip.
fn unreadable_given(d: &ImportItemDetail, given: bool) -> Option<&SkipInfo> {
    d.row.skipped.as_ref().filter(|skip| given && skip.reason == SkipReason::Unreadable)
}

/// The line of `extract --json` for this item, plus `state` and `item_id`; and whether it counts
/// as a failure. `given`: the item's path was on the command line.
fn json_line(d: &ImportItemDetail, save: bool, given: bool) -> (String, bool) {
    let row = &d.row;
    let mut value = match (row.state, &d.proposal, &row.skipped) {
        (_, _, Some(skip)) if unreadable_given(d, given).is_some() => {
            json!({"ok": false, "error": {"kind": ErrorCode::Io, "message": skip.message}})
        }
        (ItemState::Ready | ItemState::Saved, Some(product), _) => match unsaved(d, save) {
            Some(error) => json!({"ok": false, "error": {"kind": error.code, "message": error.message}}),
            None => {
                let attempt = d.attempt.as_ref();
                let mut v = json!({
                    "ok": true,
                    "product": product,
                    "flags": d.flags,
                    "usage": attempt.and_then(|a| Some(usage_json(a.usage.as_ref()?, a.cost_usd))),
                    "model": attempt.map(|a| a.model.clone()),
                    "latency_ms": attempt.map(|a| a.latency_ms),
                    "photo_id": row.photo_id,
                    "attempt_id": attempt.map(|a| a.id),
                });
                if row.state == ItemState::Saved {
                    v["saved_product_id"] = json!(row.product_id);
                }
                v
            }
        },
        (_, _, Some(skip)) => json!({"ok": false, "skipped": skip_json(skip)}),
        _ => {
            let error = row.last_error.clone().unwrap_or_else(|| ErrorReport::new(ErrorCode::Io, "unknown"));
            let mut v = json!({"ok": false, "error": {"kind": error.code, "message": error.message}});
            // A blocked, cut-off or unreadable answer was billed all the same.
            if let Some(usage) = d.attempt.as_ref().and_then(|a| a.usage) {
                v["usage"] = json!(usage);
            }
            v
        }
    };
    put_file(&mut value, &row.stored_path());
    if d.photos.len() > 1 {
        value["files"] = json!(d.photos.iter().map(|p| &p.path).collect::<Vec<_>>());
    }
    if let Some(barcodes) = &d.barcodes {
        value["barcodes"] = barcode_gtins(barcodes);
    }
    value["state"] = json!(row.state);
    value["item_id"] = json!(row.id);
    let failed = value["ok"] == false && (row.skipped.is_none() || unreadable_given(d, given).is_some());
    (value.to_string(), failed)
}

fn skip_json(skip: &SkipInfo) -> Value {
    json!({
        "reason": skip.reason,
        "message": skip.message,
        "duplicate_of_item": skip.duplicate_of_item,
        "duplicate_of_product": skip.duplicate_of_product,
    })
}

/// `--group-by`'s value, as `[import] group_by` spells it.
fn parse_group_by(text: &str) -> Result<GroupBy, String> {
    serde_json::from_value(Value::String(text.to_owned())).map_err(|_| "expected stem, folder or none".to_owned())
}

/// With `--save`, a ready item was not saved: why.
fn unsaved(d: &ImportItemDetail, save: bool) -> Option<ErrorReport> {
    if !save || d.row.state != ItemState::Ready {
        return None;
    }
    let product = d.proposal.clone()?;
    match checked_for_save(product) {
        Err(e) => Some(ErrorReport::from(e)),
        Ok(_) => Some(ErrorReport::new(ErrorCode::Conflict, "not saved; review it in the window")),
    }
}

/// The item's line: one line, whatever its file's name, the answer or the error hold (each a
/// [`field`]); and whether it counts as a failure.
fn text_line(d: &ImportItemDetail, save: bool, given: bool) -> (String, bool) {
    let row = &d.row;
    let file = field(&row.path);
    if let Some(skip) = unreadable_given(d, given) {
        return (format!("error {file}: [{}] {}", ErrorCode::Io, field(&skip.message)), true);
    }
    if let Some(skip) = &row.skipped {
        return (format!("skip  {file}: {}", field(&skip.message)), false);
    }
    match (&d.proposal, unsaved(d, save)) {
        (Some(p), None) if matches!(row.state, ItemState::Ready | ItemState::Saved) => {
            let brand = p.brand.as_deref().map(|b| format!(" ({})", field(b))).unwrap_or_default();
            let (latency, prompt, output) = d.attempt.as_ref().map_or((0, 0, 0), |a| {
                let usage = a.usage.unwrap_or_default();
                (a.latency_ms, usage.prompt_tokens, usage.output_tokens)
            });
            let flags = if d.flags.is_empty() { String::new() } else { format!(", {} flagged", d.flags.len()) };
            let saved = match (row.state, row.product_id) {
                (ItemState::Saved, Some(id)) => format!(", saved as #{id}"),
                _ => String::new(),
            };
            let state = if row.state == ItemState::Saved { "saved" } else { "ready" };
            let line = format!(
                "{state} {file}: {}{brand} — {latency} ms, {prompt} in / {output} out tokens{flags}{saved}",
                field(&p.name)
            );
            (line, false)
        }
        (_, Some(error)) => (format!("error {file}: [{}] not saved: {}", error.code, field(&error.message)), true),
        _ => {
            let error = row.last_error.clone().unwrap_or_else(|| ErrorReport::new(ErrorCode::Io, "unknown"));
            (format!("error {file}: [{}] {}", error.code, field(&error.message)), true)
        }
    }
}

fn summary(
    p: &ImportProgress,
    cost: &CostTotal,
    pipeline: &Pipeline,
    json: bool,
    gave_up: Option<&str>,
    sequences: &[SequenceNote],
) -> String {
    let breaker = pipeline.stack().breaker().actuator_json();
    let c = &p.counts;
    if json {
        let mut value = json!({"summary": {
            "saved": c.saved,
            "ready": c.ready,
            "failed": c.failed,
            "skipped": c.skipped,
            "duplicates": p.duplicates,
            "queued": c.active(),
            "cost": cost_json(cost),
            "breaker": breaker,
        }});
        if let Some(why) = gave_up {
            value["summary"]["gave_up"] = json!(why);
        }
        if !sequences.is_empty() {
            value["summary"]["sequences"] = json!(sequences);
        }
        value.to_string()
    } else {
        let gave_up = gave_up.map(|why| format!("; {why}")).unwrap_or_default();
        format!(
            "{} saved, {} ready, {} failed, {} skipped ({} duplicates), {} queued; {}; Gemini circuit breaker {}{gave_up}",
            c.saved,
            c.ready,
            c.failed,
            c.skipped,
            p.duplicates,
            c.active(),
            cost_text(cost),
            breaker["state"].as_str().unwrap_or("?")
        )
    }
}

/// `[#####-----] 120/200 · 23.5/min · ETA 1m 12s · paused: …`
fn progress_line(p: &ImportProgress) -> String {
    const WIDTH: u32 = 24;
    let filled = (p.done * WIDTH).checked_div(p.total).unwrap_or(0);
    let bar: String = (0..WIDTH).map(|i| if i < filled { '#' } else { '-' }).collect();
    let c = &p.counts;
    let eta = p
        .eta_ms
        .filter(|_| p.throughput_per_min > 0.0)
        .map(|ms| format!(" · ETA {}", humantime::format_duration(Duration::from_secs(ms / 1000))))
        .unwrap_or_default();
    let status = match &p.status {
        ImportStatus::PausedBreaker { message, .. }
        | ImportStatus::PausedBudget { message, .. }
        | ImportStatus::WaitingQuota { message, .. }
        | ImportStatus::Stopped { message, .. } => format!(" · {message}"),
        _ => String::new(),
    };
    format!(
        "[{bar}] {}/{} · ready {} · saved {} · failed {} · {:.1}/min · {}{eta}{status}",
        p.done, p.total, c.ready, c.saved, c.failed, p.throughput_per_min, p.cost.usd
    )
}

/// `import status`: the counts, then one line (or object) per item. Needs no queue lock: it can
/// run while an import does.
async fn status(state: &AppState, json: bool) -> i32 {
    let store = ImportStore::new(state.catalog().clone());
    let (counts, duplicates) = match store.counts().await {
        Ok(counts) => counts,
        Err(e) => {
            errln!("error: {}", ErrorReport::from(e));
            return EXIT_FAILED;
        }
    };
    const PAGE: u32 = 500;
    let mut rows = Vec::new();
    loop {
        match store.items(rows.len() as u32, PAGE, None).await {
            Ok(page) => {
                let done = page.rows.len() < PAGE as usize;
                rows.extend(page.rows);
                if done {
                    break;
                }
            }
            Err(e) => {
                errln!("error: {}", ErrorReport::from(e));
                return EXIT_FAILED;
            }
        }
    }
    let written = if json {
        let items: Vec<Value> = rows
            .iter()
            .map(|r| {
                let mut item = json!({
                    "id": r.id,
                    "state": r.state,
                    "attempts": r.attempts,
                    "error": r.last_error.as_ref().map(|e| json!({"kind": e.code, "message": e.message})),
                    "skipped": r.skipped.as_ref().map(skip_json),
                    "product": r.proposal,
                    "flags": r.flag_count,
                    "looks_like": r.looks_like,
                    "product_id": r.product_id,
                });
                put_file(&mut item, &r.stored_path());
                item
            })
            .collect();
        let value = json!({"counts": counts, "total": counts.total(), "duplicates": duplicates, "items": items});
        terminal::out_json(&value)
    } else {
        let c = counts;
        let mut text = format!(
            "{} items: {} queued, {} preparing, {} extracting, {} ready, {} saved, {} failed, {} skipped ({} duplicates)\n",
            c.total(),
            c.queued,
            c.preparing,
            c.extracting,
            c.ready,
            c.saved,
            c.failed,
            c.skipped,
            duplicates
        );
        for r in &rows {
            let detail = match (&r.last_error, &r.skipped, &r.proposal) {
                (_, Some(skip), _) => field(&skip.message).into_owned(),
                (Some(e), _, _) => format!("[{}] {}", e.code, field(&e.message)),
                (None, None, Some(p)) => field(&p.name).into_owned(),
                _ => String::new(),
            };
            text.push_str(&format!("#{:<6} {:<10} {}  {}\n", r.id, r.state.as_str(), field(&r.path), detail));
        }
        terminal::out(text.trim_end_matches('\n'))
    };
    if written.is_err() {
        return EXIT_FAILED;
    }
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The give-up rule on tokio's paused clock: exactly `after` without progress, counted again
    /// from each progress.
    #[tokio::test(start_paused = true)]
    async fn a_run_gives_up_exactly_after_the_time_without_progress() {
        let start = tokio::time::Instant::now();
        let mut give_up = GiveUp::new(Duration::from_secs(120));
        tokio::time::sleep(Duration::from_secs(90)).await;
        give_up.progressed();
        assert_eq!(give_up.deadline() - start, Duration::from_secs(210), "progress starts the wait again");
        let early = tokio::time::timeout(Duration::from_secs(119), tokio::time::sleep_until(give_up.deadline())).await;
        assert!(early.is_err(), "not before the wait is over");
        tokio::time::sleep_until(give_up.deadline()).await;
        assert_eq!(start.elapsed(), Duration::from_secs(210));
    }
}
