import { describe, expect, it } from "vitest";
import { serverAwayText } from "./server";

describe("serverAwayText", () => {
  it("says since when and why the team server is away, and nothing while it answers", () => {
    const since = Date.UTC(2026, 11, 7, 14, 2, 30);
    expect(serverAwayText({ away_since_ms: since, reason: "Connection refused" }, "en-GB", "UTC")).toBe(
      "The team catalog's server cannot be reached since 14:02 (Connection refused). Imports wait and go on by themselves once it is back; what is shown is what was read before.",
    );
    expect(serverAwayText({ away_since_ms: null, reason: null })).toBeNull();
    expect(serverAwayText(null)).toBeNull();
  });
});
