//! The catalog table: [`ProductQuery`] → one page of live products and the total, plus the facet
//! counts for the filters. Synchronous; runs on the catalog thread inside a read transaction.
//!
//! A page is read in two steps: first the ids of the page (a scan of one of migration 0003's
//! `products_live_by_*` indexes, or of the full-text matches), then the rows of those ids with
//! their thumbnails. The first step touches only index entries, so a deep page skips rows without
//! reading them; the second reads exactly `limit` rows.
//!
//! # Relevance, bounded
//! bm25 has to score every match before it can pick the best, which costs about half a
//! microsecond a match: fine for "granola" (a few hundred matches), not for "gr" typed into a
//! catalog of 100,000 products (tens of thousands). So relevance ranks at most
//! [`RANKED_MATCHES`] matches of the query (words and filters), the newest ones (highest ids);
//! when more match, the others follow them, newest first. A query with fewer matches is ranked
//! whole, exactly. Equal scores: the newer product first. Either way a page costs at most
//! [`RANKED_MATCHES`] scores, whatever the offset, and the order is one total order, so pages
//! never overlap or skip. One pass over the newest matches reads their ids and scores (FTS5
//! walks its doclists in id order without sorting); they are ranked in Rust, and that pass also
//! counts a query with fewer matches, so the common search is a single full-text query.
//!
//! The full-text index holds live products only (migration 0003), so a text search without
//! other filters is answered by `products_fts` alone, without reading `products`.

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, Row};

use super::columns::get_u64;
use super::db::{Db, Dialect};
use super::records::*;
use super::CatalogError;
use crate::product::Price;

/// bm25 weights per `products_fts` column (name, brand, category, description, attributes).
const RANK: &str = "bm25(products_fts, 10.0, 4.0, 2.0, 1.0, 1.0)";

/// How many matches of a text search relevance ranks at most (see the module docs). 1,000, as
/// far as Meilisearch (`maxTotalHits`) and Algolia (`paginationLimitedTo`) rank and page by
/// default: a search that matches more is too broad for the order past the first pages to matter,
/// and the list still holds every match. It was 2,000 until issue 13: every broad search reads
/// this many matches and their search vectors, and at 2,000 the server's search missed its 10 ms
/// (BENCHMARKS.md, run 8: p95 9.9–11.4 ms at 2,000, 7.7–10.4 ms, median 8.7, at 1,000; with
/// pg/0011's bands both).
pub const RANKED_MATCHES: u32 = 1_000;

/// How far past the page's offset a text search counts its matches: more, and the page says "at
/// least" ([`ProductPage::total_capped`]), as search engines do (Elasticsearch's
/// `track_total_hits` stops at 10,000, Meilisearch's estimated total at 1,000). As many as
/// relevance ranks: the first page's count, ranking and rows come from one read of the newest
/// 1,001 matches, and a broad search costs that read, not its matches. Counting to 10,000 (until
/// issue 13) read up to 10,001 matches on every broad search; on the server each costs a heap
/// page (~0.6 µs at 100,000 products), which alone took a search past its 10 ms (BENCHMARKS.md,
/// run 7). A list that scrolls on learns more from each page.
pub const TOTAL_CAP: u64 = RANKED_MATCHES as u64;

/// Where a text search's count stops for a page at `offset`: `cap` ([`TOTAL_CAP`]) past it
/// (`None`: no text, the count is exact).
pub(super) fn count_limit(query: &ProductQuery, cap: u64) -> Option<u64> {
    fts_query(&query.text).map(|_| u64::from(query.offset).saturating_add(cap.max(1)))
}

/// The page's total from a count that stopped one past `limit` (see [`count_limit`]): more
/// than `limit` is "at least `limit`".
pub(super) fn page_total(counted: u64, limit: Option<u64>) -> (u64, bool) {
    match limit {
        Some(limit) if counted > limit => (limit, true),
        _ => (counted, false),
    }
}

/// A page and the total, in one read transaction (so they agree).
pub(super) fn query_products(
    conn: &mut Connection,
    query: &ProductQuery,
    cap: u64,
) -> Result<ProductPage, CatalogError> {
    let tx = conn.transaction()?;
    let plan = Plan::new(query);
    let limit = count_limit(query, cap);
    let (ids, total) = plan.page(&tx)?;
    let (total, total_capped) = match total {
        Some(total) => (total, false),
        None => page_total(plan.total(&tx, limit)?, limit),
    };
    let rows = summaries(&tx, &ids)?;
    drop(tx);
    Ok(ProductPage { total, total_capped, rows })
}

