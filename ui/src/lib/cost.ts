// The cost meter's pure logic: money as text, totals per day and per month, and today's line.
// Amounts arrive as dollars (the Rust side sums exact nanodollars; these only display).
import type { CostTotal } from "../bindings/CostTotal";
import type { UsageDay } from "../bindings/UsageDay";
import type { UsageReport } from "../bindings/UsageReport";
import { plural } from "./format";

/** "$0.000125", "$1.25": at least two decimals, at most six. "price unknown" for null. */
export function formatUsd(usd: number | null | undefined): string {
  if (usd === null || usd === undefined || !Number.isFinite(usd)) return "price unknown";
  const micros = Math.round(usd * 1e6);
  const whole = Math.floor(micros / 1e6);
  let frac = String(micros % 1e6).padStart(6, "0");
  while (frac.length > 2 && frac.endsWith("0")) frac = frac.slice(0, -1);
  return `$${whole}.${frac}`;
}

/** A total's cost, saying how many calls had no price. */
export function formatTotal(total: CostTotal): string {
  const priced = total.calls - total.unpriced_calls;
  if (total.unpriced_calls === 0) return formatUsd(total.usd);
  if (priced === 0 || total.usd === 0) return "price unknown";
  return `${formatUsd(total.usd)} + ${total.unpriced_calls} at an unknown price`;
}

/** What today's spend is made of, said after its amount: "for 3 calls, 1200 input / 1136 output
 * tokens of a $0.001 daily budget." */
export function todayDetail(report: Pick<UsageReport, "spent_today" | "daily_budget_usd">): string {
  const t = report.spent_today;
  const budget = report.daily_budget_usd === null ? "" : ` of a ${formatUsd(report.daily_budget_usd)} daily budget`;
  return `for ${plural(t.calls, "call")}, ${t.input_tokens} input / ${t.output_tokens} output tokens${budget}.`;
}

/**
 * Said when today's spend has already reached the daily budget: the queue holds every new call
 * (today's spend plus the call's estimate would pass it) until the next local day, or until the
 * budget is raised. Compared in nanodollars, as the backend sums them.
 */
export function budgetWarning(report: Pick<UsageReport, "spent_today" | "daily_budget_usd">): string | null {
  if (report.daily_budget_usd === null) return null;
  const spent = Math.round(report.spent_today.usd * 1e9);
  const budget = Math.round(report.daily_budget_usd * 1e9);
  if (spent < budget) return null;
  const where = spent > budget ? "is already over this budget" : "has already reached this budget";
  return `Today's spend (${formatUsd(report.spent_today.usd)}) ${where}: new calls wait until tomorrow or until you raise it.`;
}

export function emptyTotal(): CostTotal {
  return { calls: 0, input_tokens: 0, cached_tokens: 0, output_tokens: 0, usd: 0, unpriced_calls: 0 };
}

export function addTotals(a: CostTotal, b: CostTotal): CostTotal {
  return {
    calls: a.calls + b.calls,
    input_tokens: a.input_tokens + b.input_tokens,
    cached_tokens: a.cached_tokens + b.cached_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    usd: a.usd + b.usd,
    unpriced_calls: a.unpriced_calls + b.unpriced_calls,
  };
}

export interface Bucket {
  /** "2026-12-03" for a day, "2026-12" for a month. */
  label: string;
  total: CostTotal;
}

/** The rows (per day and model) summed per day or per month, oldest first. */
export function bucketed(days: UsageDay[], by: "day" | "month"): Bucket[] {
  const map = new Map<string, CostTotal>();
  for (const row of days) {
    const label = by === "day" ? row.day : row.day.slice(0, 7);
    map.set(label, addTotals(map.get(label) ?? emptyTotal(), row.total));
  }
  return [...map.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([label, total]) => ({ label, total }));
}
