import { describe, expect, it } from "vitest";
import type { Settings } from "../bindings/Settings";
import type { AppStatus } from "../bindings/AppStatus";
import {
  catalogNext,
  emptyPriceRow,
  fieldForConfigError,
  formToSettingsInput,
  isResilienceField,
  modelPriceText,
  parseDuration,
  settingsToForm,
} from "./settings";

const settings: Settings = {
  gemini: {
    base_url: "https://generativelanguage.googleapis.com",
    model: "gemini-2.5-flash",
    timeout: "1m",
    connect_timeout: "10s",
    read_timeout: "45s",
    thinking: "off",
    max_output_tokens: 8192,
    temperature: null,
    media_resolution: "model_default",
  },
  image: { max_long_edge: 1536, jpeg_quality: 85, max_file_bytes: 20_000_000, max_pixels: 50_000_000 },
  resilience: {
    circuit_breaker: {
      sliding_window_type: "count_based",
      sliding_window_size: 20,
      minimum_number_of_calls: 10,
      failure_rate_threshold: 50,
      slow_call_rate_threshold: 100,
      slow_call_duration_threshold: "1m",
      wait_duration_in_open_state: "15s",
      permitted_number_of_calls_in_half_open_state: 5,
      automatic_transition_from_open_to_half_open_enabled: false,
      remember_across_restarts: true,
      max_wait_duration_in_half_open_state: "0s",
    },
    bulkhead: { max_concurrent_calls: 10, max_wait_duration: "0s" },
    time_limiter: { timeout_duration: "30s" },
    retry: { max_attempts: 3, wait_duration: "500ms", max_wait: "1m" },
    rate_limiter: { enabled: false, limit_for_period: 10, limit_refresh_period: "1m" },
  },
  pricing: {
    rows: [
      {
        model: "my-tuned-model",
        price: { input_per_million: 1.25, output_per_million: 5, cached_input_per_million: null, batch_discount: 0.5 },
      },
    ],
    model_price: {
      model: "gemini-2.5-flash",
      price: { input_per_million: 0.3, output_per_million: 2.5, cached_input_per_million: 0.03, batch_discount: 0.5 },
      user: false,
    },
  },
  api_key: { configured: true, hint: "••••x9Q2", source: "keyring", keyring_problem: null },
  config_path: "/home/ann/.config/product-extractor/config.toml",
  http_api: { with_window: false, listen: "127.0.0.1:8080", token_set: false, status: { state: "off" } },
};

