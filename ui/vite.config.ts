import { defineConfig } from "vitest/config";
import { svelte } from "@sveltejs/vite-plugin-svelte";

// The app runs in WebKitGTK under a strict CSP (no inline scripts or styles), so everything is
// emitted as files: component styles are extracted into one .css file by the Svelte plugin.
export default defineConfig({
  base: "./",
  plugins: [svelte()],
  clearScreen: false,
  server: { port: 5173, strictPort: true },
  build: {
    target: ["es2021", "safari15"],
    outDir: "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
