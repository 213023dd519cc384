// Pure logic behind the Gemini status panel and the breaker badge: labels, texts, window cells, chart
// geometry and the failure-rate history. Everything takes `now` (and locale / time zone for clock
// times) as arguments so the tests are deterministic; the components pass Date.now().
import type { BreakerEvent } from "../bindings/BreakerEvent";
import type { BreakerSnapshot } from "../bindings/BreakerSnapshot";
import type { BreakerState } from "../bindings/BreakerState";
import type { BucketSummary } from "../bindings/BucketSummary";
import type { RecordedCall } from "../bindings/RecordedCall";
import type { ResilienceSnapshot } from "../bindings/ResilienceSnapshot";
import type { SlidingWindowType } from "../bindings/SlidingWindowType";

// ---------------------------------------------------------------------------------------------
// States

export interface StateInfo {
  /** Resilience4j's name, e.g. "HALF_OPEN". */
  label: string;
  /** CSS class carrying the state's color, e.g. "state-half-open". */
  cls: string;
  /** One sentence on what the state means for Gemini calls. */
  meaning: string;
}

const STATES: Record<BreakerState, StateInfo> = {
  closed: {
    label: "CLOSED",
    cls: "state-closed",
    meaning: "Calls go through to Gemini; failures are being counted.",
  },
  open: {
    label: "OPEN",
    cls: "state-open",
    meaning: "Gemini kept failing, so calls are refused without being sent until the wait is over.",
  },
  half_open: {
    label: "HALF_OPEN",
    cls: "state-half-open",
    meaning: "A few probe calls are let through to decide whether Gemini has recovered.",
  },
  disabled: {
    label: "DISABLED",
    cls: "state-disabled",
    meaning: "The breaker is switched off: every call goes through and nothing is recorded.",
  },
  forced_open: {
    label: "FORCED_OPEN",
    cls: "state-forced-open",
    meaning: "Forced open by hand: every call is refused until the breaker is set back.",
  },
  metrics_only: {
    label: "METRICS_ONLY",
    cls: "state-metrics-only",
    meaning: "Every call goes through; failures are counted but the breaker never opens.",
  },
};

export function stateInfo(state: BreakerState): StateInfo {
  return STATES[state] ?? { label: String(state).toUpperCase(), cls: "state-unknown", meaning: "" };
}

export const stateLabel = (state: BreakerState): string => stateInfo(state).label;
export const stateClass = (state: BreakerState): string => stateInfo(state).cls;

// ---------------------------------------------------------------------------------------------
// Numbers and durations

/** A percentage as the actuator shows it, one decimal: 50 → "50.0%", 45.454544 → "45.5%". */
export function formatPercent(value: number): string {
  return `${(Math.round(value * 10) / 10).toFixed(1)}%`;
}

/**
 * failureRate / slowCallRate: −1 (fewer buffered calls than the minimum) becomes
 * "n/a — 3 of 10 calls needed". DISABLED and FORCED_OPEN keep no window (minimum 0): nothing is
 * recorded there, and saying "0 of 0 calls needed" would be nonsense.
 */
export function formatRate(rate: number, bufferedCalls: number, minimumCalls: number): string {
  if (rate < 0 && minimumCalls === 0) return "n/a — calls are not recorded in this state";
  if (rate < 0) return `n/a — ${bufferedCalls} of ${minimumCalls} calls needed`;
  return formatPercent(rate);
}

/** 850 → "850 ms", 1250 → "1.2 s", 12 000 → "12 s", 75 000 → "1 min 15 s", 3 720 000 → "1 h 2 min". */
export function formatDuration(ms: number): string {
  const value = Math.max(0, ms);
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 10_000 && value % 1000 !== 0) return `${(Math.floor(value / 100) / 10).toFixed(1)} s`;
  const seconds = Math.floor(value / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return seconds % 60 === 0 ? `${minutes} min` : `${minutes} min ${seconds % 60} s`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
}

/** Whole seconds until `at`, rounded up, never below 0. */
export function secondsUntil(at: number, now: number): number {
  return Math.max(0, Math.ceil((at - now) / 1000));
}

