//! `usage [--json] [--since YYYY-MM-DD]`: tokens and cost of the Gemini calls recorded in this
//! catalog, per local day and model (the model that answered), then the total. A model without a
//! price shows its tokens and "price unknown", never a made-up price.

use clap::Args;
use pe_core::catalog::{CostTotal, UsageDay};
use pe_core::pricing;
use pe_core::ErrorReport;
use serde_json::json;

use super::{cost_json, usage_error, EXIT_FAILED, EXIT_OK};
use crate::state::AppState;
use crate::terminal::{self, errln, outln};

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// One JSON object per day and model, then a summary line.
    #[arg(long)]
    pub json: bool,
    /// The first local day to show [default: 30 days ago].
    #[arg(long, value_name = "YYYY-MM-DD")]
    pub since: Option<String>,
}

/// How far back the report reaches without `--since`.
const DEFAULT_DAYS: i64 = 30;

/// Why the usage cannot be reported.
pub(crate) enum UsageError {
    /// `since` is not a date like 2026-12-01.
    BadDate(String),
    Catalog(ErrorReport),
}

/// The calls recorded since the local day `since` (default: the last 30 days), per local day and
/// model, and their total: what `usage` prints and `GET /api/usage` answers.
pub(crate) async fn report(state: &AppState, since: Option<&str>) -> Result<(Vec<UsageDay>, CostTotal), UsageError> {
    let now = (state.pipeline().clock())();
    let today = pricing::local_day(now);
    let since = match since {
        Some(date) => pricing::local_date_start(date)
            .ok_or_else(|| UsageError::BadDate(format!("{date:?} is not a date like 2026-12-01")))?,
        None => today.start - (DEFAULT_DAYS - 1) * 86_400_000,
    };
    let days = state
        .catalog()
        .usage_by_day(since, today.utc_offset_ms)
        .await
        .map_err(|e| UsageError::Catalog(ErrorReport::from(e)))?;
    let mut total = CostTotal::default();
    for day in &days {
        total.add_total(&day.total);
    }
    Ok((days, total))
}

pub async fn run(state: &AppState, args: UsageArgs) -> i32 {
    let (days, total) = match report(state, args.since.as_deref()).await {
        Ok(report) => report,
        Err(UsageError::BadDate(message)) => return usage_error(&format!("--since {message}")),
        Err(UsageError::Catalog(e)) => {
            errln!("error: {e}");
            return EXIT_FAILED;
        }
    };
    let budget = state.pipeline().pricing().daily_budget();
    if args.json {
        for day in &days {
            let mut line = cost_json(&day.total);
            line["day"] = json!(day.day);
            line["model"] = json!(day.model);
            line["calls"] = json!(day.total.calls);
            let _ = terminal::out_json(&line);
        }
        let mut cost = cost_json(&total);
        cost["calls"] = json!(total.calls);
        let _ = terminal::out_json(
            &json!({"summary": {"cost": cost, "daily_budget_usd": budget, "prices_as_of": pricing::LIST_PRICES_AS_OF}}),
        );
        return EXIT_OK;
    }
    outln!(
        "{:<10}  {:<28}  {:>6}  {:>12}  {:>10}  {:>12}  {:>12}",
        "day",
        "model",
        "calls",
        "input",
        "cached",
        "output",
        "cost"
    );
    for day in &days {
        let t = &day.total;
        outln!(
            "{:<10}  {:<28}  {:>6}  {:>12}  {:>10}  {:>12}  {:>12}",
            day.day,
            terminal::field(&day.model),
            t.calls,
            t.input_tokens,
            t.cached_tokens,
            t.output_tokens,
            money(t)
        );
    }
    outln!(
        "{:<10}  {:<28}  {:>6}  {:>12}  {:>10}  {:>12}  {:>12}",
        "total",
        "",
        total.calls,
        total.input_tokens,
        total.cached_tokens,
        total.output_tokens,
        money(&total)
    );
    if let Some(budget) = budget {
        outln!("daily budget {budget}");
    }
    EXIT_OK
}

/// The known cost, or "price unknown" when none of the calls had a price.
fn money(t: &CostTotal) -> String {
    let priced = t.calls.saturating_sub(t.unpriced_calls);
    match (t.unpriced_calls, priced) {
        (0, _) => t.usd.to_string(),
        (_, 0) if t.usd.nanos() == 0 => "price unknown".into(),
        (n, _) => format!("{}+{n} unknown", t.usd),
    }
}
