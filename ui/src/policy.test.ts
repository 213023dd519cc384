/// <reference types="vite/client" />
// The webview's promises (SECURITY.md): photos and model output are untrusted, so every value is
// rendered as text, under a CSP that allows no inline or remote code, in a window granted only
// the capabilities it uses. These read the real sources and config the app is built from.
import { describe, expect, it } from "vitest";
import tauriConf from "../../tauri.conf.json";
import capability from "../../src-tauri/capabilities/default.json";
import { THUMBNAIL_SCHEME } from "./bindings/constants";

const sources = import.meta.glob(["./**/*.svelte", "./**/*.ts", "!./**/*.test.ts"], {
  query: "?raw",
  import: "default",
  eager: true,
}) as Record<string, string>;

/// Ways of turning a string into markup or code; none may appear in the UI's own sources.
const HTML_SINKS = [
  /\{@html/,
  /\.innerHTML\b/,
  /\.outerHTML\b/,
  /insertAdjacentHTML/,
  /document\.write/,
  /\beval\(/,
  /new Function\(/,
  /createContextualFragment/,
  /srcdoc/,
];

describe("the webview policy", () => {
  it("reads the UI's sources", () => {
    // A glob that matched nothing would make the next test pass vacuously.
    expect(Object.keys(sources).length).toBeGreaterThan(20);
    expect(Object.keys(sources)).toContain("./lib/ReviewPanel.svelte");
  });

  it("listens to Rust's events only by their generated names (lib/events.ts), never by a typed string", () => {
    const raw = Object.entries(sources)
      .filter(([file]) => file !== "./lib/events.ts" && !file.startsWith("./bindings/"))
      .flatMap(([file, text]) => [
        ...(/from "@tauri-apps\/api\/event"/.test(text) ? [`${file}: imports listen directly`] : []),
        ...[...text.matchAll(/"(?:resilience|import|catalog|app):\/\/[a-z-]+"/g)].map((m) => `${file}: ${m[0]}`),
      ]);
    expect(raw).toEqual([]);
  });

  it("renders every value as text: no HTML or code sink in the UI", () => {
    const found = Object.entries(sources).flatMap(([file, text]) =>
      HTML_SINKS.filter((sink) => sink.test(text)).map((sink) => `${file}: ${sink}`),
    );
    expect(found).toEqual([]);
  });

  it("keeps a strict CSP: own files only, no inline or eval'd code, IPC as the only connection", () => {
    const csp = tauriConf.app.security.csp as Record<string, string>;
    expect(csp["default-src"]).toBe("'self'");
    expect(csp["script-src"]).toBe("'self'");
    expect(csp["style-src"]).toBe("'self'");
    expect(csp["object-src"]).toBe("'none'");
    expect(csp["frame-ancestors"]).toBe("'none'");
    expect(csp["connect-src"]).toBe("ipc: http://ipc.localhost");
    // Images: the app's files, data: URLs, and the app's own thumbnail protocol (both of the forms
    // Tauri gives a custom scheme), nothing remote.
    expect(csp["img-src"]).toBe(`'self' data: ${THUMBNAIL_SCHEME}: http://${THUMBNAIL_SCHEME}.localhost`);
    const all = Object.values(csp).join(" ");
    expect(all).not.toMatch(/unsafe-inline|unsafe-eval|wasm-unsafe-eval|\*|https?:\/\/(?!(ipc|thumb)\.localhost\b)/);
    expect(tauriConf.app.withGlobalTauri).toBe(false);
    expect(tauriConf.app.security.freezePrototype).toBe(true);
  });

  it("grants the main window only what it uses: events and the open and save dialogs", () => {
    expect(capability.windows).toEqual(["main"]);
    expect([...capability.permissions].sort()).toEqual(
      ["core:event:default", "dialog:allow-open", "dialog:allow-save"].sort(),
    );
  });
});
