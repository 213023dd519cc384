-- Search on the server behaves as on SQLite (issue 13): the same fields (name, brand, category,
-- description, attribute names and values) of live products, word prefixes, case and accents
-- folded ("creme" finds "Crème"). SQLite has FTS5 with `remove_diacritics 2`; here PostgreSQL's
-- full-text search over the `simple` configuration (no stemming, no stop words: like unicode61)
-- with `unaccent`, and a GIN index. Ranking weights the name highest, as bm25 does on SQLite.

-- `unaccent` is a trusted extension (PostgreSQL 13+): the database's owner may create it.
CREATE EXTENSION IF NOT EXISTS unaccent;

-- unaccent() is STABLE (its rules file could change); an index and a generated column need an
-- IMMUTABLE function: this wrapper names the dictionary, PostgreSQL's documented way.
CREATE FUNCTION pe_unaccent(text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    RETURN unaccent('unaccent'::regdictionary, $1);

-- A product's attribute names and values as one text (what SQLite's products_search_text view
-- indexes).
CREATE FUNCTION pe_attributes_text(saved json) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (SELECT string_agg(coalesce(a ->> 'name', '') || ' ' || coalesce(a ->> 'value', ''), ' ')
            FROM json_array_elements(CASE WHEN json_typeof(saved -> 'attributes') = 'array'
                                          THEN saved -> 'attributes' ELSE '[]'::json END) AS a);

ALTER TABLE products ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', pe_unaccent(coalesce(name, ''))), 'A')
    || setweight(to_tsvector('simple', pe_unaccent(coalesce(brand, ''))), 'B')
    || setweight(to_tsvector('simple', pe_unaccent(coalesce(category, ''))), 'B')
    || setweight(to_tsvector('simple', pe_unaccent(coalesce(saved_json ->> 'description', ''))), 'C')
    || setweight(to_tsvector('simple', pe_unaccent(coalesce(pe_attributes_text(saved_json), ''))), 'C')
) STORED;

CREATE INDEX products_search ON products USING gin (search) WHERE deleted_at IS NULL;
