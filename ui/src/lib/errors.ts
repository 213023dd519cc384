// Errors cross from Rust as ErrorReport objects ({ code, message, detail? }). The UI switches on the
// code, never on English text. Anything else that rejects (a Tauri internal string, a JS Error) is
// wrapped so every failure can be shown the same way — never as "[object Object]".
import type { ErrorCode } from "../bindings/ErrorCode";
import type { ErrorReport } from "../bindings/ErrorReport";

const CODES: ReadonlySet<string> = new Set<ErrorCode>([
  "invalid_image",
  "unsupported_format",
  "image_too_large",
  "gemini_auth",
  "gemini_bad_request",
  "gemini_not_found",
  "gemini_quota",
  "gemini_unavailable",
  "gemini_not_available",
  "gemini_api_error",
  "timeout",
  "network",
  "response_too_large",
  "blocked",
  "unparsable_output",
  "output_truncated",
  "config",
  "catalog",
  "validation",
  "not_found",
  "revision_conflict",
  "conflict",
  "io",
  "circuit_open",
  "bulkhead_full",
  "rate_limited",
]);

export function isErrorReport(value: unknown): value is ErrorReport {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.code === "string" && CODES.has(v.code) && typeof v.message === "string";
}

/** Turns any rejection value into an ErrorReport. Unknown shapes become code "io" with a readable message. */
export function toErrorReport(value: unknown): ErrorReport {
  if (isErrorReport(value)) return value;
  let message: string;
  if (typeof value === "string") message = value;
  else if (value instanceof Error) message = value.message;
  else if (typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string")
    message = (value as { message: string }).message;
  else {
    try {
      message = JSON.stringify(value) ?? String(value);
    } catch {
      message = String(value);
    }
  }
  return { code: "io", message: message.trim() || "Something went wrong.", detail: "unexpected error from the app" };
}

/** What a failed job card offers next to the message. */
export type ErrorAction = "open_settings" | "open_status" | "retry" | "none";

export interface ErrorAdvice {
  /** A short title for the failure. */
  title: string;
  /** One sentence a catalog clerk can act on. */
  hint: string;
  action: ErrorAction;
}

const ADVICE: Record<ErrorCode, ErrorAdvice> = {
  invalid_image: {
    title: "Not a readable image",
    hint: "The file is empty, truncated or not a photo. Export it again from the camera or editor.",
    action: "none",
  },
  unsupported_format: {
    title: "Unsupported format",
    hint: "This image format can't be prepared. Convert it to JPEG or PNG and add it again.",
    action: "none",
  },
  image_too_large: {
    title: "Image too large",
    hint: "The photo is over the size limits set in Settings → Image. Resize it or raise the limits.",
    action: "none",
  },
  gemini_auth: {
    title: "API key refused",
    hint: "Gemini did not accept the API key. Check or replace it in Settings.",
    action: "open_settings",
  },
  gemini_bad_request: {
    title: "Request refused",
    hint: "Gemini refused the request for this photo. Retrying may help; otherwise try another photo.",
    action: "retry",
  },
  gemini_not_found: {
    title: "Model not found",
    hint: "The model named in Settings does not exist. Pick another model in Settings.",
    action: "open_settings",
  },
  gemini_quota: {
    title: "Quota reached",
    hint: "The Gemini quota or rate limit was reached. Wait a moment, then retry.",
    action: "retry",
  },
  gemini_unavailable: {
    title: "Gemini unavailable",
    hint: "Gemini is overloaded or down right now. Retry in a moment.",
    action: "retry",
  },
  gemini_not_available: {
    title: "Gemini not available here",
    hint: "Gemini is not offered for this API key's project or location. Check the key's project and billing, or use Gemini from a supported region.",
    action: "open_settings",
  },
  gemini_api_error: {
    title: "Gemini error",
    hint: "Gemini answered with an error. Retry; if it keeps failing, check the log.",
    action: "retry",
  },
  timeout: {
    title: "Timed out",
    hint: "Gemini took too long to answer. Retry, or raise the timeouts in Settings.",
    action: "retry",
  },
  network: {
    title: "No connection",
    hint: "Gemini could not be reached. Check the internet connection, then retry.",
    action: "retry",
  },
  response_too_large: {
    title: "Answer too large",
    hint: "Gemini's answer was far larger than any product answer, so it was not read. Retry later; a proxy may be interfering.",
    action: "retry",
  },
  blocked: {
    title: "Blocked by Gemini",
    hint: "Gemini's safety filters blocked this photo. Enter the product by hand or use another photo.",
    action: "none",
  },
  unparsable_output: {
    title: "Unreadable answer",
    hint: "Gemini answered, but not with product data. Retrying usually helps.",
    action: "retry",
  },
  output_truncated: {
    title: "Answer cut off",
    hint: "Gemini used up its output tokens (thinking included) before answering. Raise gemini.max_output_tokens or lower gemini.thinking in the config file, then retry.",
    action: "retry",
  },
  config: {
    title: "Configuration problem",
    hint: "A setting is invalid. Fix it in Settings.",
    action: "open_settings",
  },
  catalog: {
    title: "Catalog error",
    hint: "The local catalog could not be read or written. Check free disk space and the log.",
    action: "none",
  },
  validation: {
    title: "Invalid field",
    hint: "A field is invalid. Fix the highlighted fields.",
    action: "none",
  },
  not_found: {
    title: "Not found",
    hint: "The file or record no longer exists.",
    action: "none",
  },
  revision_conflict: {
    title: "Changed by someone else",
    hint: "Someone saved this product after you opened it, so your edit was not saved. Reload it to see their changes, then edit again.",
    action: "none",
  },
  conflict: {
    title: "Changed meanwhile",
    hint: "This changed since it was shown (or another product-extractor window is using it). Refresh and try again.",
    action: "none",
  },
  budget_spent: {
    title: "Daily budget spent",
    hint: "Today's Gemini budget would be passed. Raise it in Settings, or try again tomorrow.",
    action: "open_settings",
  },
  regrouped: {
    title: "Photos changed",
    hint: "A photo was moved into or out of this product in review; extract it again for a proposal from its photos (one Gemini call).",
    action: "retry",
  },
  batch_ended: {
    title: "Batch ended",
    hint: "Gemini's batch failed, expired or was cancelled; the photo is queued again and goes in the next batch.",
    action: "none",
  },
  disk_full: {
    title: "Disk full",
    hint: "The disk holding the catalog is full. Free some space; waiting photos go on by themselves.",
    action: "none",
  },
  not_queued_here: {
    title: "Not queued by this computer",
    hint: "The team catalog names a file on this computer that this desktop did not queue, so it was not opened. If the photo is yours, drop it again.",
    action: "none",
  },
  restored: {
    title: "Restored, not sent",
    hint: "This photo was waiting in the queue of the backup you restored. A restore sends nothing by itself: retry it to extract it (one Gemini call).",
    action: "retry",
  },
  io: {
    title: "Unexpected error",
    hint: "Something went wrong reading or writing a file. Check the log for details.",
    action: "none",
  },
  circuit_open: {
    title: "Gemini calls paused",
    hint: "Recent Gemini calls kept failing, so the app stopped sending more for a while. The Gemini status page shows when it tries again.",
    action: "open_status",
  },
  bulkhead_full: {
    title: "Too many calls at once",
    hint: "All Gemini call slots were busy for too long. Retry when the current photos are done.",
    action: "retry",
  },
  rate_limited: {
    title: "Rate limit reached",
    hint: "The app's own limit of Gemini calls per period was reached. Wait a moment, then retry.",
    action: "retry",
  },
};

export function adviceFor(code: ErrorCode): ErrorAdvice {
  return ADVICE[code] ?? ADVICE.io;
}
