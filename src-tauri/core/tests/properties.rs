//! Property tests (proptest) over the parts that read untrusted or hand-written input: Gemini's
//! answer, the product validator, intake on damaged real photos, and the config file.
//!
//! `make test` runs [`CASES`] cases a property; a longer run:
//! `PROPTEST_CASES=10000 cargo test --workspace --test properties --release`.
//! A failing case is shrunk and saved in `tests/properties.proptest-regressions` (commit it: it
//! runs first from then on).

use std::path::Path;
use std::time::Duration;

use pe_core::config::{Config, ImageConfig};
use pe_core::gemini::batch::BatchResponse;
use pe_core::gemini::{GeminiError, GeminiExtraction};
use pe_core::intake::{self, IntakeError};
use pe_core::product::{
    check_currency, check_gtin, diff, take_fields, Attribute, FieldChange, FlagKind, NetContent, Price, Product,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use proptest::{collection, option};
use serde_json::{json, Value};

/// Cases a property in `make test`; `PROPTEST_CASES` overrides it.
const CASES: u32 = 64;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES);
    let persistence = FileFailurePersistence::WithSource("proptest-regressions");
    ProptestConfig { cases, failure_persistence: Some(Box::new(persistence)), ..ProptestConfig::default() }
}

// --- Gemini's answer ------------------------------------------------------------------------

/// The parser a direct call and a batch item share, on one response body.
fn parse(body: String) -> Result<GeminiExtraction, GeminiError> {
    BatchResponse { key: None, response: Some(body), error: None }.into_result(
        "gemini-2.5-flash",
        Duration::from_millis(5),
        8192,
        1_760_000_000_000,
    )
}

