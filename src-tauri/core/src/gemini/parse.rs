//! Tolerant parsing of a `generateContent` answer into a [`Product`].
//!
//! Handles every shape the spec lists: no candidates with `promptFeedback.blockReason`, a
//! candidate without content, content without parts, thought parts (skipped), unknown fields and
//! unknown `finishReason` values; and text that is JSON wrapped in a code fence or in prose.
//!
//! When no usable answer came, [`REASONS`] classifies the `finishReason` (or the prompt's
//! `blockReason`): blocked, cut off at `maxOutputTokens`, or stopped for another reason; a value
//! newer than this table is "stopped" with its name kept. Every such error carries the answer's
//! `usageMetadata`: Gemini bills it all the same.

use crate::product::Product;

use super::error::{short, Detail, GeminiError};
use super::wire::{GenerateContentResponse, UsageMetadata};
use super::Usage;

/// What a `finishReason` means for an answer without usable text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// A normal end (STOP, unspecified): no text is simply an unreadable answer.
    Normal,
    /// `maxOutputTokens` was reached.
    Truncated,
    /// The answer (or the prompt) was withheld.
    Blocked,
    /// Gemini stopped for another reason.
    Stopped,
}

/// Every `finishReason` and `blockReason` value of the SDK's enums (2026), what it means for an
/// answer without usable text, and how a person would say it. A prompt's `blockReason` is always
/// a block, whatever the value.
pub(crate) const REASONS: &[(&str, Ending, &str)] = &[
    ("FINISH_REASON_UNSPECIFIED", Ending::Normal, "no reason given"),
    ("STOP", Ending::Normal, "finished"),
    ("MAX_TOKENS", Ending::Truncated, "the output token limit was reached"),
    ("SAFETY", Ending::Blocked, "flagged by the safety filters"),
    ("RECITATION", Ending::Blocked, "too close to existing copyrighted text"),
    ("LANGUAGE", Ending::Stopped, "a language Gemini does not support"),
    ("OTHER", Ending::Stopped, "another reason"),
    ("BLOCKLIST", Ending::Blocked, "a term on a blocklist"),
    ("PROHIBITED_CONTENT", Ending::Blocked, "prohibited content"),
    ("SPII", Ending::Blocked, "sensitive personal information"),
    ("MALFORMED_FUNCTION_CALL", Ending::Stopped, "a malformed function call"),
    ("IMAGE_SAFETY", Ending::Blocked, "flagged by the image safety filters"),
    ("IMAGE_PROHIBITED_CONTENT", Ending::Blocked, "prohibited image content"),
    ("IMAGE_OTHER", Ending::Stopped, "a problem with an image"),
    ("NO_IMAGE", Ending::Stopped, "no image was produced"),
    ("IMAGE_RECITATION", Ending::Blocked, "an image too close to existing copyrighted work"),
    ("UNEXPECTED_TOOL_CALL", Ending::Stopped, "an unexpected tool call"),
    ("TOO_MANY_TOOL_CALLS", Ending::Stopped, "too many tool calls"),
    ("MISSING_THOUGHT_SIGNATURE", Ending::Stopped, "a missing thought signature"),
    ("MALFORMED_RESPONSE", Ending::Stopped, "a malformed response"),
    ("ESCALATION", Ending::Stopped, "the request was escalated"),
    ("PUP_LIMITED_DISABLED", Ending::Stopped, "a feature limited or disabled for this project"),
    ("CONTINUATION", Ending::Stopped, "the answer continues in another response"),
    ("MODEL_ARMOR", Ending::Blocked, "a Model Armor screening policy"),
    // blockReason values not listed above.
    ("BLOCKED_REASON_UNSPECIFIED", Ending::Blocked, "an unspecified reason"),
    ("JAILBREAK", Ending::Blocked, "a suspected jailbreak attempt"),
];