/// A page without the total.
pub(super) fn query_rows(conn: &mut Connection, query: &ProductQuery) -> Result<Vec<ProductSummary>, CatalogError> {
    let tx = conn.transaction()?;
    let (ids, _) = Plan::new(query).page(&tx)?;
    let rows = summaries(&tx, &ids)?;
    drop(tx);
    Ok(rows)
}

/// Live products. SQLite counts all of them minus the deleted ones, each on a small index
/// (counting `deleted_at IS NULL` directly would read the whole table); a server counts them on
/// its partial index of live products.
pub(super) fn count_live(db: &Db<'_>) -> Result<u64, CatalogError> {
    let sql = match db.dialect() {
        Dialect::Sqlite => {
            "SELECT (SELECT count(*) FROM products) - (SELECT count(*) FROM products WHERE deleted_at IS NOT NULL)"
        }
        Dialect::Postgres => "SELECT count(*) FROM products WHERE deleted_at IS NULL",
    };
    Ok(db.query_row(sql, &[], |row| get_u64(row, 0))?)
}

/// Categories and brands of live products, most common first. Spellings that differ only in
/// ASCII case count as one (SQLite's index compares `COLLATE NOCASE`; a server groups on
/// `lower()`).
pub(super) fn facets(db: &Db<'_>) -> Result<Facets, CatalogError> {
    let tx = db.read_transaction()?;
    let values = |column: &str| -> Result<Vec<FacetValue>, CatalogError> {
        let (group, order) = match tx.dialect() {
            Dialect::Sqlite => (format!("{column} COLLATE NOCASE"), format!("min({column}) COLLATE NOCASE")),
            Dialect::Postgres => (format!("lower({column})"), format!("lower(min({column}))")),
        };
        let sql = format!(
            "SELECT min({column}), count(*) FROM products
             WHERE deleted_at IS NULL AND {column} IS NOT NULL
             GROUP BY {group}
             ORDER BY count(*) DESC, {order}, min({column})"
        );
        Ok(tx.query_map(&sql, &[], |row| Ok(FacetValue { value: row.get(0)?, count: get_u64(row, 1)? }))?)
    };
    let facets = Facets { categories: values("category")?, brands: values("brand")? };
    tx.commit()?;
    Ok(facets)
}

/// The SQL for one [`ProductQuery`]: which rows, in which order.
struct Plan {
    /// The FTS5 query (`?1`) when the text has terms.
    fts: Option<String>,
    /// Conditions on `products p` beyond "live", AND-ed.
    filters: Vec<String>,
    /// The values of `?1`, `?2`, ...: the FTS5 query first, if any, then the filters'.
    values: Vec<Value>,
    sort: SortKey,
    direction: SortDirection,
    offset: u32,
    limit: u32,
}

impl Plan {
    fn new(query: &ProductQuery) -> Self {
        let fts = fts_query(&query.text);
        let mut plan = Plan {
            values: fts.iter().map(|f| Value::Text(f.clone())).collect(),
            fts,
            filters: Vec::new(),
            sort: query.sort,
            direction: query.direction,
            offset: query.offset,
            limit: query.limit,
        };
        let first = plan.values.len() + 1;
        let (filters, values) =
            filter_conditions(query, first, |n| format!("?{n}"), |column, p| format!("{column} = {p} COLLATE NOCASE"));
        plan.filters = filters;
        plan.values.extend(values.into_iter().map(|v| match v {
            FilterValue::Text(text) => Value::Text(text),
            FilterValue::Real(real) => Value::Real(real),
        }));
        plan
    }

    /// `FROM ... WHERE ...` of the matching rows. Without filters a text search needs only the
    /// full-text index (it holds live products only); everything else reads `products p`, and
    /// always says `p.deleted_at IS NULL`, which also lets SQLite use the partial
    /// `products_live_*` indexes.
    fn matching(&self, with_products: bool) -> String {
        let with_products = with_products || !self.filters.is_empty() || self.fts.is_none();
        let mut conditions: Vec<&str> = Vec::new();
        let from = match (&self.fts, with_products) {
            (Some(_), false) => "products_fts",
            (Some(_), true) => "products_fts JOIN products p ON p.id = products_fts.rowid",
            (None, _) => "products p",
        };
        if self.fts.is_some() {
            conditions.push("products_fts MATCH ?1");
        }
        if with_products {
            conditions.push("p.deleted_at IS NULL");
            conditions.extend(self.filters.iter().map(String::as_str));
        }
        format!("FROM {from} WHERE {}", conditions.join(" AND "))
    }