fn response_with_text(text: &str, finish: &str) -> String {
    json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": finish}],
           "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 50, "totalTokenCount": 150},
           "modelVersion": "gemini-2.5-flash"})
    .to_string()
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        prop_oneof![Just("candidates"), Just("content"), Just("parts"), Just("text"), Just("name"), Just("STOP")]
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("candidates".to_string()),
            Just("content".to_string()),
            Just("parts".to_string()),
            Just("text".to_string()),
            Just("finishReason".to_string()),
            Just("usageMetadata".to_string()),
            Just("promptFeedback".to_string()),
            Just("blockReason".to_string()),
            Just("thought".to_string()),
            "[a-zA-Z]{1,8}",
        ];
        prop_oneof![
            collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            collection::btree_map(key, inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Text as a person or a model writes it: trimmed, not blank.
fn words() -> impl Strategy<Value = String> + Clone {
    "[A-Za-z0-9äöüßé&'.-]{1,10}( [A-Za-z0-9äöüßé&'.-]{1,10}){0,3}"
}

/// Any text a field may hold: blank, plain, or any printable characters.
fn any_text() -> impl Strategy<Value = String> + Clone {
    prop_oneof![Just(String::new()), "[A-Za-z ]{1,8}", "\\PC{0,6}"]
}

/// Products whose strings come from `text` and whose amounts from `number` (the one product
/// strategy: every field, every optional one sometimes absent).
fn product_with<T, N>(text: T, number: N) -> impl Strategy<Value = Product>
where
    T: Strategy<Value = String> + Clone + 'static,
    N: Strategy<Value = f64> + Clone + 'static,
{
    let price = (number.clone(), prop_oneof!["EUR", "JPY", "[A-Z]{3}"])
        .prop_map(|(amount, currency)| Price { amount, currency });
    let content = (number, text.clone()).prop_map(|(value, unit)| NetContent { value, unit });
    let attributes = collection::vec(
        (prop_oneof![Just("Flavor".to_string()), text.clone()], text.clone())
            .prop_map(|(name, value)| Attribute { name, value }),
        0..4,
    );
    let uncertain =
        collection::vec(prop_oneof![Just("price".to_string()), Just("gtin".to_string()), text.clone()], 0..3);
    let gtin = prop_oneof!["[0-9]{8,14}", text.clone()];
    (
        (text.clone(), option::of(text.clone()), option::of(text.clone()), option::of(text.clone()), option::of(price)),
        (option::of(gtin), option::of(text.clone()), option::of(text.clone()), option::of(text), option::of(content)),
        (attributes, uncertain),
    )
        .prop_map(
            |(
                (name, brand, category, description, price),
                (gtin, color, size, material, net_content),
                (attributes, uncertain_fields),
            )| Product {
                name,
                brand,
                category,
                description,
                price,
                gtin,
                color,
                size,
                material,
                net_content,
                attributes,
                uncertain_fields,
            },
        )
}

/// Any product, NaN prices and blank names included.
fn any_product() -> impl Strategy<Value = Product> {
    product_with(any_text(), prop_oneof![Just(0.0), 0.0..1e6f64, any::<f64>()])
}

/// A product as Gemini may answer it: a name, finite amounts (JSON has no NaN).
fn answered_product() -> impl Strategy<Value = Product> {
    product_with(words(), 0.001..1e6f64)
}

proptest! {
    #![proptest_config(config())]

    /// Any bytes as a body: an answer or a typed error, never a panic.
    #[test]
    fn any_body_is_an_answer_or_a_typed_error(bytes in collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(String::from_utf8_lossy(&bytes).into_owned());
    }

    /// Any JSON as a body, shaped like a response or not.
    #[test]
    fn any_json_body_is_an_answer_or_a_typed_error(value in any_json()) {
        if let Ok(extraction) = parse(value.to_string()) {
            prop_assert!(!extraction.product.name.trim().is_empty(), "a product always has a name");
        }
    }

    /// Any text in a well-formed response: a product with a name, or a typed error.
    #[test]
    fn any_answer_text_is_a_product_or_a_typed_error(text in "\\PC{0,200}", finish in prop_oneof!["STOP", "MAX_TOKENS", "SAFETY", "", "OTHER"]) {
        if let Ok(extraction) = parse(response_with_text(&text, &finish)) {
            prop_assert!(!extraction.product.name.trim().is_empty());
        }
    }

    /// A valid product comes back as it was sent, bare, fenced or inside prose: cleaned
    /// (`Product::cleaned`: normalized, each field within its maximum), with the cleaning's flags.
    #[test]
    fn a_product_round_trips_through_the_parser(p in answered_product(), wrap in 0..3u8) {
        let json = serde_json::to_string(&p).unwrap();
        let text = match wrap {
            0 => json,
            1 => format!("```json\n{json}\n```"),
            _ => format!("Here is the product:\n{json}\nAnything else?"),
        };
        let extraction = parse(response_with_text(&text, "STOP")).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let (expected, cleaning) = p.cleaned();
        prop_assert_eq!(extraction.product, expected);
        prop_assert_eq!(extraction.cleaning, cleaning);
        prop_assert_eq!(extraction.usage.prompt_tokens, 100);
    }
}

// --- the product validator -------------------------------------------------------------------

fn gtin_flagged(p: &Product) -> bool {
    p.validate().iter().any(|f| f.field == "gtin" && f.kind == FlagKind::Invalid)
}

proptest! {
    #![proptest_config(config())]

    /// Of the ten possible last digits, exactly one makes a GTIN of a valid length valid; and a
    /// valid GTIN with any one digit changed is refused (GS1 catches every single-digit error).
    #[test]
    fn exactly_one_check_digit_is_valid_and_one_wrong_digit_is_caught(
        body in prop_oneof!["[0-9]{7}", "[0-9]{11}", "[0-9]{12}", "[0-9]{13}"],
        at in any::<prop::sample::Index>(),
        to in 0..10u8,
    ) {
        let valid: Vec<String> = (0..10).map(|d| format!("{body}{d}")).filter(|g| check_gtin(g).is_ok()).collect();
        prop_assert_eq!(valid.len(), 1, "{}", body);
        let gtin = &valid[0];
        let i = at.index(gtin.len());
        let mut changed = gtin.clone().into_bytes();
        let to = b'0' + to;
        prop_assume!(changed[i] != to);
        changed[i] = to;
        prop_assert!(check_gtin(std::str::from_utf8(&changed).unwrap()).is_err());
        let product = Product { name: "x".into(), gtin: Some(gtin.clone()), ..Product::default() };
        prop_assert!(!gtin_flagged(&product));
    }

    /// Anything that is not 8, 12, 13 or 14 digits is refused, with a message; never a panic.
    #[test]
    fn a_gtin_of_another_shape_is_refused(text in "\\PC{0,20}") {
        let shaped = text.bytes().all(|b| b.is_ascii_digit()) && [8, 12, 13, 14].contains(&text.len());
        if !shaped {
            let message = check_gtin(&text).unwrap_err();
            prop_assert!(!message.is_empty());
        }
    }

    /// A currency is three upper-case ISO 4217 letters: lower case, other lengths and other
    /// characters are refused; normalizing upper-cases what the model wrote.
    #[test]
    fn currency_codes(code in "\\PC{0,5}", known in prop_oneof!["EUR", "USD", "JPY", "GBP", "CHF", "SEK"]) {
        prop_assert!(check_currency(&known).is_ok());
        prop_assert!(check_currency(&known.to_lowercase()).is_err());
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
            prop_assert!(check_currency(&code).is_err());
        }
        let lower = Product { name: "x".into(), price: Some(Price { amount: 1.0, currency: known.to_lowercase() }), ..Product::default() };
        prop_assert!(lower.clone().normalized().is_valid(), "{:?}", lower.normalized().validate());
    }

    /// A price is valid exactly when it is a finite amount of zero or more.
    #[test]
    fn prices(amount in prop_oneof![any::<f64>(), -10.0..10.0f64, Just(0.0), Just(-0.0), Just(f64::NAN), Just(f64::INFINITY)]) {
        let p = Product { name: "x".into(), price: Some(Price { amount, currency: "EUR".into() }), ..Product::default() };
        let flagged = p.validate().iter().any(|f| f.field == "price.amount" && f.kind == FlagKind::Invalid);
        prop_assert_eq!(flagged, !(amount.is_finite() && amount >= 0.0));
        prop_assert_eq!(p.is_valid(), !flagged);
    }

    /// Any product validates without a panic, and is valid exactly when no flag is invalid.
    #[test]
    fn validation_is_total(p in any_product()) {
        let flags = p.validate();
        prop_assert_eq!(p.is_valid(), flags.iter().all(|f| f.kind != FlagKind::Invalid));
        prop_assert!(flags.iter().all(|f| !f.message.is_empty()));
    }
}

// --- review diffs (a re-extract's changes, taken field by field) -------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_product_does_not_differ_from_itself(p in any_product()) {
        prop_assert!(diff(Some(&p), &p).is_empty());
        prop_assert!(diff(Some(&p), &p.clone()).is_empty());
    }

    #[test]
    fn changes_are_real_unique_and_symmetric(a in any_product(), b in any_product()) {
        let forward = diff(Some(&a), &b);
        let mut fields: Vec<&str> = forward.iter().map(|c| c.field.as_str()).collect();
        for change in &forward {
            prop_assert_ne!(&change.before, &change.after);
        }
        let mut backward: Vec<FieldChange> = diff(Some(&b), &a)
            .into_iter()
            .map(|c| FieldChange { field: c.field, before: c.after, after: c.before })
            .collect();
        let mut forward = forward.clone();
        forward.sort_by(|x, y| x.field.cmp(&y.field));
        backward.sort_by(|x, y| x.field.cmp(&y.field));
        prop_assert_eq!(&forward, &backward);
        fields.sort_unstable();
        let before = fields.len();
        fields.dedup();
        prop_assert_eq!(before, fields.len());
    }

    #[test]
    fn taking_some_changes_leaves_exactly_the_others(
        a in any_product(),
        b in any_product(),
        mask in collection::vec(any::<bool>(), 16),
    ) {
        let changes = diff(Some(&a), &b);
        let (taken, kept): (Vec<_>, Vec<_>) = changes.iter().enumerate().partition(|(i, _)| mask[i % mask.len()]);
        let taken: Vec<String> = taken.into_iter().map(|(_, c)| c.field.clone()).collect();
        let merged = take_fields(&a, &b, &taken).unwrap();
        let mut left: Vec<String> = diff(Some(&merged), &b).into_iter().map(|c| c.field).collect();
        let mut expected: Vec<String> = kept.into_iter().map(|(_, c)| c.field.clone()).collect();
        left.sort();
        expected.sort();
        prop_assert_eq!(left, expected);
        let all: Vec<String> = changes.into_iter().map(|c| c.field).collect();
        prop_assert!(diff(Some(&take_fields(&a, &b, &all).unwrap()), &b).is_empty());
    }

    #[test]
    fn against_nothing_every_change_is_an_addition(p in any_product()) {
        for change in diff(None, &p) {
            prop_assert!(change.before.is_none(), "{:?}", change);
            prop_assert!(change.after.is_some(), "{:?}", change);
        }
    }
}

