// The catalog table's search box, filters and sort, turned into the backend's ProductQuery.
import type { ProductQuery } from "../bindings/ProductQuery";
import type { ProductRecord } from "../bindings/ProductRecord";
import { parseDecimal } from "./form";

export type SortKey = ProductQuery["sort"];

export interface CatalogFilters {
  text: string;
  category: string;
  brand: string;
  flaggedOnly: boolean;
  priceMin: string;
  priceMax: string;
}

export function emptyFilters(): CatalogFilters {
  return { text: "", category: "", brand: "", flaggedOnly: false, priceMin: "", priceMax: "" };
}

export interface CatalogSort {
  key: SortKey;
  direction: ProductQuery["direction"];
}

/** Newest first, or best match first while there is search text. */
export function defaultSort(text: string): CatalogSort {
  return text.trim() === "" ? { key: "updated", direction: "desc" } : { key: "relevance", direction: "desc" };
}

/** A click on a column header: the same column flips, another starts in its natural order. */
export function toggleSort(current: CatalogSort, key: SortKey): CatalogSort {
  if (current.key === key) return { key, direction: current.direction === "asc" ? "desc" : "asc" };
  return { key, direction: key === "updated" || key === "relevance" ? "desc" : "asc" };
}

/** The query for a page, or the reason the filters cannot be used yet (a price that is not a number). */
export function buildQuery(
  filters: CatalogFilters,
  sort: CatalogSort,
  offset: number,
  limit: number,
): { query: ProductQuery } | { error: string } {
  const priceMin = parseDecimal(filters.priceMin);
  const priceMax = parseDecimal(filters.priceMax);
  if (Number.isNaN(priceMin) || Number.isNaN(priceMax)) return { error: "Price filter: enter a number, e.g. 9.99" };
  if (priceMin !== null && priceMax !== null && priceMin > priceMax)
    return { error: "Price filter: the minimum is above the maximum" };
  // Relevance needs search text; without it the backend sorts by date, and so do we.
  const effective = sort.key === "relevance" && filters.text.trim() === "" ? defaultSort("") : sort;
  return {
    query: {
      text: filters.text,
      category: filters.category || null,
      brand: filters.brand || null,
      flagged: filters.flaggedOnly ? true : null,
      price_min: priceMin,
      price_max: priceMax,
      sort: effective.key,
      direction: effective.direction,
      offset,
      limit,
    },
  };
}

/** True when any filter besides the search text is set. */
export function hasFilters(filters: CatalogFilters): boolean {
  return filters.category !== "" || filters.brand !== "" || filters.flaggedOnly || filters.priceMin.trim() !== "" || filters.priceMax.trim() !== "";
}

/** What a change saved elsewhere (another desktop on a team catalog) did to the product open
 * here, in words; `null` when the product is as it was loaded (same revision, same deleted state). */
export function remoteChange(
  shown: Pick<ProductRecord, "revision" | "deleted_at">,
  now: Pick<ProductRecord, "revision" | "deleted_at" | "deleted_by" | "updated_by">,
): string | null {
  if (now.deleted_at !== null && shown.deleted_at === null) return `Deleted by ${now.deleted_by || "someone"}`;
  if (now.deleted_at === null && shown.deleted_at !== null) return "Brought back from the deleted products";
  if (now.revision !== shown.revision) return `Changed by ${now.updated_by || "someone"} at revision ${now.revision}`;
  return null;
}
