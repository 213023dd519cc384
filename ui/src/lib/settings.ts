// The Settings form edits friendly units (MB, megapixels); the backend takes bytes and pixels.
import type { ApiKeyChange } from "../bindings/ApiKeyChange";
import type { AppStatus } from "../bindings/AppStatus";
import type { MediaResolution } from "../bindings/MediaResolution";
import type { PricingSettings } from "../bindings/PricingSettings";
import type { Settings } from "../bindings/Settings";
import type { SettingsInput } from "../bindings/SettingsInput";
import type { SlidingWindowType } from "../bindings/SlidingWindowType";
import type { Thinking } from "../bindings/Thinking";
import type { UserPrice } from "../bindings/UserPrice";
import { formatUsd } from "./cost";
import { parseDecimal } from "./form";

/** One `[pricing."model"]` row as the form edits it: dollars per million tokens, as text. */
export interface PriceRowForm {
  model: string;
  input: string;
  output: string;
  /** Empty: the input price. */
  cached: string;
  batchDiscount: string;
}

export interface SettingsForm {
  apiKey: string;
  /** Keep a new key in the config file (plain text) instead of the OS keyring: an explicit choice. */
  keyInConfigFile: boolean;
  baseUrl: string;
  model: string;
  timeout: string;
  connectTimeout: string;
  readTimeout: string;
  thinking: Thinking;
  maxOutputTokens: string;
  /** Empty: the default (0.2, or the model's own on Gemini 3). */
  temperature: string;
  mediaResolution: MediaResolution;
  prices: PriceRowForm[];
  maxLongEdge: string;
  jpegQuality: string;
  maxFileMb: string;
  maxMegapixels: string;
  // Resilience: numbers stay text until Save parses them, like the image fields.
  breakerWindowType: SlidingWindowType;
  breakerWindowSize: string;
  breakerMinimumCalls: string;
  breakerFailureRate: string;
  breakerSlowCallRate: string;
  breakerSlowCallDuration: string;
  breakerWaitInOpen: string;
  breakerHalfOpenCalls: string;
  breakerAutoHalfOpen: boolean;
  breakerRemember: boolean;
  breakerMaxWaitInHalfOpen: string;
  bulkheadMaxConcurrent: string;
  bulkheadMaxWait: string;
  timeLimiterTimeout: string;
  retryMaxAttempts: string;
  retryWaitDuration: string;
  retryMaxWait: string;
  rateLimiterEnabled: boolean;
  rateLimiterLimit: string;
  rateLimiterRefreshPeriod: string;
  /** "Serve the HTTP API while the window is open" (`[server] with_window`). */
  httpApiWithWindow: boolean;
  /** `[server] listen`: address and port. */
  httpApiListen: string;
}

export type SettingsField = Exclude<keyof SettingsForm, "keyInConfigFile" | "httpApiWithWindow">;

function trimNumber(n: number): string {
  return String(Math.round(n * 100) / 100);
}