/// How a `finishReason` ends an answer; a value newer than [`REASONS`] is "stopped".
pub(crate) fn ending_of(reason: &str) -> Ending {
    REASONS.iter().find(|(r, _, _)| *r == reason).map_or(Ending::Stopped, |(_, e, _)| *e)
}

/// A reason in plain words, for the error message.
pub(crate) fn reason_in_words(reason: &str) -> &'static str {
    REASONS.iter().find(|(r, _, _)| *r == reason).map_or("a reason this version does not know yet", |(_, _, w)| *w)
}

/// What a successful answer carries, before timing is added.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parsed {
    pub product: Product,
    /// The answer's `sources` as sent (checked against the photos later: [`crate::product::field_sources`]).
    pub sources: Option<serde_json::Value>,
    pub usage: Usage,
    pub model_version: Option<String>,
    pub finish_reason: Option<String>,
    /// What cleaning the answer took ([`Product::cleaned`]), a flag per field changed.
    pub cleaning: Vec<crate::product::FieldFlag>,
}

impl From<&UsageMetadata> for Usage {
    fn from(u: &UsageMetadata) -> Self {
        let output = u.candidates_token_count.saturating_add(u.thoughts_token_count);
        let total =
            if u.total_token_count > 0 { u.total_token_count } else { u.prompt_token_count.saturating_add(output) };
        Usage {
            prompt_tokens: u.prompt_token_count,
            output_tokens: output,
            thoughts_tokens: u.thoughts_token_count,
            total_tokens: total,
            cached_tokens: u.cached_content_token_count.min(u.prompt_token_count),
        }
    }
}

fn unparsable(reason: impl Into<String>, detail: impl Into<String>, usage: Option<Usage>, raw: &str) -> GeminiError {
    GeminiError::UnparsableOutput { reason: reason.into(), usage, source: Detail(detail.into()), raw: raw.to_string() }
}

/// Parses the body of a 200 answer. `max_output_tokens` is what the request allowed (for the
/// message of a cut-off answer).
pub(crate) fn parse_generate_response(body: &str, max_output_tokens: u32) -> Result<Parsed, GeminiError> {
    let response: GenerateContentResponse = serde_json::from_str(body).map_err(|e| {
        unparsable(
            "the answer was not a Gemini response",
            format!("{e}; body starts: {}", short(body.trim(), 200)),
            None,
            body,
        )
    })?;
    // What Gemini billed, success or not.
    let billed = response.usage_metadata.as_ref().map(Usage::from);
    let usage = billed.unwrap_or_default();

    let Some(candidate) = response.candidates.first() else {
        if let Some(reason) = response.prompt_feedback.as_ref().and_then(|f| f.block_reason.clone()) {
            return Err(GeminiError::Blocked { reason, usage: billed, raw: body.to_string() });
        }
        return Err(unparsable(
            "Gemini returned no answer",
            "no candidates and no promptFeedback.blockReason",
            billed,
            body,
        ));
    };
    let finish_reason = candidate.finish_reason.clone().filter(|r| !r.is_empty());
    let finish = finish_reason.as_deref().unwrap_or("");

    // The answer: every text part that is not a thought, in order.
    let text: String = candidate
        .content
        .iter()
        .flat_map(|c| c.parts.iter())
        .filter(|p| !p.thought)
        .filter_map(|p| p.text.as_deref())
        .collect();

    let no_usable_text = |what: &str| -> GeminiError {
        let (raw, reason) = (body.to_string(), finish.to_string());
        match ending_of(finish) {
            _ if finish.is_empty() => unparsable(
                what.to_string(),
                format!("finishReason none; text: {}", short(text.trim(), 200)),
                billed,
                body,
            ),
            Ending::Blocked => GeminiError::Blocked { reason, usage: billed, raw },
            Ending::Truncated => GeminiError::OutputTruncated {
                max_output_tokens,
                usage: billed,
                source: Detail(format!("finishReason MAX_TOKENS; text: {}", short(text.trim(), 200))),
                raw,
            },
            Ending::Stopped => GeminiError::Stopped { reason, usage: billed, raw },
            Ending::Normal => unparsable(
                what.to_string(),
                format!("finishReason {finish}; text: {}", short(text.trim(), 200)),
                billed,
                body,
            ),
        }
    };

    if text.trim().is_empty() {
        return Err(no_usable_text("the answer had no text"));
    }
    let Some(json) = extract_json_object(&text) else {
        return Err(no_usable_text("the answer held no JSON object"));
    };
    let serde_json::Value::Object(object) = &json else {
        return Err(no_usable_text("the answer held no JSON object"));
    };
    match object.get("name") {
        Some(serde_json::Value::String(name)) if !name.trim().is_empty() => {}
        _ => return Err(unparsable("the answer had no product name", short(text.trim(), 200), billed, body)),
    }
    let product: Product = serde_json::from_value(json.clone()).map_err(|e| {
        unparsable("the product data had the wrong shape", format!("{e}: {}", short(text.trim(), 200)), billed, body)
    })?;
    let sources = object.get(crate::product::SOURCES_KEY).cloned();
    let (product, cleaning) = product.cleaned();
    Ok(Parsed { product, sources, usage, model_version: response.model_version, finish_reason, cleaning })
}

