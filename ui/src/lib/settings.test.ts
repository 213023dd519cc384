import { describe, expect, it } from "vitest";
import type { Settings } from "../bindings/Settings";
import { fieldForConfigError, formToSettingsInput, settingsToForm } from "./settings";

const settings: Settings = {
  gemini: {
    base_url: "https://generativelanguage.googleapis.com",
    model: "gemini-2.5-flash",
    timeout: "1m",
    connect_timeout: "10s",
    read_timeout: "45s",
  },
  image: { max_long_edge: 1536, jpeg_quality: 85, max_file_bytes: 20_000_000, max_pixels: 50_000_000 },
  api_key: { configured: true, hint: "••••x9Q2", source: "config_file" },
  config_path: "/home/ann/.config/product-extractor/config.toml",
};

describe("settings form", () => {
  it("round-trips with friendly units", () => {
    const form = settingsToForm(settings);
    expect(form.maxFileMb).toBe("20");
    expect(form.maxMegapixels).toBe("50");
    const { input, errors } = formToSettingsInput(form);
    expect(errors).toEqual({});
    expect(input).toEqual({ gemini: settings.gemini, image: settings.image, api_key: { action: "keep" } });
  });

  it("sets or clears the key", () => {
    const form = { ...settingsToForm(settings), apiKey: "  AIzaNEW  " };
    expect(formToSettingsInput(form).input.api_key).toEqual({ action: "set", key: "AIzaNEW" });
    expect(formToSettingsInput(settingsToForm(settings), "clear").input.api_key).toEqual({ action: "clear" });
  });

  it("reports bad numbers per field", () => {
    const form = { ...settingsToForm(settings), jpegQuality: "150", maxFileMb: "abc", model: " " };
    const { errors } = formToSettingsInput(form);
    expect(Object.keys(errors).sort()).toEqual(["jpegQuality", "maxFileMb", "model"]);
  });

  it("finds the field a config error names", () => {
    expect(fieldForConfigError('gemini.read_timeout: invalid duration "5 parsecs"')).toBe("readTimeout");
    expect(fieldForConfigError("invalid value for `timeout`: expected 30s")).toBe("timeout");
    expect(fieldForConfigError("image.max_pixels must be more than 0")).toBe("maxMegapixels");
    expect(fieldForConfigError("something else")).toBeNull();
  });
});
