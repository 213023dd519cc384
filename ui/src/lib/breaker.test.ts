import { describe, expect, it } from "vitest";
import type { BreakerEvent } from "../bindings/BreakerEvent";
import type { BreakerSnapshot } from "../bindings/BreakerSnapshot";
import {
  PROBE_DUE,
  badgeCountdown,
  badgeDetail,
  bucketBars,
  bulkheadSlots,
  clockTime,
  countdownText,
  describeEvent,
  elapsedText,
  formatDuration,
  formatRate,
  newestFirst,
  probesText,
  pushHistory,
  rateChart,
  recordsNothing,
  restoredText,
  stateClass,
  stateInfo,
  stateLabel,
  trimHistory,
  windowCells,
  windowText,
  type RatePoint,
} from "./breaker";

const T0 = Date.UTC(2026, 11, 2, 14, 3, 8);

function breaker(over: Partial<BreakerSnapshot> = {}): BreakerSnapshot {
  return {
    name: "gemini",
    state: "closed",
    state_since_ms: T0,
    failure_rate: -1,
    slow_call_rate: -1,
    buffered_calls: 3,
    failed_calls: 1,
    slow_calls: 0,
    slow_failed_calls: 0,
    successful_calls: 2,
    not_permitted_calls: 0,
    window_type: "count_based",
    window_size: 10,
    minimum_number_of_calls: 10,
    configured_window_type: "count_based",
    configured_window_size: 10,
    configured_minimum_number_of_calls: 10,
    restored_from_ms: null,
    calls: ["success", "failure", "success"],
    buckets: [],
    half_open: null,
    open: null,
    failure_rate_threshold: 50,
    slow_call_rate_threshold: 100,
    slow_call_duration_threshold_ms: 60_000,
    ...over,
  };
}

function event(kind: BreakerEvent["kind"]): BreakerEvent {
  return { breaker: "gemini", time_ms: T0, kind, duration_ms: null, message: null };
}

describe("states", () => {
  it("maps every state to its Resilience4j label and a color class", () => {
    expect(stateLabel("closed")).toBe("CLOSED");
    expect(stateLabel("half_open")).toBe("HALF_OPEN");
    expect(stateLabel("forced_open")).toBe("FORCED_OPEN");
    expect(stateLabel("metrics_only")).toBe("METRICS_ONLY");
    expect(stateClass("closed")).toBe("state-closed");
    expect(stateClass("open")).toBe("state-open");
    expect(stateClass("half_open")).toBe("state-half-open");
    expect(stateClass("disabled")).toBe("state-disabled");
    expect(stateClass("forced_open")).toBe("state-forced-open");
    expect(stateClass("metrics_only")).toBe("state-metrics-only");
    expect(stateInfo("open").meaning.length).toBeGreaterThan(10);
  });
});

describe("rates and durations", () => {
  it("shows −1 as the calls still needed", () => {
    expect(formatRate(-1, 3, 10)).toBe("n/a — 3 of 10 calls needed");
    expect(formatRate(-1, 0, 0)).toBe("n/a — calls are not recorded in this state");
    expect(formatRate(50, 10, 10)).toBe("50.0%");
    expect(formatRate(45.454544, 11, 10)).toBe("45.5%");
    expect(formatRate(0, 10, 10)).toBe("0.0%");
  });

  it("formats durations", () => {
    expect(formatDuration(850)).toBe("850 ms");
    expect(formatDuration(1250)).toBe("1.2 s");
    expect(formatDuration(3000)).toBe("3 s");
    expect(formatDuration(12_000)).toBe("12 s");
    expect(formatDuration(12_900)).toBe("12 s");
    expect(formatDuration(60_000)).toBe("1 min");
    expect(formatDuration(75_000)).toBe("1 min 15 s");
    expect(formatDuration(3_720_000)).toBe("1 h 2 min");
    expect(formatDuration(-5)).toBe("0 ms");
  });

  it("says how long a state has lasted", () => {
    expect(elapsedText(T0, T0 + 400)).toBe("just now");
    expect(elapsedText(T0, T0 + 12_700)).toBe("for 12 s");
    expect(elapsedText(T0, T0 + 130_000)).toBe("for 2 min 10 s");
  });
});

