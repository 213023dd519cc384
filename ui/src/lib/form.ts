// The review form edits strings; the catalog stores a Product. This module converts between the two
// without losing anything the reviewer typed: a number that does not parse becomes a local
// "invalid" flag instead of silently disappearing.
import { PRODUCT_FIELDS } from "../bindings/constants";
import type { FieldFlag } from "../bindings/FieldFlag";
import type { FieldKey } from "../bindings/FieldKey";
import type { Product } from "../bindings/Product";
import type { ProductField } from "../bindings/ProductField";

export interface AttributeRow {
  name: string;
  value: string;
}

export interface ProductForm {
  name: string;
  brand: string;
  category: string;
  description: string;
  priceAmount: string;
  priceCurrency: string;
  gtin: string;
  color: string;
  size: string;
  material: string;
  netValue: string;
  netUnit: string;
  attributes: AttributeRow[];
  uncertainFields: string[];
}

export interface FormResult {
  product: Product;
  /** Problems found before the backend sees the product (e.g. "3,4x" is not a number). */
  localFlags: FieldFlag[];
  /** For each attribute in `product`, the index of its row in the form (blank rows are skipped). */
  attributeRows: number[];
}

export function emptyForm(): ProductForm {
  return productToForm(emptyProduct());
}

export function emptyProduct(): Product {
  return {
    name: "",
    brand: null,
    category: null,
    description: null,
    price: null,
    gtin: null,
    color: null,
    size: null,
    material: null,
    net_content: null,
    attributes: [],
    uncertain_fields: [],
  };
}

function numberText(value: number): string {
  return Number.isFinite(value) ? String(value) : "";
}

export function productToForm(p: Product): ProductForm {
  return {
    name: p.name ?? "",
    brand: p.brand ?? "",
    category: p.category ?? "",
    description: p.description ?? "",
    priceAmount: p.price ? numberText(p.price.amount) : "",
    priceCurrency: p.price?.currency ?? "",
    gtin: p.gtin ?? "",
    color: p.color ?? "",
    size: p.size ?? "",
    material: p.material ?? "",
    netValue: p.net_content ? numberText(p.net_content.value) : "",
    netUnit: p.net_content?.unit ?? "",
    attributes: (p.attributes ?? []).map((a) => ({ name: a.name, value: a.value })),
    uncertainFields: [...(p.uncertain_fields ?? [])],
  };
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

export function formToProduct(form: ProductForm): FormResult {
  const localFlags: FieldFlag[] = [];

  let price: Product["price"] = null;
  const amount = parseDecimal(form.priceAmount);
  const currency = form.priceCurrency.trim().toUpperCase();
  if (amount !== null || currency !== "") {
    if (amount === null) localFlags.push(invalid("price.amount", "enter the amount, e.g. 3.49"));
    else if (Number.isNaN(amount)) localFlags.push(invalid("price.amount", "not a number, e.g. 3.49"));
    price = { amount: amount !== null && !Number.isNaN(amount) ? amount : 0, currency };
  }

  let net_content: Product["net_content"] = null;
  const value = parseDecimal(form.netValue);
  const unit = form.netUnit.trim();
  if (value !== null || unit !== "") {
    if (value === null) localFlags.push(invalid("net_content.value", "enter the amount, e.g. 500"));
    else if (Number.isNaN(value)) localFlags.push(invalid("net_content.value", "not a number, e.g. 500"));
    net_content = { value: value !== null && !Number.isNaN(value) ? value : 0, unit };
  }

  const attributes: Product["attributes"] = [];
  const attributeRows: number[] = [];
  form.attributes.forEach((row, i) => {
    const name = row.name.trim();
    const val = row.value.trim();
    if (name === "" && val === "") return;
    attributes.push({ name, value: val });
    attributeRows.push(i);
  });

  const product: Product = {
    name: form.name.trim(),
    brand: opt(form.brand),
    category: opt(form.category),
    description: opt(form.description),
    price,
    gtin: opt(form.gtin)?.replace(/[\s-]/g, "") ?? null,
    color: opt(form.color),
    size: opt(form.size),
    material: opt(form.material),
    net_content,
    attributes,
    uncertain_fields: [...form.uncertainFields],
  };
  return { product, localFlags, attributeRows };
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

/** The form properties that hold a field's text as typed, named like the field. */
export type TextFieldKey = {
  [K in keyof ProductForm]: ProductForm[K] extends string ? K : never;
}[keyof ProductForm] &
  FieldKey;

/** True for the fields the form edits as one text box (the field's key is the form property). */
export function isTextField(field: ProductField): field is ProductField & { key: TextFieldKey } {
  return field.kind === "text" || field.kind === "long_text" || field.kind === "gtin";
}

/** A label for a FieldChange.field of the Rust diff: "Price", "Attribute “Flavor”". */
export function changeLabel(field: string): string {
  if (field.startsWith("attributes.")) return `Attribute “${field.slice("attributes.".length)}”`;
  return fieldLabel(field);
}
