// Typed wrappers around the Tauri commands. Every wrapper rejects with an ErrorReport (see errors.ts).
import { Channel, invoke, type InvokeArgs } from "@tauri-apps/api/core";
import type { AppStatus } from "../bindings/AppStatus";
import type { BackupSummary } from "../bindings/BackupSummary";
import type { BreakerControl } from "../bindings/BreakerControl";
import type { ConnectionCheck } from "../bindings/ConnectionCheck";
import type { ExportFormat } from "../bindings/ExportFormat";
import type { ExportSummary } from "../bindings/ExportSummary";
import type { EnqueueReport } from "../bindings/EnqueueReport";
import type { Facets } from "../bindings/Facets";
import type { ImportControl } from "../bindings/ImportControl";
import type { ImportItemDetail } from "../bindings/ImportItemDetail";
import type { ImportPage } from "../bindings/ImportPage";
import type { ImportProgress } from "../bindings/ImportProgress";
import type { ItemState } from "../bindings/ItemState";
import type { FieldFlag } from "../bindings/FieldFlag";
import type { JobEvent } from "../bindings/JobEvent";
import type { JobTicket } from "../bindings/JobTicket";
import type { Product } from "../bindings/Product";
import type { ProductPage } from "../bindings/ProductPage";
import type { ProductQuery } from "../bindings/ProductQuery";
import type { ProductRecord } from "../bindings/ProductRecord";
import type { ReextractProposal } from "../bindings/ReextractProposal";
import type { ResilienceSnapshot } from "../bindings/ResilienceSnapshot";
import type { RestoreSummary } from "../bindings/RestoreSummary";
import type { RevisionRecord } from "../bindings/RevisionRecord";
import type { SaveInput } from "../bindings/SaveInput";
import type { Settings } from "../bindings/Settings";
import type { SettingsInput } from "../bindings/SettingsInput";
import type { UndoReport } from "../bindings/UndoReport";
import type { UpdateInput } from "../bindings/UpdateInput";
import type { ErrorReport } from "../bindings/ErrorReport";
import { toErrorReport } from "./errors";
import { mapAttributeFlags } from "./form";

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
  queryProducts: (query: ProductQuery) => call<ProductPage>("query_products", { query }),
  catalogFacets: () => call<Facets>("catalog_facets"),
  getProduct: (id: number) => call<ProductRecord>("get_product", { id }),
  productHistory: (id: number) => call<RevisionRecord[]>("product_history", { id }),
  updateProduct: (input: UpdateInput) => call<ProductRecord>("update_product", { input }),
  deleteProduct: (id: number) => call<ProductRecord>("delete_product", { id }),
  undeleteProduct: (id: number) => call<ProductRecord>("undelete_product", { id }),
  duplicateProduct: (id: number) => call<ProductRecord>("duplicate_product", { id }),
  reextractProduct: (id: number) => call<ReextractProposal>("reextract_product", { id }),
  exportCatalog: (format: ExportFormat, path: string) => call<ExportSummary>("export_catalog", { format, path }),
  backupCatalog: (path: string) => call<BackupSummary>("backup_catalog", { path }),
  restoreCatalog: (path: string) => call<RestoreSummary>("restore_catalog", { path }),
  previewPhoto: (file: string) => call<string>("preview_photo", { file }),
  containsFolder: (paths: string[]) => call<boolean>("contains_folder", { paths }),
  importPaths: (paths: string[]) => call<EnqueueReport>("import_paths", { paths }),
  importProgress: () => call<ImportProgress>("import_progress"),
  importItems: (offset: number, limit: number, states: ItemState[] | null) =>
    call<ImportPage>("import_items", { offset, limit, states }),
  importItem: (id: number) => call<ImportItemDetail>("import_item", { id }),
  importThumbnail: (id: number) => call<string | null>("import_thumbnail", { id }),
  importControl: (action: ImportControl) => call<ImportProgress>("import_control", { action }),
  importSaveItem: (id: number, product: Product) => call<ProductRecord>("import_save_item", { id, product }),
  importDiscardItem: (id: number) => call<void>("import_discard_item", { id }),
  importSaveAllReady: () => call<number[]>("import_save_all_ready"),
  importUndoSaveAll: (ids: number[]) => call<UndoReport>("import_undo_save_all", { ids }),
  importForce: (id: number) => call<void>("import_force", { id }),
  resilienceSnapshot: () => call<ResilienceSnapshot>("resilience_snapshot"),
  breakerControl: (action: BreakerControl) => call<ResilienceSnapshot>("breaker_control", { action }),
};

/**
 * After a save refused as `validation`, the backend's flags for `product` mapped to the form's
 * rows, so the form shows in place what is wrong. `null` for any other refusal, or when the check
 * itself fails (the save's own error is what the user needs then).
 */
export async function flagsAfterRefusal(
  report: ErrorReport,
  product: Product,
  attributeRows: number[],
): Promise<FieldFlag[] | null> {
  if (report.code !== "validation") return null;
  try {
    return mapAttributeFlags(await api.validateProduct(product), attributeRows);
  } catch {
    return null;
  }
}