/// The `modelVersion` of a response body (a failed answer's included); `None` when the body is
/// not a response or names none.
pub fn response_model_version(body: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Version {
        #[serde(default)]
        model_version: Option<serde_json::Value>,
    }
    match serde_json::from_str::<Version>(body).ok()?.model_version? {
        serde_json::Value::String(s) if !s.trim().is_empty() => Some(s),
        _ => None,
    }
}

/// Finds the product JSON in model text: the whole text, else the inside of a ``` fence, else
/// the first balanced top-level `{...}` that parses. Returns `None` when none parses.
pub(crate) fn extract_json_object(text: &str) -> Option<serde_json::Value> {
    let trimmed = text.trim().trim_start_matches('\u{feff}');
    // Valid JSON that is not an object (an array, a string) is not a product: no digging inside.
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(trimmed) {
        return v.is_object().then_some(v);
    }
    if let Some(inner) = fenced_block(trimmed) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(inner.trim()) {
            return v.is_object().then_some(v);
        }
    }
    // Prose around JSON: the first top-level balanced `{...}` that parses. An object that never
    // closes (a truncated answer) ends the search: everything after it is nested, not top-level.
    let mut from = 0;
    for _ in 0..32 {
        let start = from + trimmed[from..].find('{')?;
        let end = start + balanced_object_end(&trimmed[start..])?;
        if let Ok(v @ serde_json::Value::Object(_)) = serde_json::from_str::<serde_json::Value>(&trimmed[start..end]) {
            return Some(v);
        }
        from = end;
    }
    None
}

/// The text between the first ``` fence line (```json, ```JSON, ```) and the next ```.
fn fenced_block(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
    let body = &after[body_start..];
    let close = body.find("```").unwrap_or(body.len());
    Some(&body[..close])
}

