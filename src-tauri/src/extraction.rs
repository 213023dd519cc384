//! What a finished queue item means for the one who waited for it: `extract`'s line and the HTTP
//! API's answer read it the same way (one rule for both ways in).

use pe_core::import::{ImportItemDetail, ImportQueue, ItemState, SkipReason};
use pe_core::pricing::Usd;
use pe_core::product::{FieldFlag, Product};
use pe_core::{ErrorCode, ErrorReport};

use crate::state::AppState;

/// The answer and the saved product's id (when saved), or the error.
pub(crate) type Outcome = Result<(Answer, Option<i64>), ErrorReport>;

/// One finished item's answer.
pub(crate) struct Answer {
    pub(crate) product: Product,
    pub(crate) flags: Vec<FieldFlag>,
    pub(crate) usage: pe_core::gemini::Usage,
    /// What the attempt cost; `None`: price unknown.
    pub(crate) cost: Option<Usd>,
    /// Gemini was called for it in this run (not a stored answer).
    pub(crate) billed_now: bool,
    pub(crate) model: String,
    pub(crate) latency_ms: u64,
    pub(crate) photo_id: i64,
    pub(crate) attempt_id: i64,
}

/// What a finished item means for whoever waited for it (`extract`'s line, the HTTP API's answer):
/// the proposal (saved first when `save`), or the error. An item skipped because its bytes are in
/// the catalog already gives the proposal that product was saved from, without a call.
pub(crate) async fn outcome_of(queue: &ImportQueue, state: &AppState, detail: ImportItemDetail, save: bool) -> Outcome {
    let row = &detail.row;
    match (row.state, detail.proposal, detail.attempt, &row.skipped) {
        (ItemState::Ready | ItemState::Saved, Some(product), Some(attempt), _) => {
            let saved = match (save, row.state) {
                (false, _) => None,
                (true, ItemState::Saved) => row.product_id,
                (true, _) => Some(queue.save_item(row.id, product.clone()).await.map_err(ErrorReport::from)?.id),
            };
            let answer = Answer {
                flags: detail.flags,
                product,
                usage: attempt.usage.unwrap_or_default(),
                cost: attempt.cost_usd,
                // A ready item from an earlier run was billed then, not now.
                billed_now: row.state == ItemState::Ready || save,
                model: attempt.model,
                latency_ms: attempt.latency_ms,
                photo_id: row.photo_id.unwrap_or_default(),
                attempt_id: attempt.id,
            };
            Ok((answer, saved))
        }
        (_, _, _, Some(skip)) if skip.reason == SkipReason::AlreadyInCatalog => {
            let product_id = skip.duplicate_of_product.unwrap_or_default();
            let answer = stored_answer(state, product_id).await?;
            Ok((answer, save.then_some(product_id)))
        }
        (_, _, _, Some(skip)) => {
            let code = match skip.reason {
                SkipReason::UnsupportedFormat => ErrorCode::UnsupportedFormat,
                SkipReason::NotAPhoto => ErrorCode::InvalidImage,
                _ => ErrorCode::Io,
            };
            Err(ErrorReport::new(code, skip.message.clone()))
        }
        _ => Err(row.last_error.clone().unwrap_or_else(|| {
            ErrorReport::new(ErrorCode::Io, format!("Item #{} ended as {} without a result.", row.id, row.state))
        })),
    }
}

/// The proposal a product in the catalog was saved from: the same bytes are not sent again.
pub(crate) async fn stored_answer(state: &AppState, product_id: i64) -> Result<Answer, ErrorReport> {
    let record = state.catalog().get_product(product_id).await?;
    let attempts = state.catalog().attempts(record.photo_id).await?;
    let attempt = attempts.into_iter().find(|a| Some(a.id) == record.attempt_id);
    let product = attempt.as_ref().and_then(|a| a.proposal.clone()).unwrap_or_else(|| record.saved.clone());
    let usage = attempt.as_ref().map(|a| pe_core::gemini::Usage {
        prompt_tokens: a.prompt_tokens.unwrap_or_default(),
        output_tokens: a.output_tokens.unwrap_or_default(),
        thoughts_tokens: a.thoughts_tokens.unwrap_or_default(),
        total_tokens: a.total_tokens.unwrap_or_default(),
        cached_tokens: a.cached_tokens.unwrap_or_default(),
    });
    Ok(Answer {
        flags: product.validate(),
        product,
        usage: usage.unwrap_or_default(),
        cost: attempt.as_ref().and_then(|a| a.cost_usd),
        billed_now: false,
        model: attempt.as_ref().map(|a| a.model.clone()).unwrap_or_default(),
        latency_ms: attempt.as_ref().map_or(0, |a| a.latency_ms),
        photo_id: record.photo_id,
        attempt_id: record.attempt_id.unwrap_or_default(),
    })
}
