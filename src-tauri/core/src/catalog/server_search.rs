//! Search on a server catalog (issue 13): the catalog's search box, answered by PostgreSQL's
//! full-text search as SQLite's FTS5 answers it (pg/0004: the same fields of live products, word
//! prefixes, case and accents folded). The user's text is never query syntax: it is split into
//! words by the same parser that indexed the products, and each word becomes a prefix term that
//! must match (`'creme':* & 'fraiche':*`), built by the server itself from the text as a bound
//! parameter.
//!
//! Ranking follows SQLite's rule ([`super::listing`]): `ts_rank` scores at most the
//! [`RANKED_MATCHES`] newest matches (scoring costs per match, and "re" typed into 100,000
//! products matches most of them); when more match, the older ones follow, newest first. Equal
//! scores: the newer product first.

use super::listing::RANKED_MATCHES;
use super::server::{ServerCatalog, ServerError};

/// The live products matching `text` (every word a prefix, case and accents ignored), best first
/// (the name weighs most; see the module docs for broad searches); empty when `text` has no word.
pub async fn search_ids(catalog: &ServerCatalog, text: &str, offset: u32, limit: u32) -> Result<Vec<i64>, ServerError> {
    let client = catalog.client().await?;
    let rows = client
        .query(
            "WITH q AS (
                 SELECT to_tsquery('simple', string_agg(quote_literal(word) || ':*', ' & ')) AS query
                 FROM unnest(tsvector_to_array(to_tsvector('simple', pe_unaccent($1)))) AS word
             ),
             newest AS (
                 SELECT p.id, ts_rank(p.search, q.query) AS score FROM products p, q
                 WHERE q.query IS NOT NULL AND p.deleted_at IS NULL AND p.search @@ q.query
                 ORDER BY p.id DESC LIMIT $4
             ),
             older AS (
                 SELECT p.id FROM products p, q
                 WHERE (SELECT count(*) FROM newest) = $4 AND p.id < (SELECT min(id) FROM newest)
                   AND p.deleted_at IS NULL AND p.search @@ q.query
             )
             SELECT id FROM (
                 SELECT id, 0 AS part, score FROM newest
                 UNION ALL
                 SELECT id, 1 AS part, 0 FROM older
             ) ranked
             ORDER BY part, score DESC, id DESC
             LIMIT $2 OFFSET $3",
            &[&text, &i64::from(limit), &i64::from(offset), &i64::from(RANKED_MATCHES)],
        )
        .await
        .map_err(|e| catalog.driver_error(&e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