describe("OPEN countdown", () => {
  const at = Date.UTC(2026, 11, 2, 14, 3, 20);

  it("counts down to the probe in whole seconds, rounded up", () => {
    expect(clockTime(at, "en-GB", "UTC")).toBe("14:03:20");
    expect(countdownText(at, at - 12_000, "en-GB", "UTC")).toBe("next probe allowed at 14:03:20 — in 12 s");
    expect(countdownText(at, at - 11_200, "en-GB", "UTC")).toBe("next probe allowed at 14:03:20 — in 12 s");
    expect(countdownText(at, at - 90_000, "en-GB", "UTC")).toBe("next probe allowed at 14:03:20 — in 1 min 30 s");
  });

  it("says the probe is due once the wait is over", () => {
    expect(countdownText(at, at, "en-GB", "UTC")).toBe(PROBE_DUE);
    expect(countdownText(at, at + 5000)).toBe("probe due — the next call will test Gemini");
    expect(badgeCountdown(at, at - 12_000)).toBe("probe in 12 s");
    expect(badgeCountdown(at, at + 1)).toBe("probe due");
  });

  it("gives the badge a detail in OPEN and HALF_OPEN only", () => {
    const open = breaker({ state: "open", open: { opened_at_ms: at - 60_000, probe_allowed_at_ms: at } });
    expect(badgeDetail(open, at - 3000)).toBe("probe in 3 s");
    const half = breaker({ state: "half_open", half_open: { permits_used: 3, permits_permitted: 5 } });
    expect(badgeDetail(half, at)).toBe("3 of 5 probes");
    expect(badgeDetail(breaker(), at)).toBe("");
    expect(probesText(1, 1)).toBe("1 of 1 probe");
  });
});

describe("sliding window", () => {
  it("pads a count window with empty cells up to its size", () => {
    expect(windowCells(["success", "failure"], 5)).toEqual(["success", "failure", "empty", "empty", "empty"]);
    expect(windowCells([], 3)).toEqual(["empty", "empty", "empty"]);
    expect(windowCells(["success", "failure", "slow_success"], 2)).toEqual(["failure", "slow_success"]);
    expect(windowCells(["slow_failure"], 1)).toEqual(["slow_failure"]);
  });

  it("stacks a time window's buckets, padding missing seconds at the start", () => {
    const bars = bucketBars(
      [
        { calls: 4, failed: 2, slow: 1, slow_failed: 1 },
        { calls: 2, failed: 0, slow: 0, slow_failed: 0 },
      ],
      4,
      40,
      20,
    );
    expect(bars.count).toBe(4);
    expect(bars.max).toBe(4);
    const third = bars.rects.filter((r) => r.x >= 20 && r.x < 30);
    expect(third.map((r) => r.kind)).toEqual(["success", "slow_failure", "failure"]);
    expect(third.reduce((sum, r) => sum + r.height, 0)).toBeCloseTo(20);
    expect(third[0].y).toBeCloseTo(10);
    const fourth = bars.rects.filter((r) => r.x >= 30);
    expect(fourth).toHaveLength(1);
    expect(fourth[0].height).toBeCloseTo(10);
    expect(bars.rects.some((r) => r.x < 20)).toBe(false);
  });
});

describe("events", () => {
  it("describes each kind", () => {
    expect(describeEvent(event({ type: "state_transition", from: "closed", to: "open" }))).toEqual({
      type: "STATE_TRANSITION",
      text: "CLOSED → OPEN",
      tone: "bad",
    });
    expect(describeEvent(event({ type: "state_transition", from: "half_open", to: "closed" })).tone).toBe("ok");
    expect(describeEvent(event({ type: "error", slow: true })).text).toBe("slow call failed");
    expect(describeEvent(event({ type: "success", slow: false })).type).toBe("SUCCESS");
    expect(describeEvent(event({ type: "not_permitted" })).type).toBe("NOT_PERMITTED");
    expect(describeEvent(event({ type: "failure_rate_exceeded", rate: 60 })).text).toBe("failure rate 60.0% reached the threshold");
    expect(describeEvent(event({ type: "forced_open" })).type).toBe("FORCED_OPEN");
  });

  it("lists the newest first without touching the input", () => {
    const a = { ...event({ type: "reset" }), time_ms: 1 };
    const b = { ...event({ type: "disabled" }), time_ms: 2 };
    const input = [a, b];
    expect(newestFirst(input)).toEqual([b, a]);
    expect(input).toEqual([a, b]);
  });
});

