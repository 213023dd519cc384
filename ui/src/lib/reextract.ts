// Re-extracting a saved product gives a fresh Gemini proposal as a list of changed fields; the
// reviewer accepts some of them. This merges the accepted ones into the saved product.
import type { Product } from "../bindings/Product";
import { FIELD_LABELS } from "./form";

/** The scalar fields a change can name directly (FieldChange.field in the Rust diff). */
const WHOLE_FIELDS = [
  "name",
  "brand",
  "category",
  "description",
  "price",
  "gtin",
  "color",
  "size",
  "material",
  "net_content",
  "uncertain_fields",
] as const;

type WholeField = (typeof WHOLE_FIELDS)[number];

function isWholeField(field: string): field is WholeField {
  return (WHOLE_FIELDS as readonly string[]).includes(field);
}

/**
 * `saved` with the `accepted` fields taken from `proposal`. A field is a product field name or
 * `attributes.<name>`: that attribute is set to the proposal's value, added at the end if it is
 * new, or removed if the proposal does not have it. Unknown names are ignored.
 */
export function applyChanges(saved: Product, proposal: Product, accepted: Iterable<string>): Product {
  const next: Product = structuredClone(saved);
  for (const field of accepted) {
    if (isWholeField(field)) {
      // Each whole field has the same type in both products.
      (next as unknown as Record<string, unknown>)[field] = structuredClone(proposal[field]);
      continue;
    }
    if (!field.startsWith("attributes.")) continue;
    const name = field.slice("attributes.".length);
    const proposed = proposal.attributes.find((a) => a.name === name);
    const index = next.attributes.findIndex((a) => a.name === name);
    if (proposed && index >= 0) next.attributes[index] = { ...proposed };
    else if (proposed) next.attributes.push({ ...proposed });
    else if (index >= 0) next.attributes.splice(index, 1);
  }
  return next;
}

/** A human label for a FieldChange.field: "Price", "Attribute “Flavor”". */
export function changeLabel(field: string): string {
  if (field.startsWith("attributes.")) return `Attribute “${field.slice("attributes.".length)}”`;
  return FIELD_LABELS[field] ?? field;
}
