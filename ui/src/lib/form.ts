// The review form edits strings; the catalog stores a Product. This module converts between the two
// without losing anything the reviewer typed: a number that does not parse becomes a local
// "invalid" flag instead of silently disappearing. It goes by the field table from Rust
// (PRODUCT_FIELDS) and decides by a field's kind, never by its name, so a new field in the table
// is a new field of the form.
import { FIELD_KIND_PARTS, PRODUCT_FIELDS } from "../bindings/constants";
import type { FieldFlag } from "../bindings/FieldFlag";
import type { FieldKind } from "../bindings/FieldKind";
import type { Product } from "../bindings/Product";
import type { ProductField } from "../bindings/ProductField";

export interface AttributeRow {
  name: string;
  value: string;
}

export interface ProductForm {
  /**
   * Every value as typed, by the name a flag gives it: a text field by its key ("name", "gtin"),
   * each part of a two-part field by "key.part" ("price.amount", "net_content.unit").
   */
  values: Record<string, string>;
  /** The attributes field's rows, blank ones included (they are skipped on the way back). */
  attributes: AttributeRow[];
  /** The model's unsure list, as the reviewer confirms fields one by one. */
  uncertainFields: string[];
}

export interface FormResult {
  product: Product;
  /** Problems found before the backend sees the product (e.g. "3,4x" is not a number). */
  localFlags: FieldFlag[];
  /** For each attribute in `product`, the index of its row in the form (blank rows are skipped). */
  attributeRows: number[];
}

/** The fields the form goes by: the table from Rust (a test may pass a longer one). */
export type Fields = readonly ProductField[];

/** How the window shows each two-part kind: its placeholders, an example for a message, its code. */
export const PAIR_UI: Partial<Record<FieldKind, PairUi>> = {
  price: { placeholders: ["0.00", "EUR"], example: "3.49", codeLabel: "Currency (3 letters)", codeClass: "currency", upper: true, codeMaxLength: 3 },
  net_content: { placeholders: ["500", "g"], example: "500", codeLabel: "Unit", codeClass: "unit", upper: false },
};

interface PairUi {
  placeholders: [string, string];
  /** A number as the message after a bad one shows it ("not a number, e.g. 3.49"). */
  example: string;
  /** The code's accessible name. */
  codeLabel: string;
  codeClass: string;
  /** The code is typed in capitals (a currency). */
  upper: boolean;
  codeMaxLength?: number;
}

/** The two parts of a kind edited as two values (from Rust), or null. */
export function partsOf(kind: FieldKind): readonly [string, string] | null {
  return FIELD_KIND_PARTS.find((k) => k.kind === kind)?.parts ?? null;
}

/** The form's name of a two-part field's part: "price.amount". */
export function partName(field: ProductField, part: string): string {
  return `${field.key}.${part}`;
}

export function emptyForm(fields: Fields = PRODUCT_FIELDS): ProductForm {
  return productToForm(emptyProduct(fields), fields);
}

export function emptyProduct(fields: Fields = PRODUCT_FIELDS): Product {
  const product: Record<string, unknown> = {};
  for (const f of fields) {
    if (f.kind === "attributes" || f.kind === "field_names") product[f.key] = [];
    else product[f.key] = f.required ? "" : null;
  }
  return product as Product;
}

function numberText(value: number): string {
  return Number.isFinite(value) ? String(value) : "";
}

export function productToForm(p: Product, fields: Fields = PRODUCT_FIELDS): ProductForm {
  const source = p as unknown as Record<string, unknown>;
  const form: ProductForm = { values: {}, attributes: [], uncertainFields: [] };
  for (const f of fields) {
    const value = source[f.key];
    const parts = partsOf(f.kind);
    if (parts) {
      const pair = (value ?? null) as Record<string, unknown> | null;
      form.values[partName(f, parts[0])] = pair ? numberText(Number(pair[parts[0]])) : "";
      form.values[partName(f, parts[1])] = pair ? String(pair[parts[1]] ?? "") : "";
    } else if (f.kind === "attributes") {
      form.attributes = ((value ?? []) as AttributeRow[]).map((a) => ({ name: a.name, value: a.value }));
    } else if (f.kind === "field_names") {
      form.uncertainFields = [...((value ?? []) as string[])];
    } else {
      form.values[f.key] = (value as string | null | undefined) ?? "";
    }
  }
  return form;
}