describe("failure-rate history", () => {
  it("records −1 as a gap and keeps five minutes", () => {
    let h: RatePoint[] = [];
    h = pushHistory(h, breaker({ failure_rate: -1 }), T0);
    h = pushHistory(h, breaker({ failure_rate: 20 }), T0 + 1000);
    expect(h).toEqual([
      { t: T0, rate: null },
      { t: T0 + 1000, rate: 20 },
    ]);
    h = pushHistory(h, breaker({ failure_rate: 40 }), T0 + 5 * 60_000 + 500);
    expect(h).toEqual([
      { t: T0 + 500, rate: null },
      { t: T0 + 1000, rate: 20 },
      { t: T0 + 5 * 60_000 + 500, rate: 40 },
    ]);
    h = pushHistory(h, breaker({ failure_rate: 0 }), T0 + 20 * 60_000);
    expect(h).toEqual([
      { t: T0 + 15 * 60_000, rate: 40 },
      { t: T0 + 20 * 60_000, rate: 0 },
    ]);
  });

  it("trims old points but carries the last value to the left edge", () => {
    const h: RatePoint[] = [
      { t: 0, rate: 10 },
      { t: 1000, rate: 30 },
      { t: 9000, rate: 50 },
    ];
    expect(trimHistory(h, 10_000, 5000)).toEqual([
      { t: 5000, rate: 30 },
      { t: 9000, rate: 50 },
    ]);
    expect(trimHistory(h, 100_000, 5000)).toEqual([{ t: 95_000, rate: 50 }]);
    expect(trimHistory([], 100_000, 5000)).toEqual([]);
  });

  it("draws step lines with gaps and the threshold", () => {
    const h: RatePoint[] = [
      { t: 0, rate: 0 },
      { t: 25, rate: 50 },
      { t: 50, rate: null },
      { t: 75, rate: 100 },
    ];
    const chart = rateChart(h, 50, 100, 100, 10, 100);
    expect(chart.thresholdY).toBe(5);
    expect(chart.lines).toEqual(["0,10 25,10 25,5 50,5", "75,0 100,0"]);
    expect(rateChart([], 50, 100, 100, 10, 100).lines).toEqual([]);
  });
});

describe("bulkhead", () => {
  it("counts slots in use", () => {
    expect(bulkheadSlots(4, 1)).toEqual({ inUse: 3, max: 4, fraction: 0.75, text: "3 of 4 slots in use" });
    expect(bulkheadSlots(0, 0).fraction).toBe(0);
  });
});

describe("the configured window", () => {
  it("is named as configured, whatever the current state's window holds", () => {
    expect(windowText("count_based", 20)).toBe("20 calls (count-based)");
    expect(windowText("count_based", 1)).toBe("1 call (count-based)");
    expect(windowText("time_based", 60)).toBe("60 s (time-based)");
  });

  it("says that DISABLED and FORCED_OPEN record nothing", () => {
    expect(recordsNothing("forced_open")).toBe(true);
    expect(recordsNothing("disabled")).toBe(true);
    for (const state of ["closed", "open", "half_open", "metrics_only"] as const) expect(recordsNothing(state)).toBe(false);
  });
});

describe("a breaker restored from the last run", () => {
  it("says so, with when it was saved, and the timeline names the restore", () => {
    expect(restoredText(T0, "en-GB", "UTC")).toBe("Restored from the last run (saved 14:03:08)");
    expect(restoredText(null)).toBeNull();
    const view = describeEvent(event({ type: "restored", saved_at_ms: T0 }));
    expect(view.type).toBe("RESTORED");
    expect(view.text).toContain("started from the last run's state");
  });
});
