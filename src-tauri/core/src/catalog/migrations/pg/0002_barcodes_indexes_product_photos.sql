-- pg 0002: the SQLite schema's migrations 0009, 0010 and 0011 on the server, translated with the
-- rules of pg/0001 (INTEGER → BIGINT, BLOB → BYTEA, TEXT + json_valid() → JSON, TEXT → TEXT).

-- SQLite 0009: the barcodes read on the machine, a JSON array of `barcode::Barcode` (`[]` when none
-- was legible, NULL when nothing was read). `attempts.barcodes_json`: what the call's proposal was
-- checked against; `import_items.barcodes_json`: what the item's photo read when it was prepared.
ALTER TABLE attempts ADD COLUMN barcodes_json JSON;
-- SQLite 0011: where Gemini read each field (a JSON array of field, photo, box_2d).
ALTER TABLE attempts ADD COLUMN sources_json JSON;
ALTER TABLE import_items ADD COLUMN barcodes_json JSON;

-- SQLite 0010: what opening the import queue reads (`near_seed`): the photos' perceptual hashes
-- without their rows (and so without their thumbnails), and "has this photo a live product?" as
-- one index search, not a scan of the live products.
CREATE INDEX photos_phash ON photos (id, phash) WHERE phash IS NOT NULL;
CREATE INDEX products_live_photo ON products (photo_id) WHERE deleted_at IS NULL;

-- SQLite 0011: a product is several photos. The first stays where it was (`import_items.photo_id`,
-- `attempts.photo_id`, `products.photo_id`); the others are these tables' rows, position 1, 2, …
-- in the order they were sent. SQLite's WITHOUT ROWID tables are plain tables with the same
-- primary key here (PostgreSQL has no rowid to leave out).

-- An import item's other photos: path and SHA-256 from the scan, `photo_id` once prepared.
CREATE TABLE import_item_photos (
    item_id    BIGINT  NOT NULL REFERENCES import_items (id) ON DELETE CASCADE,
    position   BIGINT  NOT NULL CHECK (position >= 1),
    path       TEXT    NOT NULL,
    path_bytes BYTEA,
    sha256     TEXT,
    photo_id   BIGINT  REFERENCES photos (id),
    PRIMARY KEY (item_id, position)
);
-- "The same bytes are never sent twice" and "the same path listed before" look here too.
CREATE INDEX import_item_photos_sha256 ON import_item_photos (sha256);
CREATE INDEX import_item_photos_path ON import_item_photos (path);

-- The GTIN keys read on an item's photos (photos of one import with the same barcode are one
-- product).
CREATE TABLE import_item_gtins (
    item_id  BIGINT NOT NULL REFERENCES import_items (id) ON DELETE CASCADE,
    gtin_key TEXT   NOT NULL,
    PRIMARY KEY (item_id, gtin_key)
);
CREATE INDEX import_item_gtins_key ON import_item_gtins (gtin_key);

-- What the item's grouping did, for the review (`{"split": …, "merged_by": […]}`; NULL for an
-- ordinary group). TEXT, as in SQLite, which does not check it either.
ALTER TABLE import_items ADD COLUMN group_json TEXT;

-- The photos an attempt sent besides its first (the audit trail: which photos a call saw).
CREATE TABLE attempt_photos (
    attempt_id BIGINT  NOT NULL REFERENCES attempts (id),
    position   BIGINT  NOT NULL CHECK (position >= 1),
    photo_id   BIGINT  NOT NULL REFERENCES photos (id),
    PRIMARY KEY (attempt_id, position)
);

-- A saved product's photos besides its first, written with the save that made it.
CREATE TABLE product_photos (
    product_id BIGINT  NOT NULL REFERENCES products (id) ON DELETE CASCADE,
    position   BIGINT  NOT NULL CHECK (position >= 1),
    photo_id   BIGINT  NOT NULL REFERENCES photos (id),
    PRIMARY KEY (product_id, position)
);
-- "Already in the catalog" for a photo that is not a product's first.
CREATE INDEX product_photos_photo ON product_photos (photo_id);
