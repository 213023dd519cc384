-- 0009: the barcodes read on the machine (see `crate::barcode`).
--
-- Intake reads every EAN/UPC barcode from the prepared photo before Gemini is called; a barcode
-- is the truth for the proposal's GTIN (`barcode::apply_barcodes`). Both columns hold the
-- barcodes as a JSON array of `barcode::Barcode` (GTIN, format, pixel box, box_2d); `[]` when
-- none was legible, NULL when nothing was read (rows from before, a photo never prepared).
--
-- `import_items.barcodes_json`: what the item's photo read when it was prepared (written with
-- `extracting`), so a batch's answer, read after a restart, gets the same rule, and the JSON
-- lines can say what was read. `attempts.barcodes_json`: what the call's proposal was checked
-- against, for the audit trail and for where a saved product's GTIN came from
-- (`barcode::gtin_source`, derived when read: nothing is stored on the product, so its revision
-- rules are untouched).

ALTER TABLE attempts ADD COLUMN barcodes_json TEXT CHECK (barcodes_json IS NULL OR json_valid(barcodes_json));
ALTER TABLE import_items ADD COLUMN barcodes_json TEXT CHECK (barcodes_json IS NULL OR json_valid(barcodes_json));