/** "14:03:20" (24-hour clock with seconds). */
export function clockTime(ms: number, locale?: string, timeZone?: string): string {
  return new Intl.DateTimeFormat(locale, {
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    hourCycle: "h23",
    timeZone,
  }).format(new Date(ms));
}

/** Coarse "in this state for" text: seconds under a minute, then minutes, then hours. */
export function elapsedText(sinceMs: number, now: number): string {
  const ms = Math.max(0, now - sinceMs);
  if (ms < 1000) return "just now";
  return `for ${formatDuration(Math.floor(ms / 1000) * 1000)}`;
}

// ---------------------------------------------------------------------------------------------
// OPEN countdown

/** Past probe_allowed_at_ms: the transition to HALF_OPEN is lazy, so the next call becomes the probe. */
export const PROBE_DUE = "probe due — the next call will test Gemini";

/** "next probe allowed at 14:03:20 — in 12 s", or PROBE_DUE once the wait is over. */
export function countdownText(probeAllowedAtMs: number, now: number, locale?: string, timeZone?: string): string {
  if (now >= probeAllowedAtMs) return PROBE_DUE;
  const wait = formatDuration(secondsUntil(probeAllowedAtMs, now) * 1000);
  return `next probe allowed at ${clockTime(probeAllowedAtMs, locale, timeZone)} — in ${wait}`;
}

/** The badge's short form: "probe in 12 s" / "probe due". */
export function badgeCountdown(probeAllowedAtMs: number, now: number): string {
  if (now >= probeAllowedAtMs) return "probe due";
  return `probe in ${formatDuration(secondsUntil(probeAllowedAtMs, now) * 1000)}`;
}

/** Text next to the badge's state, or "" when there is nothing to add. */
export function badgeDetail(breaker: BreakerSnapshot, now: number): string {
  if (breaker.state === "open" && breaker.open) return badgeCountdown(breaker.open.probe_allowed_at_ms, now);
  if (breaker.state === "half_open" && breaker.half_open) return probesText(breaker.half_open.permits_used, breaker.half_open.permits_permitted);
  return "";
}

/** DISABLED and FORCED_OPEN record no calls: their window holds nothing until the breaker is
 * set back to normal. */
export function recordsNothing(state: BreakerState): boolean {
  return state === "disabled" || state === "forced_open";
}

/** "20 calls (count-based)", "60 s (time-based)": a window as configured. */
export function windowText(type: SlidingWindowType, size: number): string {
  return type === "count_based" ? `${size} call${size === 1 ? "" : "s"} (count-based)` : `${size} s (time-based)`;
}

/** What the panel says of a breaker that started from the last run's state: "Restored from the
 * last run (saved 14:03:08)"; null for a breaker that started afresh or has changed state since. */
export function restoredText(restoredFromMs: number | null, locale?: string, timeZone?: string): string | null {
  return restoredFromMs === null ? null : `Restored from the last run (saved ${clockTime(restoredFromMs, locale, timeZone)})`;
}

/** "3 of 5 probes". */
export function probesText(used: number, permitted: number): string {
  return `${used} of ${permitted} probe${permitted === 1 ? "" : "s"}`;
}

// ---------------------------------------------------------------------------------------------
// Sliding window

export type CellKind = RecordedCall | "empty";

export const OUTCOME_LABEL: Record<CellKind, string> = {
  success: "success",
  failure: "failure",
  slow_success: "slow success",
  slow_failure: "slow failure",
  empty: "not yet recorded",
};

/** A count window's cells, oldest first, padded with "empty" up to the window size. */
export function windowCells(calls: readonly RecordedCall[], windowSize: number): CellKind[] {
  const size = Math.max(0, Math.floor(windowSize));
  const recorded = calls.length > size ? calls.slice(calls.length - size) : calls;
  const cells: CellKind[] = [...recorded];
  while (cells.length < size) cells.push("empty");
  return cells;
}

