import { describe, expect, it } from "vitest";
import { PRODUCT_FIELDS } from "../bindings/constants";
import type { FieldKey } from "../bindings/FieldKey";
import type { Product } from "../bindings/Product";
import type { ProductField } from "../bindings/ProductField";
import {
  changeLabel,
  emptyForm,
  emptyProduct,
  fieldLabel,
  formToProduct,
  isTextField,
  mapAttributeFlags,
  parseDecimal,
  productToForm,
} from "./form";

const full: Product = {
  name: "Oat Drink Barista",
  brand: "Oatly",
  category: "Plant milk",
  description: "Oat drink for coffee.",
  price: { amount: 2.49, currency: "EUR" },
  gtin: "7394376616709",
  color: null,
  size: null,
  material: null,
  net_content: { value: 1, unit: "l" },
  attributes: [{ name: "Vegan", value: "yes" }],
  uncertain_fields: ["price"],
};

function withValues(values: Record<string, string>) {
  const form = emptyForm();
  return { ...form, values: { ...form.values, ...values } };
}

describe("form model", () => {
  it("round-trips a product", () => {
    const { product, localFlags } = formToProduct(productToForm(full));
    expect(product).toEqual(full);
    expect(localFlags).toEqual([]);
  });

  it("turns blanks into null and trims", () => {
    const form = withValues({ name: "  Tea ", brand: "  ", "price.currency": "", gtin: " 4006-381 333931 " });
    const { product } = formToProduct(form);
    expect(product.name).toBe("Tea");
    expect(product.brand).toBeNull();
    expect(product.price).toBeNull();
    expect(product.gtin).toBe("4006381333931");
  });

  it("upper-cases the currency and accepts a decimal comma", () => {
    const form = withValues({ name: "x", "price.amount": "3,49", "price.currency": "eur" });
    expect(formToProduct(form).product.price).toEqual({ amount: 3.49, currency: "EUR" });
  });

  it("flags a number that does not parse instead of dropping it", () => {
    const form = withValues({ name: "x", "price.amount": "3.4x", "price.currency": "EUR", "net_content.unit": "g" });
    const { localFlags, product } = formToProduct(form);
    expect(localFlags.map((f) => f.field)).toEqual(["price.amount", "net_content.value"]);
    expect(localFlags.every((f) => f.kind === "invalid")).toBe(true);
    expect(product.price?.currency).toBe("EUR");
  });

  it("skips blank attribute rows and maps flags back to rows", () => {
    const form = {
      ...emptyForm(),
      attributes: [
        { name: "", value: "" },
        { name: "", value: "Vanilla" },
        { name: "Size", value: "L" },
      ],
    };
    const { product, attributeRows } = formToProduct(form);
    expect(product.attributes).toEqual([
      { name: "", value: "Vanilla" },
      { name: "Size", value: "L" },
    ]);
    expect(attributeRows).toEqual([1, 2]);
    const mapped = mapAttributeFlags([{ field: "attributes[0].name", kind: "invalid", message: "m" }], attributeRows);
    expect(mapped[0].field).toBe("attributes[1].name");
  });
});

describe("parseDecimal", () => {
  it.each([
    ["3.49", 3.49],
    ["3,49", 3.49],
    ["1 299,50", 1299.5],
    ["1.299,50", 1299.5],
    ["1,299.50", 1299.5],
    ["1,299,000", 1299000],
    [".5", 0.5],
    ["", null],
    ["  ", null],
  ])("%s -> %s", (text, expected) => {
    expect(parseDecimal(text)).toBe(expected);
  });

  it("returns NaN for text", () => {
    expect(parseDecimal("abc")).toBeNaN();
    expect(parseDecimal("3.4.5")).toBeNaN();
  });
});

describe("the field list from Rust", () => {
  it("names every Product key once, with a label", () => {
    const keys = PRODUCT_FIELDS.map((f) => f.key);
    expect(new Set(keys).size).toBe(keys.length);
    expect([...keys].sort()).toEqual(Object.keys(emptyProduct()).sort());
    expect(fieldLabel("net_content")).toBe("Net content");
    expect(fieldLabel("whatever")).toBe("whatever");
  });

  it("edits each text field through the form value of the same name, and each part of a pair by its name", () => {
    const form = emptyForm();
    const text = PRODUCT_FIELDS.filter(isTextField);
    expect(text.map((f) => f.key)).toContain("gtin");
    for (const field of text) expect(typeof form.values[field.key]).toBe("string");
    expect(Object.keys(form.values)).toEqual(expect.arrayContaining(["price.amount", "price.currency", "net_content.value", "net_content.unit"]));
  });

  it("takes a field added to the table without another change (adding a field is one entry in Rust)", () => {
    const fields: ProductField[] = [
      ...PRODUCT_FIELDS,
      { key: "shelf_life" as FieldKey, label: "Shelf life", kind: "text", required: false, max_chars: 60, listed: false },
      { key: "deposit" as FieldKey, label: "Deposit", kind: "price", required: false, max_chars: null, listed: false },
    ];
    const product = { ...full, shelf_life: " 3 days ", deposit: { amount: 0.25, currency: "EUR" } } as Product;
    const form = productToForm(product, fields);
    expect(form.values.shelf_life).toBe(" 3 days ");
    expect(form.values["deposit.amount"]).toBe("0.25");
    form.values["deposit.amount"] = "0,3x";
    const { product: back, localFlags } = formToProduct(form, fields);
    expect((back as unknown as Record<string, unknown>).shelf_life).toBe("3 days");
    expect(localFlags).toEqual([{ field: "deposit.amount", kind: "invalid", message: "not a number, e.g. 3.49" }]);
    expect(Object.keys(emptyProduct(fields))).toContain("shelf_life");
  });

  it("labels the diff's changes", () => {
    expect(changeLabel("net_content")).toBe("Net content");
    expect(changeLabel("attributes.Flavor")).toBe("Attribute “Flavor”");
    expect(changeLabel("whatever")).toBe("whatever");
  });
});