/**
 * Parses a decimal as people type it: "3.49", "3,49", " 1 299,00 ", "1,299.00".
 * Returns null for blank input and NaN for text that is not a number.
 */
export function parseDecimal(text: string): number | null {
  let s = text.trim().replace(/[\s\u00a0\u202f']/g, "");
  if (s === "") return null;
  const lastComma = s.lastIndexOf(",");
  const lastDot = s.lastIndexOf(".");
  if (lastComma >= 0 && lastDot >= 0) {
    // The later separator is the decimal one; the other groups thousands.
    s = lastComma > lastDot ? s.replace(/\./g, "").replace(",", ".") : s.replace(/,/g, "");
  } else if (lastComma >= 0) {
    s = s.split(",").length === 2 ? s.replace(",", ".") : s.replace(/,/g, "");
  }
  if (!/^[+-]?(\d+\.?\d*|\.\d+)$/.test(s)) return Number.NaN;
  return Number(s);
}

function opt(text: string): string | null {
  const t = text.trim();
  return t === "" ? null : t;
}

function invalid(field: string, message: string): FieldFlag {
  return { field, kind: "invalid", message };
}

export function formToProduct(form: ProductForm, fields: Fields = PRODUCT_FIELDS): FormResult {
  const localFlags: FieldFlag[] = [];
  const product: Record<string, unknown> = {};
  const attributeRows: number[] = [];
  for (const f of fields) {
    const parts = partsOf(f.kind);
    if (parts) {
      const [numberPart, codePart] = parts;
      const ui = PAIR_UI[f.kind];
      const example = ui ? `, e.g. ${ui.example}` : "";
      const amount = parseDecimal(form.values[partName(f, numberPart)] ?? "");
      const typed = (form.values[partName(f, codePart)] ?? "").trim();
      const code = ui?.upper ? typed.toUpperCase() : typed;
      let pair: Record<string, unknown> | null = null;
      if (amount !== null || code !== "") {
        const name = partName(f, numberPart);
        if (amount === null) localFlags.push(invalid(name, `enter the amount${example}`));
        else if (Number.isNaN(amount)) localFlags.push(invalid(name, `not a number${example}`));
        pair = { [numberPart]: amount !== null && !Number.isNaN(amount) ? amount : 0, [codePart]: code };
      }
      product[f.key] = pair;
    } else if (f.kind === "attributes") {
      const attributes: AttributeRow[] = [];
      form.attributes.forEach((row, i) => {
        const name = row.name.trim();
        const val = row.value.trim();
        if (name === "" && val === "") return;
        attributes.push({ name, value: val });
        attributeRows.push(i);
      });
      product[f.key] = attributes;
    } else if (f.kind === "field_names") {
      product[f.key] = [...form.uncertainFields];
    } else {
      const text = form.values[f.key] ?? "";
      if (f.required) product[f.key] = text.trim();
      else if (f.kind === "gtin") product[f.key] = opt(text)?.replace(/[\s-]/g, "") ?? null;
      else product[f.key] = opt(text);
    }
  }
  return { product: product as Product, localFlags, attributeRows };
}

/** Rewrites "attributes[i]…" flags from product indices to form row indices. */
export function mapAttributeFlags(flags: FieldFlag[], attributeRows: number[]): FieldFlag[] {
  return flags.map((flag) => {
    const m = /^attributes\[(\d+)\](.*)$/.exec(flag.field);
    if (!m) return flag;
    const row = attributeRows[Number(m[1])];
    return row === undefined ? flag : { ...flag, field: `attributes[${row}]${m[2]}` };
  });
}

/** The product's fields (generated from Rust), by key. */
const FIELDS_BY_KEY: ReadonlyMap<string, ProductField> = new Map(PRODUCT_FIELDS.map((f) => [f.key, f]));

/** A field's label as the form and the diffs show it ("Net content"); unknown names as they are. */
export function fieldLabel(key: string): string {
  return FIELDS_BY_KEY.get(key)?.label ?? key;
}

/** True for the fields the form edits as one text box, whose value is `form.values[field.key]`. */
export function isTextField(field: ProductField): boolean {
  return field.kind === "text" || field.kind === "long_text" || field.kind === "gtin";
}

/** A label for a FieldChange.field of the Rust diff: "Price", "Attribute “Flavor”". */
export function changeLabel(field: string): string {
  if (field.startsWith("attributes.")) return `Attribute “${field.slice("attributes.".length)}”`;
  return fieldLabel(field);
}
