//! The Batch API, as the Gemini Developer API serves it (see `gemini-api.md`, "The Batch API"):
//!
//! - `POST /v1beta/models/{model}:batchGenerateContent` with
//!   `{"batch": {"displayName", "inputConfig": {"requests": {"requests": [{"request", "metadata"}]}}}}`:
//!   the whole body under 20 MB, unknown fields refused, each request checked like a
//!   `generateContent` body ([`validate::check_generate_request`]). The answer is the batch
//!   operation (`name` = `batches/{id}`, `metadata.state` = `BATCH_STATE_PENDING`).
//! - `GET /v1beta/batches/{id}`: the state moves pending → running → its end over
//!   [`BatchTiming`]'s polls; once succeeded, `metadata.output.inlinedResponses.inlinedResponses`
//!   (and `response`) hold one entry per request, in request order, each carrying its request's
//!   `metadata`, either a `response` or an `error` of its own.
//! - `POST /v1beta/batches/{id}:cancel` (`{}`), `GET /v1beta/batches` (`operations`).
//!
//! Each request's answer is decided when the batch is created, from the same script as
//! `generateContent` ([`crate::FakeGemini::push`]): a content behavior gives a response, an error
//! behavior an item error. How the whole batch ends is scripted with [`BatchFate`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::validate::{self, ApiError};

/// How a batch ends once its polls are over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchFate {
    Succeed,
    /// `BATCH_STATE_FAILED` with this error message.
    Fail(String),
    /// `BATCH_STATE_EXPIRED` (not done within 48 hours).
    Expire,
}

/// How many `GET`s a batch stays pending, then running, before it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchTiming {
    pub pending_polls: u32,
    pub running_polls: u32,
}

impl Default for BatchTiming {
    fn default() -> Self {
        Self { pending_polls: 1, running_polls: 1 }
    }
}

/// One batch the fake holds.
#[derive(Debug)]
pub(crate) struct FakeBatch {
    id: String,
    model: String,
    display_name: String,
    create_time: String,
    polls: u32,
    timing: BatchTiming,
    fate: BatchFate,
    cancelled: bool,
    /// Per request: its metadata, and the response or the error.
    results: Vec<(Value, Result<Value, ApiError>)>,
}

/// Every batch created, by id.
#[derive(Debug, Default)]
pub(crate) struct Batches {
    by_id: BTreeMap<String, FakeBatch>,
    next: u64,
    /// Batches accepted (`batchGenerateContent` answered 200).
    pub(crate) submissions: usize,
    /// Requests accepted in those batches.
    pub(crate) submitted_requests: usize,
}

/// A `batchGenerateContent` body, checked: the display name and each request's metadata and
/// checked body.
pub(crate) struct CheckedBatch {
    pub display_name: String,
    pub requests: Vec<(Value, validate::Checked)>,
}

/// Every check of a `batchGenerateContent` body, in the order the API reports them.
pub(crate) fn check_batch_request(body: &[u8]) -> Result<CheckedBatch, ApiError> {
    if body.len() > validate::MAX_REQUEST_BYTES {
        return Err(ApiError::invalid_argument(format!(
            "Request payload size exceeds the limit: {} bytes.",
            validate::MAX_REQUEST_BYTES
        )));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid_argument(format!("Invalid JSON payload received. {e}")))?;
    let top = object(&value, "")?;
    only(top, &["batch"], "")?;
    let batch = object(get(top, "batch").unwrap_or(&Value::Null), "batch")?;
    only(batch, &["displayName", "inputConfig", "model", "priority"], "batch")?;
    let display_name = get(batch, "displayName").and_then(Value::as_str).unwrap_or_default().to_string();
    let input = object(get(batch, "inputConfig").unwrap_or(&Value::Null), "batch.input_config")?;
    only(input, &["requests", "fileName"], "batch.input_config")?;
    if get(input, "fileName").is_some() {
        return Err(ApiError::invalid_argument(
            "The fake Gemini serves inline batch requests only (inputConfig.requests), not uploaded files.",
        ));
    }
    let requests = object(get(input, "requests").unwrap_or(&Value::Null), "batch.input_config.requests")?;
    only(requests, &["requests"], "batch.input_config.requests")?;
    let list = match get(requests, "requests") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        _ => {
            return Err(ApiError::invalid_argument(
                "* BatchGenerateContentRequest.batch.input_config.requests.requests: requests must not be empty.\n",
            ))
        }
    };
    let mut checked = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let path = format!("batch.input_config.requests.requests[{i}]");
        let entry = object(entry, &path)?;
        only(entry, &["request", "metadata"], &path)?;
        let metadata = get(entry, "metadata").cloned().unwrap_or_else(|| json!({}));
        if !metadata.is_object() {
            return Err(ApiError::invalid_argument(format!(
                "Invalid value at '{path}.metadata' (type.googleapis.com/google.protobuf.Struct), expected an object."
            )));
        }
        let request = get(entry, "request").cloned().unwrap_or(Value::Null);
        let bytes = serde_json::to_vec(&request).unwrap_or_default();
        let (_, request) = validate::check_generate_request(&bytes).map_err(|mut e| {
            e.message = format!("{path}.request: {}", e.message);
            e
        })?;
        checked.push((metadata, request));
    }
    Ok(CheckedBatch { display_name, requests: checked })
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ApiError> {
    v.as_object().ok_or_else(|| {
        ApiError::invalid_argument(format!(
            "Invalid JSON payload received. Expected an object at '{}'.",
            if path.is_empty() { "(root)" } else { path }
        ))
    })
}

