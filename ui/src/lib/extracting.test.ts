import { describe, expect, it } from "vitest";
import type { ImportItemDetail } from "../bindings/ImportItemDetail";
import type { ImportProgress } from "../bindings/ImportProgress";
import type { ImportRow } from "../bindings/ImportRow";
import type { ImportStatus } from "../bindings/ImportStatus";
import {
  applyDetail,
  cardFlags,
  cardStatus,
  extractShows,
  isDiscardable,
  isOlderRead,
  isReviewable,
  markSaved,
  needsDetail,
  newCard,
  nextReady,
  productLine,
  productTitle,
  queueHold,
  cardWait,
  removeCard,
  stageText,
  totals,
  upsertRows,
  withDraft,
  type ExtractCard,
} from "./extracting";
import { emptyProduct } from "./form";

const row = (id: number, patch: Partial<ImportRow> = {}): ImportRow => ({
  id,
  path: `/p/IMG_${id}.jpg`,
  path_bytes: null,
  file_name: `IMG_${id}.jpg`,
  state: "queued",
  origin: "interactive",
  attempts: 0,
  last_error: null,
  skipped: null,
  proposal: null,
  flag_count: 0,
  looks_like: null,
  photo_id: null,
  product_id: null,
  updated_at: 1000,
  photo_count: 1,
  worked_by: null,
  queued_on: null,
  photo_sha256: null,
  ...patch,
});

const detail = (r: ImportRow, attemptId: number, name = `Product ${r.id}`): ImportItemDetail => ({
  row: r,
  sha256: "ab",
  proposal: { ...emptyProduct(), name, brand: "Brand" },
  flags: [{ field: "gtin", kind: "invalid", message: "check digit" }],
  attempt: { id: attemptId, model: "gemini-test", latency_ms: 120, usage: null, raw_response: "{}", cost_usd: null, batch: false },
  barcodes: [],
  photos: [],
  group: null,
  sources: [],
});

const progress = (status: ImportStatus): ImportProgress => ({
  counts: { queued: 1, preparing: 0, extracting: 0, submitted: 0, ready: 0, saved: 0, failed: 0, skipped: 0 },
  total: 1,
  done: 0,
  duplicates: 0,
  throughput_per_min: 0,
  eta_ms: null,
  status,
  in_flight: 0,
  changes: 3,
  cost: { calls: 0, input_tokens: 0, cached_tokens: 0, output_tokens: 0, usd: 0, unpriced_calls: 0 },
  queue_cost: { calls: 0, input_tokens: 0, cached_tokens: 0, output_tokens: 0, usd: 0, unpriced_calls: 0 },
  batches: [],
});

const ready = (id: number, at = 2000) =>
  row(id, { state: "ready", photo_id: 10 + id, proposal: { name: `Product ${id}`, brand: "Brand" }, flag_count: 1, updated_at: at });

