// The import queue as the window shows it: the status line, the progress numbers and the row
// labels. Pure functions over the backend's ImportProgress / ImportRow, so they are tested here.
import { plural } from "./format";
import type { BatchInfo } from "../bindings/BatchInfo";
import type { BatchPhase } from "../bindings/BatchPhase";
import type { EnqueueReport } from "../bindings/EnqueueReport";
import type { ImportProgress } from "../bindings/ImportProgress";
import type { ImportRow } from "../bindings/ImportRow";
import type { ItemState } from "../bindings/ItemState";
import type { PhotosEstimate } from "../bindings/PhotosEstimate";

/** The states in the order the counts are shown. */
export const STATE_ORDER: ItemState[] = ["queued", "preparing", "extracting", "submitted", "ready", "saved", "failed", "skipped"];

export const STATE_LABELS: Record<ItemState, string> = {
  queued: "Queued",
  preparing: "Preparing",
  extracting: "Extracting",
  submitted: "In a batch",
  ready: "Ready for review",
  saved: "Saved",
  failed: "Failed",
  skipped: "Skipped",
};

export const BATCH_PHASE_LABELS: Record<BatchPhase, string> = {
  submitting: "Submitting",
  pending: "Pending",
  running: "Running",
  succeeded: "Succeeded",
  failed: "Failed",
  cancelled: "Cancelled",
  expired: "Expired",
};

/** "just now", "12 min", "3 h 5 min": how long ago `sinceMs` was at `nowMs`. */
export function formatSince(sinceMs: number, nowMs: number): string {
  const minutes = Math.floor(Math.max(0, nowMs - sinceMs) / 60_000);
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  const rest = minutes % 60;
  return rest === 0 ? `${hours} h ago` : `${hours} h ${rest} min ago`;
}

/** One batch of a batch-mode import, as the progress view lists it. */
export function batchLine(batch: BatchInfo, nowMs: number): string {
  const parts = [`Batch ${BATCH_PHASE_LABELS[batch.state].toLowerCase()}`, plural(batch.requests, "photo")];
  if (batch.submitted_at !== null) parts.push(`submitted ${formatSince(batch.submitted_at, nowMs)}`);
  if (batch.error) parts.push(batch.error);
  return parts.join(" · ");
}

/** Finished items out of all, 0–100; 100 for an empty queue that has nothing left to do. */
export function percentDone(progress: Pick<ImportProgress, "done" | "total">): number {
  if (progress.total === 0) return 0;
  return Math.min(100, Math.floor((progress.done / progress.total) * 100));
}

/** "about 4 min", "under a minute", "about 1 h 20 min"; "" when there is no estimate. */
export function formatEta(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms) || ms < 0) return "";
  const minutes = Math.round(ms / 60_000);
  if (minutes < 1) return "under a minute left";
  if (minutes < 60) return `about ${minutes} min left`;
  const hours = Math.floor(minutes / 60);
  const rest = minutes % 60;
  return rest === 0 ? `about ${hours} h left` : `about ${hours} h ${rest} min left`;
}

export function formatThroughput(perMinute: number): string {
  if (!Number.isFinite(perMinute) || perMinute <= 0) return "";
  return perMinute >= 10 ? `${Math.round(perMinute)} photos/min` : `${perMinute.toFixed(1)} photos/min`;
}

function clock(ms: number, locale?: string, timeZone?: string): string {
  return new Intl.DateTimeFormat(locale, { hour: "2-digit", minute: "2-digit", second: "2-digit", timeZone }).format(new Date(ms));
}

export type Tone = "idle" | "running" | "paused" | "waiting" | "stopped" | "done";

/** The one line that says what the import is doing, and how it should look. */
export function statusLine(progress: ImportProgress, locale?: string, timeZone?: string): { text: string; tone: Tone } {
  const s = progress.status;
  switch (s.kind) {
    case "idle":
      return progress.total === 0
        ? { text: "Drop a folder of photos to import it.", tone: "idle" }
        : { text: progress.counts.queued > 0 ? "Stopped — press Resume to go on." : "Nothing to do.", tone: "idle" };
    case "running":
      return { text: "Importing…", tone: "running" };
    case "paused_by_user":
      return { text: "Paused — press Resume to go on.", tone: "paused" };
    case "paused_breaker":
      return {
        text:
          s.until_unix_ms !== null
            ? `Paused: Gemini is failing, next try at ${clock(s.until_unix_ms, locale, timeZone)}.`
            : "Paused: calls to Gemini are held (circuit forced open); release them in Gemini status.",
        tone: "waiting",
      };
    case "paused_budget":
    case "paused_disk":
      return { text: `Paused: ${s.message}`, tone: "waiting" };
    case "waiting_quota":
      return { text: `Waiting for Gemini's quota until ${clock(s.until_unix_ms, locale, timeZone)}.`, tone: "waiting" };
    case "waiting_server":
      return { text: `${s.message} Next try at ${clock(s.next_try_unix_ms, locale, timeZone)}.`, tone: "waiting" };
    case "stopped":
      return { text: `Stopped: ${s.message}`, tone: "stopped" };
    case "finished":
      return { text: progress.counts.ready > 0 ? "Done — ready items wait for review." : "Done.", tone: "done" };
    case "worked_elsewhere":
      return {
        text: "Another product-extractor (an import on the command line) is working this queue; its progress shows here, and the window takes over when it ends.",
        tone: progress.counts.queued + progress.counts.preparing + progress.counts.extracting > 0 ? "running" : "done",
      };
  }
}

