// The Extract view's cards: a view of the import queue's interactive items. A card is the last
// row (and, once ready, the detail) read for its item; the queue's `import://item` events say when
// to read again. Pure functions over the backend's rows, so they are tested here.
import type { FieldFlag } from "../bindings/FieldFlag";
import type { ImportItemDetail } from "../bindings/ImportItemDetail";
import type { ImportProgress } from "../bindings/ImportProgress";
import type { ImportRow } from "../bindings/ImportRow";
import type { Product } from "../bindings/Product";
import { countFlags } from "./flags";
import { statusLine } from "./importing";

/** The values of the cards' data-status attribute. */
export type CardStatus = "queued" | "preparing" | "extracting" | "ready" | "failed" | "saved" | "duplicate" | "skipped";

export interface ExtractCard {
  id: number;
  /** The item as last read; never replaced by an older read (`updated_at`). */
  row: ImportRow;
  /** The proposal, flags and call, read once the item is ready. */
  detail: ImportItemDetail | null;
  /** The reviewer's unsaved edits and the flags computed for them (dropped by a new extraction). */
  draft: Product | null;
  draftFlags: FieldFlag[] | null;
  /** The name the product was saved with, in this session. */
  savedName: string | null;
}

export function cardStatus(row: ImportRow): CardStatus {
  if (row.state === "skipped") return row.skipped?.reason === "already_in_catalog" ? "duplicate" : "skipped";
  // Dropped photos are never batched; a batch item shows as being extracted.
  if (row.state === "submitted") return "extracting";
  return row.state;
}

export function newCard(row: ImportRow): ExtractCard {
  return { id: row.id, row, detail: null, draft: null, draftFlags: null, savedName: null };
}

const IN_PROGRESS: ReadonlySet<string> = new Set(["queued", "preparing", "extracting"]);

/** How far along an item's one pass through the queue a state is. */
const STAGE: Record<ImportRow["state"], number> = {
  queued: 0,
  preparing: 1,
  extracting: 2,
  submitted: 2,
  ready: 3,
  failed: 3,
  skipped: 3,
  saved: 4,
};

/** Whether `row` is an older read than `shown`: an earlier `updated_at`, or the same millisecond
 * and an earlier stage (a photo that cannot be read goes from queued through preparing to failed
 * within one millisecond, and the reads of those states may answer out of order). */
export function isOlderRead(row: ImportRow, shown: ImportRow): boolean {
  if (row.updated_at !== shown.updated_at) return row.updated_at < shown.updated_at;
  return STAGE[row.state] < STAGE[shown.state];
}

/** The card with a newer read of its row; an older read changes nothing. */
export function withRow(card: ExtractCard, row: ImportRow): ExtractCard {
  if (isOlderRead(row, card.row)) return card;
  const next = { ...card, row };
  if (IN_PROGRESS.has(row.state)) {
    // Extracted again: the old proposal and the edits made to it are gone.
    next.detail = null;
    next.draft = null;
    next.draftFlags = null;
  } else if (row.state !== "ready" && row.state !== "saved") {
    next.detail = null;
  }
  return next;
}

/** Rows from `extract_photos` or `extract_pending`: known cards updated, new ones appended in order. */
export function upsertRows(cards: readonly ExtractCard[], rows: readonly ImportRow[]): ExtractCard[] {
  const next = cards.slice();
  for (const row of rows) {
    const index = next.findIndex((c) => c.id === row.id);
    if (index < 0) next.push(newCard(row));
    else next[index] = withRow(next[index], row);
  }
  return next;
}

/** A fresh `import_item` read: its row, and its proposal while the item is ready or saved. */
export function applyDetail(cards: readonly ExtractCard[], detail: ImportItemDetail): ExtractCard[] {
  return cards.map((card) => {
    if (card.id !== detail.row.id || isOlderRead(detail.row, card.row)) return card;
    const next = withRow(card, detail.row);
    if (detail.proposal === null || (detail.row.state !== "ready" && detail.row.state !== "saved")) return next;
    const sameCall = card.detail?.attempt?.id === detail.attempt?.id;
    return sameCall ? { ...next, detail } : { ...next, detail, draft: null, draftFlags: null };
  });
}