    /// The id of a matching row in [`Self::matching`]'s terms.
    fn id(&self) -> &'static str {
        if self.fts.is_some() {
            "products_fts.rowid"
        } else {
            "p.id"
        }
    }

    /// The matches, counted up to one past `limit` when given.
    fn total(&self, conn: &Connection, limit: Option<u64>) -> Result<u64, CatalogError> {
        if self.fts.is_none() && self.filters.is_empty() {
            return count_live(&Db::Sqlite(conn));
        }
        let sql = match limit {
            Some(limit) => format!("SELECT count(*) FROM (SELECT 1 {} LIMIT {})", self.matching(false), limit + 1),
            None => format!("SELECT count(*) {}", self.matching(false)),
        };
        let mut stmt = conn.prepare_cached(&sql)?;
        Ok(stmt.query_row(params_from_iter(&self.values), |row| get_u64(row, 0))?)
    }

    /// The ids of the page, and the total when finding them told it (saving a count).
    fn page(&self, conn: &Connection) -> Result<(Vec<ProductId>, Option<u64>), CatalogError> {
        let (offset, limit) = (u64::from(self.offset), u64::from(self.limit));
        if limit == 0 {
            return Ok((Vec::new(), None));
        }
        if self.fts.is_some() && self.sort == SortKey::Relevance {
            return self.ranked_page(conn, offset, limit);
        }
        let order = order_by(self.sort, self.direction);
        Ok((self.ids(conn, true, None, &order, offset, limit)?, None))
    }

    /// A page of a relevance sort (see the module docs). One pass over the newest matches reads
    /// the ids and bm25 scores of up to [`RANKED_MATCHES`] + 1 of them, and they are ranked here;
    /// with more matches than that, the older ones come from SQL, newest first. `Asc` is the
    /// exact reverse.
    fn ranked_page(
        &self,
        conn: &Connection,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<ProductId>, Option<u64>), CatalogError> {
        let id = self.id();
        let sql =
            format!("SELECT {id}, {RANK} {} ORDER BY {id} DESC LIMIT {}", self.matching(false), RANKED_MATCHES + 1);
        let mut stmt = conn.prepare_cached(&sql)?;
        let newest: Vec<(ProductId, f64)> = stmt
            .query_map(params_from_iter(&self.values), |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let (ranked, cutoff) = rank(newest);
        let desc = self.direction == SortDirection::Desc;
        let ranked: Vec<ProductId> = if desc { ranked } else { ranked.into_iter().rev().collect() };
        let Some(cutoff) = cutoff else {
            // Every match is ranked, and now counted.
            return Ok((window(&ranked, offset, limit), Some(ranked.len() as u64)));
        };
        let older = format!(" AND {id} < ?{}", self.values.len() + 1);
        let ranked_len = ranked.len() as u64;
        if desc {
            let mut ids = window(&ranked, offset, limit);
            let want = limit - ids.len() as u64;
            if want > 0 {
                let skip = offset.saturating_sub(ranked_len);
                ids.extend(self.ids(conn, false, Some((&older, cutoff)), &format!("{id} DESC"), skip, want)?);
            }
            Ok((ids, None))
        } else {
            let total = self.total(conn, None)?;
            let older_len = total.saturating_sub(ranked_len);
            let mut ids = if offset < older_len {
                self.ids(conn, false, Some((&older, cutoff)), &format!("{id} ASC"), offset, limit)?
            } else {
                Vec::new()
            };
            let want = limit - ids.len() as u64;
            ids.extend(window(&ranked, offset.saturating_sub(older_len), want));
            Ok((ids, Some(total)))
        }
    }

    /// The SQL of [`Self::ids`]; LIMIT and OFFSET are its last two parameters.
    fn ids_sql(&self, with_products: bool, extra: Option<&str>, order: &str) -> String {
        let n = self.values.len() + usize::from(extra.is_some());
        format!(
            "SELECT {} {}{} ORDER BY {order} LIMIT ?{} OFFSET ?{}",
            self.id(),
            self.matching(with_products),
            extra.unwrap_or(""),
            n + 1,
            n + 2
        )
    }

    /// The ids of matching rows (and `extra`, when given) in `order`: `skip`, then `take`.
    fn ids(
        &self,
        conn: &Connection,
        with_products: bool,
        extra: Option<(&str, ProductId)>,
        order: &str,
        skip: u64,
        take: u64,
    ) -> Result<Vec<ProductId>, CatalogError> {
        let sql = self.ids_sql(with_products, extra.map(|(c, _)| c), order);
        let mut values = self.values.clone();
        values.extend(extra.map(|(_, id)| Value::Integer(id)));
        values.push(Value::Integer(i64::try_from(take).unwrap_or(i64::MAX)));
        values.push(Value::Integer(i64::try_from(skip).unwrap_or(i64::MAX)));
        let mut stmt = conn.prepare_cached(&sql)?;
        let ids = stmt.query_map(params_from_iter(&values), |row| row.get(0))?.collect::<Result<_, _>>()?;
        Ok(ids)
    }
}

