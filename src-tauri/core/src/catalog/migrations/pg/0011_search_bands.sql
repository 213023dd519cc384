-- pg 0011: the newest matches of a broad search, read band by band (issue 13's search target).
-- A search in relevance order wants the newest 1,001 matches (the ranked ones and the count past
-- the page, listing::RANKED_MATCHES). Through pg/0010's prefix index that meant reading every
-- match, one heap page each (~1 µs): "kg" at 100,000 products is 4,600 matches for 1,001 wanted;
-- walking down the newest products instead checks ~22,000 rows (~0.25 µs each). Here each
-- product is also indexed under its band, the id's high bits (4,096 ids a band), so the matches
-- of one band are one GIN AND away, and the search reads bands newest first until it has enough
-- (server_listing.rs, `Plan::newest_matches`): ~1,001 matches read, plus the bands' lists of ids
-- decoded by GIN (~0.07 µs an id). Like Lucene's index sorting with early termination, within
-- what a GIN index can do. Measured: BENCHMARKS.md, run 8.

-- The band of a product id. Its width is here only.
CREATE FUNCTION pe_search_band(id bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS 'SELECT id >> 12';

-- The band's key: a lexeme no search term can match (the parser never makes a word with a space,
-- and a prefix term is never empty).
CREATE FUNCTION pe_search_band_key(band bigint) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$SELECT ' band ' || band$$;

-- What the search index holds for a product: its words, their prefixes (pg/0010) and its band.
CREATE FUNCTION pe_search_keys(search tsvector, id bigint) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT COST 1000 AS $$
BEGIN
    RETURN pe_prefixes(search) || array_to_tsvector(ARRAY[pe_search_band_key(pe_search_band(id))]);
END;
$$;

CREATE INDEX product_search_keys ON product_search USING gin (pe_search_keys(search, id));
DROP INDEX product_search_prefixes;

-- The estimate reads the new index's statistics.
CREATE OR REPLACE FUNCTION pe_match_estimate(terms tsquery) RETURNS float8
    LANGUAGE plpgsql VOLATILE STRICT AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) SELECT FROM product_search WHERE pe_search_keys(search, id) @@ $1'
        INTO plan USING terms;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END;
$$;

ANALYZE product_search;
