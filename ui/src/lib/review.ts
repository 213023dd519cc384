// The one review model: a product being edited in the form, its flags, undo/redo, dirty state,
// and the caller's save / discard / re-extract actions. The Extract review, the import review and
// a catalog product all use it through ReviewModal.svelte.
//
// The model keeps its data in `state`, a plain object: a component passes a `$state(...)` proxy so
// every change shows, and the getters below read through it (so they are reactive in templates).
// Tests pass a plain object.
import type { ErrorReport } from "../bindings/ErrorReport";
import type { FieldFlag } from "../bindings/FieldFlag";
import type { Product } from "../bindings/Product";
import { toErrorReport } from "./errors";
import { countFlags, hasInvalid, mergeFlags } from "./flags";
import { formToProduct, mapAttributeFlags, productToForm, type FormResult, type ProductForm } from "./form";
import { plural } from "./format";
import { EditHistory } from "./undo";

export interface ReviewMessage {
  text: string;
  kind: "error" | "ok" | "conflict";
}

export interface ReviewState {
  form: ProductForm;
  /** The backend's flags, mapped to form rows. */
  serverFlags: FieldFlag[];
  /** The product as loaded (saved, or proposed): what `dirty` compares against. */
  baseline: Product;
  validating: boolean;
  saving: boolean;
  /** An action in progress other than Save ("Asking Gemini again…"). */
  working: string | null;
  message: ReviewMessage | null;
  canUndo: boolean;
  canRedo: boolean;
}

/** What the caller does on each action. Save resolves with whatever the caller needs next. */
export interface ReviewActions<Saved> {
  save: (product: Product) => Promise<Saved>;
  discard?: () => Promise<void> | void;
  reextract?: () => Promise<void> | void;
}

export function reviewState(product: Product, flags: FieldFlag[]): ReviewState {
  return {
    form: productToForm(product),
    serverFlags: flags,
    baseline: product,
    validating: false,
    saving: false,
    working: null,
    message: null,
    canUndo: false,
    canRedo: false,
  };
}

/**
 * After a save refused as `validation`, the product's flags the backend sent with the refusal
 * (ErrorReport.data), mapped to the form's rows so the form shows in place what is wrong. `null`
 * for any other refusal: the save's message is what the user needs then.
 */
export function flagsAfterRefusal(report: ErrorReport, attributeRows: number[]): FieldFlag[] | null {
  if (report.data?.kind !== "validation") return null;
  return mapAttributeFlags(report.data.flags, attributeRows);
}

/** A deep copy that also works on a Svelte `$state` proxy (structuredClone does not). */
function plain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

export class ReviewModel<Saved = unknown> {
  private readonly history: EditHistory<ProductForm>;

  constructor(
    readonly state: ReviewState,
    private readonly actions: ReviewActions<Saved>,
  ) {
    this.history = new EditHistory<ProductForm>(plain(state.form));
  }

  get result(): FormResult {
    return formToProduct(this.state.form);
  }
  /** The backend's flags with the form's own (a number that does not parse). */
  get flags(): FieldFlag[] {
    return mergeFlags(this.state.serverFlags, this.result.localFlags);
  }
  get counts(): { invalid: number; uncertain: number; barcode: number; cleaned: number } {
    return countFlags(this.flags);
  }
  get invalid(): boolean {
    return hasInvalid(this.flags);
  }
  get dirty(): boolean {
    return JSON.stringify(this.result.product) !== JSON.stringify(this.state.baseline);
  }
  get busy(): boolean {
    return this.state.saving || this.state.working !== null;
  }
  get canDiscard(): boolean {
    return this.actions.discard !== undefined;
  }
  get canReextract(): boolean {
    return this.actions.reextract !== undefined;
  }

  /** Shows `product` as loaded: its fields in the form, nothing to undo, no message. */
  load(product: Product, flags: FieldFlag[]): void {
    Object.assign(this.state, reviewState(product, flags));
    this.history.reset(plain(this.state.form));
  }

