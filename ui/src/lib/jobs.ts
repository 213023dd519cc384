// The job cards of the Extract view, as a pure reducer over JobEvents and user actions. Events can
// arrive before extract_photos has returned its tickets, so an event for an unknown job creates
// the card, and a later ticket only fills in the file name.
import type { ErrorReport } from "../bindings/ErrorReport";
import type { ExtractionView } from "../bindings/ExtractionView";
import type { FieldFlag } from "../bindings/FieldFlag";
import type { JobEvent } from "../bindings/JobEvent";
import type { JobTicket } from "../bindings/JobTicket";
import type { PreparedView } from "../bindings/PreparedView";
import type { Product } from "../bindings/Product";
import { baseName } from "./format";

/** The values of the cards' data-status attribute. */
export type JobStatus = "queued" | "preparing" | "extracting" | "ready" | "failed" | "saved";

export interface JobCard {
  jobId: number;
  file: string;
  fileName: string;
  status: JobStatus;
  /** Set once the backend has sent the prepared image. Kept across re-extractions. */
  prepared: PreparedView | null;
  extraction: ExtractionView | null;
  error: ErrorReport | null;
  /** The reviewer's unsaved edits and the flags computed for them. */
  draft: Product | null;
  draftFlags: FieldFlag[] | null;
  /** The catalog id once saved (or the existing product the photo belongs to). */
  savedProductId: number | null;
  savedName: string | null;
}

export type JobAction =
  | { type: "tickets"; tickets: JobTicket[] }
  | { type: "event"; event: JobEvent }
  | { type: "retry"; jobId: number }
  | { type: "draft"; jobId: number; product: Product; flags: FieldFlag[] }
  | { type: "saved"; jobId: number; productId: number; product: Product }
  | { type: "remove"; jobId: number };

function newCard(jobId: number, file: string, fileName?: string): JobCard {
  return {
    jobId,
    file,
    fileName: fileName ?? (file ? baseName(file) : `Photo ${jobId}`),
    status: "queued",
    prepared: null,
    extraction: null,
    error: null,
    draft: null,
    draftFlags: null,
    savedProductId: null,
    savedName: null,
  };
}

function update(cards: readonly JobCard[], jobId: number, file: string, change: (card: JobCard) => JobCard): JobCard[] {
  const index = cards.findIndex((c) => c.jobId === jobId);
  if (index < 0) return [...cards, change(newCard(jobId, file))];
  const next = cards.slice();
  next[index] = change(cards[index]);
  return next;
}

function applyEvent(cards: readonly JobCard[], event: JobEvent): JobCard[] {
  switch (event.event) {
    case "queued": {
      const t = event.data;
      return update(cards, t.job_id, t.file, (c) => ({
        ...c,
        file: t.file,
        fileName: t.file_name,
        status: "queued",
        error: null,
        extraction: null,
        draft: null,
        draftFlags: null,
      }));
    }
    case "preparing":
      return update(cards, event.data.job_id, "", (c) => ({ ...c, status: "preparing", error: null }));
    case "prepared":
      return update(cards, event.data.job_id, "", (c) => ({ ...c, prepared: event.data }));
    case "extracting":
      return update(cards, event.data.job_id, "", (c) => ({ ...c, status: "extracting", error: null }));
    case "ready": {
      const view = event.data;
      return update(cards, view.job_id, view.file, (c) => ({
        ...c,
        file: view.file || c.file,
        status: "ready",
        extraction: view,
        error: null,
        draft: null,
        draftFlags: null,
        savedProductId: view.existing_product_id,
        savedName: null,
      }));
    }
    case "failed":
      return update(cards, event.data.job_id, "", (c) => ({ ...c, status: "failed", error: event.data.error }));
  }
}

export function reduceJobs(cards: readonly JobCard[], action: JobAction): JobCard[] {
  switch (action.type) {
    case "tickets": {
      let next = cards.slice();
      for (const t of action.tickets) {
        const index = next.findIndex((c) => c.jobId === t.job_id);
        if (index < 0) next = [...next, newCard(t.job_id, t.file, t.file_name)];
        else next[index] = { ...next[index], file: t.file, fileName: t.file_name };
      }
      return next;
    }
    case "event":
      return applyEvent(cards, action.event);
    case "retry":
      return cards.map((c) =>
        c.jobId === action.jobId
          ? { ...c, status: "preparing", error: null, extraction: null, draft: null, draftFlags: null }
          : c,
      );
    case "draft":
      return cards.map((c) => (c.jobId === action.jobId ? { ...c, draft: action.product, draftFlags: action.flags } : c));
    case "saved":
      return cards.map((c) =>
        c.jobId === action.jobId
          ? {
              ...c,
              status: "saved",
              savedProductId: action.productId,
              savedName: action.product.name,
              draft: action.product,
              draftFlags: null,
              extraction: c.extraction ? { ...c.extraction, existing_product_id: action.productId } : null,
            }
          : c,
      );
    case "remove":
      return cards.filter((c) => c.jobId !== action.jobId);
  }
}

/** A card can be opened in the review panel once Gemini has answered. */
export function isReviewable(card: JobCard): boolean {
  return card.extraction !== null && (card.status === "ready" || card.status === "saved");
}

/** The next card waiting for review after `jobId` (wrapping around), or null. */
export function nextReady(cards: readonly JobCard[], jobId: number): JobCard | null {
  const start = cards.findIndex((c) => c.jobId === jobId);
  for (let step = 1; step <= cards.length; step++) {
    const card = cards[(start + step + cards.length) % cards.length];
    if (card.jobId !== jobId && card.status === "ready") return card;
  }
  return null;
}

export interface JobTotals {
  total: number;
  working: number;
  ready: number;
  failed: number;
  saved: number;
}

export function totals(cards: readonly JobCard[]): JobTotals {
  const t: JobTotals = { total: cards.length, working: 0, ready: 0, failed: 0, saved: 0 };
  for (const c of cards) {
    if (c.status === "queued" || c.status === "preparing" || c.status === "extracting") t.working += 1;
    else t[c.status] += 1;
  }
  return t;
}

/** The stage text shown on a card. */
export function stageText(card: JobCard): string {
  switch (card.status) {
    case "queued":
      return "Waiting…";
    case "preparing":
      return card.prepared ? "Prepared" : "Preparing…";
    case "extracting":
      return "Extracting (Gemini)…";
    case "ready":
      return "Ready for review";
    case "failed":
      return "Failed";
    case "saved":
      return "Saved";
  }
}
