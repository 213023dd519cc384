-- pg 0010: prefix indexes for search, as SQLite's FTS5 table has (`prefix = '2 3 4 5 6'`, 0003),
-- and what a search needs to choose how to find the newest matches. Every search term is a word
-- prefix. On the words index of pg/0005 a prefix term (`'fr':*`)
-- makes GIN find every indexed word that starts with it and merge their lists of rows: a short
-- prefix of a common word merges hundreds ("fr" → fresh, free, french, fruit, …), ~6–8 ms at
-- 100,000 products before a single row is read. Here each product is also indexed under the
-- prefixes of 1 to 6 characters of each of its words, so a term of that length is one exact
-- key with one list of rows, which GIN intersects with the other terms' lists (measured at 100k:
-- "nut fr" 6.0 → 2.4 ms in the index). A longer term is still a prefix term, on the same index,
-- whose few matching words are its own. `products.search` (pg/0004) stays the one definition of
-- what is searched, and `product_search.search` what ranking scores.

-- The lexemes of a search vector and every prefix of 1 to 6 characters of each (positions and
-- weights are left out: matching does not use them). "fresh" → f fr fre fres fresh.
CREATE FUNCTION pe_prefixes(search tsvector) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT COST 1000 AS $$
DECLARE
    words text[] := tsvector_to_array(search);
    terms text[] := words;
    word text;
    n int;
BEGIN
    FOREACH word IN ARRAY words LOOP
        FOR n IN 1 .. least(length(word) - 1, 6) LOOP
            terms := terms || left(word, n);
        END LOOP;
    END LOOP;
    RETURN array_to_tsvector(terms);  -- sorted, duplicates removed
END;
$$;

CREATE INDEX product_search_prefixes ON product_search USING gin (pe_prefixes(search));

-- pg/0005's words index stays for searches with filters: there the planner chooses between it
-- and a filter's own index (a brand's few hundred products, each checked on its words), and
-- pe_prefixes() checked row by row outside its index would cost ~17 µs a row.

-- The statistics of the new index's expression (its most common lexemes), which searches read
-- through pe_match_estimate below: without them the planner guesses, and a broad search on a
-- catalog migrated in place would read every match until autovacuum analyzes the table.
ANALYZE product_search;

-- A search reads a few thousand rows, a few milliseconds: starting parallel workers for it costs
-- more than it saves (measured: 12–15 ms with a Gather against ~9 ms without).
ALTER TABLE product_search SET (parallel_workers = 0);

-- How many live products the planner expects to match `terms` on the prefix index, from the
-- index's statistics (the most common lexemes and their frequencies, which ANALYZE keeps for an
-- expression index as for a column): a search finds its newest matches either by reading every
-- match through the index or by walking down the newest products, and which is cheaper depends on
-- how many match (server_listing.rs). EXPLAIN is PostgreSQL's way to read an estimate (the wiki's
-- "count estimate"); it plans the statement without running it, ~0.3 ms. VOLATILE: PostgreSQL
-- runs EXPLAIN only in a volatile function.
CREATE FUNCTION pe_match_estimate(terms tsquery) RETURNS float8
    LANGUAGE plpgsql VOLATILE STRICT AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) SELECT FROM product_search WHERE pe_prefixes(search) @@ $1' INTO plan USING terms;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END;
$$;