function change(cards: readonly ExtractCard[], id: number, f: (card: ExtractCard) => ExtractCard): ExtractCard[] {
  return cards.map((c) => (c.id === id ? f(c) : c));
}

export function withDraft(cards: readonly ExtractCard[], id: number, product: Product, flags: FieldFlag[]): ExtractCard[] {
  return change(cards, id, (c) => ({ ...c, draft: product, draftFlags: flags }));
}

/** Saved in this window: the card says so at once (the item's event follows). */
export function markSaved(cards: readonly ExtractCard[], id: number, productId: number, product: Product): ExtractCard[] {
  return change(cards, id, (c) => ({
    ...c,
    row: { ...c.row, state: "saved", product_id: productId },
    savedName: product.name,
    draft: product,
    draftFlags: null,
  }));
}

export function removeCard(cards: readonly ExtractCard[], id: number): ExtractCard[] {
  return cards.filter((c) => c.id !== id);
}

/** Ready, and its proposal not read since the row last changed. */
export function needsDetail(card: ExtractCard): boolean {
  return card.row.state === "ready" && (card.detail === null || card.detail.row.updated_at < card.row.updated_at);
}

/** A card can be opened in the review panel once its proposal is read. */
export function isReviewable(card: ExtractCard): boolean {
  return card.row.state === "ready" && card.detail !== null && card.detail.proposal !== null;
}

/** Discard accepts these states; any other card is only taken off the list. */
export function isDiscardable(card: ExtractCard): boolean {
  return card.row.state === "ready" || card.row.state === "failed" || card.row.state === "queued";
}

/** The next card waiting for review after `id` (wrapping around), or null. */
export function nextReady(cards: readonly ExtractCard[], id: number): ExtractCard | null {
  const start = cards.findIndex((c) => c.id === id);
  for (let step = 1; step <= cards.length; step++) {
    const card = cards[(start + step + cards.length) % cards.length];
    if (card.id !== id && isReviewable(card)) return card;
  }
  return null;
}

export interface CardTotals {
  total: number;
  working: number;
  waiting: number;
  ready: number;
  failed: number;
  saved: number;
  duplicate: number;
}

/**
 * What the Extract view shows: its cards; the empty "Drop product photos here" once the photos
 * a previous session left were read and there are none; nothing until then (a restart with photos
 * waiting would otherwise flash the empty state before their cards).
 */
export function extractShows(cards: readonly ExtractCard[], pendingRead: boolean): "cards" | "empty" | "reading" {
  if (cards.length > 0) return "cards";
  return pendingRead ? "empty" : "reading";
}

/** The cards per state; with the queue's progress, the ones it holds (a spent budget, an open
 * breaker, a stop) count as `waiting`, not as in progress. */
export function totals(cards: readonly ExtractCard[], progress: ImportProgress | null = null): CardTotals {
  const t: CardTotals = { total: cards.length, working: 0, waiting: 0, ready: 0, failed: 0, saved: 0, duplicate: 0 };
  for (const c of cards) {
    const s = cardStatus(c.row);
    if (cardWait(c, progress) !== null) t.waiting += 1;
    else if (s === "queued" || s === "preparing" || s === "extracting") t.working += 1;
    else if (s === "skipped") t.failed += 1;
    else t[s] += 1;
  }
  return t;
}

/** Why a waiting photo waits, when the whole queue does (paused, held by the breaker, a quota or
 * the daily budget, stopped, or worked by another process); null while the queue runs. */
export function queueHold(progress: ImportProgress | null, locale?: string, timeZone?: string): string | null {
  if (progress === null) return null;
  switch (progress.status.kind) {
    case "paused_by_user":
    case "paused_breaker":
    case "paused_budget":
    case "paused_disk":
    case "waiting_quota":
    case "waiting_server":
    case "stopped":
      return statusLine(progress, locale, timeZone).text;
    case "worked_elsewhere":
      return "Queued for the other product-extractor working this queue.";
    default:
      return null;
  }
}

