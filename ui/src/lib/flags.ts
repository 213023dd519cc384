// Looks up the flags that concern one form field. A flag on a parent ("price", uncertain) concerns
// its children ("price.amount", "price.currency"); invalid wins over barcode, barcode over the
// cleaning flags, those over uncertain. A barcode flag says what the photo's barcode read and what
// Gemini read for the GTIN; a cleaning flag (control_characters_removed, too_long) says what was
// removed from or cut off Gemini's answer (their messages are shown as they are). Only the
// validator can recompute invalid and uncertain flags, so the others survive a re-validation
// (`keepBarcodeFlags`).
import type { FieldFlag } from "../bindings/FieldFlag";
import type { FlagKind } from "../bindings/FlagKind";

export const UNCERTAIN_TEXT = "Gemini was not sure";

/** True when `flagField` is `field` or one of its ancestors ("price" for "price.amount"). */
export function concerns(flagField: string, field: string): boolean {
  if (flagField === field) return true;
  return field.startsWith(flagField + ".") || field.startsWith(flagField + "[");
}

/** Flags that concern `field`, invalid ones first. */
export function flagsFor(flags: readonly FieldFlag[], field: string): FieldFlag[] {
  const found = flags.filter((f) => concerns(f.field, field));
  return found.sort((a, b) => rank(a.kind) - rank(b.kind));
}

/** A flag the answer's cleaning made: Gemini's text had control characters or was too long. */
export function isCleaning(kind: FlagKind): boolean {
  return kind === "control_characters_removed" || kind === "too_long";
}

function rank(kind: FlagKind): number {
  return kind === "invalid" ? 0 : kind === "barcode" ? 1 : isCleaning(kind) ? 2 : 3;
}

/** The strongest flag kind for a field, or null. */
export function flagKind(flags: readonly FieldFlag[], field: string): FlagKind | null {
  return flagsFor(flags, field)[0]?.kind ?? null;
}

/** Messages to show under a group of fields (e.g. the price row), without duplicates. */
export function messagesFor(flags: readonly FieldFlag[], fields: readonly string[]): { kind: FlagKind; text: string }[] {
  const out: { kind: FlagKind; text: string }[] = [];
  const seen = new Set<string>();
  const relevant = flags.filter((f) => fields.some((field) => concerns(f.field, field) || f.field.startsWith(field + ".")));
  for (const flag of relevant.sort((a, b) => rank(a.kind) - rank(b.kind))) {
    const text = flag.kind === "uncertain" ? UNCERTAIN_TEXT : flag.message;
    const key = flag.kind + "\u0000" + text;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ kind: flag.kind, text });
  }
  return out;
}

export function countFlags(flags: readonly FieldFlag[]): {
  invalid: number;
  uncertain: number;
  barcode: number;
  cleaned: number;
} {
  let invalid = 0;
  let uncertain = 0;
  let barcode = 0;
  let cleaned = 0;
  for (const f of flags) {
    if (f.kind === "invalid") invalid += 1;
    else if (f.kind === "barcode") barcode += 1;
    else if (isCleaning(f.kind)) cleaned += 1;
    else uncertain += 1;
  }
  return { invalid, uncertain, barcode, cleaned };
}

/** A fresh validation's flags, with the barcode and cleaning flags of `before` (the validator cannot know them). */
export function keepBarcodeFlags(fresh: readonly FieldFlag[], before: readonly FieldFlag[]): FieldFlag[] {
  return [...fresh, ...before.filter((f) => f.kind === "barcode" || isCleaning(f.kind))];
}

export function hasInvalid(flags: readonly FieldFlag[]): boolean {
  return flags.some((f) => f.kind === "invalid");
}

/** Flags whose field is not one of `known` (shown in a list above the form so nothing is hidden). */
export function unplacedFlags(flags: readonly FieldFlag[], known: readonly string[]): FieldFlag[] {
  return flags.filter(
    (f) => !known.some((k) => concerns(f.field, k) || concerns(k, f.field)) && !/^attributes\[\d+\]/.test(f.field),
  );
}

/** Merges the backend's flags with the form's local ones; a local flag replaces a backend flag on the same field. */
export function mergeFlags(server: readonly FieldFlag[], local: readonly FieldFlag[]): FieldFlag[] {
  const localFields = new Set(local.map((f) => f.field));
  return [...local, ...server.filter((f) => !localFields.has(f.field))];
}