/// A filter's bound value.
pub(super) enum FilterValue {
    Text(String),
    Real(f64),
}

/// The conditions of `query`'s filters on `products p` (AND-ed) and their values, the
/// placeholders numbered from `first`: the one list of what each filter means, for both
/// backends. `param` writes a placeholder (`?3`, `$3`); `equal_ignoring_case` compares a column
/// with one, case folded as the backend folds it.
pub(super) fn filter_conditions(
    query: &ProductQuery,
    first: usize,
    param: impl Fn(usize) -> String,
    equal_ignoring_case: impl Fn(&str, &str) -> String,
) -> (Vec<String>, Vec<FilterValue>) {
    let mut conditions = Vec::new();
    let mut values = Vec::new();
    let mut bind = |value: FilterValue| {
        values.push(value);
        param(first + values.len() - 1)
    };
    if let Some(category) = &query.category {
        let p = bind(FilterValue::Text(category.clone()));
        conditions.push(equal_ignoring_case("p.category", &p));
    }
    if let Some(brand) = &query.brand {
        let p = bind(FilterValue::Text(brand.clone()));
        conditions.push(equal_ignoring_case("p.brand", &p));
    }
    match query.flagged {
        Some(true) => conditions.push("p.flagged > 0".into()),
        Some(false) => conditions.push("p.flagged = 0".into()),
        None => {}
    }
    if let Some(min) = query.price_min {
        conditions.push(format!("p.price_amount >= {}", bind(FilterValue::Real(min))));
    }
    if let Some(max) = query.price_max {
        conditions.push(format!("p.price_amount <= {}", bind(FilterValue::Real(max))));
    }
    (conditions, values)
}

/// Relevance's order of the newest matches (up to [`RANKED_MATCHES`] + 1, each with a score that
/// is lower for a better match): best first, equal scores the newer product first; and, when
/// more matched than are ranked, the oldest ranked id (the older matches follow it, newest
/// first). Both backends rank this way.
pub(super) fn rank(mut newest: Vec<(ProductId, f64)>) -> (Vec<ProductId>, Option<ProductId>) {
    let ranked_count = RANKED_MATCHES as usize;
    let cutoff = (newest.len() > ranked_count).then(|| {
        newest.truncate(ranked_count);
        newest.iter().map(|(id, _)| *id).min().unwrap_or(ProductId::MAX)
    });
    newest.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
    (newest.into_iter().map(|(id, _)| id).collect(), cutoff)
}

/// `take` ids after skipping `skip`.
pub(super) fn window(ids: &[ProductId], skip: u64, take: u64) -> Vec<ProductId> {
    ids.iter()
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .take(usize::try_from(take).unwrap_or(usize::MAX))
        .copied()
        .collect()
}

/// The ORDER BY of a sort of `products p` (relevance without text is by update); ties by id in
/// the same direction, rows without the value last.
fn order_by(sort: SortKey, direction: SortDirection) -> String {
    let asc = direction == SortDirection::Asc;
    let dir = if asc { "ASC" } else { "DESC" };
    // Nullable columns: SQLite sorts NULL first, so descending puts them last by itself, and
    // ascending sorts on `x IS NULL` first (the `products_live_by_*_nulls_last` indexes).
    let nullable = |column: &str, collate: &str| {
        if asc {
            format!("{column} IS NULL, {column}{collate} ASC, p.id ASC")
        } else {
            format!("{column}{collate} DESC, p.id DESC")
        }
    };
    match sort {
        SortKey::Relevance | SortKey::Updated => format!("p.updated_at {dir}, p.id {dir}"),
        SortKey::Name => format!("p.name COLLATE NOCASE {dir}, p.id {dir}"),
        SortKey::Brand => nullable("p.brand", " COLLATE NOCASE"),
        SortKey::Category => nullable("p.category", " COLLATE NOCASE"),
        SortKey::Price => nullable("p.price_amount", ""),
        SortKey::Gtin => nullable("p.gtin", ""),
    }
}

