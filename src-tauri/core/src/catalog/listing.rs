//! The catalog table: [`ProductQuery`] → one page of live products and the total, plus the facet
//! counts for the filters. Synchronous; runs on the catalog thread inside a read transaction.
//!
//! A page is read in two steps: first the ids of the page (a scan of one of migration 0003's
//! `products_live_by_*` indexes, or of the full-text matches), then the rows of those ids with
//! their thumbnails. The first step touches only index entries, so a deep page skips rows without
//! reading them; the second reads exactly `limit` rows.

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, Row};

use super::queries::{get_u64, thumbnail_url};
use super::records::*;
use super::CatalogError;
use crate::product::Price;

/// bm25 weights per `products_fts` column (name, brand, category, description, attributes).
const RANK: &str = "bm25(products_fts, 10.0, 4.0, 2.0, 1.0, 1.0)";

/// A page and the total, in one read transaction (so they agree).
pub(super) fn query_products(conn: &mut Connection, query: &ProductQuery) -> Result<ProductPage, CatalogError> {
    let tx = conn.transaction()?;
    let plan = Plan::new(query);
    let total = plan.total(&tx)?;
    let rows = plan.rows(&tx)?;
    drop(tx);
    Ok(ProductPage { total, rows })
}

/// A page without the total.
pub(super) fn query_rows(conn: &Connection, query: &ProductQuery) -> Result<Vec<ProductSummary>, CatalogError> {
    Plan::new(query).rows(conn)
}

/// Categories and brands of live products, most common first. Spellings that differ only in
/// ASCII case count as one (the index compares `COLLATE NOCASE`).
pub(super) fn facets(conn: &mut Connection) -> Result<Facets, CatalogError> {
    let tx = conn.transaction()?;
    let values = |column: &str| -> Result<Vec<FacetValue>, CatalogError> {
        let sql = format!(
            "SELECT min({column}), count(*) FROM products
             WHERE deleted_at IS NULL AND {column} IS NOT NULL
             GROUP BY {column} COLLATE NOCASE
             ORDER BY count(*) DESC, min({column}) COLLATE NOCASE, min({column})"
        );
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map([], |row| Ok(FacetValue { value: row.get(0)?, count: get_u64(row, 1)? }))?;
        Ok(rows.collect::<Result<_, _>>()?)
    };
    let facets = Facets { categories: values("category")?, brands: values("brand")? };
    drop(tx);
    Ok(facets)
}

/// The SQL for one [`ProductQuery`]: what to read, which rows, in which order.
struct Plan {
    /// `products p`, joined to `products_fts` when the text has terms.
    from: &'static str,
    /// AND-ed conditions; the first is always `p.deleted_at IS NULL`, which also lets SQLite use
    /// the partial `products_live_*` indexes.
    conditions: Vec<String>,
    /// The values of `?1`, `?2`, ... in `conditions`.
    values: Vec<Value>,
    /// True when the only condition beyond "live" is the text match: the full-text index holds
    /// live products only, so the total can be counted there alone.
    text_only: bool,
    order: String,
    offset: u32,
    limit: u32,
}

impl Plan {
    fn new(query: &ProductQuery) -> Self {
        let mut plan = Plan {
            from: "products p",
            conditions: vec!["p.deleted_at IS NULL".into()],
            values: Vec::new(),
            text_only: false,
            order: String::new(),
            offset: query.offset,
            limit: query.limit,
        };
        let fts = fts_query(&query.text);
        if let Some(fts) = &fts {
            plan.from = "products_fts JOIN products p ON p.id = products_fts.rowid";
            plan.condition("products_fts MATCH", Value::Text(fts.clone()), "");
        }
        if let Some(category) = &query.category {
            plan.condition("p.category =", Value::Text(category.clone()), " COLLATE NOCASE");
        }
        if let Some(brand) = &query.brand {
            plan.condition("p.brand =", Value::Text(brand.clone()), " COLLATE NOCASE");
        }
        match query.flagged {
            Some(true) => plan.conditions.push("p.flagged > 0".into()),
            Some(false) => plan.conditions.push("p.flagged = 0".into()),
            None => {}
        }
        if let Some(min) = query.price_min {
            plan.condition("p.price_amount >=", Value::Real(min), "");
        }
        if let Some(max) = query.price_max {
            plan.condition("p.price_amount <=", Value::Real(max), "");
        }
        plan.text_only = fts.is_some() && plan.conditions.len() == 2;
        plan.order = order_by(query.sort, query.direction, fts.is_some());
        plan
    }

