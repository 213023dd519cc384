//! Conversions between SQLite columns and Rust values, shared by the modules that hold SQL
//! (`queries`, `listing`, `revisions`). It uses none of them.

use base64::Engine as _;
use rusqlite::types::Type;
use rusqlite::types::ValueRef;
use rusqlite::Row;
use serde::de::DeserializeOwned;

use super::error::CatalogError;

/// A row of either backend's, read by column (a `rusqlite::Row`, or the seam's `DbRow`).
pub(super) trait Columns {
    fn value(&self, idx: usize) -> rusqlite::Result<ValueRef<'_>>;
}

impl Columns for Row<'_> {
    fn value(&self, idx: usize) -> rusqlite::Result<ValueRef<'_>> {
        self.get_ref(idx)
    }
}

impl Columns for super::db::DbRow<'_> {
    fn value(&self, idx: usize) -> rusqlite::Result<ValueRef<'_>> {
        self.get_ref(idx)
    }
}

/// A `u64` as an INTEGER parameter; one that does not fit is `Invalid`, naming `field`.
pub(super) fn to_i64(field: &str, value: u64) -> Result<i64, CatalogError> {
    i64::try_from(value).map_err(|_| CatalogError::invalid(field, format!("{value} is too large")))
}

/// A non-negative INTEGER column (rusqlite reads `u64` only with a feature we do not need).
pub(super) fn get_u64(row: &impl Columns, idx: usize) -> rusqlite::Result<u64> {
    let value: i64 = row.value(idx)?.as_i64()?;
    u64::try_from(value).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(idx, value))
}

/// A nullable JSON text column, parsed.
pub(super) fn json_column<T: DeserializeOwned>(row: &impl Columns, idx: usize) -> rusqlite::Result<Option<T>> {
    match row.value(idx)?.as_str_or_null()? {
        None => Ok(None),
        Some(text) => serde_json::from_str(text)
            .map(Some)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(e))),
    }
}

/// `data:image/jpeg;base64,…` for an `<img src>` (a photo shown once; thumbnails go by hash).
pub(crate) fn jpeg_data_url(jpeg: &[u8]) -> String {
    format!("data:image/jpeg;base64,{}", base64::engine::general_purpose::STANDARD.encode(jpeg))
}

/// A text column holding a value it may not hold (an unknown enum name).
pub(super) fn conversion_error(idx: usize, message: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, message.into())
}

#[cfg(test)]
mod tests {
    /// A field the table lists has its columns in `products`: in the copy's table list, which
    /// `catalog_server`'s drift test holds to both schemas, column for column; and
    /// [`super::super::queries::ListingColumns`] writes exactly these, one value each.
    #[test]
    fn every_listed_field_has_its_columns_in_both_schemas() {
        let listed = super::super::queries::listed_column_names();
        assert_eq!(listed, ["name", "brand", "category", "price_amount", "price_currency", "gtin", "flagged"]);
        let product = crate::product::Product { name: "Oat bar".into(), ..Default::default() };
        let values = super::super::queries::ListingColumns::of(&product);
        assert_eq!(values.after(&[]).len(), listed.len());
        let products = super::super::copy::TABLES.iter().find(|t| t.name == "products").unwrap();
        for column in listed {
            assert!(products.columns.iter().any(|(c, _)| c == column), "products.{column} is missing");
        }
    }
}
