import { describe, expect, it } from "vitest";
import { serverAwayText } from "./server";

describe("serverAwayText", () => {
  it("says since when, for how long and why the team server is away, and nothing while it answers", () => {
    const since = Date.UTC(2026, 11, 7, 14, 2, 30);
    const away = { away_since_ms: since, reason: "Connection refused" };
    expect(serverAwayText(away, since + 400, "en-GB", "UTC")).toBe(
      "The team catalog's server cannot be reached since 14:02, just now: Connection refused. Imports wait and go on by themselves once it is back; what is shown is what was read before.",
    );
    expect(serverAwayText(away, since + 95_000, "en-GB", "UTC")).toContain("since 14:02, for 1 min 35 s: Connection refused.");
    expect(serverAwayText({ away_since_ms: since, reason: null }, since + 5_000, "en-GB", "UTC")).toContain(
      "since 14:02, for 5 s. Imports wait",
    );
    expect(serverAwayText({ away_since_ms: null, reason: null }, since)).toBeNull();
    expect(serverAwayText(null, since)).toBeNull();
  });
});
