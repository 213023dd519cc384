import { describe, expect, it } from "vitest";
import { reviewAction } from "./reviewKeys";

const key = (k: string, mods: Partial<Record<"ctrlKey" | "metaKey" | "shiftKey" | "altKey", boolean>> = {}) => ({
  key: k,
  ctrlKey: false,
  metaKey: false,
  shiftKey: false,
  altKey: false,
  ...mods,
});

describe("reviewAction", () => {
  it("maps the review keys when not typing", () => {
    expect(reviewAction(key("ArrowRight"), false)).toBe("next");
    expect(reviewAction(key("j"), false)).toBe("next");
    expect(reviewAction(key("k"), false)).toBe("previous");
    expect(reviewAction(key("Enter"), false)).toBe("accept");
    expect(reviewAction(key("a"), false)).toBe("accept");
    expect(reviewAction(key("e"), false)).toBe("edit");
    expect(reviewAction(key("s"), false)).toBe("skip");
    expect(reviewAction(key("d"), false)).toBe("discard");
    expect(reviewAction(key("Delete"), false)).toBe("discard");
    expect(reviewAction(key("Escape"), false)).toBe("close");
    expect(reviewAction(key("x"), false)).toBeNull();
  });

  it("leaves typing alone, except the save chord", () => {
    for (const k of ["j", "a", "Enter", "d", "ArrowRight", "Escape", "s"]) expect(reviewAction(key(k), true)).toBeNull();
    expect(reviewAction(key("Enter", { ctrlKey: true }), true)).toBe("accept");
    expect(reviewAction(key("Enter", { metaKey: true }), false)).toBe("accept");
  });

  it("ignores other chords", () => {
    expect(reviewAction(key("s", { ctrlKey: true }), false)).toBeNull();
    expect(reviewAction(key("j", { altKey: true }), false)).toBeNull();
  });
});
