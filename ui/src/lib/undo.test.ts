import { describe, expect, it } from "vitest";
import { EditHistory, undoKey } from "./undo";

describe("EditHistory", () => {
  it("undoes and redoes through recorded versions", () => {
    const h = new EditHistory({ name: "a" });
    expect(h.canUndo).toBe(false);
    h.record({ name: "ab" });
    h.record({ name: "abc" });
    expect(h.undo()).toEqual({ name: "ab" });
    expect(h.undo()).toEqual({ name: "a" });
    expect(h.undo()).toBeNull();
    expect(h.redo()).toEqual({ name: "ab" });
    expect(h.redo()).toEqual({ name: "abc" });
    expect(h.redo()).toBeNull();
  });

  it("drops the redo branch when a new edit is recorded", () => {
    const h = new EditHistory(1);
    h.record(2);
    h.record(3);
    h.undo();
    expect(h.record(4)).toBe(true);
    expect(h.canRedo).toBe(false);
    expect(h.undo()).toBe(2);
  });

  it("ignores a state equal to the current one", () => {
    const h = new EditHistory({ a: [1] });
    expect(h.record({ a: [1] })).toBe(false);
    expect(h.canUndo).toBe(false);
  });

  it("keeps snapshots, not references to the live form", () => {
    const form = { tags: ["x"] };
    const h = new EditHistory(form);
    form.tags.push("y");
    h.record(form);
    form.tags.push("z");
    expect(h.undo()).toEqual({ tags: ["x"] });
    const redone = h.redo()!;
    expect(redone).toEqual({ tags: ["x", "y"] });
    redone.tags.push("mutated");
    h.undo();
    expect(h.redo()).toEqual({ tags: ["x", "y"] });
  });

  it("keeps at most `limit` versions to undo", () => {
    const h = new EditHistory(0, 3);
    for (let i = 1; i <= 10; i++) h.record(i);
    expect([h.undo(), h.undo(), h.undo(), h.undo()]).toEqual([9, 8, 7, null]);
  });

  it("reset forgets everything", () => {
    const h = new EditHistory("a");
    h.record("b");
    h.reset("c");
    expect(h.canUndo || h.canRedo).toBe(false);
    h.record("d");
    expect(h.undo()).toBe("c");
  });
});

describe("undoKey", () => {
  const key = (k: string, mods: Partial<Record<"ctrlKey" | "metaKey" | "shiftKey" | "altKey", boolean>> = {}) => ({
    key: k,
    ctrlKey: false,
    metaKey: false,
    shiftKey: false,
    altKey: false,
    ...mods,
  });
  it("maps the platform shortcuts", () => {
    expect(undoKey(key("z", { ctrlKey: true }))).toBe("undo");
    expect(undoKey(key("Z", { ctrlKey: true, shiftKey: true }))).toBe("redo");
    expect(undoKey(key("y", { ctrlKey: true }))).toBe("redo");
    expect(undoKey(key("z", { metaKey: true }))).toBe("undo");
    expect(undoKey(key("z"))).toBeNull();
    expect(undoKey(key("z", { ctrlKey: true, altKey: true }))).toBeNull();
    expect(undoKey(key("s", { ctrlKey: true }))).toBeNull();
  });
});
