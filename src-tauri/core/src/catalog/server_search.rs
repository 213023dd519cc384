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
    let cap = i64::from(RANKED_MATCHES);
    // The newest matches (one more than are ranked, to know whether older ones follow), scored.
    let rows = client
        .query(
            "WITH q AS (
                 SELECT to_tsquery('simple', string_agg(quote_literal(word) || ':*', ' & ')) AS query
                 FROM unnest(tsvector_to_array(to_tsvector('simple', pe_unaccent($1)))) AS word
             )
             SELECT p.id, ts_rank(p.search, q.query) FROM products p, q
             WHERE q.query IS NOT NULL AND p.deleted_at IS NULL AND p.search @@ q.query
             ORDER BY p.id DESC LIMIT $2",
            &[&text, &(cap + 1)],
        )
        .await
        .map_err(|e| catalog.driver_error(&e))?;
    let mut newest: Vec<(i64, f32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let more = newest.len() > RANKED_MATCHES as usize;
    newest.truncate(RANKED_MATCHES as usize);
    // Best first; equal scores, the newer product first.
    newest.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    let (offset, limit) = (offset as usize, limit as usize);
    let mut page: Vec<i64> = newest.iter().skip(offset).take(limit).map(|(id, _)| *id).collect();
    let wanted = offset + limit;
    if more && wanted > newest.len() {
        // Past the ranked ones: the older matches, newest first.
        let oldest_ranked = newest.iter().map(|(id, _)| *id).min().unwrap_or(i64::MAX);
        let skip = i64::try_from(offset.saturating_sub(newest.len())).unwrap_or(i64::MAX);
        let take = i64::try_from(limit - page.len()).unwrap_or(0);
        let rows = client
            .query(
                "WITH q AS (
                     SELECT to_tsquery('simple', string_agg(quote_literal(word) || ':*', ' & ')) AS query
                     FROM unnest(tsvector_to_array(to_tsvector('simple', pe_unaccent($1)))) AS word
                 )
                 SELECT p.id FROM products p, q
                 WHERE p.id < $2 AND p.deleted_at IS NULL AND p.search @@ q.query
                 ORDER BY p.id DESC LIMIT $3 OFFSET $4",
                &[&text, &oldest_ranked, &take, &skip],
            )
            .await
            .map_err(|e| catalog.driver_error(&e))?;
        page.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
    }
    Ok(page)
}
