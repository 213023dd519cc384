import { describe, expect, it } from "vitest";
import { photoNumber, reviewAction } from "./reviewKeys";

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
    expect(reviewAction(key("q"), false)).toBeNull();
  });

  it("moves the shown photo of a product of several, and extracts again", () => {
    expect(reviewAction(key("n"), false)).toBe("split");
    expect(reviewAction(key("ArrowLeft", { shiftKey: true }), false)).toBe("moveToPrevious");
    expect(reviewAction(key("ArrowRight", { shiftKey: true }), false)).toBe("moveToNext");
    expect(reviewAction(key("x"), false)).toBe("reextract");
    for (const k of ["n", "x"]) expect(reviewAction(key(k), true)).toBeNull();
    expect(reviewAction(key("ArrowLeft", { shiftKey: true }), true)).toBeNull();
  });

  it("shows photo 1–9 by its number", () => {
    expect(photoNumber(key("1"), false)).toBe(0);
    expect(photoNumber(key("9"), false)).toBe(8);
    expect(photoNumber(key("0"), false)).toBeNull();
    expect(photoNumber(key("3"), true)).toBeNull();
    expect(photoNumber(key("3", { ctrlKey: true }), false)).toBeNull();
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