describe("settings form", () => {
  it("sends a new key to the keyring unless the user chose the config file", () => {
    const form = { ...settingsToForm(settings), apiKey: "  AIzaNEWKEY  " };
    expect(form.keyInConfigFile).toBe(false);
    expect(formToSettingsInput(form).input.api_key).toEqual({ action: "set", key: "AIzaNEWKEY" });
    form.keyInConfigFile = true;
    expect(formToSettingsInput(form).input.api_key).toEqual({ action: "set_in_config_file", key: "AIzaNEWKEY" });
    // No key typed: the choice alone changes nothing.
    expect(formToSettingsInput({ ...form, apiKey: "" }).input.api_key).toEqual({ action: "keep" });
  });

  it("keeps the config file as the place for a key already there", () => {
    const inFile: Settings = { ...settings, api_key: { ...settings.api_key, source: "config_file" } };
    expect(settingsToForm(inFile).keyInConfigFile).toBe(true);
  });

  it("round-trips with friendly units", () => {
    const form = settingsToForm(settings);
    expect(form.maxFileMb).toBe("20");
    expect(form.maxMegapixels).toBe("50");
    const { input, errors } = formToSettingsInput(form);
    expect(errors).toEqual({});
    expect(input).toEqual({
      gemini: settings.gemini,
      image: settings.image,
      resilience: settings.resilience,
      prices: settings.pricing.rows,
      api_key: { action: "keep" },
      http_api: { with_window: false, listen: "127.0.0.1:8080" },
    });
  });

  it("turns the window's HTTP API on at an address it checks", () => {
    const form = { ...settingsToForm(settings), httpApiWithWindow: true, httpApiListen: " 127.0.0.1:9090 " };
    const { input, errors } = formToSettingsInput(form);
    expect(errors).toEqual({});
    expect(input.http_api).toEqual({ with_window: true, listen: "127.0.0.1:9090" });
    expect(formToSettingsInput({ ...form, httpApiListen: "[::1]:8080" }).errors).toEqual({});
    for (const bad of ["localhost", "127.0.0.1", "127.0.0.1:70000", "http://127.0.0.1:8080"]) {
      expect(formToSettingsInput({ ...form, httpApiListen: bad }).errors.httpApiListen).toBeTruthy();
    }
    expect(fieldForConfigError('invalid setting server.listen: "x" is not an address and port like 127.0.0.1:8080')).toBe(
      "httpApiListen",
    );
  });

  it("edits thinking, output tokens, temperature and media resolution", () => {
    const form = settingsToForm(settings);
    expect([form.thinking, form.maxOutputTokens, form.temperature, form.mediaResolution]).toEqual([
      "off",
      "8192",
      "",
      "model_default",
    ]);
    const edited = {
      ...form,
      thinking: "low" as const,
      maxOutputTokens: " 4096 ",
      temperature: "0,7",
      mediaResolution: "medium" as const,
    };
    const { input, errors } = formToSettingsInput(edited);
    expect(errors).toEqual({});
    expect(input.gemini).toMatchObject({ thinking: "low", max_output_tokens: 4096, temperature: 0.7, media_resolution: "medium" });
    // An empty temperature is the default, not 0.
    expect(formToSettingsInput({ ...edited, temperature: " " }).input.gemini.temperature).toBeNull();
    const bad = formToSettingsInput({ ...edited, maxOutputTokens: "0", temperature: "2.5" }).errors;
    expect(Object.keys(bad).sort()).toEqual(["maxOutputTokens", "temperature"]);
    expect(bad.temperature).toBe("Temperature must be a number from 0 to 2, or empty for the default");
  });

  it("edits, adds and removes price rows, and checks each", () => {
    const form = settingsToForm(settings);
    expect(form.prices).toEqual([{ model: "my-tuned-model", input: "1.25", output: "5", cached: "", batchDiscount: "0.5" }]);
    const added = { ...emptyPriceRow(), model: " gemini-2.5-flash-lite ", input: "0.12", output: "0.5", cached: "0.012" };
    const { input, errors } = formToSettingsInput({ ...form, prices: [...form.prices, added] });
    expect(errors).toEqual({});
    expect(input.prices).toEqual([
      settings.pricing.rows[0],
      {
        model: "gemini-2.5-flash-lite",
        price: { input_per_million: 0.12, output_per_million: 0.5, cached_input_per_million: 0.012, batch_discount: 0.5 },
      },
    ]);
    // Removing every row sends none (the backend drops the user's rows).
    expect(formToSettingsInput({ ...form, prices: [] }).input.prices).toEqual([]);

    const problem = (row: Partial<typeof added>, rows = form.prices) =>
      formToSettingsInput({ ...form, prices: [...rows, { ...added, ...row }] }).errors.prices;
    expect(problem({ model: "  " })).toBe("Price row 2: the model id is required");
    expect(problem({ model: "my-tuned-model" })).toBe("Price row 2 (my-tuned-model): this model already has a row");
    expect(problem({ input: "" })).toBe(
      "Price row 2 (gemini-2.5-flash-lite): the input price must be between 0 and 1000 dollars per million tokens",
    );
    expect(problem({ output: "-1" })).toMatch(/the output price must be/);
    expect(problem({ cached: "abc" })).toMatch(/the cached input price must be/);
    expect(problem({ batchDiscount: "1.5" })).toBe(
      "Price row 2 (gemini-2.5-flash-lite): the batch discount must be a factor from 0 to 1 (0.5: half price)",
    );
    expect(problem({})).toBeUndefined();
  });

  it("says the configured model's price, or that it is unknown", () => {
    expect(modelPriceText(settings.pricing)).toBe(
      "$0.30 in / $2.50 out per million tokens (gemini-2.5-flash, list price; batch × 0.5)",
    );
    expect(modelPriceText({ ...settings.pricing, model_price: null })).toBe("price unknown");
  });

  it("edits every resilience setting", () => {
    const form = {
      ...settingsToForm(settings),
      breakerWindowType: "time_based" as const,
      breakerWindowSize: " 60 ",
      breakerMinimumCalls: "4",
      breakerFailureRate: "33,5",
      breakerSlowCallRate: "80",
      breakerSlowCallDuration: " 20s ",
      breakerWaitInOpen: "1m 30s",
      breakerHalfOpenCalls: "2",
      breakerAutoHalfOpen: true,
      breakerMaxWaitInHalfOpen: "45s",
      breakerRemember: false,
      bulkheadMaxConcurrent: "3",
      bulkheadMaxWait: "250ms",
      timeLimiterTimeout: "1.5m",
      retryMaxAttempts: "1",
      retryWaitDuration: "1s",
      retryMaxWait: "0",
      rateLimiterEnabled: true,
      rateLimiterLimit: "12",
      rateLimiterRefreshPeriod: "1h",
    };
    const { input, errors } = formToSettingsInput(form);
    expect(errors).toEqual({});
    expect(input.resilience).toEqual({
      circuit_breaker: {
        sliding_window_type: "time_based",
        sliding_window_size: 60,
        minimum_number_of_calls: 4,
        failure_rate_threshold: 33.5,
        slow_call_rate_threshold: 80,
        slow_call_duration_threshold: "20s",
        wait_duration_in_open_state: "1m 30s",
        permitted_number_of_calls_in_half_open_state: 2,
        automatic_transition_from_open_to_half_open_enabled: true,
        remember_across_restarts: false,
        max_wait_duration_in_half_open_state: "45s",
      },
      bulkhead: { max_concurrent_calls: 3, max_wait_duration: "250ms" },
      time_limiter: { timeout_duration: "1.5m" },
      retry: { max_attempts: 1, wait_duration: "1s", max_wait: "0" },
      rate_limiter: { enabled: true, limit_for_period: 12, limit_refresh_period: "1h" },
    });
  });

  it("reports bad resilience values per field", () => {
    const form = {
      ...settingsToForm(settings),
      breakerWindowSize: "0",
      breakerMinimumCalls: "2.5",
      breakerFailureRate: "0",
      breakerSlowCallRate: "100.5",
      breakerWaitInOpen: "soon",
      breakerHalfOpenCalls: "",
      bulkheadMaxWait: " ",
      timeLimiterTimeout: "30",
      retryMaxAttempts: "abc",
      rateLimiterLimit: "5000000000",
    };
    const { errors } = formToSettingsInput(form);
    expect(Object.keys(errors).sort()).toEqual(
      [
        "breakerWindowSize",
        "breakerMinimumCalls",
        "breakerFailureRate",
        "breakerSlowCallRate",
        "breakerWaitInOpen",
        "breakerHalfOpenCalls",
        "bulkheadMaxWait",
        "timeLimiterTimeout",
        "retryMaxAttempts",
        "rateLimiterLimit",
      ].sort(),
    );
    expect(errors.breakerFailureRate).toBe("Failure rate threshold must be a percentage above 0 and at most 100");
    expect(errors.bulkheadMaxWait).toBe("Max wait is required");
    expect(errors.timeLimiterTimeout).toBe("Timeout duration must be a duration such as 30s, 2m or 1h30m");
    expect(errors.breakerWaitInOpen).toBe("Wait in open state must be a duration such as 30s, 2m or 1h30m");
    expect(Object.keys(errors).every(isResilienceField)).toBe(true);
    expect(isResilienceField("jpegQuality")).toBe(false);
  });

  it("sets or clears the key", () => {
    const form = { ...settingsToForm(settings), apiKey: "  AIzaNEW  " };
    expect(formToSettingsInput(form).input.api_key).toEqual({ action: "set", key: "AIzaNEW" });
    expect(formToSettingsInput(settingsToForm(settings), "clear").input.api_key).toEqual({ action: "clear" });
  });

  it("reads durations as the backend does", () => {
    const cases: [string, number | null][] = [
      ["30s", 30],
      [" 2m ", 120],
      ["1h30m", 5400],
      ["1m 30s", 90],
      ["1.5s", 1.5],
      ["500ms", 0.5],
      ["0", 0],
      ["0s", 0],
      ["2 hours 1 min", 7260],
      ["1M", 2_630_016],
      ["abc", null],
      ["30", null],
      ["5 parsecs", null],
      ["30S", null],
      ["1.s", null],
      ["-5s", null],
      ["s30", null],
      ["", null],
    ];
    for (const [text, seconds] of cases) expect(parseDuration(text), text).toBe(seconds);
  });

  it("says plainly when a Gemini duration or the address is wrong", () => {
    const form = {
      ...settingsToForm(settings),
      timeout: "abc",
      connectTimeout: "0s",
      readTimeout: " 1h30m ",
      baseUrl: "generativelanguage.googleapis.com",
    };
    const { input, errors } = formToSettingsInput(form);
    expect(errors).toEqual({
      timeout: "Timeout must be a duration such as 30s, 2m or 1h30m",
      connectTimeout: "Connect timeout must be longer than zero, such as 30s, 2m or 1h30m",
      baseUrl: "Base URL must be a full address starting with https://, such as https://generativelanguage.googleapis.com",
    });
    expect(input.gemini.read_timeout).toBe("1h30m");
    for (const url of ["https://", "ftp://example.com", "https//example.com", "  "]) {
      expect(formToSettingsInput({ ...settingsToForm(settings), baseUrl: url }).errors.baseUrl, url).toBeDefined();
    }
    // A local proxy over plain http is the user's choice (the backend takes it too).
    const local = formToSettingsInput({ ...settingsToForm(settings), baseUrl: " http://127.0.0.1:8080 " });
    expect(local.errors).toEqual({});
    expect(local.input.gemini.base_url).toBe("http://127.0.0.1:8080");
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

  it("finds the resilience field a config error names", () => {
    const cases: [string, string][] = [
      ["invalid setting circuit_breaker.failure_rate_threshold: must be a percentage", "breakerFailureRate"],
      ["invalid setting circuit_breaker.slow_call_rate_threshold: must be a percentage", "breakerSlowCallRate"],
      ["invalid setting circuit_breaker.sliding_window_size: must be at least 1", "breakerWindowSize"],
      ["invalid setting circuit_breaker.minimum_number_of_calls: must be at least 1", "breakerMinimumCalls"],
      ["invalid setting circuit_breaker.wait_duration_in_open_state: must be at least 1ms", "breakerWaitInOpen"],
      ["invalid setting circuit_breaker.slow_call_duration_threshold: must be longer than zero", "breakerSlowCallDuration"],
      ["invalid setting circuit_breaker.permitted_number_of_calls_in_half_open_state: x", "breakerHalfOpenCalls"],
      ["invalid setting circuit_breaker.max_wait_duration_in_half_open_state: x", "breakerMaxWaitInHalfOpen"],
      ["invalid setting bulkhead.max_concurrent_calls: must be at least 1", "bulkheadMaxConcurrent"],
      ["invalid setting bulkhead.max_wait_duration: x", "bulkheadMaxWait"],
      ["invalid setting time_limiter.timeout_duration: must be longer than zero", "timeLimiterTimeout"],
      ["invalid setting retry.max_attempts: must be at least 1 (the first call counts)", "retryMaxAttempts"],
      ["invalid setting retry.wait_duration: x", "retryWaitDuration"],
      ["invalid setting retry.max_wait: x", "retryMaxWait"],
      ["invalid setting rate_limiter.limit_for_period: must be at least 1", "rateLimiterLimit"],
      ["invalid setting rate_limiter.limit_refresh_period: must be longer than zero", "rateLimiterRefreshPeriod"],
      // The breaker alone names its keys without the section.
      ["failure_rate_threshold: must be a percentage greater than 0 and at most 100", "breakerFailureRate"],
    ];
    for (const [message, field] of cases) expect(fieldForConfigError(message), message).toBe(field);
    // Longer keys that contain shorter ones do not fall back to the Gemini or other fields.
    expect(fieldForConfigError("invalid setting time_limiter.timeout_duration: x")).not.toBe("timeout");
    // Keys other sections share a word with match only with their section.
    expect(fieldForConfigError("the rate limiter is enabled")).toBeNull();
    expect(fieldForConfigError("invalid setting gemini.timeout: must be longer than zero")).toBe("timeout");
  });

  it("finds the Gemini request and price fields a config error names", () => {
    expect(fieldForConfigError("invalid setting gemini.max_output_tokens: must be more than zero")).toBe("maxOutputTokens");
    expect(fieldForConfigError("invalid setting gemini.temperature: must be between 0 and 2")).toBe("temperature");
    expect(fieldForConfigError('invalid setting pricing."my-model".input_per_million: must be between 0 and 1000 dollars')).toBe(
      "prices",
    );
    expect(fieldForConfigError("invalid setting pricing: a model id is required")).toBe("prices");
  });
});

describe("the catalog at the next start", () => {
  const status = (over: Partial<AppStatus>): AppStatus => ({
    version: "0.1.0",
    data_dir: "/d",
    config_path: "/c/config.toml",
    log_dir: "/d/logs",
    model: "gemini-2.5-flash",
    base_url: "https://generativelanguage.googleapis.com",
    api_key: { configured: false, hint: null, source: "none", keyring_problem: null },
    demo: false,
    catalog: "/d/catalog.sqlite3",
    catalog_on_server: false,
    catalog_setting: null,
    catalog_env: null,
    ...over,
  });
  const team = "postgres://alice@db:5432/catalog";

  it("is the open one when nothing else is chosen", () => {
    expect(catalogNext(status({}))).toEqual({ kind: "same" });
    expect(catalogNext(status({ catalog: team, catalog_on_server: true, catalog_setting: team }))).toEqual({
      kind: "same",
    });
    // Another SQLite file named in the config is the one open.
    expect(catalogNext(status({ catalog_setting: "/elsewhere/catalog.sqlite3" }))).toEqual({ kind: "same" });
  });

  it("asks for a restart when another catalog is chosen", () => {
    expect(catalogNext(status({ catalog_setting: team }))).toEqual({ kind: "restart", next: team });
    expect(catalogNext(status({ catalog: team, catalog_on_server: true }))).toEqual({ kind: "restart", next: null });
  });

  it("says when the environment names another catalog", () => {
    expect(catalogNext(status({ catalog: team, catalog_on_server: true, catalog_env: team }))).toEqual({
      kind: "environment",
      env: team,
    });
    expect(catalogNext(status({ catalog_setting: team, catalog_env: team, catalog: team, catalog_on_server: true }))).toEqual({
      kind: "same",
    });
  });
});