/// Refuses fields the message does not define (camelCase or snake_case names).
fn only(map: &Map<String, Value>, known: &[&str], path: &str) -> Result<(), ApiError> {
    for name in map.keys() {
        let camel = heck::ToLowerCamelCase::to_lower_camel_case(name.as_str());
        if !known.contains(&camel.as_str()) {
            let at = if path.is_empty() { String::new() } else { format!(" at '{path}'") };
            return Err(ApiError::invalid_argument(format!(
                "Invalid JSON payload received. Unknown name \"{name}\"{at}: Cannot find field."
            )));
        }
    }
    Ok(())
}

fn get<'a>(map: &'a Map<String, Value>, camel: &str) -> Option<&'a Value> {
    map.get(camel).or_else(|| map.get(&heck::ToSnakeCase::to_snake_case(camel)))
}

impl Batches {
    /// Stores a new batch and returns its operation JSON.
    pub(crate) fn create(
        &mut self,
        model: &str,
        display_name: String,
        results: Vec<(Value, Result<Value, ApiError>)>,
        timing: BatchTiming,
        fate: BatchFate,
        now: Duration,
    ) -> Value {
        self.next += 1;
        self.submissions += 1;
        self.submitted_requests += results.len();
        let id = format!("fake{:06}{:x}", self.next, crate::products::fnv1a(display_name.as_bytes()) & 0xffff);
        let batch = FakeBatch {
            id: id.clone(),
            model: model.to_string(),
            display_name,
            create_time: rfc3339(now),
            polls: 0,
            timing,
            fate,
            cancelled: false,
            results,
        };
        let body = batch.operation(now);
        self.by_id.insert(id, batch);
        body
    }

    /// `GET batches/{id}`: one poll more, then the batch as it stands.
    pub(crate) fn poll(&mut self, id: &str, now: Duration) -> Option<Value> {
        let batch = self.by_id.get_mut(id)?;
        batch.polls = batch.polls.saturating_add(1);
        Some(batch.operation(now))
    }

    /// `:cancel`: a batch not finished yet ends cancelled. `None` when there is no such batch.
    pub(crate) fn cancel(&mut self, id: &str) -> Option<()> {
        let batch = self.by_id.get_mut(id)?;
        if !batch.state().is_terminal() {
            batch.cancelled = true;
        }
        Some(())
    }

    /// `GET batches`: every batch, newest first, without advancing any.
    pub(crate) fn list(&self, now: Duration) -> Value {
        let operations: Vec<Value> = self.by_id.values().rev().map(|b| b.operation(now)).collect();
        json!({ "operations": operations })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Expired,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            Self::Pending => "BATCH_STATE_PENDING",
            Self::Running => "BATCH_STATE_RUNNING",
            Self::Succeeded => "BATCH_STATE_SUCCEEDED",
            Self::Failed => "BATCH_STATE_FAILED",
            Self::Cancelled => "BATCH_STATE_CANCELLED",
            Self::Expired => "BATCH_STATE_EXPIRED",
        }
    }

    fn is_terminal(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }
}

impl FakeBatch {
    fn state(&self) -> State {
        if self.cancelled {
            return State::Cancelled;
        }
        if self.polls <= self.timing.pending_polls {
            return State::Pending;
        }
        if self.polls <= self.timing.pending_polls + self.timing.running_polls {
            return State::Running;
        }
        match self.fate {
            BatchFate::Succeed => State::Succeeded,
            BatchFate::Fail(_) => State::Failed,
            BatchFate::Expire => State::Expired,
        }
    }

