import { describe, expect, it } from "vitest";
import type { UsageDay } from "../bindings/UsageDay";
import { budgetWarning, bucketed, emptyTotal, formatTotal, formatUsd, todayDetail } from "./cost";

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
  });

  it("says what today's spend is made of, with a space before the budget", () => {
    const spent_today = { ...emptyTotal(), calls: 3, input_tokens: 1200, output_tokens: 1136, usd: 0.002814 };
    expect(todayDetail({ spent_today, daily_budget_usd: 0.5 })).toBe(
      "for 3 calls, 1200 input / 1136 output tokens of a $0.50 daily budget.",
    );
    expect(todayDetail({ spent_today: { ...spent_today, calls: 1 }, daily_budget_usd: null })).toBe(
      "for 1 call, 1200 input / 1136 output tokens.",
    );
  });

  it("warns when the budget set is already reached or passed", () => {
    const spent = (usd: number) => ({ ...emptyTotal(), calls: 2, usd });
    expect(budgetWarning({ spent_today: spent(0.002814), daily_budget_usd: 0.001 })).toBe(
      "Today's spend ($0.002814) is already over this budget: new calls wait until tomorrow or until you raise it.",
    );
    expect(budgetWarning({ spent_today: spent(0.1 + 0.2), daily_budget_usd: 0.3 })).toBe(
      "Today's spend ($0.30) has already reached this budget: new calls wait until tomorrow or until you raise it.",
    );
    expect(budgetWarning({ spent_today: spent(0.0009), daily_budget_usd: 0.001 })).toBeNull();
    expect(budgetWarning({ spent_today: spent(5), daily_budget_usd: null })).toBeNull();
  });
});
