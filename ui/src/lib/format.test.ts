import { describe, expect, it } from "vitest";
import {
  baseName,
  formatLatency,
  formatNetContent,
  formatPrice,
  formatTimestamp,
  formatUsage,
  plural,
  prettyJson,
} from "./format";

describe("format", () => {
  it("formats prices by currency", () => {
    expect(formatPrice({ amount: 3.49, currency: "EUR" }, "en-US")).toBe("€3.49");
    expect(formatPrice({ amount: 1200, currency: "usd" }, "en-US")).toBe("$1,200.00");
    expect(formatPrice({ amount: 500, currency: "JPY" }, "en-US")).toBe("¥500");
    expect(formatPrice({ amount: 2, currency: "??" }, "en-US")).toBe("2.00 ??");
    expect(formatPrice(null)).toBe("");
  });

  it("formats net content", () => {
    expect(formatNetContent({ value: 1.5, unit: "l" }, "en-US")).toBe("1.5 l");
  });

  it("formats timestamps relative to today", () => {
    const now = Date.UTC(2026, 11, 2, 16, 0);
    expect(formatTimestamp(Date.UTC(2026, 11, 2, 14, 5), now, "en-GB", "UTC")).toBe("Today, 14:05");
    expect(formatTimestamp(Date.UTC(2026, 11, 1, 9, 12), now, "en-GB", "UTC")).toBe("Yesterday, 09:12");
    expect(formatTimestamp(Date.UTC(2026, 10, 20, 9, 0), now, "en-GB", "UTC")).toBe("20 Nov 2026, 09:00");
  });

  it("formats latency and usage", () => {
    expect(formatLatency(850)).toBe("850 ms");
    expect(formatLatency(1840)).toBe("1.8 s");
    expect(formatLatency(12_400)).toBe("12 s");
    expect(formatUsage({ prompt_tokens: 1290, output_tokens: 210, thoughts_tokens: 0, total_tokens: 1500, cached_tokens: 0 }, "en-US")).toBe(
      "1,500 tokens (1,290 in, 210 out)",
    );
  });

  it("pretty-prints JSON and leaves other text alone", () => {
    expect(prettyJson('{"a":1}')).toBe('{\n  "a": 1\n}');
    expect(prettyJson("<html>")).toBe("<html>");
  });

  it("takes base names and plurals", () => {
    expect(baseName("/home/ann/photos/IMG_1.jpg")).toBe("IMG_1.jpg");
    expect(baseName("C:\\photos\\a.png")).toBe("a.png");
    expect(plural(1, "flag")).toBe("1 flag");
    expect(plural(3, "flag")).toBe("3 flags");
  });
});
