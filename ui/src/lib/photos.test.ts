import { describe, expect, it } from "vitest";
import { barcodeBoxes, bestPicture, boxesOn, boxRect, fieldBox, fieldOfElement } from "./photos";

describe("boxRect", () => {
  it("maps Gemini's normalized [y_min, x_min, y_max, x_max] to the photo's pixels", () => {
    expect(boxRect([100, 200, 500, 800], 2000, 1000)).toEqual({ x: 400, y: 100, width: 1200, height: 400 });
    expect(boxRect([0, 0, 1000, 1000], 640, 480)).toEqual({ x: 0, y: 0, width: 640, height: 480 });
  });

  it("drops what is not a box", () => {
    for (const bad of [[1, 2, 3], [100, 100, 100, 200], [500, 100, 400, 200], [0, 0, 1001, 10], [-1, 0, 10, 10], [0, 0, Number.NaN, 10]]) {
      expect(boxRect(bad, 100, 100), JSON.stringify(bad)).toBeNull();
    }
    expect(boxRect([0, 0, 10, 10], 0, 100)).toBeNull();
  });
});

describe("barcode boxes", () => {
  it("are drawn on the photo they were read on", () => {
    const boxes = barcodeBoxes([
      { gtin: "4006381333931", format: "ean13", bounds: { x_min: 0, y_min: 0, x_max: 1, y_max: 1 }, box_2d: [600, 300, 700, 700], photo: 1 },
      { gtin: "0036000291452", format: "upc_a", bounds: { x_min: 0, y_min: 0, x_max: 1, y_max: 1 }, box_2d: [700, 700, 600, 800], photo: 1 },
    ]);
    expect(boxes[0].label).toContain("4006381333931");
    expect(boxesOn(boxes, 0)).toEqual([]);
    expect(boxesOn(boxes, 1).map((b) => b.box_2d)).toEqual([[600, 300, 700, 700]]);
    expect(barcodeBoxes(null)).toEqual([]);
  });
});

describe("field boxes", () => {
  it("know which field a form control edits", () => {
    expect(fieldOfElement("field-name")).toBe("name");
    expect(fieldOfElement("field-gtin")).toBe("gtin");
    expect(fieldOfElement("field-price-currency")).toBe("price");
    expect(fieldOfElement("field-net_content-unit")).toBe("net_content");
    expect(fieldOfElement("attr-value-3")).toBe("attributes");
    expect(fieldOfElement("field-secret")).toBeNull();
    expect(fieldOfElement("import-review-panel")).toBeNull();
  });

  it("draw where the focused field was read, on its photo", () => {
    const sources = [
      { field: "name", photo: 0, box_2d: [100, 100, 200, 400] as [number, number, number, number] },
      { field: "gtin", photo: 1, box_2d: [600, 400, 900, 900] as [number, number, number, number] },
    ];
    expect(fieldBox(sources, "gtin")).toEqual({ photo: 1, box_2d: [600, 400, 900, 900], label: "GTIN: read here", kind: "field" });
    expect(fieldBox(sources, "brand")).toBeNull();
    expect(fieldBox(sources, null)).toBeNull();
    expect(fieldBox(null, "name")).toBeNull();
  });
});

describe("bestPicture", () => {
  it("takes the first source that answers, trying the next only after a failure", async () => {
    const asked: string[] = [];
    const source = (name: string, answer: string | null | Error) => async () => {
      asked.push(name);
      if (answer instanceof Error) throw answer;
      return answer;
    };
    expect(await bestPicture([source("file", "data:file"), source("kept", "data:kept")])).toBe("data:file");
    expect(asked).toEqual(["file"]);
    asked.length = 0;
    const missing = new Error("No such file");
    expect(await bestPicture([source("file", missing), null, source("kept", "data:kept")])).toBe("data:kept");
    expect(asked).toEqual(["file", "kept"]);
    asked.length = 0;
    expect(await bestPicture([source("file", missing), source("kept", missing), source("thumb", null)])).toBe(null);
    expect(asked).toEqual(["file", "kept", "thumb"]);
  });
});
