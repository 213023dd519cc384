import { describe, expect, it } from "vitest";
import type { FieldFlag } from "../bindings/FieldFlag";
import { countFlags, flagKind, flagsFor, hasInvalid, keepBarcodeFlags, mergeFlags, messagesFor, unplacedFlags } from "./flags";

const flags: FieldFlag[] = [
  { field: "price", kind: "uncertain", message: "Gemini was not sure of this value" },
  { field: "price.currency", kind: "invalid", message: "unknown currency XYZ" },
  { field: "gtin", kind: "invalid", message: "check digit should be 7, not 3" },
  { field: "attributes[1].name", kind: "invalid", message: "an attribute needs a name" },
  { field: "brand", kind: "uncertain", message: "Gemini was not sure of this value" },
];

describe("flag lookup", () => {
  it("applies a parent flag to its children, invalid first", () => {
    expect(flagKind(flags, "price.amount")).toBe("uncertain");
    expect(flagKind(flags, "price.currency")).toBe("invalid");
    expect(flagsFor(flags, "price.currency").map((f) => f.kind)).toEqual(["invalid", "uncertain"]);
    expect(flagKind(flags, "name")).toBeNull();
    expect(flagKind(flags, "attributes[1].name")).toBe("invalid");
    expect(flagKind(flags, "attributes[1].value")).toBeNull();
  });

  it("does not confuse fields sharing a prefix", () => {
    expect(flagKind([{ field: "gtin", kind: "invalid", message: "" }], "gtin_extra")).toBeNull();
  });

  it("collects messages for a group", () => {
    expect(messagesFor(flags, ["price"])).toEqual([
      { kind: "invalid", text: "unknown currency XYZ" },
      { kind: "uncertain", text: "Gemini was not sure" },
    ]);
  });

  it("counts", () => {
    expect(countFlags(flags)).toEqual({ invalid: 3, uncertain: 2, barcode: 0, cleaned: 0 });
    expect(hasInvalid(flags)).toBe(true);
    expect(hasInvalid(flags.filter((f) => f.kind === "uncertain"))).toBe(false);
  });

  it("finds flags that have no field in the form", () => {
    const extra: FieldFlag = { field: "weight", kind: "invalid", message: "?" };
    expect(unplacedFlags([...flags, extra], ["name", "brand", "price", "gtin"])).toEqual([extra]);
  });

  it("lets local flags replace server flags on the same field", () => {
    const local: FieldFlag[] = [{ field: "gtin", kind: "invalid", message: "local" }];
    const merged = mergeFlags(flags, local);
    expect(merged.filter((f) => f.field === "gtin")).toEqual(local);
    expect(merged).toHaveLength(flags.length);
  });

  it("shows a barcode flag's message, ranks it under invalid, and keeps it across validations", () => {
    const barcode: FieldFlag = {
      field: "gtin",
      kind: "barcode",
      message: "The photo's barcode reads 4006381333931; Gemini read 0036000291452. The barcode's GTIN is used.",
    };
    const uncertain: FieldFlag = { field: "gtin", kind: "uncertain", message: "Gemini was not sure of this value" };
    expect(flagKind([uncertain, barcode], "gtin")).toBe("barcode");
    expect(messagesFor([barcode], ["gtin"])).toEqual([{ kind: "barcode", text: barcode.message }]);
    expect(countFlags([barcode, uncertain])).toEqual({ invalid: 0, uncertain: 1, barcode: 1, cleaned: 0 });
    const fresh: FieldFlag[] = [{ field: "name", kind: "invalid", message: "a name is required" }];
    expect(keepBarcodeFlags(fresh, [barcode, uncertain])).toEqual([...fresh, barcode]);
  });

  it("shows what cleaning Gemini's answer changed, ranks it under barcode, and keeps it across validations", () => {
    const removed: FieldFlag = {
      field: "name",
      kind: "control_characters_removed",
      message: "2 control character(s) removed from Gemini's answer",
    };
    const cut: FieldFlag = { field: "description", kind: "too_long", message: "Gemini's answer was 9000 characters long; the first 5000 are kept" };
    const uncertain: FieldFlag = { field: "name", kind: "uncertain", message: "Gemini was not sure of this value" };
    expect(flagKind([uncertain, removed], "name")).toBe("control_characters_removed");
    expect(messagesFor([cut], ["description"])).toEqual([{ kind: "too_long", text: cut.message }]);
    expect(countFlags([removed, cut, uncertain])).toEqual({ invalid: 0, uncertain: 1, barcode: 0, cleaned: 2 });
    const fresh: FieldFlag[] = [{ field: "gtin", kind: "invalid", message: "a GTIN has digits only" }];
    expect(keepBarcodeFlags(fresh, [removed, uncertain, cut])).toEqual([...fresh, removed, cut]);
  });
});
