//! The catalog table on a server catalog (issue 13): [`ProductQuery`] → one page and the total,
//! the facets and the live count, as [`super::listing`] answers them on SQLite. Each read runs in
//! one read-only `REPEATABLE READ` transaction, so a page and its total agree.
//!
//! # Search
//! PostgreSQL's full-text search answers the search box as FTS5 does on SQLite (pg/0004: the same
//! fields of live products, word prefixes, case and accents folded). The user's text is never
//! query syntax: it is split into words by the same parser that indexed the products, and each
//! word becomes a prefix term that must match (`'creme':* & 'fraiche':*`), built by the server
//! itself from the text as a bound parameter. The matches are found through the search index
//! (pg/0010, pg/0011), where a word of up to 6 characters is one exact key (`'fr'` stands for
//! `'fr':*`): every match at once, or band by band from the newest products; or by walking down
//! the newest products ([`Plan::newest_matches`], [`way`]).
//!
//! Relevance follows SQLite's rule ([`super::listing::rank`]): `ts_rank` scores at most the
//! [`RANKED_MATCHES`] newest matches (scoring costs per match, and "re" typed into 100,000
//! products matches most of them); when more match, the older ones follow, newest first. Equal
//! scores: the newer product first.
//!
//! # Sorts
//! The same keys, directions and tie-breaks as SQLite; text sorts compare `lower(…)` (pg/0001's
//! `products_live_by_*` indexes), rows without the value last both ways.

use std::sync::atomic::{AtomicU8, Ordering};

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{IsolationLevel, Transaction};

use super::listing::{
    count_limit, filter_conditions, fts_query, page_total, rank, window, FilterValue, RANKED_MATCHES,
};
use super::records::*;
use super::server::ServerCatalog;
use super::CatalogError;
use crate::product::Price;

/// A read transaction whose fixed statements are prepared once per connection.
type Cached<'c> = deadpool_postgres::Transaction<'c>;

/// A bound parameter and its type.
type Param = (Box<dyn ToSql + Sync + Send>, Type);

/// A parameter of a statement sent with its types ([`Transaction::query_typed`]): parsed, bound
/// and run in one round trip, where a statement prepared first takes two (and is planned for the
/// values all the same: the unnamed statement is planned when bound).
type Typed<'a> = (&'a (dyn ToSql + Sync), Type);

/// The user's words as tsqueries (NULL without a word), built by the server from the text (`$1`)
/// with the parser that indexed the products: every word a prefix term that must match. Two
/// spellings of the same query:
/// - for the search index (pg/0010, pg/0011: every word under its prefixes of 1 to 6 characters
///   too), a word of up to 6 characters is an exact term (`'fr'`), a longer one a prefix term;
/// - for the search vectors themselves (ranking, and a walk down the newest products), every word
///   a prefix term (`'fr':*`).
///
/// They are bound to the searches as `$1::text::tsquery`, so the planner sees the actual terms.
/// With them, when `$2` asks: the planner's estimate of the matches (`pe_match_estimate`, an
/// EXPLAIN of ~0.3 ms), how many live products there are (`reltuples`, as of the last ANALYZE)
/// and how many bands of ids the search index has (pg/0011, up to the newest id), which choose
/// how a search finds its newest matches ([`way`]).
const TEXT_QUERY: &str = "SELECT t.indexed, t.prefixes,
         CASE WHEN $2 THEN pe_match_estimate(t.indexed::tsquery) END,
         CASE WHEN $2 THEN (SELECT reltuples::float8 FROM pg_class WHERE oid = 'product_search'::regclass) END,
         CASE WHEN $2 THEN (SELECT coalesce(pe_search_band(max(id)) + 1, 0) FROM product_search) END
    FROM (SELECT to_tsquery('simple', string_agg(quote_literal(word)
                     || CASE WHEN length(word) <= 6 THEN '' ELSE ':*' END, ' & '))::text AS indexed,
                 to_tsquery('simple', string_agg(quote_literal(word) || ':*', ' & '))::text AS prefixes
          FROM unnest(tsvector_to_array(to_tsvector('simple', pe_unaccent($1)))) AS word) AS t";

