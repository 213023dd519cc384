//! The cost meter: spend per day and model, today's spend against the daily budget, a product's
//! cost, an estimate for photos not sent yet, and setting the budget.

use pe_core::catalog::CostTotal;
use pe_core::pipeline::PhotosEstimate;
use pe_core::pricing;
use pe_core::{ErrorCode, ErrorReport};
use tauri::State;

use crate::dto::{PriceRow, UsageReport};
use crate::state::AppState;

/// How far back the report reaches: enough for a month's chart next to the daily one.
const REPORT_DAYS: i64 = 62;

pub async fn usage_report(state: State<'_, AppState>) -> Result<UsageReport, ErrorReport> {
    report(&state).await
}

/// Sets (or, with `None`, turns off) `pricing.daily_budget_usd` and saves the config.
pub async fn set_daily_budget(state: State<'_, AppState>, usd: Option<f64>) -> Result<UsageReport, ErrorReport> {
    let mut config = state.file_config();
    config.pricing.daily_budget_usd = usd;
    config.validate()?;
    state.apply_file_config(config).await?;
    report(&state).await
}

/// Every attempt for a photo: what its product cost to extract (retries and failures included).
pub async fn photo_cost(state: State<'_, AppState>, photo_id: i64) -> Result<CostTotal, ErrorReport> {
    Ok(state.catalog().photo_cost(photo_id).await?)
}

/// What `photos` more photos would cost (each its own product); with `None`, the import queue's
/// waiting items (one call each, with all their photos).
pub async fn estimate_photos(state: State<'_, AppState>, photos: Option<u32>) -> Result<PhotosEstimate, ErrorReport> {
    let (products, photos) = match photos {
        Some(n) => (n, n),
        None => state.import_queue().await?.store().waiting().await?,
    };
    Ok(state.pipeline().estimate_products(products, photos).await?)
}

async fn report(state: &AppState) -> Result<UsageReport, ErrorReport> {
    let pipeline = state.pipeline();
    let now = (pipeline.clock())();
    let today = pricing::local_day(now);
    let since = today.start - (REPORT_DAYS - 1) * 86_400_000;
    let days = state.catalog().usage_by_day(since, today.utc_offset_ms).await?;
    let spent_today = pipeline.spent_today().await?;
    let table = pipeline.pricing().table();
    let user = &pipeline.pricing().models;
    let prices =
        table.into_iter().map(|(model, price)| PriceRow { user: user.contains_key(&model), model, price }).collect();
    let day = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms + today.utc_offset_ms)
            .map(|d| d.format("%Y-%m-%d").to_string())
            .ok_or_else(|| ErrorReport::new(ErrorCode::Io, "the clock is out of range"))
    };
    Ok(UsageReport {
        days,
        today: day(now)?,
        spent_today,
        daily_budget_usd: pipeline.pricing().daily_budget(),
        prices,
        prices_as_of: pricing::LIST_PRICES_AS_OF.into(),
    })
}