export function settingsToForm(s: Settings): SettingsForm {
  const r = s.resilience;
  const cb = r.circuit_breaker;
  return {
    apiKey: "",
    keyInConfigFile: s.api_key.source === "config_file",
    baseUrl: s.gemini.base_url,
    model: s.gemini.model,
    timeout: s.gemini.timeout,
    connectTimeout: s.gemini.connect_timeout,
    readTimeout: s.gemini.read_timeout,
    thinking: s.gemini.thinking,
    maxOutputTokens: String(s.gemini.max_output_tokens),
    temperature: s.gemini.temperature === null ? "" : String(s.gemini.temperature),
    mediaResolution: s.gemini.media_resolution,
    prices: s.pricing.rows.map(priceRowToForm),
    maxLongEdge: String(s.image.max_long_edge),
    jpegQuality: String(s.image.jpeg_quality),
    maxFileMb: trimNumber(s.image.max_file_bytes / 1_000_000),
    maxMegapixels: trimNumber(s.image.max_pixels / 1_000_000),
    breakerWindowType: cb.sliding_window_type,
    breakerWindowSize: String(cb.sliding_window_size),
    breakerMinimumCalls: String(cb.minimum_number_of_calls),
    breakerFailureRate: String(cb.failure_rate_threshold),
    breakerSlowCallRate: String(cb.slow_call_rate_threshold),
    breakerSlowCallDuration: cb.slow_call_duration_threshold,
    breakerWaitInOpen: cb.wait_duration_in_open_state,
    breakerHalfOpenCalls: String(cb.permitted_number_of_calls_in_half_open_state),
    breakerAutoHalfOpen: cb.automatic_transition_from_open_to_half_open_enabled,
    breakerRemember: cb.remember_across_restarts,
    breakerMaxWaitInHalfOpen: cb.max_wait_duration_in_half_open_state,
    bulkheadMaxConcurrent: String(r.bulkhead.max_concurrent_calls),
    bulkheadMaxWait: r.bulkhead.max_wait_duration,
    timeLimiterTimeout: r.time_limiter.timeout_duration,
    retryMaxAttempts: String(r.retry.max_attempts),
    retryWaitDuration: r.retry.wait_duration,
    retryMaxWait: r.retry.max_wait,
    rateLimiterEnabled: r.rate_limiter.enabled,
    rateLimiterLimit: String(r.rate_limiter.limit_for_period),
    rateLimiterRefreshPeriod: r.rate_limiter.limit_refresh_period,
    httpApiWithWindow: s.http_api.with_window,
    httpApiListen: s.http_api.listen,
  };
}

export type FormErrors = Partial<Record<SettingsField, string>>;

function integer(text: string, min: number, max: number, errors: FormErrors, field: SettingsField, what: string): number {
  const n = parseDecimal(text);
  if (n === null || Number.isNaN(n) || !Number.isInteger(n) || n < min || n > max) {
    errors[field] = `${what} must be a whole number from ${min} to ${max}`;
    return 0;
  }
  return n;
}

function positive(text: string, errors: FormErrors, field: SettingsField, what: string): number {
  const n = parseDecimal(text);
  if (n === null || Number.isNaN(n) || n <= 0) {
    errors[field] = `${what} must be a number above 0`;
    return 0;
  }
  return n;
}

/** The backend's counts are u32; 0 is refused for every one the form edits. */
const U32_MAX = 4_294_967_295;

function count(text: string, errors: FormErrors, field: SettingsField, what: string): number {
  const n = parseDecimal(text);
  if (n === null || Number.isNaN(n) || !Number.isInteger(n) || n < 1 || n > U32_MAX) {
    errors[field] = `${what} must be a whole number of 1 or more`;
    return 0;
  }
  return n;
}

function percent(text: string, errors: FormErrors, field: SettingsField, what: string): number {
  const n = parseDecimal(text);
  if (n === null || Number.isNaN(n) || n <= 0 || n > 100) {
    errors[field] = `${what} must be a percentage above 0 and at most 100`;
    return 0;
  }
  return n;
}

/** Empty: the default; else 0 to 2, as Gemini takes it. */
function temperature(text: string, errors: FormErrors): number | null {
  if (text.trim() === "") return null;
  const n = parseDecimal(text);
  if (n === null || Number.isNaN(n) || n < 0 || n > 2) {
    errors.temperature = "Temperature must be a number from 0 to 2, or empty for the default";
    return null;
  }
  return n;
}