/// The rows of `ids`, in that order.
fn summaries(conn: &Connection, ids: &[ProductId]) -> Result<Vec<ProductSummary>, CatalogError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT p.id, p.photo_id, p.name, p.brand, p.category, p.price_amount, p.price_currency, p.gtin,
                p.revision, p.updated_at, ph.sha256, p.flagged
         FROM json_each(?1) AS page
         JOIN products p ON p.id = page.value
         JOIN photos ph ON ph.id = p.photo_id
         ORDER BY page.key",
    )?;
    let rows = stmt.query_map([serde_json::to_string(ids)?], summary_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn summary_row(row: &Row<'_>) -> rusqlite::Result<ProductSummary> {
    let amount: Option<f64> = row.get(5)?;
    let currency: Option<String> = row.get(6)?;
    Ok(ProductSummary {
        id: row.get(0)?,
        photo_id: row.get(1)?,
        name: row.get(2)?,
        brand: row.get(3)?,
        category: row.get(4)?,
        price: amount.zip(currency).map(|(amount, currency)| Price { amount, currency }),
        gtin: row.get(7)?,
        revision: row.get(8)?,
        updated_at: row.get(9)?,
        photo_sha256: row.get(10)?,
        flagged: row.get(11)?,
    })
}

/// The user's text as an FTS5 query: every whitespace-separated term becomes a quoted prefix term
/// (`"term"*`, inner quotes doubled), all of which must match. Quoting makes every character
/// literal, so operators (`AND`, `NOT`, `NEAR`), `*`, `(`, `-`, `:` and column filters in the
/// input are searched as text, never parsed. Terms with no letter or digit (which the tokenizer
/// would drop) are skipped; `None` when nothing searchable is left.
pub(super) fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split_whitespace()
        .filter(|term| term.chars().any(char::is_alphanumeric))
        .map(|term| format!("\"{}\"*", term.replace('"', "\"\"")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_term_is_a_quoted_prefix_term() {
        assert_eq!(fts_query("  "), None);
        assert_eq!(fts_query("( - * :"), None);
        assert_eq!(fts_query("gran"), Some(r#""gran"*"#.into()));
        assert_eq!(fts_query("oat  AND\tmilk"), Some(r#""oat"* "AND"* "milk"*"#.into()));
        assert_eq!(fts_query(r#"12" name:x"#), Some(r#""12"""* "name:x"*"#.into()));
        assert_eq!(fts_query("crème"), Some(r#""crème"*"#.into()));
    }

    /// The query plans of `sql` with `values` (and LIMIT, OFFSET), one line per step.
    fn plan_of(conn: &Connection, plan: &Plan) -> Vec<String> {
        let mut values = plan.values.clone();
        values.extend([Value::Integer(100), Value::Integer(0)]);
        let sql = plan.ids_sql(true, None, &order_by(plan.sort, plan.direction));
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        stmt.query_map(params_from_iter(&values), |row| row.get::<_, String>(3)).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn every_sort_of_the_whole_table_is_an_index_scan() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::migrations::apply(&mut conn, super::super::migrations::MIGRATIONS).unwrap();
        for sort in [
            SortKey::Relevance,
            SortKey::Name,
            SortKey::Brand,
            SortKey::Category,
            SortKey::Price,
            SortKey::Gtin,
            SortKey::Updated,
        ] {
            for direction in [SortDirection::Asc, SortDirection::Desc] {
                let plan = Plan::new(&ProductQuery { sort, direction, ..Default::default() });
                let steps = plan_of(&conn, &plan);
                assert!(
                    steps.iter().all(|s| !s.contains("TEMP B-TREE"))
                        && steps.iter().any(|s| s.contains("INDEX products_live_by")),
                    "{sort:?} {direction:?}: {steps:?}"
                );
            }
        }
        // The flagged filter has its own index in the default order.
        let flagged = Plan::new(&ProductQuery { flagged: Some(true), ..Default::default() });
        let steps = plan_of(&conn, &flagged);
        assert_eq!(steps, ["SCAN p USING INDEX products_live_flagged"]);
        let category =
            Plan::new(&ProductQuery { category: Some("snacks".into()), sort: SortKey::Name, ..Default::default() });
        let steps = plan_of(&conn, &category);
        assert!(steps.iter().any(|s| s.contains("INDEX products_live_by")), "{steps:?}");
    }

    #[test]
    fn every_sort_has_a_tie_break_and_puts_missing_values_last() {
        assert_eq!(order_by(SortKey::Relevance, SortDirection::Desc), "p.updated_at DESC, p.id DESC");
        assert_eq!(
            order_by(SortKey::Brand, SortDirection::Asc),
            "p.brand IS NULL, p.brand COLLATE NOCASE ASC, p.id ASC"
        );
        assert_eq!(order_by(SortKey::Price, SortDirection::Desc), "p.price_amount DESC, p.id DESC");
    }
}
