// The Settings form edits friendly units (MB, megapixels); the backend takes bytes and pixels.
import type { ApiKeyChange } from "../bindings/ApiKeyChange";
import type { Settings } from "../bindings/Settings";
import type { SettingsInput } from "../bindings/SettingsInput";
import { parseDecimal } from "./form";

export interface SettingsForm {
  apiKey: string;
  baseUrl: string;
  model: string;
  timeout: string;
  connectTimeout: string;
  readTimeout: string;
  maxLongEdge: string;
  jpegQuality: string;
  maxFileMb: string;
  maxMegapixels: string;
}

export type SettingsField = Exclude<keyof SettingsForm, "apiKey"> | "apiKey";

function trimNumber(n: number): string {
  return String(Math.round(n * 100) / 100);
}

export function settingsToForm(s: Settings): SettingsForm {
  return {
    apiKey: "",
    baseUrl: s.gemini.base_url,
    model: s.gemini.model,
    timeout: s.gemini.timeout,
    connectTimeout: s.gemini.connect_timeout,
    readTimeout: s.gemini.read_timeout,
    maxLongEdge: String(s.image.max_long_edge),
    jpegQuality: String(s.image.jpeg_quality),
    maxFileMb: trimNumber(s.image.max_file_bytes / 1_000_000),
    maxMegapixels: trimNumber(s.image.max_pixels / 1_000_000),
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
  const api_key: ApiKeyChange = key !== "" ? { action: "set", key } : { action: keyChange };
  const input: SettingsInput = {
    gemini: {
      base_url: required("baseUrl", form.baseUrl, "Base URL"),
      model: required("model", form.model, "Model"),
      timeout: required("timeout", form.timeout, "Timeout"),
      connect_timeout: required("connectTimeout", form.connectTimeout, "Connect timeout"),
      read_timeout: required("readTimeout", form.readTimeout, "Read timeout"),
    },
    image: {
      max_long_edge: integer(form.maxLongEdge, 64, 8192, errors, "maxLongEdge", "Max long edge"),
      jpeg_quality: integer(form.jpegQuality, 1, 100, errors, "jpegQuality", "JPEG quality"),
      max_file_bytes: Math.round(positive(form.maxFileMb, errors, "maxFileMb", "Max file size") * 1_000_000),
      max_pixels: Math.round(positive(form.maxMegapixels, errors, "maxMegapixels", "Max megapixels") * 1_000_000),
    },
    api_key,
  };
  return { input, errors };
}

/** Config keys as the backend names them in its messages, longest first so "read_timeout" wins over "timeout". */
const CONFIG_KEYS: [string, SettingsField][] = (
  [
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
  ] as [string, SettingsField][]
).sort((a, b) => b[0].length - a[0].length);

/** Which form field a save_settings "config" error is about, from the key its message names. */
export function fieldForConfigError(message: string): SettingsField | null {
  for (const [key, field] of CONFIG_KEYS) {
    const re = new RegExp(`(^|[^a-z_])${key}($|[^a-z_])`, "i");
    if (re.test(message)) return field;
  }
  return null;
}
