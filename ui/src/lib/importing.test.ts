import { describe, expect, it } from "vitest";
import type { ImportProgress } from "../bindings/ImportProgress";
import type { ImportRow } from "../bindings/ImportRow";
import { batchLine, describeEnqueue, formatEta, formatSince, formatThroughput, looksLikeText, percentDone, photosText, rowDetail, queueControls, stateLabel, statusLine, waitingText, workedByText } from "./importing";

function progress(overrides: Partial<ImportProgress> = {}): ImportProgress {
  return {
    counts: { queued: 0, preparing: 0, extracting: 0, submitted: 0, ready: 0, saved: 0, failed: 0, skipped: 0 },
    total: 0,
    done: 0,
    duplicates: 0,
    throughput_per_min: 0,
    eta_ms: null,
    status: { kind: "idle" },
    in_flight: 0,
    changes: 0,
    cost: { calls: 0, input_tokens: 0, cached_tokens: 0, output_tokens: 0, usd: 0, unpriced_calls: 0 },
    queue_cost: { calls: 0, input_tokens: 0, cached_tokens: 0, output_tokens: 0, usd: 0, unpriced_calls: 0 },
    batches: [],
    ...overrides,
  };
}

function row(overrides: Partial<ImportRow> = {}): ImportRow {
  return {
    id: 1,
    path: "/shoot/a.jpg",
    path_bytes: null,
    file_name: "a.jpg",
    state: "queued",
    origin: "import",
    attempts: 0,
    last_error: null,
    skipped: null,
    proposal: null,
    flag_count: 0,
    looks_like: null,
    photo_id: null,
    product_id: null,
    updated_at: 0,
    photo_count: 1,
    worked_by: null,
    queued_on: null,
    photo_sha256: null,
    ...overrides,
  };
}

describe("progress numbers", () => {
  it("percent done rounds down and never passes 100", () => {
    expect(percentDone({ done: 0, total: 0 })).toBe(0);
    expect(percentDone({ done: 1, total: 3 })).toBe(33);
    expect(percentDone({ done: 299, total: 300 })).toBe(99);
    expect(percentDone({ done: 300, total: 300 })).toBe(100);
  });
  it("ETA in words", () => {
    expect(formatEta(null)).toBe("");
    expect(formatEta(20_000)).toBe("under a minute left");
    expect(formatEta(4 * 60_000)).toBe("about 4 min left");
    expect(formatEta(80 * 60_000)).toBe("about 1 h 20 min left");
    expect(formatEta(120 * 60_000)).toBe("about 2 h left");
  });
  it("throughput", () => {
    expect(formatThroughput(0)).toBe("");
    expect(formatThroughput(3.25)).toBe("3.3 photos/min");
    expect(formatThroughput(118.6)).toBe("119 photos/min");
  });
});

describe("statusLine", () => {
  it("says when Gemini is failing and when the next try is", () => {
    const at = Date.UTC(2026, 11, 2, 14, 3, 20);
    const line = statusLine(progress({ status: { kind: "paused_breaker", until_unix_ms: at, message: "" } }), "en-GB", "UTC");
    expect(line).toEqual({ text: "Paused: Gemini is failing, next try at 14:03:20.", tone: "waiting" });
  });
  it("explains a forced-open pause without a time", () => {
    const line = statusLine(progress({ status: { kind: "paused_breaker", until_unix_ms: null, message: "" } }));
    expect(line.text).toContain("forced open");
  });
  it("says the daily budget is spent, as a wait", () => {
    const message = "Today's Gemini budget ($5.00) is spent; resumes tomorrow or raise it in Settings.";
    const line = statusLine(progress({ status: { kind: "paused_budget", until_unix_ms: 0, message } }));
    expect(line).toEqual({ text: `Paused: ${message}`, tone: "waiting" });
  });
  it("passes the stop reason through", () => {
    const line = statusLine(progress({ status: { kind: "stopped", code: "gemini_auth", message: "Gemini rejected the API key — open Settings." } }));
    expect(line).toEqual({ text: "Stopped: Gemini rejected the API key — open Settings.", tone: "stopped" });
  });
  it("points at review when done with ready items", () => {
    const counts = { queued: 0, preparing: 0, extracting: 0, submitted: 0, ready: 2, saved: 1, failed: 0, skipped: 0 };
    expect(statusLine(progress({ status: { kind: "finished" }, counts })).text).toContain("review");
  });
  it("says another process works the queue, running while it has work", () => {
    const busy = { queued: 3, preparing: 0, extracting: 1, submitted: 0, ready: 0, saved: 0, failed: 0, skipped: 0 };
    const line = statusLine(progress({ status: { kind: "worked_elsewhere" }, counts: busy }));
    expect(line.text).toContain("Another product-extractor");
    expect(line.tone).toBe("running");
    const idle = { ...busy, queued: 0, extracting: 0, ready: 4 };
    expect(statusLine(progress({ status: { kind: "worked_elsewhere" }, counts: idle })).tone).toBe("done");
  });
  it("invites a drop when empty", () => {
    expect(statusLine(progress()).text).toContain("Drop a folder");
  });
});