export interface BarRect {
  kind: RecordedCall;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface BucketBars {
  rects: BarRect[];
  /** The highest bucket's call count (the chart's full height). */
  max: number;
  /** Buckets drawn, oldest first (padded to the window size with empty seconds at the start). */
  count: number;
}

const EMPTY_BUCKET: BucketSummary = { calls: 0, failed: 0, slow: 0, slow_failed: 0 };

/**
 * A time window's one-second buckets as stacked bars in a `width`×`height` box: from the bottom
 * success, slow success, slow failure, failure. Buckets missing at the start (a window shorter than
 * its size) are empty seconds.
 */
export function bucketBars(buckets: readonly BucketSummary[], windowSize: number, width: number, height: number): BucketBars {
  const size = Math.max(buckets.length, Math.floor(windowSize), 1);
  const padded: BucketSummary[] = [...Array<BucketSummary>(size - buckets.length).fill(EMPTY_BUCKET), ...buckets];
  const max = Math.max(1, ...padded.map((b) => b.calls));
  const slot = width / size;
  const gap = slot > 4 ? 1 : 0;
  const rects: BarRect[] = [];
  padded.forEach((b, i) => {
    const parts: [RecordedCall, number][] = [
      ["success", Math.max(0, b.calls - b.failed - b.slow + b.slow_failed)],
      ["slow_success", Math.max(0, b.slow - b.slow_failed)],
      ["slow_failure", b.slow_failed],
      ["failure", Math.max(0, b.failed - b.slow_failed)],
    ];
    let bottom = height;
    for (const [kind, n] of parts) {
      if (n <= 0) continue;
      const h = (n / max) * height;
      bottom -= h;
      rects.push({ kind, x: i * slot + gap / 2, y: bottom, width: Math.max(slot - gap, 0.5), height: h });
    }
  });
  return { rects, max, count: size };
}

// ---------------------------------------------------------------------------------------------
// Events

export type EventTone = "ok" | "bad" | "warn" | "info";

export interface EventView {
  /** Resilience4j's CircuitBreakerEvent.Type, e.g. "STATE_TRANSITION". */
  type: string;
  /** What happened, in words: "CLOSED → OPEN", "slow call", "failure rate 55.0% ≥ threshold". */
  text: string;
  tone: EventTone;
}

export function describeEvent(event: BreakerEvent): EventView {
  const kind = event.kind;
  switch (kind.type) {
    case "success":
      return { type: "SUCCESS", text: kind.slow ? "slow call succeeded" : "call succeeded", tone: kind.slow ? "warn" : "ok" };
    case "error":
      return { type: "ERROR", text: kind.slow ? "slow call failed" : "call failed", tone: "bad" };
    case "ignored_error":
      return { type: "IGNORED_ERROR", text: "call failed, not counted", tone: "info" };
    case "not_permitted":
      return { type: "NOT_PERMITTED", text: "call refused by the breaker", tone: "bad" };
    case "state_transition":
      return {
        type: "STATE_TRANSITION",
        text: `${stateLabel(kind.from)} → ${stateLabel(kind.to)}`,
        tone: kind.to === "closed" ? "ok" : kind.to === "open" || kind.to === "forced_open" ? "bad" : "warn",
      };
    case "reset":
      return { type: "RESET", text: "breaker reset, metrics cleared", tone: "info" };
    case "failure_rate_exceeded":
      return { type: "FAILURE_RATE_EXCEEDED", text: `failure rate ${formatPercent(kind.rate)} reached the threshold`, tone: "bad" };
    case "slow_call_rate_exceeded":
      return { type: "SLOW_CALL_RATE_EXCEEDED", text: `slow-call rate ${formatPercent(kind.rate)} reached the threshold`, tone: "bad" };
    case "forced_open":
      return { type: "FORCED_OPEN", text: "forced open by hand", tone: "bad" };
    case "disabled":
      return { type: "DISABLED", text: "breaker disabled", tone: "info" };
    case "restored":
      return { type: "RESTORED", text: `started from the last run's state (saved ${clockTime(kind.saved_at_ms)})`, tone: "info" };
    default:
      return { type: String((kind as { type?: unknown }).type ?? "UNKNOWN").toUpperCase(), text: "", tone: "info" };
  }
}

/** The timeline's order: newest first. */
export function newestFirst(events: readonly BreakerEvent[]): BreakerEvent[] {
  return [...events].reverse();
}

// ---------------------------------------------------------------------------------------------
// Failure-rate history and chart

export interface RatePoint {
  /** When the snapshot was received, unix ms. */
  t: number;
  /** Failure rate in percent, or null while it is not computed yet (−1). */
  rate: number | null;
}

export const HISTORY_MS = 5 * 60_000;
/** Snapshots arrive at most ~10 per second: 5 minutes of them with room to spare. */
const HISTORY_MAX_POINTS = 4000;

/**
 * Appends the snapshot's failure rate at `now` and drops points older than `spanMs`. The newest
 * point before the cut-off is kept (moved to the cut-off) so the line starts at the chart's left edge.
 */
export function pushHistory(
  history: readonly RatePoint[],
  snapshot: ResilienceSnapshot | BreakerSnapshot,
  now: number,
  spanMs: number = HISTORY_MS,
): RatePoint[] {
  const rate = "breaker" in snapshot ? snapshot.breaker.failure_rate : snapshot.failure_rate;
  const point: RatePoint = { t: now, rate: Number.isFinite(rate) && rate >= 0 ? rate : null };
  const last = history[history.length - 1];
  const base = last && last.t > now ? history.filter((p) => p.t <= now) : history;
  return trimHistory([...base, point], now, spanMs);
}

export function trimHistory(history: readonly RatePoint[], now: number, spanMs: number = HISTORY_MS): RatePoint[] {
  const cutoff = now - spanMs;
  let first = history.findIndex((p) => p.t >= cutoff);
  if (first < 0) first = history.length;
  const kept = history.slice(first);
  const before = first > 0 ? history[first - 1] : undefined;
  if (before && (kept.length === 0 || kept[0].t > cutoff)) kept.unshift({ t: cutoff, rate: before.rate });
  return kept.length > HISTORY_MAX_POINTS ? kept.slice(kept.length - HISTORY_MAX_POINTS) : kept;
}

export interface RateChart {
  /** One SVG `points` string per unbroken run of known rates (−1 draws a gap). */
  lines: string[];
  /** The threshold's y coordinate. */
  thresholdY: number;
}

const round = (n: number) => Math.round(n * 10) / 10;

/**
 * The history as step lines in a `width`×`height` box (0 % at the bottom, 100 % at the top), the x
 * axis spanning `spanMs` up to `now`. A rate holds until the next snapshot, and the last one up to now.
 */
export function rateChart(
  history: readonly RatePoint[],
  threshold: number,
  now: number,
  width: number,
  height: number,
  spanMs: number = HISTORY_MS,
): RateChart {
  const start = now - spanMs;
  const x = (t: number) => round(((Math.min(Math.max(t, start), now) - start) / spanMs) * width);
  const y = (rate: number) => round(height - (Math.min(Math.max(rate, 0), 100) / 100) * height);
  const lines: string[] = [];
  let run: string[] = [];
  const flush = () => {
    if (run.length > 1) lines.push(run.join(" "));
    run = [];
  };
  history.forEach((p, i) => {
    if (p.t > now) return;
    const next = history[i + 1];
    const end = next && next.t <= now ? next.t : now;
    if (p.rate === null) {
      flush();
      return;
    }
    const py = y(p.rate);
    run.push(`${x(p.t)},${py}`, `${x(end)},${py}`);
  });
  flush();
  return { lines, thresholdY: y(threshold) };
}

// ---------------------------------------------------------------------------------------------
// Bulkhead

export interface SlotsMeter {
  inUse: number;
  max: number;
  /** Fraction in [0, 1]. */
  fraction: number;
  text: string;
}

export function bulkheadSlots(max: number, available: number): SlotsMeter {
  const inUse = Math.max(0, Math.min(max, max - available));
  return { inUse, max, fraction: max > 0 ? inUse / max : 0, text: `${inUse} of ${max} slot${max === 1 ? "" : "s"} in use` };
}
