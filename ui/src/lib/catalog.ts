// "Proposed by Gemini" vs "Saved": the field-by-field comparison shown for a catalog record.
import type { Product } from "../bindings/Product";
import { formatNetContent, formatPrice } from "./format";

export interface FieldRow {
  field: string;
  label: string;
  saved: string;
  proposed: string | null;
  differs: boolean;
}

export const FIELD_LABELS: [keyof Product, string][] = [
  ["name", "Name"],
  ["brand", "Brand"],
  ["category", "Category"],
  ["description", "Description"],
  ["price", "Price"],
  ["gtin", "GTIN"],
  ["color", "Color"],
  ["size", "Size"],
  ["material", "Material"],
  ["net_content", "Net content"],
  ["attributes", "Attributes"],
];

export function describeField(product: Product, field: keyof Product, locale?: string): string {
  switch (field) {
    case "price":
      return formatPrice(product.price, locale);
    case "net_content":
      return formatNetContent(product.net_content, locale);
    case "attributes":
      return product.attributes.map((a) => `${a.name}: ${a.value}`).join("\n");
    case "uncertain_fields":
      return product.uncertain_fields.join(", ");
    default:
      return (product[field] as string | null) ?? "";
  }
}

export function compareProducts(saved: Product, proposed: Product | null, locale?: string): FieldRow[] {
  return FIELD_LABELS.map(([field, label]) => {
    const s = describeField(saved, field, locale);
    const p = proposed ? describeField(proposed, field, locale) : null;
    return { field, label, saved: s, proposed: p, differs: p !== null && p !== s };
  });
}