/// Given text starting with `{`, the byte length of the balanced object, aware of JSON strings.
fn balanced_object_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Coded, ErrorCode};
    use serde_json::json;

    fn answer(text: &str, finish: &str) -> String {
        json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"},
                               "finishReason": finish, "index": 0}],
               "usageMetadata": {"promptTokenCount": 102, "candidatesTokenCount": 160,
                                 "thoughtsTokenCount": 278, "totalTokenCount": 540},
               "modelVersion": "gemini-2.5-flash", "responseId": "L7JLavbaFMP5xN8P2-fwwAE"})
        .to_string()
    }

    const PRODUCT: &str = r#"{"name": " Crunchy Oat Granola ", "brand": "Morning Field", "price": {"amount": 3.49, "currency": "eur"},
        "gtin": "4006381333931", "net_content": {"value": 500, "unit": "g"}, "uncertain_fields": ["price"]}"#;

    fn ok(body: &str) -> Parsed {
        parse_generate_response(body, 8192).unwrap_or_else(|e| panic!("{e}: {e:?}"))
    }

    fn err(body: &str) -> GeminiError {
        match parse_generate_response(body, 8192) {
            Ok(p) => panic!("expected an error, got {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn spec_example_parses_with_usage() {
        let p = ok(&answer(PRODUCT, "STOP"));
        assert_eq!(p.product.name, "Crunchy Oat Granola");
        assert_eq!(p.product.price.as_ref().unwrap().currency, "EUR");
        assert_eq!(p.product.uncertain_fields, vec!["price"]);
        assert_eq!(
            p.usage,
            Usage { prompt_tokens: 102, output_tokens: 438, thoughts_tokens: 278, total_tokens: 540, cached_tokens: 0 }
        );
        assert_eq!(p.model_version.as_deref(), Some("gemini-2.5-flash"));
        assert_eq!(p.finish_reason.as_deref(), Some("STOP"));
    }

    #[test]
    fn text_shapes() {
        let cases = [
            PRODUCT.to_string(),
            format!("```json\n{PRODUCT}\n```"),
            format!("```JSON\n{PRODUCT}\n```\n"),
            format!("```\n{PRODUCT}\n```"),
            format!("Here is the product I found:\n{PRODUCT}\nLet me know if you need more."),
            format!("Sure! {{not json}} and then ```json\n{PRODUCT}``` done"),
            format!("The {{brand}} is visible. {PRODUCT} (prices in {{EUR}})"),
            format!("\u{feff}{PRODUCT}"),
        ];
        for text in cases {
            let p = ok(&answer(&text, "STOP"));
            assert_eq!(p.product.name, "Crunchy Oat Granola", "{text}");
        }
    }

    #[test]
    fn braces_inside_strings_do_not_confuse_extraction() {
        let text = r#"Result: {"name": "Mug {large}", "description": "a \"}\" shape"} trailing }"#;
        assert_eq!(ok(&answer(text, "STOP")).product.name, "Mug {large}");
    }

    #[test]
    fn thought_parts_are_skipped_and_text_parts_joined() {
        let body = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "**Looking at the label** {\"name\": \"WRONG\"}", "thought": true},
            {"text": "{\"name\": \"Crunchy "},
            {"text": "Oat Granola\"}", "thoughtSignature": "abc"}]}, "finishReason": "STOP"}]})
        .to_string();
        assert_eq!(ok(&body).product.name, "Crunchy Oat Granola");
    }

    #[test]
    fn unknown_fields_and_unknown_finish_reason_are_tolerated() {
        let body = json!({"candidates": [{"content": {"parts": [{"text": PRODUCT, "newThing": 1}], "role": "model"},
            "finishReason": "SOME_FUTURE_REASON", "avgLogprobs": -0.1, "citationMetadata": {"x": []},
            "safetyRatings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"}]}],
            "usageMetadata": {"promptTokenCount": "7", "promptTokensDetails": [{"modality": "IMAGE", "tokenCount": 258}]},
            "serverTiming": {"a": 1}, "modelVersion": null})
        .to_string();
        let p = ok(&body);
        assert_eq!(p.finish_reason.as_deref(), Some("SOME_FUTURE_REASON"));
        assert_eq!(
            p.usage,
            Usage { prompt_tokens: 7, output_tokens: 0, thoughts_tokens: 0, total_tokens: 7, cached_tokens: 0 }
        );
        assert_eq!(p.model_version, None);
    }

    #[test]
    fn cached_tokens_are_read_and_never_exceed_the_prompt() {
        let usage = |meta: serde_json::Value| {
            let body = json!({"candidates": [{"content": {"parts": [{"text": PRODUCT}]}, "finishReason": "STOP"}],
                "usageMetadata": meta});
            ok(&body.to_string()).usage
        };
        let u = usage(json!({"promptTokenCount": 2000, "cachedContentTokenCount": 1024, "candidatesTokenCount": 150}));
        assert_eq!((u.prompt_tokens, u.cached_tokens, u.output_tokens), (2000, 1024, 150));
        assert_eq!(usage(json!({"promptTokenCount": 10, "cachedContentTokenCount": "99"})).cached_tokens, 10);
    }

    #[test]
    fn missing_usage_metadata_is_zero() {
        let body = json!({"candidates": [{"content": {"parts": [{"text": PRODUCT}]}}]}).to_string();
        let p = ok(&body);
        assert_eq!(p.usage, Usage::default());
        assert_eq!(p.finish_reason, None);
    }

    #[test]
    fn error_shapes() {
        let cases: Vec<(String, ErrorCode, &str)> = vec![
            (
                json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "safetyRatings": []},
                    "usageMetadata": {"promptTokenCount": 300}})
                .to_string(),
                ErrorCode::Blocked,
                "PROHIBITED_CONTENT",
            ),
            (
                json!({"candidates": [], "promptFeedback": {"blockReason": "OTHER"}}).to_string(),
                ErrorCode::Blocked,
                "OTHER",
            ),
            (
                json!({"candidates": [{"finishReason": "SAFETY", "safetyRatings": [{"blocked": true}]}]}).to_string(),
                ErrorCode::Blocked,
                "SAFETY",
            ),
            (
                json!({"candidates": [{"content": {"role": "model"}, "finishReason": "IMAGE_SAFETY"}]}).to_string(),
                ErrorCode::Blocked,
                "IMAGE_SAFETY",
            ),
            (answer("", "RECITATION"), ErrorCode::Blocked, "RECITATION"),
            (
                json!({"candidates": [{"content": {"role": "model"}, "finishReason": "STOP"}]}).to_string(),
                ErrorCode::UnparsableOutput,
                "no text",
            ),
            (json!({"candidates": [{"index": 0}]}).to_string(), ErrorCode::UnparsableOutput, "no text"),
            (json!({"candidates": [{"content": {"parts": []}}]}).to_string(), ErrorCode::UnparsableOutput, "no text"),
            (
                json!({"candidates": [{"content": {"parts": [{"text": "x", "thought": true}]}}]}).to_string(),
                ErrorCode::UnparsableOutput,
                "no text",
            ),
            (json!({}).to_string(), ErrorCode::UnparsableOutput, "no answer"),
            ("not json at all".to_string(), ErrorCode::UnparsableOutput, "not a Gemini response"),
            ("[1,2]".to_string(), ErrorCode::UnparsableOutput, "not a Gemini response"),
            (answer("I'm sorry, I cannot tell what this is.", "STOP"), ErrorCode::UnparsableOutput, "no JSON object"),
            (answer("[{\"name\": \"x\"}]", "STOP"), ErrorCode::UnparsableOutput, "no JSON object"),
            (answer("\"just a string\"", "STOP"), ErrorCode::UnparsableOutput, "no JSON object"),
            (answer("{\"brand\": \"Acme\"}", "STOP"), ErrorCode::UnparsableOutput, "no product name"),
            (answer("{\"name\": \"  \"}", "STOP"), ErrorCode::UnparsableOutput, "no product name"),
            (answer("{\"name\": 42}", "STOP"), ErrorCode::UnparsableOutput, "no product name"),
            (answer("{\"name\": \"X\", \"price\": \"3.49\"}", "STOP"), ErrorCode::UnparsableOutput, "wrong shape"),
            (answer("{\"name\": \"Crunchy Oat Gra", "MAX_TOKENS"), ErrorCode::OutputTruncated, "cut off at 8192"),
            (answer("", "MAX_TOKENS"), ErrorCode::OutputTruncated, "raise gemini.max_output_tokens"),
            (
                answer(
                    "{\"name\": \"Oil\", \"attributes\": [{\"name\": \"Origin\", \"value\": \"Italy\"}, {\"na",
                    "MAX_TOKENS",
                ),
                ErrorCode::OutputTruncated,
                "lower gemini.thinking",
            ),
            (
                json!({"promptFeedback": {"blockReason": "JAILBREAK"}}).to_string(),
                ErrorCode::Blocked,
                "a suspected jailbreak attempt: JAILBREAK",
            ),
            (answer("", "MODEL_ARMOR"), ErrorCode::Blocked, "Model Armor"),
            (answer("", "SPII"), ErrorCode::Blocked, "sensitive personal information"),
            (answer("", "IMAGE_PROHIBITED_CONTENT"), ErrorCode::Blocked, "prohibited image content"),
            (answer("", "LANGUAGE"), ErrorCode::UnparsableOutput, "Gemini stopped: LANGUAGE"),
            (
                answer("no json", "MALFORMED_RESPONSE"),
                ErrorCode::UnparsableOutput,
                "Gemini stopped: MALFORMED_RESPONSE",
            ),
            (answer("", "SOME_FUTURE_REASON"), ErrorCode::UnparsableOutput, "Gemini stopped: SOME_FUTURE_REASON"),
            (answer("Note {\"name\": \"inner\"", "STOP"), ErrorCode::UnparsableOutput, "no JSON object"),
        ];
        for (body, code, needle) in cases {
            let e = err(&body);
            assert_eq!(e.code(), code, "{body}: {e}");
            assert!(e.to_string().contains(needle), "{body}: {e}");
            assert_eq!(e.raw_response(), Some(body.as_str()));
            assert_eq!(e.http_status(), Some(200));
        }
    }

    #[test]
    fn every_reason_is_classified_and_unknown_ones_are_kept() {
        for (reason, ending, words) in REASONS {
            assert_eq!(ending_of(reason), *ending);
            assert_eq!(reason_in_words(reason), *words);
        }
        assert_eq!(ending_of("NEW_REASON_2027"), Ending::Stopped);
        let e = err(&answer("", "NEW_REASON_2027"));
        assert!(e.to_string().starts_with("Gemini stopped: NEW_REASON_2027"), "{e}");
    }

    #[test]
    fn failed_answers_carry_their_billed_usage() {
        let billed =
            Usage { prompt_tokens: 102, output_tokens: 438, thoughts_tokens: 278, total_tokens: 540, cached_tokens: 0 };
        for body in [
            answer("", "MAX_TOKENS"),
            answer("", "SAFETY"),
            answer("", "OTHER"),
            answer("I'm sorry.", "STOP"),
            answer("{\"brand\": \"Acme\"}", "STOP"),
        ] {
            assert_eq!(err(&body).billed_usage(), Some(&billed), "{body}");
        }
        let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"},
            "usageMetadata": {"promptTokenCount": 300, "totalTokenCount": 300}})
        .to_string();
        let usage =
            Usage { prompt_tokens: 300, output_tokens: 0, thoughts_tokens: 0, total_tokens: 300, cached_tokens: 0 };
        assert_eq!(err(&blocked).billed_usage(), Some(&usage));
        // No usageMetadata: nothing is claimed.
        assert_eq!(err(&json!({"candidates": [{"finishReason": "SAFETY"}]}).to_string()).billed_usage(), None);
        assert_eq!(err("not json").billed_usage(), None);
    }

    #[test]
    fn safety_finish_with_usable_text_is_accepted() {
        assert_eq!(ok(&answer(PRODUCT, "SAFETY")).product.name, "Crunchy Oat Granola");
    }

    #[test]
    fn unparsable_detail_has_an_excerpt() {
        let e = err(&answer("I'm sorry, I cannot tell what this is.", "STOP"));
        let report = crate::ErrorReport::from_error(&e);
        assert!(report.detail.unwrap().contains("I'm sorry"));
    }
}