    /// The batch as a long-running operation, the way `batches.get` answers.
    fn operation(&self, now: Duration) -> Value {
        let state = self.state();
        let name = format!("batches/{}", self.id);
        let total = self.results.len();
        let failed = self.results.iter().filter(|r| r.1.is_err()).count();
        let stats = if state == State::Succeeded {
            json!({"requestCount": total.to_string(), "successfulRequestCount": (total - failed).to_string(),
                   "failedRequestCount": failed.to_string()})
        } else {
            json!({"requestCount": total.to_string(), "pendingRequestCount": total.to_string()})
        };
        let mut metadata = json!({
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": format!("models/{}", self.model),
            "displayName": self.display_name,
            "createTime": self.create_time,
            "updateTime": rfc3339(now),
            "batchStats": stats,
            "state": state.name(),
            "name": name,
        });
        let mut op = json!({ "name": name });
        if state.is_terminal() {
            metadata["endTime"] = json!(rfc3339(now));
            op["done"] = json!(true);
        }
        match (&self.fate, state) {
            (_, State::Succeeded) => {
                let responses: Vec<Value> = self
                    .results
                    .iter()
                    .map(|(meta, result)| match result {
                        Ok(response) => json!({"response": response, "metadata": meta}),
                        // A `google.rpc.Status`: the gRPC code, not the HTTP one.
                        Err(e) => json!({"error": {"code": grpc_code(&e.status), "message": e.message,
                                                   "details": e.details}, "metadata": meta}),
                    })
                    .collect();
                let output = json!({"inlinedResponses": {"inlinedResponses": responses}});
                metadata["output"] = output.clone();
                let mut response = output;
                response["@type"] =
                    json!("type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput");
                op["response"] = response;
            }
            (BatchFate::Fail(message), State::Failed) => {
                op["error"] = json!({"code": 13, "message": message});
            }
            _ => {}
        }
        op["metadata"] = metadata;
        op
    }
}

/// The gRPC code of a canonical status name.
fn grpc_code(status: &str) -> u32 {
    match status {
        "CANCELLED" => 1,
        "INVALID_ARGUMENT" => 3,
        "DEADLINE_EXCEEDED" => 4,
        "NOT_FOUND" => 5,
        "PERMISSION_DENIED" => 7,
        "RESOURCE_EXHAUSTED" => 8,
        "FAILED_PRECONDITION" => 9,
        "UNAVAILABLE" => 14,
        "UNAUTHENTICATED" => 16,
        _ => 13,
    }
}

/// The response (or error) for each request, decided now from the behavior script.
pub(crate) fn answers(
    state: &crate::Shared,
    model: &str,
    requests: &[(Value, validate::Checked)],
) -> Vec<(Value, Result<Value, ApiError>)> {
    requests
        .iter()
        .map(|(meta, checked)| {
            let result = crate::content_answer(state, model, checked, state.next_behavior())
                // A behavior that acts on a connection has no meaning inside a batch: the item
                // is answered as a product.
                .unwrap_or_else(|_| Ok(crate::plain_product(state, model, checked)));
            (meta.clone(), result)
        })
        .collect()
}

/// `2026-12-03T10:11:12.123Z` for a time since the Unix epoch.
pub(crate) fn rfc3339(since_epoch: Duration) -> String {
    let secs = since_epoch.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since_epoch.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(Duration::from_millis(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(Duration::from_millis(1_796_213_472_123)), "2026-12-02T12:11:12.123Z");
    }

    #[test]
    fn unknown_fields_and_empty_batches_are_refused() {
        let e = check_batch_request(br#"{"batch": {"inputConfig": {"requests": {"requests": []}}}}"#).err().unwrap();
        assert!(e.message.contains("must not be empty"), "{}", e.message);
        let e = check_batch_request(br#"{"batch": {"nme": "x"}}"#).err().unwrap();
        assert!(e.message.contains("Unknown name \"nme\" at 'batch'"), "{}", e.message);
        let e = check_batch_request(
            br#"{"batch": {"inputConfig": {"requests": {"requests": [{"request": {"contents": []}, "metadata": {"key": "1"}}]}}}}"#,
        )
        .err()
        .unwrap();
        assert!(e.message.contains("requests[0].request"), "{}", e.message);
    }
}