describe("extract cards from the queue's rows", () => {
  it("walks an item through its states, never back to an older read", () => {
    let cards = upsertRows([], [row(1)]);
    expect(cards).toHaveLength(1);
    expect(stageText(cards[0], null)).toBe("Queued");
    cards = upsertRows(cards, [row(1, { state: "preparing", updated_at: 1100 })]);
    expect(stageText(cards[0], null)).toBe("Preparing…");
    // A read that was overtaken by a newer one changes nothing.
    cards = upsertRows(cards, [row(1, { state: "queued", updated_at: 1050 })]);
    expect(cardStatus(cards[0].row)).toBe("preparing");
    cards = upsertRows(cards, [row(1, { state: "extracting", photo_id: 11, updated_at: 1200 })]);
    expect(stageText(cards[0], null)).toBe("Extracting (Gemini)…");
    cards = upsertRows(cards, [ready(1)]);
    expect(needsDetail(cards[0])).toBe(true);
    expect(isReviewable(cards[0])).toBe(false);
    cards = applyDetail(cards, detail(ready(1), 7));
    expect(needsDetail(cards[0])).toBe(false);
    expect(isReviewable(cards[0])).toBe(true);
    expect(stageText(cards[0], null)).toBe("Ready for review");
    expect(productLine(cards[0])).toEqual({ name: "Product 1", brand: "Brand" });
    expect(productTitle(cards[0])).toBe("Product 1 · Brand");
    expect(cardFlags(cards[0])).toEqual({ invalid: 1, uncertain: 0, barcode: 0, cleaned: 0, total: 1 });
  });

  it("keeps a failure read in the same millisecond as the states before it (reads answer out of order)", () => {
    // A file that is not a photo: queued, preparing and failed within one millisecond.
    let cards = upsertRows([], [row(1, { updated_at: 1000 })]);
    cards = applyDetail(cards, detail(row(1, { state: "failed", updated_at: 1000 }), 3));
    expect(cardStatus(cards[0].row)).toBe("failed");
    // The read of `preparing`, asked first, answers last: it changes nothing.
    cards = applyDetail(cards, detail(row(1, { state: "preparing", updated_at: 1000 }), 3));
    cards = upsertRows(cards, [row(1, { state: "preparing", updated_at: 1000 })]);
    expect(cardStatus(cards[0].row)).toBe("failed");
    // Retried later, it moves on as usual.
    cards = upsertRows(cards, [row(1, { state: "queued", updated_at: 2000 })]);
    expect(cardStatus(cards[0].row)).toBe("queued");
    expect(isOlderRead(row(1, { state: "ready", updated_at: 5 }), row(1, { state: "saved", updated_at: 5 }))).toBe(true);
  });

  it("keeps the order cards arrived in and appends new rows", () => {
    const cards = upsertRows(upsertRows([], [row(3), row(1)]), [row(2), row(3, { state: "preparing", updated_at: 1500 })]);
    expect(cards.map((c) => c.id)).toEqual([3, 1, 2]);
    expect(cards[0].row.state).toBe("preparing");
  });

  it("counts the row's flags until the proposal is read", () => {
    const card = newCard(ready(4));
    expect(cardFlags(card)).toEqual({ invalid: 0, uncertain: 0, barcode: 0, cleaned: 0, total: 1 });
    expect(productLine(card).name).toBe("Product 4");
    expect(productTitle(card)).toBe("Product 4 · Brand");
    expect(productTitle(newCard(row(5)))).toBeNull();
  });

  it("drops the draft when the item is extracted again, keeps it for the same call", () => {
    let cards = applyDetail(upsertRows([], [ready(1)]), detail(ready(1), 7));
    cards = withDraft(cards, 1, { ...emptyProduct(), name: "Edited" }, []);
    cards = applyDetail(cards, detail(ready(1, 2100), 7));
    expect(cards[0].draft?.name).toBe("Edited");
    expect(productLine(cards[0]).name).toBe("Edited");
    // The reviewer's draft has no brand: the card's title says so too.
    expect(productTitle(cards[0])).toBe("Edited");
    expect(cardFlags(cards[0]).total).toBe(0);
    // Re-extract: queued again, the proposal and the edits are gone.
    cards = upsertRows(cards, [row(1, { state: "queued", updated_at: 3000, photo_id: 11 })]);
    expect(cards[0].draft).toBeNull();
    expect(cards[0].detail).toBeNull();
    expect(isReviewable(cards[0])).toBe(false);
    // A new answer under a new attempt also drops a draft made meanwhile.
    cards = applyDetail(upsertRows(cards, [ready(1, 4000)]), detail(ready(1, 4000), 8, "Second answer"));
    cards = withDraft(cards, 1, { ...emptyProduct(), name: "Edit 2" }, []);
    cards = applyDetail(cards, detail(ready(1, 5000), 9, "Third answer"));
    expect(cards[0].draft).toBeNull();
    expect(productLine(cards[0]).name).toBe("Third answer");
  });

  it("ignores an older detail read", () => {
    let cards = upsertRows([], [row(1, { state: "queued", updated_at: 3000 })]);
    cards = applyDetail(cards, detail(ready(1, 2000), 7));
    expect(cards[0].row.state).toBe("queued");
    expect(cards[0].detail).toBeNull();
  });

  it("says why a queued photo waits when the queue is held", () => {
    const card = newCard(row(1));
    const open = progress({ kind: "paused_breaker", until_unix_ms: Date.UTC(2025, 0, 1, 9, 30, 5), message: "open" });
    expect(stageText(card, open, "en-GB", "UTC")).toBe("Paused: Gemini is failing, next try at 09:30:05.");
    const forced = progress({ kind: "paused_breaker", until_unix_ms: null, message: "forced" });
    expect(stageText(card, forced)).toContain("circuit forced open");
    expect(stageText(card, progress({ kind: "stopped", code: "gemini_auth", message: "Gemini rejected the API key." }))).toBe(
      "Stopped: Gemini rejected the API key.",
    );
    expect(stageText(card, progress({ kind: "paused_by_user" }))).toContain("Paused");
    expect(queueHold(progress({ kind: "worked_elsewhere" }))).toContain("other product-extractor");
    expect(queueHold(progress({ kind: "running" }))).toBeNull();
    expect(queueHold(null)).toBeNull();
    // Running, but this item went back to the queue for a reason of its own.
    const back = newCard(row(2, { last_error: { code: "bulkhead_full", message: "All slots busy." } }));
    expect(stageText(back, progress({ kind: "running" }))).toBe("Waiting: All slots busy.");
    // The hold concerns waiting photos only.
    expect(stageText(newCard(ready(3)), open)).toBe("Ready for review");
  });

  it("shows a photo already in the catalog as that product", () => {
    const dup = newCard(
      row(5, {
        state: "skipped",
        skipped: { reason: "already_in_catalog", message: "already product #12", duplicate_of_item: null, duplicate_of_product: 12 },
      }),
    );
    expect(cardStatus(dup.row)).toBe("duplicate");
    expect(stageText(dup, null)).toBe("Already product #12");
    expect(isDiscardable(dup)).toBe(false);
    const notPhoto = newCard(
      row(6, {
        state: "skipped",
        skipped: { reason: "not_a_photo", message: "notes.txt is not a photo", duplicate_of_item: null, duplicate_of_product: null },
      }),
    );
    expect(cardStatus(notPhoto.row)).toBe("skipped");
    expect(totals([dup, notPhoto])).toMatchObject({ total: 2, duplicate: 1, failed: 1 });
  });

  it("marks a save at once, finds the next ready card and totals", () => {
    let cards: ExtractCard[] = upsertRows([], [ready(1), row(2, { state: "failed" }), ready(3), row(4, { state: "extracting" })]);
    cards = applyDetail(applyDetail(cards, detail(ready(1), 1)), detail(ready(3), 3));
    expect(nextReady(cards, 1)?.id).toBe(3);
    expect(nextReady(cards, 3)?.id).toBe(1);
    cards = markSaved(cards, 1, 42, { ...emptyProduct(), name: "Saved Name" });
    expect(cardStatus(cards[0].row)).toBe("saved");
    expect(cards[0].row.product_id).toBe(42);
    expect(productLine(cards[0]).name).toBe("Saved Name");
    expect(isReviewable(cards[0])).toBe(false);
    expect(nextReady(cards, 3)).toBeNull();
    expect(totals(cards)).toEqual({ total: 4, working: 1, waiting: 0, ready: 1, failed: 1, saved: 1, duplicate: 0 });
    expect(isDiscardable(cards[1])).toBe(true);
    cards = removeCard(cards, 2);
    expect(cards.map((c) => c.id)).toEqual([1, 3, 4]);
  });
});