/** humantime's units (the backend's duration parser), in seconds; case matters ("M" is a month). */
const DURATION_UNITS: Record<string, number> = {
  ...Object.fromEntries(["nanos", "nsec", "ns"].map((u) => [u, 1e-9])),
  ...Object.fromEntries(["usec", "us", "µs"].map((u) => [u, 1e-6])),
  ...Object.fromEntries(["millis", "msec", "ms"].map((u) => [u, 1e-3])),
  ...Object.fromEntries(["seconds", "second", "secs", "sec", "s"].map((u) => [u, 1])),
  ...Object.fromEntries(["minutes", "minute", "min", "mins", "m"].map((u) => [u, 60])),
  ...Object.fromEntries(["hours", "hour", "hr", "hrs", "h"].map((u) => [u, 3600])),
  ...Object.fromEntries(["days", "day", "d"].map((u) => [u, 86_400])),
  ...Object.fromEntries(["weeks", "week", "wk", "wks", "w"].map((u) => [u, 604_800])),
  ...Object.fromEntries(["months", "month", "M"].map((u) => [u, 2_630_016])),
  ...Object.fromEntries(["years", "year", "yr", "yrs", "y"].map((u) => [u, 31_557_600])),
};

/** One span of a duration: a number (spaces allowed inside, as humantime allows), an optional
 * fraction, a unit. */
const DURATION_SPAN = /(\d[\d\s]*)(?:\.([\d\s]*))?([a-zA-Zµ]+)/g;
const DURATION_TEXT = /^\s*(?:\d[\d\s]*(?:\.[\d\s]*)?[a-zA-Zµ]+\s*)+$/;

/**
 * A duration as the backend reads it (humantime: "30s", "1m 30s", "1h30m", "1.5s", "500ms", or
 * "0"), in seconds; null when it would refuse it. Checked here so a field says so plainly instead
 * of showing the parser's own words.
 */
export function parseDuration(text: string): number | null {
  const t = text.trim();
  if (t === "0") return 0;
  if (!DURATION_TEXT.test(t)) return null;
  let seconds = 0;
  for (const [, whole, fraction, unit] of t.matchAll(DURATION_SPAN)) {
    const scale = DURATION_UNITS[unit];
    const digits = fraction?.replace(/\s/g, "");
    if (scale === undefined || digits === "") return null;
    seconds += Number(`${whole.replace(/\s/g, "")}.${digits ?? ""}`) * scale;
  }
  return seconds;
}

const DURATION_EXAMPLES = "30s, 2m or 1h30m";

function duration(text: string, errors: FormErrors, field: SettingsField, what: string, { positive = false } = {}): string {
  const t = text.trim();
  const seconds = parseDuration(t);
  if (t === "") errors[field] = `${what} is required`;
  else if (seconds === null) errors[field] = `${what} must be a duration such as ${DURATION_EXAMPLES}`;
  else if (positive && seconds === 0) errors[field] = `${what} must be longer than zero, such as ${DURATION_EXAMPLES}`;
  return t;
}

/** The Gemini address: a full http(s) URL (the backend takes https:// or, for a local proxy,
 * http://). */
function baseUrl(text: string, errors: FormErrors): string {
  const t = text.trim();
  if (t === "") {
    errors.baseUrl = "Base URL is required";
    return t;
  }
  let host = "";
  try {
    host = new URL(t).hostname;
  } catch {
    // Not a URL: said below.
  }
  if (!/^https?:\/\//.test(t) || host === "") {
    errors.baseUrl = "Base URL must be a full address starting with https://, such as https://generativelanguage.googleapis.com";
  }
  return t;
}

export function priceRowToForm(row: UserPrice): PriceRowForm {
  const p = row.price;
  const text = (n: number | null | undefined) => (n === null || n === undefined ? "" : String(n));
  return {
    model: row.model,
    input: text(p.input_per_million),
    output: text(p.output_per_million),
    cached: text(p.cached_input_per_million),
    batchDiscount: text(p.batch_discount),
  };
}

/** A new row: list-price-like defaults are not guessed; the batch discount is the Batch API's half. */
export function emptyPriceRow(): PriceRowForm {
  return { model: "", input: "", output: "", cached: "", batchDiscount: "0.5" };
}