/// How a statement finds the matches of a text search.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// Through the search index (pg/0011), `$1` being [`Terms::indexed`]: a read of every match.
    Index,
    /// Through the search index, the matches of one band of ids (`b.band`, pg/0011), `$1` being
    /// [`Terms::indexed`].
    Band,
    /// Row by row on the search vectors, `$1` being [`Terms::prefixes`]: a walk down the products
    /// in id order that stops after a few thousand matches, and ranking.
    Vectors,
}

/// The user's words as tsquery texts ([`TEXT_QUERY`]).
struct Terms {
    /// For the prefix index.
    indexed: String,
    /// For the search vectors.
    prefixes: String,
    /// How many products the planner expects to match.
    estimate: f64,
    /// How many live products there are, about.
    live: f64,
    /// How many bands of ids the search index has (0 when not asked for), the newest one's number
    /// + 1: where reading band by band starts.
    bands: i64,
}

/// A page and the total. A text search in relevance order learns its total from the matches it
/// reads first ([`Plan::relevance_page`]); any other page sends its count beside the page's
/// statement (tokio-postgres pipelines the queries of one connection polled together): one round
/// trip, not two.
pub(super) async fn query_products(
    server: &ServerCatalog,
    query: &ProductQuery,
    cap: u64,
) -> Result<ProductPage, CatalogError> {
    let mut client = server.client().await?;
    let tx = snapshot(server, &mut client).await?;
    let plan = Plan::new(server, &tx, query).await?;
    let limit = count_limit(query, cap);
    let (ids, total, total_capped) = if plan.relevance() {
        plan.relevance_page(server, &tx, limit.unwrap_or(u64::MAX)).await?
    } else {
        let (ids, counted) = tokio::try_join!(plan.sorted_page(server, &tx), plan.total(server, &tx, limit))?;
        let (total, capped) = page_total(counted, limit);
        (ids, total, capped)
    };
    let rows = summaries(server, &tx, &ids).await?;
    tx.commit().await.map_err(|e| server.driver_error(&e))?;
    Ok(ProductPage { total, total_capped, rows })
}

/// A page without the total.
pub(super) async fn query_rows(
    server: &ServerCatalog,
    query: &ProductQuery,
) -> Result<Vec<ProductSummary>, CatalogError> {
    let mut client = server.client().await?;
    let tx = snapshot(server, &mut client).await?;
    let plan = Plan::new(server, &tx, query).await?;
    // No total to tell: reading every match pays only up to the ranked ones and the page.
    let enough = u64::from(query.offset) + u64::from(query.limit) + u64::from(RANKED_MATCHES);
    let ids = if plan.relevance() {
        plan.relevance_page(server, &tx, enough).await?.0
    } else {
        plan.sorted_page(server, &tx).await?
    };
    let rows = summaries(server, &tx, &ids).await?;
    tx.commit().await.map_err(|e| server.driver_error(&e))?;
    Ok(rows)
}

/// A read-only `REPEATABLE READ` transaction: every statement in it sees the same catalog.
pub(super) async fn snapshot<'c>(
    server: &ServerCatalog,
    client: &'c mut deadpool_postgres::Object,
) -> Result<deadpool_postgres::Transaction<'c>, CatalogError> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(|e| server.driver_error(&e))?)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The SQL for one [`ProductQuery`] on the server.
struct Plan {
    /// The user's words as tsqueries, `$1` in the form of the statement's [`Lookup`], when the
    /// text has any.
    text: Option<Terms>,
    /// The text had something to search but the server's parser found no word in it: nothing
    /// matches (as in FTS5, where such a term matches nothing).
    nothing: bool,
    /// Conditions on `products p` beyond "live", AND-ed.
    filters: Vec<String>,
    /// The filters' values: `$1`, `$2`, ..., or from `$2` after the text.
    values: Vec<Param>,
    sort: SortKey,
    direction: SortDirection,
    offset: u32,
    limit: u32,
}