describe("cardWait", () => {
  const budget = progress({ kind: "paused_budget", until_unix_ms: Date.UTC(2025, 0, 2), message: "Today's Gemini budget ($0.001) is spent; resumes tomorrow or raise it in Settings." });

  it("says why a prepared photo waits at the gate, and what to do: never a bare Preparing…", () => {
    const prepared = newCard(row(7, { state: "preparing" }));
    expect(stageText(prepared, budget)).toBe("Paused: Today's Gemini budget ($0.001) is spent; resumes tomorrow or raise it in Settings.");
    expect(cardWait(prepared, budget)?.actions).toEqual(["open_settings"]);
    expect(cardWait(newCard(row(8)), budget)?.actions).toEqual(["open_settings"]);
    // While the queue runs, a photo being prepared is just that.
    expect(stageText(prepared, progress({ kind: "running" }))).toBe("Preparing…");
    expect(cardWait(prepared, progress({ kind: "running" }))).toBeNull();
  });

  it("offers what fixes each hold", () => {
    const card = newCard(row(9));
    const open = progress({ kind: "paused_breaker", until_unix_ms: null, message: "forced" });
    expect(cardWait(card, open)?.actions).toEqual(["open_status"]);
    expect(cardWait(card, progress({ kind: "paused_by_user" }))?.actions).toEqual(["resume"]);
    const noKey = progress({ kind: "stopped", code: "gemini_auth", message: "No Gemini API key is configured." });
    expect(cardWait(card, noKey)?.actions).toEqual(["open_settings", "resume"]);
    const disk = progress({ kind: "stopped", code: "io", message: "The disk is full." });
    expect(cardWait(card, disk)?.actions).toEqual(["resume"]);
    const quota = progress({ kind: "waiting_quota", until_unix_ms: Date.UTC(2025, 0, 1, 9), message: "quota" });
    expect(cardWait(card, quota)).toEqual({ text: expect.stringContaining("quota"), actions: [] });
    // A card being extracted or done is not held by the queue.
    expect(cardWait(newCard(row(10, { state: "extracting" })), budget)).toBeNull();
    expect(cardWait(newCard(ready(11)), budget)).toBeNull();
    // The view's summary counts a held card as waiting, not as in progress.
    expect(totals([card, newCard(ready(12))], budget)).toMatchObject({ working: 0, waiting: 1, ready: 1 });
    expect(totals([card], progress({ kind: "running" }))).toMatchObject({ working: 1, waiting: 0 });
  });
});

describe("the Extract view at start", () => {
  it("shows the empty state only once the waiting photos were read", () => {
    expect(extractShows([], false)).toBe("reading");
    expect(extractShows([], true)).toBe("empty");
    // Photos added before the read answered show at once.
    expect(extractShows(upsertRows([], [row(1)]), false)).toBe("cards");
    expect(extractShows(upsertRows([], [row(1)]), true)).toBe("cards");
  });
});
