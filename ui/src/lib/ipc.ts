// Typed wrappers around the Tauri commands. Every wrapper rejects with an ErrorReport (see errors.ts).
import { Channel, invoke, type InvokeArgs } from "@tauri-apps/api/core";
import type { AppStatus } from "../bindings/AppStatus";
import type { BreakerControl } from "../bindings/BreakerControl";
import type { ConnectionCheck } from "../bindings/ConnectionCheck";
import type { FieldFlag } from "../bindings/FieldFlag";
import type { JobEvent } from "../bindings/JobEvent";
import type { JobTicket } from "../bindings/JobTicket";
import type { Product } from "../bindings/Product";
import type { ProductRecord } from "../bindings/ProductRecord";
import type { ProductSummary } from "../bindings/ProductSummary";
import type { ResilienceSnapshot } from "../bindings/ResilienceSnapshot";
import type { SaveInput } from "../bindings/SaveInput";
import type { Settings } from "../bindings/Settings";
import type { SettingsInput } from "../bindings/SettingsInput";
import { toErrorReport } from "./errors";

async function call<T>(command: string, args?: InvokeArgs): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (error) {
    throw toErrorReport(error);
  }
}

function channel(onEvent: (event: JobEvent) => void): Channel<JobEvent> {
  const ch = new Channel<JobEvent>();
  ch.onmessage = onEvent;
  return ch;
}

export const api = {
  appStatus: () => call<AppStatus>("app_status"),
  getSettings: () => call<Settings>("get_settings"),
  saveSettings: (input: SettingsInput) => call<Settings>("save_settings", { input }),
  testConnection: () => call<ConnectionCheck>("test_connection"),
  setDemoMode: (enabled: boolean) => call<AppStatus>("set_demo_mode", { enabled }),
  extractPhotos: (paths: string[], onEvent: (event: JobEvent) => void) =>
    call<JobTicket[]>("extract_photos", { paths, onEvent: channel(onEvent) }),
  reextract: (jobId: number, file: string, onEvent: (event: JobEvent) => void) =>
    call<JobTicket>("reextract", { jobId, file, onEvent: channel(onEvent) }),
  validateProduct: (product: Product) => call<FieldFlag[]>("validate_product", { product }),
  saveProduct: (input: SaveInput) => call<ProductRecord>("save_product", { input }),
  listProducts: (offset: number, limit: number) => call<ProductSummary[]>("list_products", { offset, limit }),
  getProduct: (id: number) => call<ProductRecord>("get_product", { id }),
  previewPhoto: (file: string) => call<string>("preview_photo", { file }),
  resilienceSnapshot: () => call<ResilienceSnapshot>("resilience_snapshot"),
  breakerControl: (action: BreakerControl) => call<ResilienceSnapshot>("breaker_control", { action }),
};
