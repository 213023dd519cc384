import { describe, expect, it } from "vitest";
import type { UsageDay } from "../bindings/UsageDay";
import { bars, bucketed, emptyTotal, formatTotal, formatUsd } from "./cost";

const day = (d: string, model: string, usd: number, calls = 1, unpriced = 0): UsageDay => ({
  day: d,
  model,
  total: { ...emptyTotal(), calls, usd, input_tokens: 1000 * calls, unpriced_calls: unpriced },
});

describe("cost", () => {
  it("formats dollars like the CLI", () => {
    expect(formatUsd(0.000125)).toBe("$0.000125");
    expect(formatUsd(1.25)).toBe("$1.25");
    expect(formatUsd(0)).toBe("$0.00");
    expect(formatUsd(null)).toBe("price unknown");
  });

  it("says when calls had no price", () => {
    expect(formatTotal({ ...emptyTotal(), calls: 2, usd: 0.5 })).toBe("$0.50");
    expect(formatTotal({ ...emptyTotal(), calls: 2, unpriced_calls: 2 })).toBe("price unknown");
    expect(formatTotal({ ...emptyTotal(), calls: 3, usd: 0.5, unpriced_calls: 1 })).toBe(
      "$0.50 + 1 at an unknown price",
    );
  });

  it("sums models per day and days per month, oldest first", () => {
    const rows = [
      day("2026-11-30", "a", 0.25),
      day("2026-12-01", "a", 0.5),
      day("2026-12-01", "b", 0.25, 2),
      day("2026-12-03", "a", 1),
    ];
    const days = bucketed(rows, "day");
    expect(days.map((b) => [b.label, b.total.usd, b.total.calls])).toEqual([
      ["2026-11-30", 0.25, 1],
      ["2026-12-01", 0.75, 3],
      ["2026-12-03", 1, 1],
    ]);
    expect(bucketed(rows, "month").map((b) => [b.label, b.total.usd])).toEqual([
      ["2026-11", 0.25],
      ["2026-12", 1.75],
    ]);
    expect(bars(days).map((b) => b.height)).toEqual([0.25, 0.75, 1]);
    expect(bars([{ label: "x", total: emptyTotal() }])[0].height).toBe(0);
  });
});