    /// Adds `{left} ?N{right}` bound to `value`.
    fn condition(&mut self, left: &str, value: Value, right: &str) {
        self.values.push(value);
        self.conditions.push(format!("{left} ?{}{right}", self.values.len()));
    }

    fn total(&self, conn: &Connection) -> Result<u64, CatalogError> {
        let sql = if self.text_only {
            "SELECT count(*) FROM products_fts WHERE products_fts MATCH ?1".to_string()
        } else {
            format!("SELECT count(*) FROM {} WHERE {}", self.from, self.conditions.join(" AND "))
        };
        let mut stmt = conn.prepare_cached(&sql)?;
        Ok(stmt.query_row(params_from_iter(&self.values), |row| get_u64(row, 0))?)
    }

    /// The ids of the page; LIMIT and OFFSET are the last two parameters.
    fn ids_sql(&self) -> String {
        let n = self.values.len();
        format!(
            "SELECT p.id FROM {} WHERE {} ORDER BY {} LIMIT ?{} OFFSET ?{}",
            self.from,
            self.conditions.join(" AND "),
            self.order,
            n + 1,
            n + 2
        )
    }

    fn rows(&self, conn: &Connection) -> Result<Vec<ProductSummary>, CatalogError> {
        if self.limit == 0 {
            return Ok(Vec::new());
        }
        let sql = self.ids_sql();
        let mut values = self.values.clone();
        values.push(Value::Integer(self.limit.into()));
        values.push(Value::Integer(self.offset.into()));
        let mut stmt = conn.prepare_cached(&sql)?;
        let ids: Vec<ProductId> =
            stmt.query_map(params_from_iter(&values), |row| row.get(0))?.collect::<Result<_, _>>()?;
        summaries(conn, &ids)
    }
}

/// The ORDER BY of a sort; ties by id in the same direction, rows without the value last.
fn order_by(sort: SortKey, direction: SortDirection, has_text: bool) -> String {
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
        SortKey::Relevance if has_text => {
            // bm25 is lower for a better match; ties newest first, as search always did.
            if asc {
                format!("{RANK} DESC, p.updated_at ASC, p.id ASC")
            } else {
                format!("{RANK} ASC, p.updated_at DESC, p.id DESC")
            }
        }
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
                p.revision, p.updated_at, ph.thumbnail_jpeg, p.flagged
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
        thumbnail: thumbnail_url(row.get_ref(10)?.as_blob()?),
        flagged: row.get(11)?,
    })
}

/// The user's text as an FTS5 query: every whitespace-separated term becomes a quoted prefix term
/// (`"term"*`, inner quotes doubled), all of which must match. Quoting makes every character
/// literal, so operators (`AND`, `NOT`, `NEAR`), `*`, `(`, `-`, `:` and column filters in the
/// input are searched as text, never parsed. Terms with no letter or digit (which the tokenizer
/// would drop) are skipped; `None` when nothing searchable is left.
fn fts_query(text: &str) -> Option<String> {
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
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", plan.ids_sql())).unwrap();
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
        // The filters use the same indexes.
        let flagged = Plan::new(&ProductQuery { flagged: Some(true), sort: SortKey::Updated, ..Default::default() });
        assert!(
            plan_of(&conn, &flagged).iter().any(|s| s.contains("INDEX products_live")),
            "{:?}",
            plan_of(&conn, &flagged)
        );
        let category =
            Plan::new(&ProductQuery { category: Some("snacks".into()), sort: SortKey::Name, ..Default::default() });
        let steps = plan_of(&conn, &category);
        assert!(steps.iter().any(|s| s.contains("INDEX products_live_by")), "{steps:?}");
    }

    #[test]
    fn every_sort_has_a_tie_break_and_puts_missing_values_last() {
        assert_eq!(order_by(SortKey::Relevance, SortDirection::Desc, false), "p.updated_at DESC, p.id DESC");
        assert_eq!(
            order_by(SortKey::Brand, SortDirection::Asc, false),
            "p.brand IS NULL, p.brand COLLATE NOCASE ASC, p.id ASC"
        );
        assert_eq!(order_by(SortKey::Price, SortDirection::Desc, true), "p.price_amount DESC, p.id DESC");
        assert!(order_by(SortKey::Relevance, SortDirection::Desc, true).starts_with("bm25(products_fts"));
    }
}
