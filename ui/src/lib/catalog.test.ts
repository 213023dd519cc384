import { describe, expect, it } from "vitest";
import { compareProducts } from "./catalog";
import { emptyProduct } from "./form";

describe("compareProducts", () => {
  it("marks the fields the reviewer changed", () => {
    const proposed = { ...emptyProduct(), name: "Oat drink", price: { amount: 2.49, currency: "EUR" } };
    const saved = { ...proposed, name: "Oat Drink Barista" };
    const rows = compareProducts(saved, proposed, "en-US");
    const byField = Object.fromEntries(rows.map((r) => [r.field, r]));
    expect(byField.name).toMatchObject({ saved: "Oat Drink Barista", proposed: "Oat drink", differs: true });
    expect(byField.price).toMatchObject({ saved: "€2.49", differs: false });
  });

  it("has nothing to compare without a proposal", () => {
    const rows = compareProducts({ ...emptyProduct(), name: "x" }, null);
    expect(rows.every((r) => r.proposed === null && !r.differs)).toBe(true);
  });
});