impl Plan {
    async fn new(server: &ServerCatalog, tx: &Cached<'_>, query: &ProductQuery) -> Result<Self, CatalogError> {
        // The filters' values follow the text's `$1`, when there is text.
        let conditions = |first| {
            filter_conditions(query, first, |n| format!("${n}"), |column, p| format!("lower({column}) = lower({p})"))
        };
        let searched = fts_query(&query.text).is_some();
        let (mut filters, mut values) = conditions(1 + usize::from(searched));
        let mut nothing = false;
        let text = if searched {
            // Only a relevance search without filters may walk (Self::newest_matches): the others
            // skip the estimate's EXPLAIN.
            let estimate = query.sort == SortKey::Relevance && filters.is_empty();
            let statement = tx.prepare_cached(TEXT_QUERY).await.map_err(|e| server.driver_error(&e))?;
            let row = tx.query_one(&statement, &[&query.text, &estimate]).await.map_err(|e| server.driver_error(&e))?;
            let terms = row.get::<_, Option<String>>(0).zip(row.get::<_, Option<String>>(1));
            nothing = terms.is_none();
            if nothing {
                // No `$1` after all.
                (filters, values) = conditions(1);
            }
            terms.map(|(indexed, prefixes)| Terms {
                indexed,
                prefixes,
                estimate: row.get::<_, Option<f64>>(2).unwrap_or(0.0).max(0.0),
                // -1 before the first ANALYZE, NULL when not asked for: unknown, which never walks.
                live: row.get::<_, Option<f64>>(3).unwrap_or(0.0).max(0.0),
                bands: row.get::<_, Option<i64>>(4).unwrap_or(0),
            })
        } else {
            None
        };
        let values = values
            .into_iter()
            .map(|v| match v {
                FilterValue::Text(text) => (Box::new(text) as Box<dyn ToSql + Sync + Send>, Type::TEXT),
                FilterValue::Real(real) => (Box::new(real) as Box<dyn ToSql + Sync + Send>, Type::FLOAT8),
            })
            .collect();
        Ok(Plan {
            text,
            nothing,
            filters,
            values,
            sort: query.sort,
            direction: query.direction,
            offset: query.offset,
            limit: query.limit,
        })
    }

    /// `SELECT {select} FROM … WHERE …` of the matching live rows, and `extra` conditions. A text
    /// search without filters that reads only ids and search vectors (`ids_only`: counts, the
    /// relevance ranking, the older matches) reads `product_search` alone (pg/0005: live
    /// products only, a quarter of `products`' bytes), aliased `p`; otherwise `products p`,
    /// joined to it for the text. The text is looked up as `lookup` says ([`Self::lookup`]).
    fn matching(&self, select: &str, extra: &[&str], ids_only: bool, lookup: Lookup) -> String {
        let mut conditions: Vec<&str> = Vec::new();
        // The words of `product_search` aliased `a`.
        let words = |a: &str| match self.lookup(lookup) {
            Lookup::Index => format!("pe_search_keys({a}.search, {a}.id) @@ $1::text::tsquery"),
            Lookup::Band => format!(
                "pe_search_keys({a}.search, {a}.id) @@ ($1::text::tsquery \
                 && quote_literal(pe_search_band_key(b.band))::tsquery)"
            ),
            Lookup::Vectors => format!("{a}.search @@ $1::text::tsquery"),
        };
        let text;
        let from = match (&self.text, self.filters.is_empty() && ids_only) {
            (Some(_), true) => {
                text = words("p");
                conditions.push(&text);
                "product_search p"
            }
            (Some(_), false) => {
                text = words("s");
                conditions.extend(["p.deleted_at IS NULL", &text]);
                "products p JOIN product_search s ON s.id = p.id"
            }
            (None, _) => {
                conditions.push("p.deleted_at IS NULL");
                "products p"
            }
        };
        if self.nothing {
            conditions.push("false");
        }
        conditions.extend(self.filters.iter().map(String::as_str));
        conditions.extend(extra);
        format!("SELECT {select} FROM {from} WHERE {}", conditions.join(" AND "))
    }

