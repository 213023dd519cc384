// Form-level undo/redo for the open product. The editor records a snapshot after each pause in
// typing (the caller debounces); undo and redo move through the snapshots. Snapshots are deep
// copies made with structuredClone, so later edits to the live form never change history. Pass plain
// data: a Svelte `$state` proxy cannot be cloned, so record `$state.snapshot(form)`.

export class EditHistory<T> {
  private past: T[] = [];
  private future: T[] = [];
  private current: T;

  constructor(
    initial: T,
    private readonly limit = 100,
    private readonly same: (a: T, b: T) => boolean = (a, b) => JSON.stringify(a) === JSON.stringify(b),
  ) {
    this.current = structuredClone(initial);
  }

  /** Records `state` as the newest version. A state equal to the current one is not recorded. */
  record(state: T): boolean {
    if (this.same(state, this.current)) return false;
    this.past.push(this.current);
    if (this.past.length > this.limit) this.past.shift();
    this.current = structuredClone(state);
    this.future = [];
    return true;
  }

  /** The previous version, or null when there is none. */
  undo(): T | null {
    const previous = this.past.pop();
    if (previous === undefined) return null;
    this.future.push(this.current);
    this.current = previous;
    return structuredClone(previous);
  }

  /** The version undone last, or null when there is none. */
  redo(): T | null {
    const next = this.future.pop();
    if (next === undefined) return null;
    this.past.push(this.current);
    this.current = next;
    return structuredClone(next);
  }

  /** Starts over from `state` (after a save or a reload): nothing to undo or redo. */
  reset(state: T): void {
    this.past = [];
    this.future = [];
    this.current = structuredClone(state);
  }

  get canUndo(): boolean {
    return this.past.length > 0;
  }

  get canRedo(): boolean {
    return this.future.length > 0;
  }
}

/** True for the platform's undo / redo shortcuts: Ctrl/⌘+Z, and Ctrl/⌘+Shift+Z or Ctrl+Y. */
export function undoKey(event: Pick<KeyboardEvent, "key" | "ctrlKey" | "metaKey" | "shiftKey" | "altKey">): "undo" | "redo" | null {
  if (!(event.ctrlKey || event.metaKey) || event.altKey) return null;
  const key = event.key.toLowerCase();
  if (key === "z") return event.shiftKey ? "redo" : "undo";
  if (key === "y" && !event.shiftKey) return "redo";
  return null;
}
