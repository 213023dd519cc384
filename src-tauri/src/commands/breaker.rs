//! The live breaker panel: its snapshot and its controls.

use pe_core::resilience::ResilienceSnapshot;
use pe_core::ErrorReport;
use serde::Deserialize;
use tauri::State;
use ts_rs::TS;

use crate::state::AppState;

/// What the panel's buttons do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum BreakerControl {
    /// Back to CLOSED with fresh metrics (Resilience4j's `reset`).
    Reset,
    /// Reject every call until told otherwise.
    ForceOpen,
    /// Let every call through and record nothing.
    Disable,
    /// Record and report, never change state.
    MetricsOnly,
    /// Back to normal operation: CLOSED with fresh metrics.
    Normal,
}

pub async fn resilience_snapshot(state: State<'_, AppState>) -> Result<ResilienceSnapshot, ErrorReport> {
    Ok(state.stack().snapshot())
}

pub async fn breaker_control(
    state: State<'_, AppState>,
    action: BreakerControl,
) -> Result<ResilienceSnapshot, ErrorReport> {
    let stack = state.stack();
    let breaker = stack.breaker();
    match action {
        BreakerControl::Reset => breaker.reset(),
        BreakerControl::ForceOpen => breaker.transition_to_forced_open(),
        BreakerControl::Disable => breaker.transition_to_disabled(),
        BreakerControl::MetricsOnly => breaker.transition_to_metrics_only(),
        BreakerControl::Normal => breaker.transition_to_closed(),
    }
    tracing::info!(?action, state = ?breaker.state(), "breaker control");
    Ok(stack.snapshot())
}