describe("rows", () => {
  it("shows the proposal, the error, or the skip reason", () => {
    expect(rowDetail(row({ state: "ready", proposal: { name: "Granola", brand: "Nordic" } }))).toBe("Granola · Nordic");
    expect(rowDetail(row({ state: "failed", last_error: { code: "invalid_image", message: "Not a photo." } }))).toBe("Not a photo.");
    expect(
      rowDetail(row({ state: "skipped", skipped: { reason: "already_in_catalog", message: "Already product #3.", duplicate_of_item: null, duplicate_of_product: 3 } })),
    ).toBe("Already product #3.");
    expect(rowDetail(row())).toBe("");
  });
  it("names what a near-duplicate looks like", () => {
    expect(looksLikeText(row({ looks_like: { kind: "product", product_id: 12, name: "Granola", distance: 3 } }))).toBe("Looks like product #12 “Granola”");
    expect(looksLikeText(row({ looks_like: { kind: "item", item_id: 2, path: "/x/b.jpg", name: null, distance: 1 } }))).toBe("Looks like b.jpg in this import");
    expect(looksLikeText(row())).toBeNull();
  });
  it("counts a product's photos only when it has several", () => {
    expect(photosText(row({ photo_count: 3 }))).toBe("3 photos");
    expect(photosText(row({ photo_count: 1 }))).toBeNull();
  });
  it("says which desktop of a team works an item, and where it was queued when elsewhere", () => {
    expect(workedByText(row({ worked_by: "bob@desk-2 #4711", queued_on: "desk-2" }))).toBe("bob@desk-2");
    expect(workedByText(row({ worked_by: "bob@desk-2 #4711", queued_on: "desk-1" }))).toBe("bob@desk-2 (queued on desk-1)");
    expect(workedByText(row({ worked_by: "bob@desk-2 #4711", queued_on: null }))).toBe("bob@desk-2");
    expect(workedByText(row({ worked_by: null, queued_on: "desk-1" }))).toBeNull();
    expect(workedByText(row())).toBeNull();
  });
});

describe("describeEnqueue", () => {
  it("says what a drop added", () => {
    expect(describeEnqueue({ queued: 1, duplicates: 0, skipped: 0, unchanged: 0, sequences: [] })).toBe("1 photo queued.");
    const note = { folder: "/shoot", first: "photo-000.jpg", last: "photo-059.jpg", photos: 60, message: "…" };
    expect(describeEnqueue({ queued: 60, duplicates: 0, skipped: 0, unchanged: 0, sequences: [note] })).toBe(
      "60 photos queued, 60 numbered in sequence, one product each (see Import).",
    );
    expect(describeEnqueue({ queued: 12, duplicates: 3, skipped: 1, unchanged: 2, sequences: [] })).toBe(
      "12 photos queued, 3 already known (not sent again), 1 skipped, 2 already listed.",
    );
  });
});

describe("batches", () => {
  const t0 = 1_700_000_000_000;

  it("says how long ago a batch was submitted", () => {
    expect(formatSince(t0, t0 + 30_000)).toBe("just now");
    expect(formatSince(t0, t0 + 12 * 60_000)).toBe("12 min ago");
    expect(formatSince(t0, t0 + 120 * 60_000)).toBe("2 h ago");
    expect(formatSince(t0, t0 + 185 * 60_000)).toBe("3 h 5 min ago");
    expect(formatSince(t0 + 5_000, t0)).toBe("just now");
  });

  it("lists a batch's state, size, age and reason", () => {
    const running = { name: "batches/abc", state: "running" as const, requests: 20, submitted_at: t0, last_polled_at: t0, error: null };
    expect(batchLine(running, t0 + 45 * 60_000)).toBe("Batch running · 20 photos · submitted 45 min ago");
    const submitting = { ...running, name: null, state: "submitting" as const, requests: 1, submitted_at: null };
    expect(batchLine(submitting, t0)).toBe("Batch submitting · 1 photo");
    const expired = { ...running, state: "expired" as const, error: "Gemini's batch expired; the photo is queued again." };
    expect(batchLine(expired, t0)).toBe("Batch expired · 20 photos · submitted just now · Gemini's batch expired; the photo is queued again.");
  });
});

