-- 0003: revisions, duplicates, soft delete, flag counts and the catalog table's sort indexes.
--
-- `products` is rebuilt (SQLite's 12-step table change: it cannot drop a column-level UNIQUE in
-- place): the UNIQUE on photo_id becomes a partial unique index over extracted products only, so
-- duplicates can share their original's photo. Everything that names the table (the search view
-- and triggers of 0002) is dropped first and recreated after the rename. Ids are kept; the
-- full-text index is rebuilt anyway, with more prefix indexes (at the end of this file).
--
-- Foreign keys stay on during the rebuild (the migration runs inside a transaction, where
-- `PRAGMA foreign_keys` cannot change). That is safe here: before this migration nothing
-- references `products`, and the new table's only reference to it (duplicate_of) is NULL in
-- every copied row. Dropping the old table checks that reference once per row, so its index is
-- created before the copy (without it, the drop would scan the new table once per product).

DROP TRIGGER products_fts_after_insert;
DROP TRIGGER products_fts_after_update;
DROP TRIGGER products_fts_after_delete;
DROP VIEW products_search_text;

CREATE TABLE products_new (
    id              INTEGER PRIMARY KEY,
    photo_id        INTEGER NOT NULL REFERENCES photos (id),
    -- The attempt whose proposal is in force; NULL for a product entered by hand or duplicated.
    attempt_id      INTEGER,
    -- The product this one was copied from; NULL for the product extracted from its photo (at
    -- most one per photo: products_one_per_photo).
    duplicate_of    INTEGER REFERENCES products (id),
    -- What Gemini proposed (a copy of the attempt's proposal), and what was saved.
    proposed_json   TEXT    CHECK (proposed_json IS NULL OR json_valid(proposed_json)),
    saved_json      TEXT    NOT NULL CHECK (json_valid(saved_json)),
    -- 1 on creation, +1 with every new saved_json; product_revisions keeps each one.
    revision        INTEGER NOT NULL CHECK (revision >= 1),
    -- Denormalized from saved_json, for listing, filtering and sorting without parsing JSON.
    name            TEXT    NOT NULL CHECK (trim(name) <> ''),
    brand           TEXT,
    category        TEXT,
    price_amount    REAL    CHECK (price_amount >= 0),
    price_currency  TEXT,
    gtin            TEXT,
    -- How many fields of saved_json Product::validate() flags (the uncertain ones: invalid
    -- products are never saved).
    flagged         INTEGER NOT NULL DEFAULT 0 CHECK (flagged >= 0),
    created_at      INTEGER NOT NULL,
    -- When and by whom the current revision was saved ('' before this migration).
    updated_at      INTEGER NOT NULL,
    updated_by      TEXT    NOT NULL DEFAULT '',
    -- Soft delete: NULL while live. A deleted product is hidden from lists, search, counts and
    -- exports, and keeps its history.
    deleted_at      INTEGER,
    deleted_by      TEXT,
    CHECK ((price_amount IS NULL) = (price_currency IS NULL)),
    CHECK ((deleted_at IS NULL) = (deleted_by IS NULL)),
    FOREIGN KEY (attempt_id, photo_id) REFERENCES attempts (id, photo_id)
) STRICT;

CREATE INDEX products_by_duplicate_of ON products_new (duplicate_of) WHERE duplicate_of IS NOT NULL;

-- `flagged` is what Product::validate() counts for a valid product: one flag per distinct known
-- field name in uncertain_fields (FIELD_NAMES in product.rs; a test keeps the two in step).
INSERT INTO products_new (id, photo_id, attempt_id, duplicate_of, proposed_json, saved_json, revision, name, brand,
                          category, price_amount, price_currency, gtin, flagged, created_at, updated_at,
                          updated_by, deleted_at, deleted_by)
SELECT id, photo_id, attempt_id, NULL, proposed_json, saved_json, revision, name, brand, category, price_amount,
       price_currency, gtin,
       (SELECT count(DISTINCT u.value) FROM json_each(products.saved_json, '$.uncertain_fields') AS u
        WHERE u.type = 'text'
          AND u.value IN ('name', 'brand', 'category', 'description', 'price', 'gtin', 'color', 'size',
                          'material', 'net_content', 'attributes')),
       created_at, updated_at, '', NULL, NULL
FROM products;

DROP TABLE products;
ALTER TABLE products_new RENAME TO products;

-- One extracted product per photo; duplicates share the photo. A deleted extracted product keeps
-- its place: saving the photo again updates (and un-deletes) it.
CREATE UNIQUE INDEX products_one_per_photo ON products (photo_id) WHERE duplicate_of IS NULL;
-- The child keys of the foreign keys, so checks against attempts and products stay cheap.
-- (products_by_duplicate_of, created above, came along with the rename.)
CREATE INDEX products_by_attempt ON products (attempt_id, photo_id);

-- The catalog table: every sort is an index scan that stops after one page. Only live products
-- are indexed (every listing says `deleted_at IS NULL`); text sorts and the category and brand
-- filters compare without ASCII case (COLLATE NOCASE). Ties are broken by id, the rowid at the
-- end of every index. Nulls sort first in SQLite, so a descending scan of the plain index puts
-- them last; the `IS NULL` index does the same for an ascending sort.
CREATE INDEX products_live_by_updated ON products (updated_at) WHERE deleted_at IS NULL;
CREATE INDEX products_live_by_name ON products (name COLLATE NOCASE) WHERE deleted_at IS NULL;
CREATE INDEX products_live_by_brand ON products (brand COLLATE NOCASE) WHERE deleted_at IS NULL;
CREATE INDEX products_live_by_brand_nulls_last ON products (brand IS NULL, brand COLLATE NOCASE)
    WHERE deleted_at IS NULL;
CREATE INDEX products_live_by_category ON products (category COLLATE NOCASE) WHERE deleted_at IS NULL;
CREATE INDEX products_live_by_category_nulls_last ON products (category IS NULL, category COLLATE NOCASE)
    WHERE deleted_at IS NULL;
CREATE INDEX products_live_by_price ON products (price_amount) WHERE deleted_at IS NULL;
CREATE INDEX products_live_by_price_nulls_last ON products (price_amount IS NULL, price_amount)
    WHERE deleted_at IS NULL;
CREATE INDEX products_live_by_gtin ON products (gtin) WHERE deleted_at IS NULL;
CREATE INDEX products_live_by_gtin_nulls_last ON products (gtin IS NULL, gtin) WHERE deleted_at IS NULL;
-- The "flagged" filter, in the default order (most recently updated first).
CREATE INDEX products_live_flagged ON products (updated_at) WHERE deleted_at IS NULL AND flagged > 0;
-- Deleted products, by when (few): live = all - deleted, each counted on an index. (An index
-- on `deleted_at IS NULL` rows would make SQLite prefer it over the sort indexes.)
CREATE INDEX products_deleted ON products (deleted_at) WHERE deleted_at IS NOT NULL;

-- A new saved_json is a new revision (the API writes its product_revisions row in the same
-- transaction); SQLite refuses a change of saved_json that does not move the revision on.
CREATE TRIGGER products_saved_json_needs_a_revision
BEFORE UPDATE OF saved_json ON products
WHEN new.revision <= old.revision AND new.saved_json IS NOT old.saved_json
BEGIN
    SELECT RAISE(ABORT, 'saved_json changed without a new revision');
END;

-- Every saved version of every product. Rows are only ever inserted (products are deleted softly;
-- a product removed by hand takes its history with it).
CREATE TABLE product_revisions (
    product_id      INTEGER NOT NULL REFERENCES products (id) ON DELETE CASCADE,
    revision        INTEGER NOT NULL CHECK (revision >= 1),
    saved_json      TEXT    NOT NULL CHECK (json_valid(saved_json)),
    -- The proposal in force at this revision (NULL: none), and the attempt it came from.
    proposed_json   TEXT    CHECK (proposed_json IS NULL OR json_valid(proposed_json)),
    attempt_id      INTEGER REFERENCES attempts (id),
    source          TEXT    NOT NULL
                    CHECK (source IN ('review', 'edit', 'reextract', 'duplicate', 'import', 'restore')),
    saved_by        TEXT    NOT NULL,
    saved_at        INTEGER NOT NULL,
    PRIMARY KEY (product_id, revision)
) STRICT;

-- Earlier revisions were not kept: each product's history starts at its current revision.
INSERT INTO product_revisions (product_id, revision, saved_json, proposed_json, attempt_id, source, saved_by,
                               saved_at)
SELECT id, revision, saved_json, proposed_json, attempt_id, 'review', '', updated_at FROM products;

-- Search (0002), rebuilt: over live products only (a deleted product leaves the index, an
-- undeleted one comes back), and with prefix indexes for every prefix length people type before
-- a search narrows (2 to 6 characters): a term of 4 to 6 characters otherwise makes FTS5 merge
-- the doclists of every word it starts, on every query (measured at 100,000 products: 2 to 5 ms
-- per statement for "roast", about 1 ms with the index; the index grows by about 40%).
DROP TABLE products_fts;
CREATE VIRTUAL TABLE products_fts USING fts5(
    name,
    brand,
    category,
    description,
    attributes,
    tokenize = "unicode61 remove_diacritics 2",
    prefix = '2 3 4 5 6'
);

-- The view is still the one place that says what is indexed.
CREATE VIEW products_search_text AS
SELECT
    p.id,
    p.name,
    p.brand,
    p.category,
    json_extract(p.saved_json, '$.description') AS description,
    (SELECT group_concat(json_extract(a.value, '$.name') || ' ' || json_extract(a.value, '$.value'), ' ')
     FROM json_each(p.saved_json, '$.attributes') AS a) AS attributes
FROM products p
WHERE p.deleted_at IS NULL;

CREATE TRIGGER products_fts_after_insert AFTER INSERT ON products BEGIN
    INSERT INTO products_fts (rowid, name, brand, category, description, attributes)
    SELECT * FROM products_search_text WHERE id = new.id;
END;

-- Only changes of indexed text or of deleted_at touch the index (not flagged, updated_by, ...).
CREATE TRIGGER products_fts_after_update AFTER UPDATE OF name, brand, category, saved_json, deleted_at ON products
BEGIN
    DELETE FROM products_fts WHERE rowid = old.id;
    INSERT INTO products_fts (rowid, name, brand, category, description, attributes)
    SELECT * FROM products_search_text WHERE id = new.id;
END;

CREATE TRIGGER products_fts_after_delete AFTER DELETE ON products BEGIN
    DELETE FROM products_fts WHERE rowid = old.id;
END;

INSERT INTO products_fts (rowid, name, brand, category, description, attributes)
SELECT * FROM products_search_text;