/** What a card can do about what holds it: the view where the cause is fixed, or Resume. */
export type WaitAction = "open_settings" | "open_status" | "resume";

/** Why a card that has not been sent yet waits, and what to do about it, when the whole queue
 * waits; null while the queue runs (or for a card past that point). A photo waits queued, or
 * prepared at the gate (`preparing`): both say why, never a bare "Preparing…" with a spinner. */
export function cardWait(
  card: ExtractCard,
  progress: ImportProgress | null,
  locale?: string,
  timeZone?: string,
): { text: string; actions: WaitAction[] } | null {
  const status = cardStatus(card.row);
  if (status !== "queued" && status !== "preparing") return null;
  const text = queueHold(progress, locale, timeZone);
  if (text === null || progress === null) return null;
  const s = progress.status;
  switch (s.kind) {
    case "paused_breaker":
      return { text, actions: ["open_status"] };
    case "paused_budget":
      return { text, actions: ["open_settings"] };
    case "paused_by_user":
      return { text, actions: ["resume"] };
    case "stopped":
      return { text, actions: SETTINGS_CODES.has(s.code) ? ["open_settings", "resume"] : ["resume"] };
    default:
      return { text, actions: [] };
  }
}

/** The stops a change in Settings fixes (a missing or rejected key, an unknown model, a setting). */
const SETTINGS_CODES: ReadonlySet<string> = new Set(["gemini_auth", "gemini_not_found", "gemini_not_available", "config"]);

/** The stage text shown on a card. */
export function stageText(card: ExtractCard, progress: ImportProgress | null, locale?: string, timeZone?: string): string {
  const row = card.row;
  const wait = cardWait(card, progress, locale, timeZone);
  if (wait) return wait.text;
  switch (cardStatus(row)) {
    case "queued":
      return row.last_error ? `Waiting: ${row.last_error.message}` : "Queued";
    case "preparing":
      return "Preparing…";
    case "extracting":
      return "Extracting (Gemini)…";
    case "ready":
      return "Ready for review";
    case "failed":
      return "Failed";
    case "saved":
      return "Saved";
    case "duplicate":
      return row.skipped?.duplicate_of_product != null ? `Already product #${row.skipped.duplicate_of_product}` : "Already in the catalog";
    case "skipped":
      return "Skipped";
  }
}

/** The product's name and brand as the card shows them ("" before there is a proposal). */
export function productLine(card: ExtractCard): { name: string; brand: string } {
  const name = card.savedName ?? card.draft?.name ?? card.detail?.proposal?.name ?? card.row.proposal?.name ?? "";
  // A draft's brand stands even when the reviewer cleared it.
  const brand = (card.draft ? card.draft.brand : (card.detail?.proposal?.brand ?? card.row.proposal?.brand)) ?? "";
  return { name, brand };
}

/** The card's title in full, for its tooltip (the card cuts a long name): "Name · Brand"; null
 * while there is no name. */
export function productTitle(card: ExtractCard): string | null {
  const { name, brand } = productLine(card);
  if (!name) return null;
  return brand ? `${name} · ${brand}` : name;
}

/** The flags a card counts: the reviewer's, else the proposal's; `total` alone when only the
 * row's count is known. */
export function cardFlags(card: ExtractCard): {
  invalid: number;
  uncertain: number;
  barcode: number;
  cleaned: number;
  total: number;
} {
  const flags = card.draftFlags ?? card.detail?.flags ?? null;
  if (flags === null) return { invalid: 0, uncertain: 0, barcode: 0, cleaned: 0, total: card.row.flag_count };
  const counts = countFlags(flags);
  return { ...counts, total: counts.invalid + counts.uncertain + counts.barcode + counts.cleaned };
}