/** What the Import view offers for the queue's state: Pause while calls are being sent, Resume
 * when it waits for the user, the view that fixes a hold or a stop, and an ETA only while it is
 * sending (a hold waits for a time or for the user, not for the throughput). */
export interface QueueControls {
  pause: boolean;
  resume: boolean;
  fix: "open_settings" | "open_status" | null;
  eta: boolean;
  /** Items in `preparing` are prepared and waiting at the gate, not being prepared. */
  waitingAtGate: boolean;
}

const SETTINGS_STOPS: ReadonlySet<string> = new Set(["gemini_auth", "gemini_not_found", "gemini_not_available", "config"]);

export function queueControls(progress: ImportProgress): QueueControls {
  const s = progress.status;
  const held =
    s.kind === "paused_breaker" || s.kind === "paused_budget" || s.kind === "paused_disk" || s.kind === "waiting_quota" || s.kind === "waiting_server";
  const fix =
    s.kind === "paused_budget" || (s.kind === "stopped" && SETTINGS_STOPS.has(s.code))
      ? "open_settings"
      : s.kind === "paused_breaker"
        ? "open_status"
        : null;
  return {
    pause: s.kind === "running",
    resume: !held && s.kind !== "running" && progress.counts.queued + progress.counts.preparing > 0,
    fix,
    eta: s.kind === "running",
    waitingAtGate: held || s.kind === "paused_by_user" || s.kind === "stopped",
  };
}

/** A state's chip label: `preparing` items of a held queue are prepared and wait to be sent. */
export function stateLabel(state: ItemState, controls: Pick<QueueControls, "waitingAtGate">): string {
  return state === "preparing" && controls.waitingAtGate ? "Prepared, waiting" : STATE_LABELS[state];
}

/** The secondary text of a row: the proposal, the error, or why it was skipped. */
export function rowDetail(row: ImportRow): string {
  if (row.skipped) return row.skipped.message;
  if (row.state === "failed" && row.last_error) return row.last_error.message;
  if (row.proposal) return row.proposal.brand ? `${row.proposal.name} · ${row.proposal.brand}` : row.proposal.name;
  if (row.state === "queued" && row.last_error) return `Waiting: ${row.last_error.message}`;
  return "";
}

/** "3 photos" for a product of several photos (its first is the row's file); null for one photo. */
/** What an estimate of the waiting items is for: "3 waiting photos", or "1 waiting product
 * (2 photos)" when products have several (each product is one call). */
export function waitingText(estimate: Pick<PhotosEstimate, "products" | "photos">): string {
  if (estimate.photos <= estimate.products) return plural(estimate.products, "waiting photo");
  return `${plural(estimate.products, "waiting product")} (${plural(estimate.photos, "photo")})`;
}

export function photosText(row: ImportRow): string | null {
  return row.photo_count > 1 ? `${row.photo_count} photos` : null;
}

/**
 * On a team catalog, who works an item now and where its files are: "bob@desk-2" (the desktop's
 * process number left out), with "queued on desk-1" when another computer queued it. Null when
 * no desktop holds it (and always on a local catalog).
 */
export function workedByText(row: ImportRow): string | null {
  if (!row.worked_by) return null;
  const desktop = row.worked_by.replace(/ #\d+$/, "");
  const host = desktop.includes("@") ? desktop.slice(desktop.indexOf("@") + 1) : desktop;
  return row.queued_on && row.queued_on !== host ? `${desktop} (queued on ${row.queued_on})` : desktop;
}

/** "looks like product #12 “Granola” (distance 3)" for a near-duplicate hint. */
export function looksLikeText(row: ImportRow): string | null {
  const hint = row.looks_like;
  if (!hint) return null;
  if (hint.kind === "product") return `Looks like product #${hint.product_id} “${hint.name}”`;
  const other = hint.name ? `“${hint.name}”` : (hint.path.split(/[\\/]/).pop() ?? hint.path);
  return `Looks like ${other} in this import`;
}

/** "12 photos queued, 3 already known (not sent again), 1 skipped." */
export function describeEnqueue(report: EnqueueReport): string {
  const photos = report.queued === 1 ? "1 photo" : `${report.queued} photos`;
  const parts = [`${photos} queued`];
  if (report.duplicates > 0) parts.push(`${report.duplicates} already known (not sent again)`);
  if (report.skipped > 0) parts.push(`${report.skipped} skipped`);
  if (report.unchanged > 0) parts.push(`${report.unchanged} already listed`);
  const numbered = report.sequences.reduce((n, s) => n + s.photos, 0);
  if (numbered > 0) parts.push(`${numbered} numbered in sequence, one product each (see Import)`);
  return parts.join(", ") + ".";
}
