import { describe, expect, it } from "vitest";
import type { ErrorReport } from "../bindings/ErrorReport";
import type { Product } from "../bindings/Product";
import { emptyProduct } from "./form";
import { flagsAfterRefusal, ReviewModel, reviewState, reviewStatus } from "./review";

function product(overrides: Partial<Product>): Product {
  return { ...emptyProduct(), ...overrides };
}

const oat = product({ name: "Oat Drink", gtin: "4006381333931", attributes: [{ name: "Vegan", value: "yes" }] });

function model(save: (p: Product) => Promise<number> = async () => 1, extra: { discard?: () => void; reextract?: () => void } = {}) {
  return new ReviewModel<number>(reviewState(oat, []), { save, ...extra });
}

describe("ReviewModel", () => {
  it("is clean as loaded and dirty after an edit", () => {
    const review = model();
    expect(review.dirty).toBe(false);
    review.state.form.values.name = "Oat Drink Barista";
    expect(review.dirty).toBe(true);
    expect(review.result.product.name).toBe("Oat Drink Barista");
  });

  it("merges the form's own flags and refuses to save while a field is invalid", async () => {
    const saved: Product[] = [];
    const review = model(async (p) => {
      saved.push(p);
      return 7;
    });
    review.state.form.values["price.amount"] = "3,4x";
    expect(review.invalid).toBe(true);
    expect(review.flags.map((f) => f.field)).toEqual(["price.amount"]);
    expect(await review.save()).toBeNull();
    expect(saved).toEqual([]);
    review.state.form.values["price.amount"] = "3,49";
    review.state.form.values["price.currency"] = "eur";
    expect(await review.save()).toBe(7);
    expect(saved[0].price).toEqual({ amount: 3.49, currency: "EUR" });
    expect(review.state.saving).toBe(false);
  });

  it("shows a validation refusal's flags from the error's data, on the form's rows", async () => {
    const refusal: ErrorReport = {
      code: "validation",
      message: "Not saved — fix the highlighted fields first",
      data: { kind: "validation", flags: [{ field: "attributes[0].name", kind: "invalid", message: "an attribute needs a name" }] },
    };
    const review = model(() => Promise.reject(refusal));
    // A blank row before the attribute: the product's attribute 0 is the form's row 1.
    review.state.form.attributes.unshift({ name: "", value: "" });
    review.state.form.attributes[1].name = " ";
    expect(await review.save()).toBeNull();
    expect(review.state.message).toEqual({ text: refusal.message, kind: "error" });
    expect(review.state.serverFlags).toEqual([{ field: "attributes[1].name", kind: "invalid", message: "an attribute needs a name" }]);
  });

  it("keeps its flags on another refusal and marks a revision conflict", async () => {
    const review = new ReviewModel(reviewState(oat, [{ field: "brand", kind: "uncertain", message: "unsure" }]), {
      save: () => Promise.reject({ code: "revision_conflict", message: "changed by dave" }),
    });
    await review.save();
    expect(review.state.message?.kind).toBe("conflict");
    expect(review.state.serverFlags.map((f) => f.field)).toEqual(["brand"]);
    expect(reviewStatus(review, true)).toEqual({ kind: "message", message: review.state.message });
  });

  it("undoes and redoes recorded edits, and a load starts over", () => {
    const review = model();
    expect(review.state.canUndo).toBe(false);
    review.state.form.values.name = "A";
    review.record();
    review.state.form.values.name = "AB";
    review.undo();
    expect(review.state.form.values.name).toBe("A");
    review.undo();
    expect(review.state.form.values.name).toBe("Oat Drink");
    expect(review.state.canUndo).toBe(false);
    review.redo();
    expect(review.state.form.values.name).toBe("A");
    expect(review.state.canRedo).toBe(true);
    review.load(product({ name: "Fresh" }), []);
    expect(review.state.form.values.name).toBe("Fresh");
    expect([review.state.canUndo, review.state.canRedo, review.dirty]).toEqual([false, false, false]);
  });

  it("runs the caller's discard and re-extract, reporting a failure", async () => {
    let discarded = 0;
    const review = model(undefined, {
      discard: () => void discarded++,
      reextract: () => {
        throw { code: "circuit_open", message: "Gemini is failing" };
      },
    });
    expect([review.canDiscard, review.canReextract]).toEqual([true, true]);
    await review.discard();
    expect(discarded).toBe(1);
    await review.reextract();
    expect(review.state.message).toEqual({ text: "Re-extract failed: Gemini is failing", kind: "error" });
    expect(review.state.working).toBeNull();
    expect(model().canReextract).toBe(false);
  });
});

describe("reviewStatus", () => {
  it("puts invalid before unsure, and unsaved edits only where asked", () => {
    const review = new ReviewModel(reviewState(oat, [{ field: "brand", kind: "uncertain", message: "unsure" }]), { save: async () => 1 });
    expect(reviewStatus(review, true)).toEqual({ kind: "uncertain", text: "1 unsure — please check" });
    review.state.form.values.name = "Changed";
    expect(reviewStatus(review, true)).toEqual({ kind: "dirty" });
    expect(reviewStatus(review, false).kind).toBe("uncertain");
    review.state.form.values.gtin = "12";
    review.state.serverFlags = [...review.state.serverFlags, { field: "gtin", kind: "invalid", message: "bad" }];
    expect(reviewStatus(review, true)).toEqual({ kind: "invalid", text: "Fix 1 field to save" });
    review.state.validating = true;
    expect(reviewStatus(review, true)).toEqual({ kind: "checking" });
  });
});

describe("flagsAfterRefusal", () => {
  it("reads only a validation refusal's data", () => {
    expect(flagsAfterRefusal({ code: "validation", message: "m" }, [])).toBeNull();
    expect(flagsAfterRefusal({ code: "catalog", message: "m" }, [])).toBeNull();
    const flags = [{ field: "gtin", kind: "invalid" as const, message: "bad" }];
    expect(flagsAfterRefusal({ code: "validation", message: "m", data: { kind: "validation", flags } }, [])).toEqual(flags);
  });
});