/** The price rows, or the first problem with them (the row and the value it is about). */
function priceRows(rows: PriceRowForm[], errors: FormErrors): UserPrice[] {
  const seen = new Set<string>();
  const out: UserPrice[] = [];
  const problem = (i: number, row: PriceRowForm, text: string) => {
    errors.prices ??= `Price row ${i + 1}${row.model.trim() ? ` (${row.model.trim()})` : ""}: ${text}`;
  };
  rows.forEach((row, i) => {
    const model = row.model.trim();
    if (model === "") problem(i, row, "the model id is required");
    else if (seen.has(model)) problem(i, row, "this model already has a row");
    seen.add(model);
    const dollars = (text: string, what: string): number => {
      const n = parseDecimal(text);
      if (n === null || Number.isNaN(n) || n < 0 || n > 1000) {
        problem(i, row, `${what} must be between 0 and 1000 dollars per million tokens`);
        return 0;
      }
      return n;
    };
    const input_per_million = dollars(row.input, "the input price");
    const output_per_million = dollars(row.output, "the output price");
    const cached_input_per_million = row.cached.trim() === "" ? null : dollars(row.cached, "the cached input price");
    const discount = parseDecimal(row.batchDiscount);
    if (discount === null || Number.isNaN(discount) || discount < 0 || discount > 1) {
      problem(i, row, "the batch discount must be a factor from 0 to 1 (0.5: half price)");
    }
    out.push({
      model,
      price: { input_per_million, output_per_million, cached_input_per_million, batch_discount: discount ?? 0 },
    });
  });
  return out;
}

/** What the configured model's calls cost, as Settings says it; "price unknown" without a row. */
export function modelPriceText(pricing: PricingSettings): string {
  const row = pricing.model_price;
  if (!row) return "price unknown";
  const p = row.price;
  const source = row.user ? "your row" : "list price";
  return `${formatUsd(p.input_per_million)} in / ${formatUsd(p.output_per_million)} out per million tokens (${row.model}, ${source}; batch × ${p.batch_discount})`;
}

