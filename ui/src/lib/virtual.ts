// A virtualized list: only the rows in (and just around) the viewport exist in the DOM, and rows
// are fetched a page at a time as they scroll into view. Works the same for 10 rows or 100,000.

/** The rows to render: [start, end) around the viewport, `overscan` rows either side. */
export function visibleRange(
  scrollTop: number,
  viewportHeight: number,
  rowHeight: number,
  total: number,
  overscan = 8,
): { start: number; end: number } {
  if (total <= 0 || rowHeight <= 0) return { start: 0, end: 0 };
  const first = Math.floor(Math.max(0, scrollTop) / rowHeight);
  const count = Math.ceil(Math.max(0, viewportHeight) / rowHeight) + 1;
  const start = Math.max(0, Math.min(first, total - 1) - overscan);
  const end = Math.min(total, first + count + overscan);
  return { start, end };
}

export interface Page<T> {
  total: number;
  /** `total` is a lower bound: the source stopped counting past the page (a broad search). */
  total_capped?: boolean;
  rows: T[];
}

/**
 * Rows fetched page by page, keyed by index. A new query makes a new cache; answers that arrive
 * for an older cache are dropped by the caller comparing caches, so a slow page of the previous
 * search never shows in the new one.
 */
export class PageCache<T> {
  private readonly pages = new Map<number, T[]>();
  private readonly loading = new Map<number, Promise<void>>();
  /** Unknown until the first page arrives. */
  total: number | null = null;
  /** `total` is "at least": each page further on counts further, so the list grows as it scrolls. */
  capped = false;

  constructor(
    private readonly fetchPage: (offset: number, limit: number) => Promise<Page<T>>,
    readonly pageSize = 100,
  ) {}

  /** The row at `index`, if its page has arrived. */
  row(index: number): T | undefined {
    return this.pages.get(Math.floor(index / this.pageSize))?.[index % this.pageSize];
  }

  /** Fetches the pages covering [start, end) that are neither here nor on their way. */
  async ensure(start: number, end: number): Promise<void> {
    const first = Math.floor(Math.max(0, start) / this.pageSize);
    const last = Math.floor(Math.max(start, end - 1) / this.pageSize);
    const waits: Promise<void>[] = [];
    for (let page = first; page <= last; page++) {
      if (this.pages.has(page)) continue;
      if (this.total !== null && page * this.pageSize >= this.total && page > 0) continue;
      let pending = this.loading.get(page);
      if (!pending) {
        pending = this.fetchPage(page * this.pageSize, this.pageSize)
          .then((result) => {
            this.pages.set(page, result.rows);
            if (result.total_capped) {
              // Lower bounds from pages that answered in any order: the largest holds.
              this.total = Math.max(this.capped ? (this.total ?? 0) : 0, result.total);
              this.capped = true;
            } else {
              this.total = result.total;
              this.capped = false;
            }
          })
          .finally(() => this.loading.delete(page));
        this.loading.set(page, pending);
      }
      waits.push(pending);
    }
    await Promise.all(waits);
  }

  /** Replaces one row in place (after an edit), if its page is here. */
  update(predicate: (row: T) => boolean, replace: (row: T) => T): void {
    for (const rows of this.pages.values()) {
      const i = rows.findIndex(predicate);
      if (i >= 0) rows[i] = replace(rows[i]);
    }
  }
}
