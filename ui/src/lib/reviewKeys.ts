// The keyboard of the import review: a reviewer goes through hundreds of ready items without the
// mouse. Keys act only when focus is not in a text field (there, typing is typing), except the
// chorded ones (Ctrl+Enter saves from anywhere).

export type ReviewAction =
  | "next"
  | "previous"
  | "accept"
  | "edit"
  | "skip"
  | "discard"
  | "close"
  // The shown photo of a product of several: to a product of its own, or into the previous or
  // next product in the review.
  | "split"
  | "moveToPrevious"
  | "moveToNext"
  // A product whose photos changed: extract it again (one call).
  | "reextract";

type Key = Pick<KeyboardEvent, "key" | "ctrlKey" | "metaKey" | "altKey" | "shiftKey">;

/** The action for a key press, or null when the key is not ours (or is typing). */
export function reviewAction(event: Key, typing: boolean): ReviewAction | null {
  const chord = event.ctrlKey || event.metaKey;
  if (event.altKey) return null;
  if (chord && event.key === "Enter") return "accept";
  if (chord) return null;
  if (event.key === "Escape") return typing ? null : "close";
  if (typing) return null;
  if (event.shiftKey && event.key === "ArrowLeft") return "moveToPrevious";
  if (event.shiftKey && event.key === "ArrowRight") return "moveToNext";
  switch (event.key) {
    case "n":
      return "split";
    case "x":
      return "reextract";
    case "ArrowRight":
    case "j":
      return "next";
    case "ArrowLeft":
    case "k":
      return "previous";
    case "Enter":
    case "a":
      return "accept";
    case "e":
      return "edit";
    case "s":
      return "skip";
    case "Delete":
    case "d":
      return "discard";
    default:
      return null;
  }
}

/** Keys 1–9 show that photo of the product (0-based index), when not typing. */
export function photoNumber(event: Key, typing: boolean): number | null {
  if (typing || event.ctrlKey || event.metaKey || event.altKey) return null;
  return /^[1-9]$/.test(event.key) ? Number(event.key) - 1 : null;
}

/** True when keys typed into `element` are text, not commands. */
export function isTyping(element: Element | null): boolean {
  if (!element) return false;
  const tag = element.tagName;
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag === "INPUT") {
    const type = (element as HTMLInputElement).type;
    return !["checkbox", "radio", "button", "submit", "reset"].includes(type);
  }
  return (element as HTMLElement).isContentEditable === true;
}

/** The help line shown under the review. */
export const REVIEW_KEYS_HELP =
  "→/j next · ←/k previous · Enter/a save · e edit · s skip · d discard · Ctrl+Enter save while editing · Esc close · 1–9 photo · n photo to a new product · Shift+←/→ photo to the previous/next product · x extract again";
