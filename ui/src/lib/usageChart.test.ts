import { describe, expect, it } from "vitest";
import type { UsageDay } from "../bindings/UsageDay";
import { bucketed, emptyTotal } from "./cost";
import { CHART_DAYS, chartSlots, moneyScale, usageChart } from "./usageChart";

const day = (d: string, usd: number): UsageDay => ({ day: d, model: "m", total: { ...emptyTotal(), calls: 1, usd } });

describe("the usage chart", () => {
  it("draws one day of spend as one bar of a day's width, not a block across the chart", () => {
    const chart = usageChart(bucketed([day("2026-12-03", 0.002814)], "day"), "day", "2026-12-03");
    expect(chart.bars).toHaveLength(1);
    const [bar] = chart.bars;
    const plotWidth = chart.plot.right - chart.plot.left;
    expect(bar.width).toBeLessThanOrEqual(plotWidth / CHART_DAYS);
    expect(bar.width).toBeGreaterThan(4);
    // Today is the last slot: the bar stands at the right end, under the top of the scale.
    expect(bar.x + bar.width).toBeGreaterThan(chart.plot.right - plotWidth / CHART_DAYS);
    expect(bar.x + bar.width).toBeLessThanOrEqual(chart.plot.right);
    expect(bar.y + bar.height).toBeCloseTo(chart.plot.bottom);
    expect(bar.y).toBeGreaterThanOrEqual(chart.plot.top);
  });

  it("gives the y axis a money scale from $0 to a round amount above the most spent", () => {
    const chart = usageChart(bucketed([day("2026-12-03", 0.002814)], "day"), "day", "2026-12-03");
    expect(chart.yTicks.map((t) => t.label)).toEqual(["$0.00", "$0.001", "$0.002", "$0.003"]);
    expect(chart.yTicks[0].at).toBe(chart.plot.bottom);
    expect(chart.yTicks[3].at).toBeCloseTo(chart.plot.top);
    // The bar's top is where its amount is on the scale.
    expect(chart.bars[0].y).toBeCloseTo(chart.plot.bottom - (0.002814 / 0.003) * (chart.plot.bottom - chart.plot.top));
    expect(moneyScale(1.7)).toEqual({ top: 2, step: 0.5 });
    expect(moneyScale(10)).toEqual({ top: 10, step: 2.5 });
    expect(moneyScale(0.0000002)).toEqual({ top: 0.000001, step: 0.000001 });
    expect(moneyScale(0)).toEqual({ top: 0, step: 0 });
  });

  it("names the days under the x axis, today included, each under its own slot", () => {
    const rows = [day("2026-11-30", 0.25), day("2026-12-01", 0.5), day("2026-12-03", 1)];
    const chart = usageChart(bucketed(rows, "day"), "day", "2026-12-03");
    expect(chart.xLabels.map((l) => l.label)).toEqual(["5 Nov", "12 Nov", "19 Nov", "26 Nov", "3 Dec"]);
    expect(chart.bars.map((b) => b.label)).toEqual(["2026-11-30", "2026-12-01", "2026-12-03"]);
    // Each bar stands in its day's slot: 30 Nov four days after 26 Nov; 2 Dec (no calls) has no
    // bar, so 1 and 3 Dec stand two slots apart.
    const under = (label: string) => chart.xLabels.find((l) => l.label === label)!.at;
    const slot = (under("3 Dec") - under("26 Nov")) / 7;
    const middle = (b: { x: number; width: number }) => b.x + b.width / 2;
    expect(middle(chart.bars[0])).toBeCloseTo(under("26 Nov") + 4 * slot);
    expect(middle(chart.bars[1])).toBeCloseTo(under("26 Nov") + 5 * slot);
    expect(middle(chart.bars[2])).toBeCloseTo(under("3 Dec"));
  });

  it("spans the 31 days up to today, across months and years", () => {
    const slots = chartSlots([], "day", "2027-01-02");
    expect(slots).toHaveLength(31);
    expect(slots[0]).toBe("2026-12-03");
    expect(slots.at(-1)).toBe("2027-01-02");
  });

  it("spans the months from the first with spend to this month", () => {
    const buckets = bucketed([day("2026-11-30", 0.25), day("2027-01-02", 1)], "month");
    expect(chartSlots(buckets, "month", "2027-01-02")).toEqual(["2026-11", "2026-12", "2027-01"]);
    expect(chartSlots([], "month", "2027-01-02")).toEqual(["2027-01"]);
    const chart = usageChart(buckets, "month", "2027-01-02");
    expect(chart.xLabels.map((l) => l.label)).toEqual(["Nov 2026", "Dec 2026", "Jan 2027"]);
    expect(chart.bars.map((b) => b.width)).toEqual([28, 28]);
  });

  it("draws no bar and a scale of $0 without spend", () => {
    const chart = usageChart(bucketed([day("2026-12-03", 0)], "day"), "day", "2026-12-03");
    expect(chart.bars).toEqual([]);
    expect(chart.yTicks.map((t) => t.label)).toEqual(["$0.00"]);
  });
});
