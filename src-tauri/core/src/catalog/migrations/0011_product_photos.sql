-- 0011: a product is several photos (a shoot's front, back, side…), sent in one request.
--
-- The first photo stays where it always was: `import_items.path / path_bytes / sha256 /
-- photo_id`, `attempts.photo_id`, `products.photo_id` (so a single-photo product — every row
-- before this migration — has no rows here). The product's other photos, in the order they were
-- sent (front-like names first), are these tables' rows, position 1, 2, …

-- An import item's other photos: queued with the item (path and SHA-256 from the scan), their
-- `photo_id` set when the item is prepared (with `extracting`, like the item's own).
CREATE TABLE import_item_photos (
    item_id    INTEGER NOT NULL REFERENCES import_items (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL CHECK (position >= 1),
    path       TEXT    NOT NULL,
    path_bytes BLOB,
    sha256     TEXT,
    photo_id   INTEGER REFERENCES photos (id),
    PRIMARY KEY (item_id, position)
) WITHOUT ROWID;
-- "The same bytes are never sent twice" and "the same path listed before" look here too.
CREATE INDEX import_item_photos_sha256 ON import_item_photos (sha256);
CREATE INDEX import_item_photos_path ON import_item_photos (path);

-- The GTINs (`product::gtin_key`, 14 digits) read on an item's photos, written with
-- `extracting`: photos of an import that show the same barcode are one product, found by this
-- index when the second one is prepared.
CREATE TABLE import_item_gtins (
    item_id  INTEGER NOT NULL REFERENCES import_items (id) ON DELETE CASCADE,
    gtin_key TEXT    NOT NULL,
    PRIMARY KEY (item_id, gtin_key)
) WITHOUT ROWID;
CREATE INDEX import_item_gtins_key ON import_item_gtins (gtin_key);

-- What the item's grouping did, for the review: `{"split": {"part", "parts", "of_photos"},
-- "merged_by": [gtin…]}`; NULL for an ordinary group.
ALTER TABLE import_items ADD COLUMN group_json TEXT;

-- Where Gemini read each field (`product::FieldSource`: field, photo index, box_2d), a JSON
-- array, for an answered attempt; NULL otherwise and for attempts from before.
ALTER TABLE attempts ADD COLUMN sources_json TEXT;

-- The photos an attempt sent besides its first (the audit trail: which photos a call saw).
CREATE TABLE attempt_photos (
    attempt_id INTEGER NOT NULL REFERENCES attempts (id),
    position   INTEGER NOT NULL CHECK (position >= 1),
    photo_id   INTEGER NOT NULL REFERENCES photos (id),
    PRIMARY KEY (attempt_id, position)
) WITHOUT ROWID;

-- A saved product's photos besides its first, written with the save that made it.
CREATE TABLE product_photos (
    product_id INTEGER NOT NULL REFERENCES products (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL CHECK (position >= 1),
    photo_id   INTEGER NOT NULL REFERENCES photos (id),
    PRIMARY KEY (product_id, position)
) WITHOUT ROWID;
-- "Already in the catalog" for a photo that is not a product's first.
CREATE INDEX product_photos_photo ON product_photos (photo_id);
