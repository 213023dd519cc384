// The cost chart's geometry: a slot per day (the 31 days up to today) or per month, a bar for
// each slot with spend, a money scale on the y axis and the days or months under the x axis. Pure,
// in the SVG's own units, so UsagePanel only draws what this returns.
import { formatUsd, type Bucket } from "./cost";

export interface ChartBar {
  label: string;
  usd: number;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface ChartTick {
  /** Where the tick's line is drawn. */
  at: number;
  label: string;
}

export interface UsageChart {
  width: number;
  height: number;
  /** The plotting area: the y axis runs along `left`, the x axis along `bottom`. */
  plot: { left: number; top: number; right: number; bottom: number };
  bars: ChartBar[];
  /** The money scale, from $0 up. */
  yTicks: ChartTick[];
  /** Some of the slots, named ("3 Dec", "Dec 2026"); `at` is the slot's middle. */
  xLabels: ChartTick[];
}

const SIZE = { width: 600, height: 160, left: 64, right: 20, top: 12, bottom: 22 };
/** The days a daily chart shows, today included. */
export const CHART_DAYS = 31;
const MAX_MONTHS = 12;
/** A bar never grows wider than this, however few slots there are. */
const MAX_BAR_WIDTH = 28;
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** "2026-12-03" → "3 Dec"; "2026-12" → "Dec 2026". */
function slotName(label: string): string {
  const [year, month, day] = label.split("-");
  const name = MONTHS[Number(month) - 1] ?? month;
  return day === undefined ? `${name} ${year}` : `${Number(day)} ${name}`;
}

/**
 * The slots a chart spans, oldest first: the 31 days up to `today` ("YYYY-MM-DD", local), or the
 * months from the first with spend (at most 12 back) up to this month. Days without calls are
 * slots too, so a day's bar stands where that day is.
 */
export function chartSlots(buckets: Bucket[], by: "day" | "month", today: string): string[] {
  const [y, m, d] = today.split("-").map(Number);
  if (by === "day") {
    return Array.from({ length: CHART_DAYS }, (_, i) =>
      new Date(Date.UTC(y, m - 1, d - (CHART_DAYS - 1 - i))).toISOString().slice(0, 10),
    );
  }
  const thisMonth = today.slice(0, 7);
  const first = buckets.length > 0 && buckets[0].label < thisMonth ? buckets[0].label : thisMonth;
  const [fy, fm] = first.split("-").map(Number);
  const count = Math.min(MAX_MONTHS, (y - fy) * 12 + (m - fm) + 1);
  return Array.from({ length: count }, (_, i) => new Date(Date.UTC(y, m - count + i, 1)).toISOString().slice(0, 7));
}

/** A round top for the scale and its step (1, 2, 2.5 or 5 × a power of ten, at least a
 * micro-dollar, the finest amount shown); 0 for a chart without spend. */
export function moneyScale(max: number, ticks = 4): { top: number; step: number } {
  if (!(max > 0)) return { top: 0, step: 0 };
  const raw = max / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(1e-6, [1, 2, 2.5, 5, 10].map((f) => f * power).find((s) => s >= raw * (1 - 1e-9)) ?? 10 * power);
  return { top: Math.ceil(max / step - 1e-9) * step, step };
}

export function usageChart(buckets: Bucket[], by: "day" | "month", today: string): UsageChart {
  const { width, height } = SIZE;
  const plot = { left: SIZE.left, top: SIZE.top, right: width - SIZE.right, bottom: height - SIZE.bottom };
  const slots = chartSlots(buckets, by, today);
  const spend = new Map(buckets.map((b) => [b.label, b.total.usd]));
  const { top, step } = moneyScale(Math.max(0, ...slots.map((s) => spend.get(s) ?? 0)));
  const slotWidth = (plot.right - plot.left) / slots.length;
  const barWidth = Math.min(MAX_BAR_WIDTH, Math.max(1, slotWidth * 0.7));
  const middle = (i: number) => plot.left + (i + 0.5) * slotWidth;
  const scaleY = (usd: number) => (top > 0 ? (usd / top) * (plot.bottom - plot.top) : 0);

  const bars = slots.flatMap((label, i) => {
    const usd = spend.get(label) ?? 0;
    if (!(usd > 0)) return [];
    const h = scaleY(usd);
    return [{ label, usd, x: middle(i) - barWidth / 2, y: plot.bottom - h, width: barWidth, height: h }];
  });
  const yTicks =
    top > 0
      ? Array.from({ length: Math.round(top / step) + 1 }, (_, i) => ({ at: plot.bottom - scaleY(i * step), label: formatUsd(i * step) }))
      : [{ at: plot.bottom, label: formatUsd(0) }];
  // Days: every 7th, counted back from today so today is named; months: about six names at most.
  const every = by === "day" ? 7 : Math.ceil(slots.length / 6);
  const xLabels = slots.flatMap((label, i) =>
    (slots.length - 1 - i) % every === 0 ? [{ at: middle(i), label: slotName(label) }] : [],
  );
  return { width, height, plot, bars, yTicks, xLabels };
}