describe("waitingText", () => {
  it("counts photos when each is its own product, and products with their photos otherwise", () => {
    expect(waitingText({ products: 1, photos: 1 })).toBe("1 waiting photo");
    expect(waitingText({ products: 3, photos: 3 })).toBe("3 waiting photos");
    // A product of two photos is one call: not "1 waiting photo".
    expect(waitingText({ products: 1, photos: 2 })).toBe("1 waiting product (2 photos)");
    expect(waitingText({ products: 4, photos: 9 })).toBe("4 waiting products (9 photos)");
  });
});

describe("queueControls", () => {
  const p = (status: ImportProgress["status"], queued = 0, preparing = 0): ImportProgress => ({
    ...progress(),
    status,
    counts: { ...progress().counts, queued, preparing },
  });

  it("offers Pause and an ETA only while calls are being sent", () => {
    expect(queueControls(p({ kind: "running" }, 3))).toMatchObject({ pause: true, eta: true, fix: null, waitingAtGate: false });
  });

  it("a spent budget: no Pause, no ETA, the photo at the gate waits, Settings fixes it", () => {
    const budget = p({ kind: "paused_budget", until_unix_ms: 1, message: "Today's Gemini budget ($0.001) is spent." }, 0, 1);
    const c = queueControls(budget);
    expect(c).toEqual({ pause: false, resume: false, fix: "open_settings", eta: false, waitingAtGate: true });
    expect(stateLabel("preparing", c)).toBe("Prepared, waiting");
    expect(stateLabel("preparing", queueControls(p({ kind: "running" }, 0, 1)))).toBe("Preparing");
  });

  it("a full disk: no Pause, no ETA, no Resume; the status says which disk and what to do", () => {
    const message = "The disk holding the catalog (/data) has 100 MB free, less than the 1.1 GB the import keeps free. Free some space: the import goes on by itself.";
    const disk = p({ kind: "paused_disk", free_bytes: 100_000_000, message }, 3, 1);
    expect(queueControls(disk)).toEqual({ pause: false, resume: false, fix: null, eta: false, waitingAtGate: true });
    expect(statusLine(disk)).toEqual({ text: `Paused: ${message}`, tone: "waiting" });
  });

  it("a team server away: the status says so and when it tries again; nothing to press", () => {
    const message = "Waiting for the team catalog's server (Connection refused). The import goes on by itself once it is back; the answers already paid for are written then.";
    const away = p({ kind: "waiting_server", since_unix_ms: Date.UTC(2026, 11, 7, 14, 2), next_try_unix_ms: Date.UTC(2026, 11, 7, 14, 2, 8), message }, 4, 2);
    expect(statusLine(away, "en-GB", "UTC")).toEqual({ text: `${message} Next try at 14:02:08.`, tone: "waiting" });
    expect(queueControls(away)).toEqual({ pause: false, resume: false, fix: null, eta: false, waitingAtGate: true });
  });

  it("an open breaker waits for Gemini status; a stop for the key for Settings and Resume", () => {
    expect(queueControls(p({ kind: "paused_breaker", until_unix_ms: null, message: "forced" }, 2))).toMatchObject({ pause: false, resume: false, fix: "open_status" });
    const noKey = p({ kind: "stopped", code: "gemini_auth", message: "No key" }, 2);
    expect(queueControls(noKey)).toMatchObject({ pause: false, resume: true, fix: "open_settings", eta: false });
    expect(queueControls(p({ kind: "stopped", code: "io", message: "disk" }, 2)).fix).toBeNull();
    expect(queueControls(p({ kind: "paused_by_user" }, 2))).toMatchObject({ pause: false, resume: true });
    expect(queueControls(p({ kind: "finished" }))).toMatchObject({ pause: false, resume: false });
  });
});