/** Builds the save_settings input, or the per-field problems found before sending it. */
export function formToSettingsInput(
  form: SettingsForm,
  keyChange: "keep" | "clear" = "keep",
): { input: SettingsInput; errors: FormErrors } {
  const errors: FormErrors = {};
  const required = (field: SettingsField, value: string, what: string) => {
    if (value.trim() === "") errors[field] = `${what} is required`;
    return value.trim();
  };
  const key = form.apiKey.trim();
  const api_key: ApiKeyChange =
    key === "" ? { action: keyChange } : form.keyInConfigFile ? { action: "set_in_config_file", key } : { action: "set", key };
  const input: SettingsInput = {
    gemini: {
      base_url: baseUrl(form.baseUrl, errors),
      model: required("model", form.model, "Model"),
      timeout: duration(form.timeout, errors, "timeout", "Timeout", { positive: true }),
      connect_timeout: duration(form.connectTimeout, errors, "connectTimeout", "Connect timeout", { positive: true }),
      read_timeout: duration(form.readTimeout, errors, "readTimeout", "Read timeout", { positive: true }),
      thinking: form.thinking,
      max_output_tokens: count(form.maxOutputTokens, errors, "maxOutputTokens", "Max output tokens"),
      temperature: temperature(form.temperature, errors),
      media_resolution: form.mediaResolution,
    },
    image: {
      max_long_edge: integer(form.maxLongEdge, 64, 8192, errors, "maxLongEdge", "Max long edge"),
      jpeg_quality: integer(form.jpegQuality, 1, 100, errors, "jpegQuality", "JPEG quality"),
      max_file_bytes: Math.round(positive(form.maxFileMb, errors, "maxFileMb", "Max file size") * 1_000_000),
      max_pixels: Math.round(positive(form.maxMegapixels, errors, "maxMegapixels", "Max megapixels") * 1_000_000),
    },
    resilience: {
      circuit_breaker: {
        sliding_window_type: form.breakerWindowType,
        sliding_window_size: count(form.breakerWindowSize, errors, "breakerWindowSize", "Sliding window size"),
        minimum_number_of_calls: count(form.breakerMinimumCalls, errors, "breakerMinimumCalls", "Minimum number of calls"),
        failure_rate_threshold: percent(form.breakerFailureRate, errors, "breakerFailureRate", "Failure rate threshold"),
        slow_call_rate_threshold: percent(form.breakerSlowCallRate, errors, "breakerSlowCallRate", "Slow call rate threshold"),
        slow_call_duration_threshold: duration(
          form.breakerSlowCallDuration,
          errors,
          "breakerSlowCallDuration",
          "Slow call duration threshold",
        ),
        wait_duration_in_open_state: duration(form.breakerWaitInOpen, errors, "breakerWaitInOpen", "Wait in open state"),
        permitted_number_of_calls_in_half_open_state: count(
          form.breakerHalfOpenCalls,
          errors,
          "breakerHalfOpenCalls",
          "Calls in half-open state",
        ),
        automatic_transition_from_open_to_half_open_enabled: form.breakerAutoHalfOpen,
        remember_across_restarts: form.breakerRemember,
        max_wait_duration_in_half_open_state: duration(
          form.breakerMaxWaitInHalfOpen,
          errors,
          "breakerMaxWaitInHalfOpen",
          "Max wait in half-open state",
        ),
      },
      bulkhead: {
        max_concurrent_calls: count(form.bulkheadMaxConcurrent, errors, "bulkheadMaxConcurrent", "Max concurrent calls"),
        max_wait_duration: duration(form.bulkheadMaxWait, errors, "bulkheadMaxWait", "Max wait"),
      },
      time_limiter: {
        timeout_duration: duration(form.timeLimiterTimeout, errors, "timeLimiterTimeout", "Timeout duration"),
      },
      retry: {
        max_attempts: count(form.retryMaxAttempts, errors, "retryMaxAttempts", "Max attempts"),
        wait_duration: duration(form.retryWaitDuration, errors, "retryWaitDuration", "Wait duration"),
        max_wait: duration(form.retryMaxWait, errors, "retryMaxWait", "Max wait"),
      },
      rate_limiter: {
        enabled: form.rateLimiterEnabled,
        limit_for_period: count(form.rateLimiterLimit, errors, "rateLimiterLimit", "Limit for period"),
        limit_refresh_period: duration(form.rateLimiterRefreshPeriod, errors, "rateLimiterRefreshPeriod", "Refresh period"),
      },
    },
    prices: priceRows(form.prices, errors),
    api_key,
    http_api: { with_window: form.httpApiWithWindow, listen: listenAddress(form.httpApiListen, errors) },
  };
  return { input, errors };
}

/** `[server] listen`: an IPv4 `host:port` or an IPv6 `[host]:port`, checked by the backend too. */
function listenAddress(text: string, errors: FormErrors): string {
  const value = text.trim();
  const port = /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]):(\d{1,5})$/.exec(value);
  if (port === null || Number(port[3]) > 65535) {
    errors.httpApiListen = "An address and port, like 127.0.0.1:8080";
  }
  return value;
}

/** The resilience fields with the config key each edits, section included. */
const RESILIENCE_KEYS: [string, SettingsField][] = [
  ["circuit_breaker.sliding_window_type", "breakerWindowType"],
  ["circuit_breaker.sliding_window_size", "breakerWindowSize"],
  ["circuit_breaker.minimum_number_of_calls", "breakerMinimumCalls"],
  ["circuit_breaker.failure_rate_threshold", "breakerFailureRate"],
  ["circuit_breaker.slow_call_rate_threshold", "breakerSlowCallRate"],
  ["circuit_breaker.slow_call_duration_threshold", "breakerSlowCallDuration"],
  ["circuit_breaker.wait_duration_in_open_state", "breakerWaitInOpen"],
  ["circuit_breaker.permitted_number_of_calls_in_half_open_state", "breakerHalfOpenCalls"],
  ["circuit_breaker.automatic_transition_from_open_to_half_open_enabled", "breakerAutoHalfOpen"],
  ["circuit_breaker.remember_across_restarts", "breakerRemember"],
  ["circuit_breaker.max_wait_duration_in_half_open_state", "breakerMaxWaitInHalfOpen"],
  ["bulkhead.max_concurrent_calls", "bulkheadMaxConcurrent"],
  ["bulkhead.max_wait_duration", "bulkheadMaxWait"],
  ["time_limiter.timeout_duration", "timeLimiterTimeout"],
  ["retry.max_attempts", "retryMaxAttempts"],
  ["retry.wait_duration", "retryWaitDuration"],
  ["retry.max_wait", "retryMaxWait"],
  ["rate_limiter.enabled", "rateLimiterEnabled"],
  ["rate_limiter.limit_for_period", "rateLimiterLimit"],
  ["rate_limiter.limit_refresh_period", "rateLimiterRefreshPeriod"],
];

