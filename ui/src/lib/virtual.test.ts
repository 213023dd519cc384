import { describe, expect, it } from "vitest";
import { PageCache, visibleRange } from "./virtual";

describe("visibleRange", () => {
  it("covers the viewport plus overscan, clamped to the list", () => {
    expect(visibleRange(0, 400, 40, 1000, 5)).toEqual({ start: 0, end: 16 });
    expect(visibleRange(4000, 400, 40, 1000, 5)).toEqual({ start: 95, end: 116 });
    expect(visibleRange(39_990, 400, 40, 1000, 5)).toEqual({ start: 994, end: 1000 });
  });
  it("is empty for an empty list and never negative", () => {
    expect(visibleRange(100, 400, 40, 0)).toEqual({ start: 0, end: 0 });
    expect(visibleRange(-50, 400, 40, 3, 2)).toEqual({ start: 0, end: 3 });
  });
  it("handles a scroll position past the end (list shrank)", () => {
    const r = visibleRange(1_000_000, 400, 40, 10, 2);
    expect(r.start).toBeLessThan(r.end);
    expect(r.end).toBe(10);
  });
});

describe("PageCache", () => {
  function source(total: number) {
    const calls: number[] = [];
    const fetch = async (offset: number, limit: number) => {
      calls.push(offset);
      const rows = [];
      for (let i = offset; i < Math.min(total, offset + limit); i++) rows.push(i);
      return { total, rows };
    };
    return { calls, fetch };
  }

  it("fetches only the pages a range needs, once", async () => {
    const s = source(1000);
    const cache = new PageCache(s.fetch, 100);
    await cache.ensure(0, 30);
    expect(s.calls).toEqual([0]);
    expect(cache.total).toBe(1000);
    await cache.ensure(90, 210);
    expect(s.calls).toEqual([0, 100, 200]);
    await cache.ensure(150, 160);
    expect(s.calls).toEqual([0, 100, 200]);
    expect(cache.row(205)).toBe(205);
    expect(cache.row(650)).toBeUndefined();
  });

  it("shares a page that is already on its way", async () => {
    const s = source(500);
    const cache = new PageCache(s.fetch, 100);
    await Promise.all([cache.ensure(0, 10), cache.ensure(5, 50)]);
    expect(s.calls).toEqual([0]);
  });

  it("does not ask for pages past the end once the total is known", async () => {
    const s = source(120);
    const cache = new PageCache(s.fetch, 100);
    await cache.ensure(0, 10);
    await cache.ensure(0, 1000);
    expect(s.calls).toEqual([0, 100]);
    expect(cache.row(119)).toBe(119);
  });

  it("grows a capped total as pages further on count further", async () => {
    // 25,000 match; the source counts at most 10,000 past each page's offset.
    const calls: number[] = [];
    const cache = new PageCache(async (offset: number, limit: number) => {
      calls.push(offset);
      const total = Math.min(25_000, offset + 10_000);
      return { total, total_capped: total < 25_000, rows: [offset, offset + limit] };
    }, 100);
    await cache.ensure(0, 10);
    expect([cache.total, cache.capped]).toEqual([10_000, true]);
    // The page before the end of what is known counts further: the list grows.
    await cache.ensure(9_950, 10_000);
    expect([cache.total, cache.capped]).toEqual([19_900, true]);
    // A page answering late with a smaller lower bound does not shrink it.
    await cache.ensure(200, 210);
    expect(cache.total).toBe(19_900);
    // Near the end the count is exact again.
    await cache.ensure(19_850, 19_900);
    expect([cache.total, cache.capped]).toEqual([25_000, false]);
    expect(calls).toEqual([0, 9_900, 200, 19_800]);
  });

  it("retries a page whose fetch failed", async () => {
    let fail = true;
    const cache = new PageCache(async (offset) => {
      if (fail) throw new Error("down");
      return { total: 10, rows: [offset] };
    }, 100);
    await expect(cache.ensure(0, 1)).rejects.toThrow("down");
    fail = false;
    await cache.ensure(0, 1);
    expect(cache.row(0)).toBe(0);
  });

  it("updates a loaded row in place", async () => {
    const s = source(10);
    const cache = new PageCache(s.fetch, 100);
    await cache.ensure(0, 10);
    cache.update((r) => r === 3, () => 33);
    expect(cache.row(3)).toBe(33);
  });
});
