-- 0002: full-text search over saved products.
--
-- `products_fts` keeps its own copy of the searchable text, one row per product with
-- rowid = products.id. The saved JSON is the source: name, brand and category as denormalized in
-- `products`, the description and the attributes ("name value" pairs) from saved_json. Triggers
-- keep it in sync with every insert, update (an upsert's DO UPDATE included) and delete.
--
-- Tokens are folded to lower case without diacritics on both sides ("creme" finds "Crème",
-- "müsli" finds "Musli"); prefix indexes of 2 and 3 characters make short prefix queries cheap.

CREATE VIRTUAL TABLE products_fts USING fts5(
    name,
    brand,
    category,
    description,
    attributes,
    tokenize = "unicode61 remove_diacritics 2",
    prefix = '2 3'
);

-- The searchable text of each product, in products_fts's column order: the one place that says
-- what is indexed. The triggers and the backfill below all read it.
CREATE VIEW products_search_text AS
SELECT
    p.id,
    p.name,
    p.brand,
    p.category,
    json_extract(p.saved_json, '$.description') AS description,
    (SELECT group_concat(json_extract(a.value, '$.name') || ' ' || json_extract(a.value, '$.value'), ' ')
     FROM json_each(p.saved_json, '$.attributes') AS a) AS attributes
FROM products p;

CREATE TRIGGER products_fts_after_insert AFTER INSERT ON products BEGIN
    INSERT INTO products_fts (rowid, name, brand, category, description, attributes)
    SELECT * FROM products_search_text WHERE id = new.id;
END;

CREATE TRIGGER products_fts_after_update AFTER UPDATE ON products BEGIN
    DELETE FROM products_fts WHERE rowid = old.id;
    INSERT INTO products_fts (rowid, name, brand, category, description, attributes)
    SELECT * FROM products_search_text WHERE id = new.id;
END;

CREATE TRIGGER products_fts_after_delete AFTER DELETE ON products BEGIN
    DELETE FROM products_fts WHERE rowid = old.id;
END;

-- Products saved before this migration.
INSERT INTO products_fts (rowid, name, brand, category, description, attributes)
SELECT * FROM products_search_text;
