import { describe, expect, it } from "vitest";
import type { Product } from "../bindings/Product";
import { emptyProduct } from "./form";
import { applyChanges, changeLabel } from "./reextract";

function product(overrides: Partial<Product>): Product {
  return { ...emptyProduct(), ...overrides };
}

describe("applyChanges", () => {
  const saved = product({
    name: "Oat Drink",
    brand: "Oatly",
    price: { amount: 2.49, currency: "EUR" },
    attributes: [
      { name: "Flavor", value: "Plain" },
      { name: "Pack", value: "1 l" },
    ],
  });
  const proposal = product({
    name: "Oat Drink Barista",
    brand: null,
    price: { amount: 2.99, currency: "EUR" },
    gtin: "7394376616037",
    attributes: [
      { name: "Flavor", value: "Barista" },
      { name: "Vegan", value: "yes" },
    ],
    uncertain_fields: ["gtin"],
  });

  it("takes only the accepted fields", () => {
    const next = applyChanges(saved, proposal, ["name", "gtin"]);
    expect(next.name).toBe("Oat Drink Barista");
    expect(next.gtin).toBe("7394376616037");
    expect(next.brand).toBe("Oatly");
    expect(next.price).toEqual({ amount: 2.49, currency: "EUR" });
  });

  it("can clear a field the proposal left empty", () => {
    expect(applyChanges(saved, proposal, ["brand"]).brand).toBeNull();
  });

  it("changes, adds and removes attributes by name, keeping the order", () => {
    const next = applyChanges(saved, proposal, ["attributes.Flavor", "attributes.Vegan", "attributes.Pack"]);
    expect(next.attributes).toEqual([
      { name: "Flavor", value: "Barista" },
      { name: "Vegan", value: "yes" },
    ]);
  });

  it("never mutates its inputs", () => {
    const before = structuredClone(saved);
    const next = applyChanges(saved, proposal, ["price", "attributes.Vegan", "uncertain_fields"]);
    next.price!.amount = 0;
    next.uncertain_fields.push("x");
    expect(saved).toEqual(before);
    expect(proposal.price!.amount).toBe(2.99);
    expect(proposal.uncertain_fields).toEqual(["gtin"]);
  });

  it("ignores unknown field names", () => {
    expect(applyChanges(saved, proposal, ["bogus", "__proto__"])).toEqual(saved);
  });
});

describe("changeLabel", () => {
  it("names fields and attributes", () => {
    expect(changeLabel("net_content")).toBe("Net content");
    expect(changeLabel("attributes.Flavor")).toBe("Attribute “Flavor”");
    expect(changeLabel("whatever")).toBe("whatever");
  });
});