// --- intake on damaged real photos ----------------------------------------------------------

fn product_jpg() -> &'static [u8] {
    static PHOTO: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PHOTO.get_or_init(|| {
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/product.jpg")).unwrap()
    })
}

/// One way to damage a file.
#[derive(Debug, Clone)]
enum Damage {
    FlipBit { at: prop::sample::Index, bit: u8 },
    Truncate { at: prop::sample::Index },
    Overwrite { at: prop::sample::Index, bytes: Vec<u8> },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<prop::sample::Index>(), 0..8u8).prop_map(|(at, bit)| Damage::FlipBit { at, bit }),
        any::<prop::sample::Index>().prop_map(|at| Damage::Truncate { at }),
        (any::<prop::sample::Index>(), collection::vec(any::<u8>(), 1..64))
            .prop_map(|(at, bytes)| Damage::Overwrite { at, bytes }),
    ]
}

fn apply(bytes: &mut Vec<u8>, damage: &Damage) {
    match damage {
        Damage::FlipBit { at, bit } => {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        Damage::Truncate { at } => bytes.truncate(at.index(bytes.len())),
        Damage::Overwrite { at, bytes: with } => {
            let i = at.index(bytes.len());
            let end = (i + with.len()).min(bytes.len());
            bytes[i..end].copy_from_slice(&with[..end - i]);
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// The real photo with bits flipped, cut short or overwritten (a few damages at once, often in
    /// the headers where they hurt most): prepared, or a typed error — never a panic (which intake
    /// turns into `Internal`), and never a decode larger than the pixel limit allows.
    #[test]
    fn a_damaged_photo_is_prepared_or_a_typed_error(damages in collection::vec(damage(), 1..4), in_header in any::<bool>()) {
        let cfg = ImageConfig::default();
        let mut bytes = product_jpg().to_vec();
        for d in &damages {
            if in_header {
                // The first 2 KB: markers, tables, the frame header.
                let mut head = bytes[..2048.min(bytes.len())].to_vec();
                apply(&mut head, d);
                let tail = bytes.split_off(2048.min(bytes.len()));
                bytes = head;
                bytes.extend(tail);
            } else {
                apply(&mut bytes, d);
            }
        }
        // What the decode budget is charged: bounded by the pixel limit whatever the header says
        // (at most 8 bytes a pixel decoded, plus the RGB copy).
        prop_assert!(intake::decode_estimate(&bytes, &cfg) <= cfg.max_pixels * 11);
        match intake::prepare_bytes(&bytes, &cfg) {
            Ok(p) => {
                prop_assert!(p.width > 0 && p.height > 0 && p.width.max(p.height) <= cfg.max_long_edge);
                prop_assert!(p.jpeg.starts_with(&[0xFF, 0xD8]));
            }
            Err(IntakeError::Internal { detail }) => prop_assert!(false, "intake panicked: {}", detail),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

// --- the config file -------------------------------------------------------------------------

/// The default config as the app writes it: the sections and keys a user can write.
fn default_toml() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        Config::default().save(&path).unwrap();
        std::fs::read_to_string(&path).unwrap()
    })
}

/// A TOML value of any type, sometimes of the right one.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (0u64..100_000_000_000).prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| if f.is_finite() { format!("{f:?}") } else { "nan".into() }),
        any::<bool>().prop_map(|b| b.to_string()),
        "[a-z0-9 .:/-]{0,16}".prop_map(|s| format!("{s:?}")),
        prop_oneof!["1s", "250ms", "0s", "3h 2m", "forever", "-1s", "1000000000000000000000s"]
            .prop_map(|s| format!("{s:?}")),
        Just("[]".to_string()),
        Just("{ a = 1 }".to_string()),
        Just("\"https://example.test\"".to_string()),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// Any text as the config file: a config or an error naming what is wrong, never a panic.
    #[test]
    fn any_text_is_a_config_or_an_error(text in "\\PC{0,300}") {
        if let Err(e) = Config::from_toml(&text, Path::new("config.toml")) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    /// The real file with one key's value replaced by anything, or a line dropped, or an unknown
    /// key added: a config or an error, never a panic; an accepted config is valid.
    #[test]
    fn the_real_file_with_one_value_changed(line in any::<prop::sample::Index>(), value in toml_value(), how in 0..3u8) {
        let mut lines: Vec<String> = default_toml().lines().map(str::to_owned).collect();
        let i = line.index(lines.len());
        match how {
            0 => if let Some((key, _)) = lines[i].split_once(" = ") {
                lines[i] = format!("{key} = {value}");
            },
            1 => { lines.remove(i); }
            _ => lines.insert(i, format!("surprise = {value}")),
        }
        if let Ok(config) = Config::from_toml(&lines.join("\n"), Path::new("config.toml")) {
            prop_assert!(config.validate().is_ok());
        }
    }

    /// A config the app writes loads back equal.
    #[test]
    fn a_written_config_loads_back_equal(
        model in "[a-z0-9.-]{1,24}",
        timeout_ms in 1u64..600_000,
        max_output_tokens in 1u32..65_536,
        temperature in option::of(0.0..=2.0f64),
        max_response_bytes in 1024u64..1 << 40,
        long_edge in 64u32..=8192,
        quality in 1u8..=100,
        max_file_bytes in 1u64..1 << 40,
        max_pixels in 1u64..1 << 40,
        budget in (16u64 << 20)..1 << 40,
        poll_ms in 1u64..86_400_000,
        max_requests in 1usize..10_000,
    ) {
        let mut config = Config::default();
        config.gemini.model = model;
        config.gemini.timeout = Duration::from_millis(timeout_ms);
        config.gemini.max_output_tokens = max_output_tokens;
        config.gemini.temperature = temperature;
        config.gemini.max_response_bytes = max_response_bytes;
        config.image.max_long_edge = long_edge;
        config.image.jpeg_quality = quality;
        config.image.max_file_bytes = max_file_bytes;
        config.image.max_pixels = max_pixels;
        config.intake.decode_budget_bytes = budget;
        config.batch.poll_interval = Duration::from_millis(poll_ms);
        config.batch.max_requests = max_requests;
        prop_assume!(config.validate().is_ok());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        config.save(&path).unwrap();
        let loaded = Config::load(&path, |_| None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(loaded, config);
    }
}