    /// How a statement that would read the matches `lookup`'s way finds them: with filters, always
    /// on the search vectors, so that the planner may start from a filter's index (a brand's few
    /// hundred products) and check each one's words, ~0.3 µs a row, or take pg/0005's words index:
    /// the search index's expression costs ~17 µs a row wherever it is checked outside the index
    /// (a search with a brand took 13 ms through it against 3 ms this way).
    fn lookup(&self, lookup: Lookup) -> Lookup {
        if self.filters.is_empty() {
            lookup
        } else {
            Lookup::Vectors
        }
    }

    /// The statement's parameters with their types: the text in `lookup`'s form
    /// ([`Self::lookup`]), the filters' values, then `more`.
    fn params<'a>(&'a self, lookup: Lookup, more: &[Typed<'a>]) -> Vec<Typed<'a>> {
        let text = self.text.as_ref().map(|terms| match self.lookup(lookup) {
            Lookup::Index | Lookup::Band => &terms.indexed,
            Lookup::Vectors => &terms.prefixes,
        });
        let text = text.map(|words| (words as &(dyn ToSql + Sync), Type::TEXT));
        text.into_iter()
            .chain(self.values.iter().map(|(v, t)| (v.as_ref() as &(dyn ToSql + Sync), t.clone())))
            .chain(more.iter().cloned())
            .collect()
    }

    /// The number of the statement's first parameter after the text and the filters.
    fn next_param(&self) -> usize {
        usize::from(self.text.is_some()) + self.values.len() + 1
    }

    /// The matches, counted up to one past `limit` when given.
    async fn total(
        &self,
        server: &ServerCatalog,
        tx: &Transaction<'_>,
        limit: Option<u64>,
    ) -> Result<u64, CatalogError> {
        let sql = match limit {
            Some(limit) => {
                format!(
                    "SELECT count(*) FROM ({} LIMIT {}) AS matching",
                    self.matching("1", &[], true, Lookup::Index),
                    limit + 1
                )
            }
            None => self.matching("count(*)", &[], true, Lookup::Index),
        };
        let row =
            tx.query_typed_one(&sql, &self.params(Lookup::Index, &[])).await.map_err(|e| server.driver_error(&e))?;
        Ok(count(row.get(0)))
    }

    /// A text search in relevance order.
    fn relevance(&self) -> bool {
        self.text.is_some() && self.sort == SortKey::Relevance
    }

    /// A page of a text search in relevance order, its total and whether the total is capped, from
    /// one read of the newest matches, up to `limit` + 1 of them (and at least as many as are
    /// ranked) with their scores ([`Self::newest_matches`]). That read is the count, the
    /// ranking and the page:
    /// - The newest [`RANKED_MATCHES`] are ranked by score, the older ones follow newest first
    ///   ([`rank`], the rule both backends share).
    /// - At most `limit` matched: the total is exact, and `Asc` is the exact reverse.
    /// - More matched: the total is capped, and the page comes from the matches read, which reach
    ///   past it (`limit` is at least the page's end). `Asc` (the worst matches first) has to
    ///   start from the oldest match: [`Self::oldest_first`].
    async fn relevance_page(
        &self,
        server: &ServerCatalog,
        tx: &Transaction<'_>,
        limit: u64,
    ) -> Result<(Vec<ProductId>, u64, bool), CatalogError> {
        let (offset, take) = (u64::from(self.offset), u64::from(self.limit));
        // Enough to rank (the newest RANKED_MATCHES + 1), to count (`limit` + 1) and for the page.
        let read = limit.max(u64::from(RANKED_MATCHES)).max(offset + take).saturating_add(1);
        let newest = self.newest_matches(server, tx, read).await?;
        let capped = newest.len() as u64 > limit;
        if capped && self.direction == SortDirection::Asc {
            let ids = if take == 0 { Vec::new() } else { self.oldest_first(server, tx, &newest, offset, take).await? };
            return Ok((ids, limit, true));
        }
        let total = if capped { limit } else { newest.len() as u64 };
        let mut order = ranked_order(&newest);
        if self.direction == SortDirection::Asc {
            order.reverse();
        }
        Ok((window(&order, offset, take), total, capped))
    }

    /// The newest `wanted` matches of a text search (fewer when fewer match), newest first, each
    /// with its `ts_rank` score, found the [`way`] that costs least for this query, judged from
    /// the planner's estimate of its matches ([`Terms::estimate`]):
    /// - [`SearchWay::Index`]: every match is read through the search index, then the newest
    ///   kept: cheap for a rare word, and each match costs a heap page of its own (~1 µs at
    ///   100,000 products on the bench machine);
    /// - [`SearchWay::Bands`]: the same, one band of 4,096 ids at a time from the newest
    ///   (pg/0011), until `wanted` matched: ~`wanted` matches read, and the bands' lists of ids
    ///   decoded in the index (~0.07 µs an id);
    /// - [`SearchWay::Walk`]: down the newest products, checking each one's words (~0.25 µs a row,
    ///   the pages in order), until `wanted` matched: cheap when most products match.
    ///
    /// With filters, the planner chooses from the words index and the filters' own
    /// ([`Self::lookup`]), on a statement of the walk's shape.
    ///
    /// The bands' statement reads the bands in `generate_series`' order and stops at the LIMIT:
    /// a LATERAL subquery that refers to the band runs as a nested loop driven by the function
    /// scan, the only plan PostgreSQL has for it, which yields each band's rows in its ORDER BY.
    async fn newest_matches(
        &self,
        server: &ServerCatalog,
        tx: &Transaction<'_>,
        wanted: u64,
    ) -> Result<Vec<(ProductId, f64)>, CatalogError> {
        let Some(terms) = &self.text else { return Ok(Vec::new()) };
        let n = self.next_param();
        let limit = i64::try_from(wanted).unwrap_or(i64::MAX);
        let way = if self.filters.is_empty() {
            forced_way().unwrap_or_else(|| way(terms.estimate, terms.live, terms.bands as f64, wanted))
        } else {
            SearchWay::Walk
        };
        let prefixes = terms.prefixes.as_str();
        // `p.search` is `product_search`'s vector alone, and `products.search` (the same one)
        // when joined. The index's ways score only the newest `wanted`, after the limit: scoring
        // every match read costs ~0.6 µs each.
        let rows = match way {
            SearchWay::Walk => {
                // Scored as they are read, on the search vectors ([`Self::lookup`]).
                let sql = format!(
                    "{} ORDER BY p.id DESC LIMIT ${n}",
                    self.matching("p.id, ts_rank(p.search, $1::text::tsquery)::float8", &[], true, Lookup::Vectors)
                );
                tx.query_typed(&sql, &self.params(Lookup::Vectors, &[int(&limit)])).await
            }
            SearchWay::Index | SearchWay::Bands => {
                // The newest `wanted` with their vectors (the bands from the newest one, `$n+2`,
                // down to 0), then scored.
                let (newest, lookup) = if way == SearchWay::Index {
                    let every = self.matching("p.id, p.search", &[], true, Lookup::Index);
                    (format!("{every} ORDER BY p.id DESC LIMIT ${n}"), Lookup::Index)
                } else {
                    let band = self.matching("p.id, p.search", &[], true, Lookup::Band);
                    let bands = format!(
                        "SELECT band.id, band.search
                         FROM generate_series(${}::bigint, 0, -1) AS b (band)
                         CROSS JOIN LATERAL ({band} ORDER BY p.id DESC) AS band
                         LIMIT ${n}",
                        n + 2
                    );
                    (bands, Lookup::Band)
                };
                let sql = format!(
                    "SELECT id, ts_rank(search, ${}::text::tsquery)::float8 FROM ({newest}) AS newest ORDER BY id DESC",
                    n + 1
                );
                let newest_band = terms.bands - 1;
                let mut more = vec![int(&limit), (&prefixes, Type::TEXT)];
                if lookup == Lookup::Band {
                    more.push(int(&newest_band));
                }
                tx.query_typed(&sql, &self.params(lookup, &more)).await
            }
        }
        .map_err(|e| server.driver_error(&e))?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// The ids of a page in a column's order (a text search in relevance order is
    /// [`Self::relevance_page`]'s).
    async fn sorted_page(&self, server: &ServerCatalog, tx: &Transaction<'_>) -> Result<Vec<ProductId>, CatalogError> {
        let (offset, limit) = (u64::from(self.offset), u64::from(self.limit));
        if limit == 0 {
            return Ok(Vec::new());
        }
        let order = order_by(self.sort, self.direction);
        self.ids(server, tx, None, &order, false, offset, limit).await
    }

    /// A page of a relevance sort in `Asc` order when more matched than were read (`newest`, newest
    /// first): the exact reverse of the `Desc` order, so the older matches come first, oldest
    /// first, then the ranked ones worst first. The older ones are counted and read from SQL.
    async fn oldest_first(
        &self,
        server: &ServerCatalog,
        tx: &Transaction<'_>,
        newest: &[(ProductId, f64)],
        offset: u64,
        limit: u64,
    ) -> Result<Vec<ProductId>, CatalogError> {
        let (ranked, cutoff) = ranked(newest);
        let ranked: Vec<ProductId> = ranked.into_iter().rev().collect();
        let Some(cutoff) = cutoff else {
            return Ok(window(&ranked, offset, limit));
        };
        let total = self.total(server, tx, None).await?;
        let older_len = total.saturating_sub(ranked.len() as u64);
        let mut ids = if offset < older_len {
            self.ids(server, tx, Some(cutoff), "p.id ASC", true, offset, limit).await?
        } else {
            Vec::new()
        };
        let want = limit - ids.len() as u64;
        ids.extend(window(&ranked, offset.saturating_sub(older_len), want));
        Ok(ids)
    }

    /// The ids of matching rows (older than `older_than`, when given) in `order`: `skip`, then
    /// `take`. In id order only (`by_id`, the older matches of a relevance sort) it is a walk down
    /// (or up) the products that stops after `skip` + `take` matches, on the search vectors;
    /// other orders read the matches through the prefix index.
    #[allow(clippy::too_many_arguments)]
    async fn ids(
        &self,
        server: &ServerCatalog,
        tx: &Transaction<'_>,
        older_than: Option<ProductId>,
        order: &str,
        by_id: bool,
        skip: u64,
        take: u64,
    ) -> Result<Vec<ProductId>, CatalogError> {
        let lookup = if by_id { Lookup::Vectors } else { Lookup::Index };
        let n = self.next_param();
        let older = format!("p.id < ${n}");
        let extra: Vec<&str> = older_than.iter().map(|_| older.as_str()).collect();
        let (limit, offset) = (n + extra.len(), n + 1 + extra.len());
        let sql = format!(
            "{} ORDER BY {order} LIMIT ${limit} OFFSET ${offset}",
            self.matching("p.id", &extra, by_id, lookup)
        );
        let take = i64::try_from(take).unwrap_or(i64::MAX);
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let cutoff = older_than.unwrap_or_default();
        let (take, skip, cutoff) = (int(&take), int(&skip), int(&cutoff));
        let more: Vec<Typed> = if older_than.is_some() { vec![cutoff, take, skip] } else { vec![take, skip] };
        let rows = tx.query_typed(&sql, &self.params(lookup, &more)).await.map_err(|e| server.driver_error(&e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}

/// How [`Plan::newest_matches`] finds the newest matches of a search without filters.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchWay {
    /// Every match, through the search index.
    Index,
    /// Band by band from the newest, through the search index.
    Bands,
    /// Down the newest products, checking each one's words.
    Walk,
}

/// What each way costs per unit, in µs as measured with pgbench on the bench's 100,000-product
/// catalog (BENCHMARKS.md, run 8): a match read through the index (its heap page, its row, the
/// sort), an id of a band's list decoded by GIN, a band looked up (its GIN scan and sort, even
/// when empty: 25 empty bands took 1.2 ms), a row checked on a walk.
const MATCH_READ: f64 = 1.0;
const ID_DECODED: f64 = 0.07;
const BAND_READ: f64 = 40.0;
const ROW_WALKED: f64 = 0.25;

/// The cheapest way to find the newest `wanted` of about `estimate` matches among about `live`
/// products whose ids fill `bands` bands of the search index, the matches taken as spread evenly
/// over the ids: the newest `wanted` × `live` / `estimate` products hold them, in `wanted` /
/// `estimate` of the bands. Every match is read when fewer than `wanted` match or `live` is
/// unknown (0: never analyzed). At 100,000 products (25 bands) and a first page (1,001 wanted):
/// the index up to ~3,400 matches, the bands up to ~16,500, then the walk. Sparse ids (a few
/// products over many bands, each band a lookup) make the bands cost more, so they lose.
fn way(estimate: f64, live: f64, bands: f64, wanted: u64) -> SearchWay {
    let wanted = wanted as f64;
    if live <= 0.0 || estimate <= wanted {
        return SearchWay::Index;
    }
    let spanned = wanted * live / estimate;
    let costs = [
        (estimate * MATCH_READ, SearchWay::Index),
        (bands * wanted / estimate * BAND_READ + spanned * ID_DECODED + wanted * MATCH_READ, SearchWay::Bands),
        (spanned * ROW_WALKED, SearchWay::Walk),
    ];
    costs.into_iter().min_by(|a, b| a.0.total_cmp(&b.0)).map_or(SearchWay::Index, |(_, way)| way)
}

/// The way the tests force on every search without filters
/// ([`super::server::testing::force_search_way`]): 0 for none, else a [`SearchWay`] + 1. Every
/// way finds the same matches, so a test forcing one cannot change another test's results.
static FORCED_WAY: AtomicU8 = AtomicU8::new(0);

pub(super) fn force_way(way: Option<SearchWay>) {
    FORCED_WAY.store(way.map_or(0, |way| way as u8 + 1), Ordering::Relaxed);
}

fn forced_way() -> Option<SearchWay> {
    match FORCED_WAY.load(Ordering::Relaxed) {
        1 => Some(SearchWay::Index),
        2 => Some(SearchWay::Bands),
        3 => Some(SearchWay::Walk),
        _ => None,
    }
}

/// [`rank`] of matches read newest first with their scores (`ts_rank`: higher is better): the
/// newest [`RANKED_MATCHES`] best first, and the oldest ranked id when more were read.
fn ranked(newest: &[(ProductId, f64)]) -> (Vec<ProductId>, Option<ProductId>) {
    let ranked_rows = &newest[..newest.len().min(RANKED_MATCHES as usize + 1)];
    // `rank` wants lower for better.
    rank(ranked_rows.iter().map(|(id, score)| (*id, -score)).collect())
}

/// Relevance's `Desc` order of matches read newest first with their scores: the ranked ones
/// ([`ranked`]), then the older ones, newest first.
fn ranked_order(newest: &[(ProductId, f64)]) -> Vec<ProductId> {
    let (ranked, cutoff) = ranked(newest);
    let older = cutoff.map_or(&[][..], |cutoff| &newest[newest.partition_point(|(id, _)| *id >= cutoff)..]);
    ranked.into_iter().chain(older.iter().map(|(id, _)| *id)).collect()
}

/// The ORDER BY of a sort on the server: SQLite's (see `listing::order_by`), text compared in
/// lower case, rows without the value last both ways, ties by id in the same direction.
fn order_by(sort: SortKey, direction: SortDirection) -> String {
    let dir = if direction == SortDirection::Asc { "ASC" } else { "DESC" };
    let nullable = |column: &str| format!("{column} {dir} NULLS LAST, p.id {dir}");
    match sort {
        SortKey::Relevance | SortKey::Updated => format!("p.updated_at {dir}, p.id {dir}"),
        SortKey::Name => format!("lower(p.name) {dir}, p.id {dir}"),
        SortKey::Brand => nullable("lower(p.brand)"),
        SortKey::Category => nullable("lower(p.category)"),
        SortKey::Price => nullable("p.price_amount"),
        SortKey::Gtin => nullable("p.gtin"),
    }
}

/// A bigint parameter.
fn int(value: &i64) -> Typed<'_> {
    (value, Type::INT8)
}

/// The rows of `ids`, in that order.
async fn summaries(
    server: &ServerCatalog,
    tx: &Cached<'_>,
    ids: &[ProductId],
) -> Result<Vec<ProductSummary>, CatalogError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    // Not a cached statement: after five runs PostgreSQL may keep a generic plan, which does
    // not know how many ids the array holds (a page joins 50–100 of 100,000 photos). Typed: one
    // round trip ([`Typed`]).
    let rows = tx
        .query_typed(
            "SELECT p.id, p.photo_id, p.name, p.brand, p.category, p.price_amount, p.price_currency, p.gtin,
                    p.revision, p.updated_at, ph.sha256, p.flagged
             FROM unnest($1::bigint[]) WITH ORDINALITY AS page (id, n)
             JOIN products p ON p.id = page.id
             JOIN photos ph ON ph.id = p.photo_id
             ORDER BY page.n",
            &[(&ids, Type::INT8_ARRAY)],
        )
        .await
        .map_err(|e| server.driver_error(&e))?;
    Ok(rows
        .iter()
        .map(|row| {
            let amount: Option<f64> = row.get(5);
            let currency: Option<String> = row.get(6);
            ProductSummary {
                id: row.get(0),
                photo_id: row.get(1),
                name: row.get(2),
                brand: row.get(3),
                category: row.get(4),
                price: amount.zip(currency).map(|(amount, currency)| Price { amount, currency }),
                gtin: row.get(7),
                revision: u32::try_from(row.get::<_, i64>(8)).unwrap_or(u32::MAX),
                updated_at: row.get(9),
                photo_sha256: row.get(10),
                flagged: u32::try_from(row.get::<_, i64>(11)).unwrap_or(u32::MAX),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_takes_the_cheapest_way_for_its_share_of_matches() {
        use SearchWay::*;
        // 100,000 products, a first page (1,001 wanted).
        let at_100k = |estimate| way(estimate, 100_000.0, 25.0, 1_001);
        assert_eq!(at_100k(30.0), Index, "a rare word");
        assert_eq!(at_100k(2_500.0), Index);
        assert_eq!(at_100k(3_300.0), Index);
        assert_eq!(at_100k(3_500.0), Bands);
        assert_eq!(at_100k(9_000.0), Bands);
        assert_eq!(at_100k(16_000.0), Bands);
        assert_eq!(at_100k(17_500.0), Walk);
        assert_eq!(at_100k(90_000.0), Walk, "most products");
        // Fewer matches than wanted, or a catalog never analyzed: every match.
        assert_eq!(way(900.0, 100_000.0, 25.0, 1_001), Index);
        assert_eq!(way(5_000.0, 0.0, 25.0, 1_001), Index);
        // The same 100,000 products with ids up to 100,000,000 (24,415 bands): never the bands.
        assert_eq!(way(4_000.0, 100_000.0, 24_415.0, 1_001), Index);
        assert_eq!(way(9_000.0, 100_000.0, 24_415.0, 1_001), Walk);
        // Deeper pages want more, so the bands and the walk need more matches.
        assert_eq!(way(9_000.0, 100_000.0, 25.0, 11_001), Index);
        assert_eq!(way(25_000.0, 100_000.0, 25.0, 11_001), Walk);
        // The broad test's ways (catalog_backends.rs): every one of 1,300 products a match.
        assert_eq!(way(1_300.0, 1_300.0, 5.0, 10_001), Index);
        assert_eq!(way(1_300.0, 1_300.0, 5.0, 1_001), Walk);
    }
}
