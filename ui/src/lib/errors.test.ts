import { describe, expect, it } from "vitest";
import { adviceFor, isErrorReport, toErrorReport } from "./errors";

describe("errors", () => {
  it("keeps ErrorReports as they are", () => {
    const e = { code: "gemini_auth", message: "API key not valid" } as const;
    expect(isErrorReport(e)).toBe(true);
    expect(toErrorReport(e)).toBe(e);
  });

  it("knows the resilience codes", () => {
    expect(isErrorReport({ code: "circuit_open", message: "Gemini is failing (circuit open)" })).toBe(true);
    expect(isErrorReport({ code: "bulkhead_full", message: "busy" })).toBe(true);
    expect(isErrorReport({ code: "rate_limited", message: "slow down" })).toBe(true);
  });

  it("wraps anything else with a readable message", () => {
    expect(toErrorReport("command foo not found").message).toBe("command foo not found");
    expect(toErrorReport(new Error("boom")).message).toBe("boom");
    expect(toErrorReport({ code: "weird", message: "odd" }).message).toBe("odd");
    expect(toErrorReport({ a: 1 }).message).toBe('{"a":1}');
    expect(toErrorReport(undefined).message).not.toContain("[object");
    expect(toErrorReport(null).code).toBe("io");
  });

  it("maps codes to actions", () => {
    expect(adviceFor("gemini_auth").action).toBe("open_settings");
    expect(adviceFor("circuit_open").action).toBe("open_status");
    for (const code of ["gemini_quota", "gemini_unavailable", "timeout", "network", "response_too_large", "bulkhead_full", "rate_limited"] as const) {
      expect(adviceFor(code).action).toBe("retry");
    }
    for (const code of ["invalid_image", "unsupported_format", "image_too_large"] as const) {
      expect(adviceFor(code).action).toBe("none");
      expect(adviceFor(code).hint.length).toBeGreaterThan(10);
    }
  });
});
