//! The catalog table on a server catalog (issue 13): [`ProductQuery`] → one page and the total,
//! the facets and the live count, as [`super::listing`] answers them on SQLite. Each read runs in
//! one read-only `REPEATABLE READ` transaction, so a page and its total agree.
//!
//! # Search
//! PostgreSQL's full-text search answers the search box as FTS5 does on SQLite (pg/0004: the same
//! fields of live products, word prefixes, case and accents folded). The user's text is never
//! query syntax: it is split into words by the same parser that indexed the products, and each
//! word becomes a prefix term that must match (`'creme':* & 'fraiche':*`), built by the server
//! itself from the text as a bound parameter.
//!
//! Relevance follows SQLite's rule ([`super::listing::rank`]): `ts_rank` scores at most the
//! [`RANKED_MATCHES`] newest matches (scoring costs per match, and "re" typed into 100,000
//! products matches most of them); when more match, the older ones follow, newest first. Equal
//! scores: the newer product first.
//!
//! # Sorts
//! The same keys, directions and tie-breaks as SQLite; text sorts compare `lower(…)` (pg/0001's
//! `products_live_by_*` indexes), rows without the value last both ways.

use tokio_postgres::types::ToSql;
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

/// A bound parameter.
type Param = Box<dyn ToSql + Sync + Send>;

/// The user's words as a prefix tsquery (NULL without a word), built by the server from the text
/// (`$1`) with the parser that indexed the products. It is read first and bound to the search as
/// `$1::text::tsquery`, so the planner sees the actual terms: with the column's statistics it scans the
/// newest products for a broad prefix ("re") and the GIN index for a rare one.
const TEXT_QUERY: &str = "SELECT to_tsquery('simple', string_agg(quote_literal(word) || ':*', ' & '))::text
    FROM unnest(tsvector_to_array(to_tsvector('simple', pe_unaccent($1)))) AS word";

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

/// Live products.
pub(super) async fn count_live(server: &ServerCatalog) -> Result<u64, CatalogError> {
    let client = server.client().await?;
    let row = client
        .query_one("SELECT count(*) FROM products WHERE deleted_at IS NULL", &[])
        .await
        .map_err(|e| server.driver_error(&e))?;
    Ok(count(row.get(0)))
}

