// Display formatting. Every function takes the locale (and time zone) as optional arguments so the
// tests are deterministic; the app passes nothing and gets the system's.
import type { NetContent } from "../bindings/NetContent";
import type { Price } from "../bindings/Price";
import type { Usage } from "../bindings/Usage";

export function formatPrice(price: Price | null | undefined, locale?: string): string {
  if (!price) return "";
  const currency = price.currency.trim().toUpperCase();
  try {
    return new Intl.NumberFormat(locale, { style: "currency", currency }).format(price.amount);
  } catch {
    // Not an ISO 4217 code: show it as typed.
    const amount = new Intl.NumberFormat(locale, { minimumFractionDigits: 2, maximumFractionDigits: 2 }).format(
      price.amount,
    );
    return currency ? `${amount} ${currency}` : amount;
  }
}

export function formatNumber(value: number, locale?: string): string {
  return new Intl.NumberFormat(locale, { maximumFractionDigits: 3 }).format(value);
}

export function formatNetContent(content: NetContent | null | undefined, locale?: string): string {
  if (!content) return "";
  return `${formatNumber(content.value, locale)} ${content.unit}`.trim();
}

/** "Today, 14:05" / "Yesterday, 09:12" / "2 Dec 2026, 14:05". */
export function formatTimestamp(ms: number, now: number = Date.now(), locale?: string, timeZone?: string): string {
  const date = new Date(ms);
  const time = new Intl.DateTimeFormat(locale, { hour: "2-digit", minute: "2-digit", timeZone }).format(date);
  const day = (d: Date) => new Intl.DateTimeFormat("en-CA", { timeZone, dateStyle: "short" }).format(d);
  if (day(date) === day(new Date(now))) return `Today, ${time}`;
  if (day(date) === day(new Date(now - 86_400_000))) return `Yesterday, ${time}`;
  const full = new Intl.DateTimeFormat(locale, { day: "numeric", month: "short", year: "numeric", timeZone }).format(
    date,
  );
  return `${full}, ${time}`;
}

export function formatLatency(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

export function formatUsage(usage: Usage, locale?: string): string {
  const n = (v: number) => new Intl.NumberFormat(locale).format(v);
  const parts = [`${n(usage.prompt_tokens)} in`, `${n(usage.output_tokens)} out`];
  if (usage.thoughts_tokens > 0) parts.push(`${n(usage.thoughts_tokens)} thinking`);
  return `${n(usage.total_tokens)} tokens (${parts.join(", ")})`;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1_000_000) return `${(bytes / 1000).toFixed(0)} kB`;
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

/** Pretty-prints JSON text; text that is not JSON is returned unchanged. */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** The last path component, for both / and \ separators. */
export function baseName(path: string): string {
  const parts = path.split(/[\\/]/).filter((p) => p !== "");
  return parts[parts.length - 1] ?? path;
}

export function plural(count: number, one: string, many: string = one + "s"): string {
  return `${count} ${count === 1 ? one : many}`;
}