const RESILIENCE_FIELDS: ReadonlySet<SettingsField> = new Set(RESILIENCE_KEYS.map(([, field]) => field));

/** Whether a field lives in the (collapsible) Resilience section. */
export function isResilienceField(field: string): boolean {
  return RESILIENCE_FIELDS.has(field as SettingsField);
}

/**
 * Config keys as the backend names them in its messages, longest first so "read_timeout" wins over
 * "timeout" and "retry.max_wait" over "max_wait". The breaker's keys are unique, so they also match
 * without their section; the other sections' keys ("enabled", "wait_duration") only with it.
 */
const CONFIG_KEYS: [string, SettingsField][] = (
  [
    ...RESILIENCE_KEYS,
    ...RESILIENCE_KEYS.filter(([key]) => key.startsWith("circuit_breaker.")).map(
      ([key, field]): [string, SettingsField] => [key.slice("circuit_breaker.".length), field],
    ),
    ["thinking", "thinking"],
    ["max_output_tokens", "maxOutputTokens"],
    ["temperature", "temperature"],
    ["media_resolution", "mediaResolution"],
    ["pricing", "prices"],
    ["connect_timeout", "connectTimeout"],
    ["read_timeout", "readTimeout"],
    ["timeout", "timeout"],
    ["base_url", "baseUrl"],
    ["model", "model"],
    ["api_key", "apiKey"],
    ["max_long_edge", "maxLongEdge"],
    ["jpeg_quality", "jpegQuality"],
    ["max_file_bytes", "maxFileMb"],
    ["max_pixels", "maxMegapixels"],
    ["server.listen", "httpApiListen"],
  ] as [string, SettingsField][]
).sort((a, b) => b[0].length - a[0].length);

/** Which form field a save_settings "config" error is about, from the key its message names. */
export function fieldForConfigError(message: string): SettingsField | null {
  for (const [key, field] of CONFIG_KEYS) {
    const re = new RegExp(`(^|[^a-z_])${key.replace(/\./g, "\\.")}($|[^a-z_])`, "i");
    if (re.test(message)) return field;
  }
  return null;
}

/** What the catalog card says about the catalog the app opens at its next start. */
export type CatalogNext =
  /** The catalog open now is the one chosen. */
  | { kind: "same" }
  /** Another one is chosen: a team catalog's URL (masked), or `null` for this computer's file. */
  | { kind: "restart"; next: string | null }
  /** PRODUCT_EXTRACTOR_CATALOG_URL names a catalog and wins over the choice. */
  | { kind: "environment"; env: string };

function isServerUrl(text: string): boolean {
  return /^postgres(ql)?:\/\//i.test(text.trim());
}

export function catalogNext(status: AppStatus): CatalogNext {
  const setting = status.catalog_setting;
  if (status.catalog_env !== null && status.catalog_env !== setting) {
    return { kind: "environment", env: status.catalog_env };
  }
  const chosenServer = setting !== null && isServerUrl(setting) ? setting : null;
  const openServer = status.catalog_on_server ? status.catalog : null;
  return chosenServer === openServer ? { kind: "same" } : { kind: "restart", next: chosenServer };
}