/// Categories and brands of live products, most common first; spellings that differ only in case
/// count as one.
pub(super) async fn facets(server: &ServerCatalog) -> Result<Facets, CatalogError> {
    let mut client = server.client().await?;
    let tx = snapshot(server, &mut client).await?;
    let mut values = Vec::new();
    for column in ["category", "brand"] {
        let sql = format!(
            "SELECT min({column}), count(*) FROM products
             WHERE deleted_at IS NULL AND {column} IS NOT NULL
             GROUP BY lower({column})
             ORDER BY count(*) DESC, lower(min({column})), min({column})"
        );
        let rows = tx.query(&sql, &[]).await.map_err(|e| server.driver_error(&e))?;
        values.push(rows.iter().map(|r| FacetValue { value: r.get(0), count: count(r.get(1)) }).collect::<Vec<_>>());
    }
    let brands = values.pop().unwrap_or_default();
    let facets = Facets { categories: values.pop().unwrap_or_default(), brands };
    tx.commit().await.map_err(|e| server.driver_error(&e))?;
    Ok(facets)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The SQL for one [`ProductQuery`] on the server.
struct Plan {
    /// The user's words as a tsquery, `$1`, when the text has any.
    text: Option<String>,
    /// The text had something to search but the server's parser found no word in it: nothing
    /// matches (as in FTS5, where such a term matches nothing).
    nothing: bool,
    /// Conditions on `products p` beyond "live", AND-ed.
    filters: Vec<String>,
    /// `$1`, `$2`, ...: the text first, if any, then the filters' values.
    values: Vec<Param>,
    sort: SortKey,
    direction: SortDirection,
    offset: u32,
    limit: u32,
}

impl Plan {
    async fn new(server: &ServerCatalog, tx: &Cached<'_>, query: &ProductQuery) -> Result<Self, CatalogError> {
        let mut nothing = false;
        let text = match fts_query(&query.text) {
            None => None,
            Some(_) => {
                let statement = tx.prepare_cached(TEXT_QUERY).await.map_err(|e| server.driver_error(&e))?;
                let row = tx.query_one(&statement, &[&query.text]).await.map_err(|e| server.driver_error(&e))?;
                let tsquery: Option<String> = row.get(0);
                nothing = tsquery.is_none();
                tsquery
            }
        };
        let mut plan = Plan {
            values: text.iter().map(|t| Box::new(t.clone()) as Param).collect(),
            text,
            nothing,
            filters: Vec::new(),
            sort: query.sort,
            direction: query.direction,
            offset: query.offset,
            limit: query.limit,
        };
        let first = plan.values.len() + 1;
        let (filters, values) =
            filter_conditions(query, first, |n| format!("${n}"), |column, p| format!("lower({column}) = lower({p})"));
        plan.filters = filters;
        plan.values.extend(values.into_iter().map(|v| match v {
            FilterValue::Text(text) => Box::new(text) as Param,
            FilterValue::Real(real) => Box::new(real) as Param,
        }));
        Ok(plan)
    }

    /// `SELECT {select} FROM … WHERE …` of the matching live rows, and `extra` conditions. A text
    /// search without filters that reads only ids and search vectors (`ids_only`: counts, the
    /// relevance ranking, the older matches) reads `product_search` alone (pg/0005: live
    /// products only, a quarter of `products`' bytes), aliased `p`; otherwise `products p`,
    /// joined to it for the text.
    fn matching(&self, select: &str, extra: &[&str], ids_only: bool) -> String {
        let mut conditions: Vec<&str> = Vec::new();
        let from = match (&self.text, self.filters.is_empty() && ids_only) {
            (Some(_), true) => {
                conditions.push("p.search @@ $1::text::tsquery");
                "product_search p"
            }
            (Some(_), false) => {
                conditions.extend(["p.deleted_at IS NULL", "s.search @@ $1::text::tsquery"]);
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

    fn params<'a>(&'a self, more: &'a [&'a (dyn ToSql + Sync)]) -> Vec<&'a (dyn ToSql + Sync)> {
        self.values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).chain(more.iter().copied()).collect()
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
                format!("SELECT count(*) FROM ({} LIMIT {}) AS matching", self.matching("1", &[], true), limit + 1)
            }
            None => self.matching("count(*)", &[], true),
        };
        let row = tx.query_one(&sql, &self.params(&[])).await.map_err(|e| server.driver_error(&e))?;
        Ok(count(row.get(0)))
    }

    /// A text search in relevance order.
    fn relevance(&self) -> bool {
        self.text.is_some() && self.sort == SortKey::Relevance
    }

    /// A page of a text search in relevance order, its total and whether the total is capped, from
    /// the matches read first: up to `limit` + 1 of them, in whatever order the server finds them
    /// fastest (the GIN index for a rare word, the table in order for a broad prefix, which stops
    /// after `limit` + 1). This statement is the count, so a search costs one pass over its
    /// matches where counting and ranking each made one:
    /// - At most `limit` matched: every match is known. The newest [`RANKED_MATCHES`] are scored
    ///   by id (`ts_rank`, a primary-key lookup each) and the rest follow newest first, here.
    /// - More matched (a broad prefix, at least a tenth of the catalog at the default cap): the
    ///   total is capped and the page comes from [`Self::ranked_page`], whose walk down the
    ///   newest products finds the ranked ones after a few thousand rows.
    async fn relevance_page(
        &self,
        server: &ServerCatalog,
        tx: &Transaction<'_>,
        limit: u64,
    ) -> Result<(Vec<ProductId>, u64, bool), CatalogError> {
        let (offset, take) = (u64::from(self.offset), u64::from(self.limit));
        let read = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let sql = format!("{} LIMIT ${}", self.matching("p.id", &[], true), self.values.len() + 1);
        let rows = tx.query(&sql, &self.params(&[&read])).await.map_err(|e| server.driver_error(&e))?;
        if rows.len() as u64 > limit {
            let (ids, told) =
                if take == 0 { (Vec::new(), None) } else { self.ranked_page(server, tx, offset, take).await? };
            return Ok(match told {
                Some(total) => (ids, total, false),
                None => (ids, limit, true),
            });
        }
        let mut matches: Vec<ProductId> = rows.iter().map(|r| r.get(0)).collect();
        matches.sort_unstable_by(|a, b| b.cmp(a));
        let total = matches.len() as u64;
        let newest = &matches[..matches.len().min(RANKED_MATCHES as usize + 1)];
        let scores = if newest.is_empty() || take == 0 {
            Vec::new()
        } else {
            let text: &(dyn ToSql + Sync) = self.values[0].as_ref();
            tx.query(
                "SELECT id, ts_rank(search, $1::text::tsquery)::float8 FROM product_search WHERE id = ANY($2)",
                &[text, &newest],
            )
            .await
            .map_err(|e| server.driver_error(&e))?
        };
        let scores: std::collections::HashMap<ProductId, f64> =
            scores.iter().map(|r| (r.get(0), r.get::<_, f64>(1))).collect();
        // ts_rank is higher for a better match; `rank` wants lower, in the newest-first order.
        let (ranked, cutoff) = rank(newest.iter().map(|id| (*id, -scores.get(id).copied().unwrap_or(0.0))).collect());
        let older = cutoff.map_or(&[][..], |cutoff| &matches[matches.partition_point(|id| *id >= cutoff)..]);
        let mut order: Vec<ProductId> = ranked.into_iter().chain(older.iter().copied()).collect();
        if self.direction == SortDirection::Asc {
            order.reverse();
        }
        Ok((window(&order, offset, take), total, false))
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

    /// A page of a relevance sort, as [`super::listing`]'s: the newest matches scored and ranked
    /// here, the older ones (when more matched) from SQL, newest first; `Asc` the exact reverse.
    async fn ranked_page(
        &self,
        server: &ServerCatalog,
        tx: &Transaction<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<ProductId>, Option<u64>), CatalogError> {
        let cap = i64::from(RANKED_MATCHES) + 1;
        let sql = format!(
            "{} ORDER BY p.id DESC LIMIT ${}",
            self.matching("p.id, ts_rank(p.search, $1::text::tsquery)::float8", &[], true),
            self.values.len() + 1
        );
        let rows = tx.query(&sql, &self.params(&[&cap])).await.map_err(|e| server.driver_error(&e))?;
        // ts_rank is higher for a better match; `rank` wants lower.
        let newest: Vec<(ProductId, f64)> = rows.iter().map(|r| (r.get(0), -r.get::<_, f64>(1))).collect();
        let (ranked, cutoff) = rank(newest);
        let desc = self.direction == SortDirection::Desc;
        let ranked: Vec<ProductId> = if desc { ranked } else { ranked.into_iter().rev().collect() };
        let Some(cutoff) = cutoff else {
            return Ok((window(&ranked, offset, limit), Some(ranked.len() as u64)));
        };
        let ranked_len = ranked.len() as u64;
        let older = Some(cutoff);
        if desc {
            let mut ids = window(&ranked, offset, limit);
            let want = limit - ids.len() as u64;
            if want > 0 {
                let skip = offset.saturating_sub(ranked_len);
                ids.extend(self.ids(server, tx, older, "p.id DESC", true, skip, want).await?);
            }
            Ok((ids, None))
        } else {
            let total = self.total(server, tx, None).await?;
            let older_len = total.saturating_sub(ranked_len);
            let mut ids = if offset < older_len {
                self.ids(server, tx, older, "p.id ASC", true, offset, limit).await?
            } else {
                Vec::new()
            };
            let want = limit - ids.len() as u64;
            ids.extend(window(&ranked, offset.saturating_sub(older_len), want));
            Ok((ids, Some(total)))
        }
    }

    /// The ids of matching rows (older than `older_than`, when given) in `order` (by id only:
    /// `ids_only`): `skip`, then `take`.
    #[allow(clippy::too_many_arguments)]
    async fn ids(
        &self,
        server: &ServerCatalog,
        tx: &Transaction<'_>,
        older_than: Option<ProductId>,
        order: &str,
        ids_only: bool,
        skip: u64,
        take: u64,
    ) -> Result<Vec<ProductId>, CatalogError> {
        let n = self.values.len();
        let older = format!("p.id < ${}", n + 1);
        let extra: Vec<&str> = older_than.iter().map(|_| older.as_str()).collect();
        let (limit, offset) = (n + 1 + extra.len(), n + 2 + extra.len());
        let sql =
            format!("{} ORDER BY {order} LIMIT ${limit} OFFSET ${offset}", self.matching("p.id", &extra, ids_only));
        let take = i64::try_from(take).unwrap_or(i64::MAX);
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let cutoff = older_than.unwrap_or_default();
        let more: Vec<&(dyn ToSql + Sync)> =
            if older_than.is_some() { vec![&cutoff, &take, &skip] } else { vec![&take, &skip] };
        let rows = tx.query(&sql, &self.params(&more)).await.map_err(|e| server.driver_error(&e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
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
    // not know how many ids the array holds (a page joins 50–100 of 100,000 photos).
    let rows = tx
        .query(
            "SELECT p.id, p.photo_id, p.name, p.brand, p.category, p.price_amount, p.price_currency, p.gtin,
                    p.revision, p.updated_at, ph.thumbnail_jpeg, p.flagged
             FROM unnest($1::bigint[]) WITH ORDINALITY AS page (id, n)
             JOIN products p ON p.id = page.id
             JOIN photos ph ON ph.id = p.photo_id
             ORDER BY page.n",
            &[&ids],
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
                thumbnail: super::columns::thumbnail_url(row.get(10)),
                flagged: u32::try_from(row.get::<_, i64>(11)).unwrap_or(u32::MAX),
            }
        })
        .collect())
}
