// A product's photos in review: which boxes to draw on which photo, in the photo's own pixels.
// Boxes come in Gemini's documented form, `box_2d` = [y_min, x_min, y_max, x_max] normalized to
// 0–1000 (from the barcode reader on the machine, and later from Gemini for each field): an
// invalid one is dropped, never drawn wrong.

import { convertFileSrc } from "@tauri-apps/api/core";
import type { Barcode } from "../bindings/Barcode";
import { PRODUCT_FIELDS, THUMBNAIL_SCHEME } from "../bindings/constants";
import type { FieldSource } from "../bindings/FieldSource";

/** A box to draw on one of the product's photos. */
export interface PhotoBox {
  /** Index of the photo in the product's photos (0: the first). */
  photo: number;
  box_2d: readonly number[];
  /** What the box shows, as text (a tooltip and the legend). */
  label: string;
  kind: "barcode" | "field";
}

/** A box in the photo's pixels. */
export interface Rect {
  x: number;
  y: number;
  width: number;
  height: number;
}

/**
 * `box_2d` in the pixels of a `width` × `height` photo, or null when it is not a box: not four
 * finite numbers, outside 0–1000, or empty (min ≥ max).
 */
export function boxRect(box_2d: readonly number[], width: number, height: number): Rect | null {
  if (box_2d.length !== 4 || !(width > 0) || !(height > 0)) return null;
  if (!box_2d.every((v) => Number.isFinite(v) && v >= 0 && v <= 1000)) return null;
  const [yMin, xMin, yMax, xMax] = box_2d;
  if (yMin >= yMax || xMin >= xMax) return null;
  return {
    x: (xMin / 1000) * width,
    y: (yMin / 1000) * height,
    width: ((xMax - xMin) / 1000) * width,
    height: ((yMax - yMin) / 1000) * height,
  };
}

/** The barcodes read on the machine, as boxes on their photos. */
export function barcodeBoxes(barcodes: readonly Barcode[] | null | undefined): PhotoBox[] {
  return (barcodes ?? []).map((b) => ({
    photo: b.photo,
    box_2d: b.box_2d,
    label: `Barcode ${b.gtin} (read on this computer)`,
    kind: "barcode" as const,
  }));
}

/** The boxes of `photo` that can be drawn. */
export function boxesOn(boxes: readonly PhotoBox[], photo: number): PhotoBox[] {
  return boxes.filter((b) => b.photo === photo && boxRect(b.box_2d, 1000, 1000) !== null);
}

/** The product field a form control edits, by its element id (ProductEditor's ids), or null. */
export function fieldOfElement(id: string): string | null {
  if (/^attr-(name|value)-\d+$/.test(id)) return "attributes";
  // "field-name", or a two-part field's "field-price-amount": keys have no dash.
  const key = id.startsWith("field-") ? id.slice("field-".length).split("-")[0] : null;
  return key !== null && PRODUCT_FIELDS.some((f) => f.key === key) ? key : null;
}

/** Where `field` was read, as a box to draw, or null when Gemini did not say. */
export function fieldBox(sources: readonly FieldSource[] | null | undefined, field: string | null): PhotoBox | null {
  if (!field) return null;
  const source = (sources ?? []).find((s) => s.field === field);
  if (!source) return null;
  const label = PRODUCT_FIELDS.find((f) => f.key === field)?.label ?? field;
  return { photo: source.photo, box_2d: source.box_2d, label: `${label}: read here`, kind: "field" };
}

/**
 * A photo's best picture: its file on this computer, else the prepared photo a team catalog
 * keeps (the file is on another desktop), else its thumbnail; `null` when none is there. Each
 * source is tried only when the one before failed.
 */
export async function bestPicture(
  sources: ReadonlyArray<(() => Promise<string | null>) | null>,
): Promise<string | null> {
  for (const source of sources) {
    if (!source) continue;
    try {
      const url = await source();
      if (url) return url;
    } catch {
      // the next source
    }
  }
  return null;
}

/**
 * Where the window loads the thumbnail of the photo with this content hash: the app's thumbnail
 * protocol (src-tauri/src/thumbnails.rs), in the form this platform's webview takes. A hash names
 * one picture, so the webview caches it; a list page carries hashes, not images.
 */
export function thumbnailSrc(sha256: string): string {
  return convertFileSrc(sha256, THUMBNAIL_SCHEME);
}
