//! The saved products.

use pe_core::catalog::{ProductRecord, ProductSummary};
use pe_core::ErrorReport;
use tauri::State;

use crate::state::AppState;

/// The most rows one call returns.
const MAX_PAGE: u32 = 500;

#[tauri::command]
pub async fn list_products(
    state: State<'_, AppState>,
    offset: u32,
    limit: u32,
) -> Result<Vec<ProductSummary>, ErrorReport> {
    Ok(state.catalog().list_products(offset, limit.min(MAX_PAGE)).await?)
}

#[tauri::command]
pub async fn get_product(state: State<'_, AppState>, id: i64) -> Result<ProductRecord, ErrorReport> {
    Ok(state.catalog().get_product(id).await?)
}
