import { describe, expect, it } from "vitest";
import { buildQuery, defaultSort, emptyFilters, hasFilters, remoteChange, toggleSort } from "./catalog";

describe("the catalog query", () => {
  it("sorts newest first without text and by relevance with it", () => {
    expect(defaultSort("")).toEqual({ key: "updated", direction: "desc" });
    expect(defaultSort("oat")).toEqual({ key: "relevance", direction: "desc" });
  });

  it("flips the same column and starts another in its natural order", () => {
    expect(toggleSort({ key: "name", direction: "asc" }, "name")).toEqual({ key: "name", direction: "desc" });
    expect(toggleSort({ key: "name", direction: "desc" }, "price")).toEqual({ key: "price", direction: "asc" });
    expect(toggleSort({ key: "name", direction: "asc" }, "updated")).toEqual({ key: "updated", direction: "desc" });
  });

  it("turns the filters into a query", () => {
    const filters = { ...emptyFilters(), text: "oat", category: "Drinks", flaggedOnly: true, priceMin: "1,50", priceMax: "" };
    const built = buildQuery(filters, { key: "price", direction: "asc" }, 100, 50);
    expect(built).toEqual({
      query: {
        text: "oat",
        category: "Drinks",
        brand: null,
        flagged: true,
        price_min: 1.5,
        price_max: null,
        sort: "price",
        direction: "asc",
        offset: 100,
        limit: 50,
      },
    });
    expect(hasFilters(filters)).toBe(true);
    expect(hasFilters({ ...emptyFilters(), text: "x" })).toBe(false);
  });

  it("falls back to newest first when relevance has no text to rank", () => {
    const built = buildQuery(emptyFilters(), { key: "relevance", direction: "desc" }, 0, 50);
    expect("query" in built && built.query.sort).toBe("updated");
  });

  it("refuses a price range that is not numbers or is upside down", () => {
    expect(buildQuery({ ...emptyFilters(), priceMin: "abc" }, defaultSort(""), 0, 50)).toEqual({ error: "Price filter: enter a number, e.g. 9.99" });
    expect(buildQuery({ ...emptyFilters(), priceMin: "5", priceMax: "2" }, defaultSort(""), 0, 50)).toHaveProperty("error");
  });
});

describe("remoteChange", () => {
  const shown = { revision: 4, deleted_at: null };
  const now = (over: Partial<{ revision: number; deleted_at: number | null; deleted_by: string | null; updated_by: string }>) => ({
    revision: 4,
    deleted_at: null,
    deleted_by: null,
    updated_by: "alice",
    ...over,
  });

  it("says who saved which revision", () => {
    expect(remoteChange(shown, now({ revision: 5 }))).toBe("Changed by alice at revision 5");
    expect(remoteChange(shown, now({ revision: 5, updated_by: "" }))).toBe("Changed by someone at revision 5");
  });

  it("says who deleted it, and when it came back", () => {
    expect(remoteChange(shown, now({ deleted_at: 1, deleted_by: "bob" }))).toBe("Deleted by bob");
    expect(remoteChange({ revision: 4, deleted_at: 1 }, now({}))).toBe("Brought back from the deleted products");
  });

  it("is nothing when the product is as loaded", () => {
    expect(remoteChange(shown, now({}))).toBeNull();
  });
});