  /** Replaces the form's fields (e.g. fields taken from a re-extract) as one step to undo. */
  replaceForm(form: ProductForm): void {
    this.record();
    this.state.form = form;
    this.record();
  }

  /** Records the form as it is now as one step to undo (the caller debounces typing). */
  record(): void {
    this.history.record(plain(this.state.form));
    this.syncUndo();
  }

  undo(): void {
    this.step("undo");
  }

  redo(): void {
    this.step("redo");
  }

  private step(direction: "undo" | "redo"): void {
    this.record(); // Keep the edit still being typed.
    const next = direction === "undo" ? this.history.undo() : this.history.redo();
    if (next) this.state.form = next;
    this.syncUndo();
  }

  private syncUndo(): void {
    this.state.canUndo = this.history.canUndo;
    this.state.canRedo = this.history.canRedo;
  }

  say(text: string, kind: ReviewMessage["kind"] = "ok"): void {
    this.state.message = { text, kind };
  }

  /**
   * Saves the product in the form through the caller's action. Refused when a field is invalid or
   * a save is running. On a refusal the message shows, and a validation refusal's flags mark the
   * fields; resolves with the action's result, or null when nothing was saved.
   */
  async save(): Promise<Saved | null> {
    if (this.state.saving || this.invalid) return null;
    this.state.saving = true;
    this.state.message = null;
    const { product, attributeRows } = this.result;
    try {
      return await this.actions.save(product);
    } catch (error) {
      const report = toErrorReport(error);
      this.state.message = { text: report.message, kind: report.code === "revision_conflict" ? "conflict" : "error" };
      this.state.serverFlags = flagsAfterRefusal(report, attributeRows) ?? this.state.serverFlags;
      return null;
    } finally {
      this.state.saving = false;
    }
  }

  async discard(): Promise<void> {
    if (this.actions.discard) await this.run(null, "Could not discard", this.actions.discard);
  }

  async reextract(): Promise<void> {
    if (this.actions.reextract) await this.run("Asking Gemini again…", "Re-extract failed", this.actions.reextract);
  }

  /** Runs an action with `working` set (when given), showing a failure as the message. */
  async run(working: string | null, failure: string, action: () => Promise<void> | void): Promise<void> {
    if (this.busy) return;
    this.state.working = working;
    this.state.message = null;
    try {
      await action();
    } catch (error) {
      this.state.message = { text: `${failure}: ${toErrorReport(error).message}`, kind: "error" };
    } finally {
      this.state.working = null;
    }
  }
}

/** The footer's status line, most important first. */
export type ReviewStatus =
  | { kind: "working"; text: string }
  | { kind: "message"; message: ReviewMessage }
  | { kind: "checking" }
  | { kind: "invalid"; text: string }
  | { kind: "uncertain"; text: string }
  | { kind: "dirty" }
  | { kind: "idle" };

export function reviewStatus(review: ReviewModel<unknown>, showDirty: boolean): ReviewStatus {
  const s = review.state;
  if (s.working) return { kind: "working", text: s.working };
  if (s.message) return { kind: "message", message: s.message };
  if (s.validating) return { kind: "checking" };
  const counts = review.counts;
  if (counts.invalid > 0) return { kind: "invalid", text: `Fix ${plural(counts.invalid, "field")} to save` };
  if (showDirty && review.dirty) return { kind: "dirty" };
  if (counts.uncertain > 0) return { kind: "uncertain", text: `${counts.uncertain} unsure — please check` };
  if (counts.barcode > 0) return { kind: "uncertain", text: "The photo's barcode and Gemini disagree on the GTIN — please check" };
  if (counts.cleaned > 0) return { kind: "uncertain", text: "Gemini's answer was cleaned (control characters removed or cut to length) — please check" };
  return { kind: "idle" };
}
