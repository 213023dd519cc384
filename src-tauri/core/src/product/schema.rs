//! What Gemini is given from the field table: the JSON Schema of the answer
//! (`generationConfig.responseJsonSchema`), the system instruction's line per field, and the
//! `sources` list where it says on which photo it read each field.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::{uncertain_field_names, FieldKind, Product, PRODUCT_FIELDS};

/// The JSON Schema sent to Gemini as `generationConfig.responseJsonSchema`.
///
/// Generated from [`Product`] with every subschema inlined (no `$ref`/`$defs`) and without the
/// `$schema` key, so the same schema also fits APIs that accept only a JSON Schema subset.
pub fn response_json_schema() -> serde_json::Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let schema = settings.into_generator().into_root_schema_for::<Product>();
    let mut value = schema.to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.shift_remove("title");
        // The table's required fields (the name); `#[serde(default)]` makes schemars list none.
        let required: Vec<&str> = PRODUCT_FIELDS.iter().filter(|f| f.required).map(|f| f.name()).collect();
        obj.insert("required".into(), serde_json::json!(required));
        // Last, so Gemini writes the product first (it writes in the schema's order).
        if let Some(serde_json::Value::Object(properties)) = obj.get_mut("properties") {
            properties.insert(SOURCES_KEY.into(), sources_schema());
        }
    }
    value
}

/// What the model is told, once per request (`systemInstruction`): the general rules, then a line
/// for each field of the table with a [`super::ProductField::rule`], in schema order (the unsure
/// list last, after the rule on languages).
pub fn system_instruction() -> &'static str {
    static INSTRUCTION: LazyLock<String> = LazyLock::new(|| {
        let line = |f: &super::ProductField| f.rule.map(|rule| format!("- {}: {rule}\n", f.name()));
        let fields: String =
            PRODUCT_FIELDS.iter().filter(|f| f.kind != FieldKind::FieldNames).filter_map(line).collect();
        let lists: String =
            PRODUCT_FIELDS.iter().filter(|f| f.kind == FieldKind::FieldNames).filter_map(line).collect();
        format!("{INSTRUCTION_HEAD}{fields}{INSTRUCTION_LANGUAGES}{lists}{INSTRUCTION_TAIL}")
    });
    &INSTRUCTION
}

const INSTRUCTION_HEAD: &str = "\
You extract product data from a photo for a product catalog.
Rules:
- Describe the one product the photo is about (the most prominent one). Ignore the background, \
other items, and people.
- Use only what is visible in the photo: printed text, labels, tags, the product itself. Never \
guess or use outside knowledge to fill a field; if a value is not visible, use null (or an empty \
list).
";

const INSTRUCTION_LANGUAGES: &str = "\
- Keep the text in the language printed on the product; write description and category in English.
";

const INSTRUCTION_TAIL: &str = "Answer with the JSON object only.";

/// The answer's key for where each field was read ([`FieldSource`]); not a product field.
pub const SOURCES_KEY: &str = "sources";

/// Where Gemini read a field: which of the product's photos (0-based, in the order sent) and where
/// on it, as Gemini's documented `box_2d` (`[y_min, x_min, y_max, x_max]`, normalized to 0–1000).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[ts(export)]
pub struct FieldSource {
    /// A product field's name (`name`, `gtin`, `net_content`, …).
    pub field: String,
    pub photo: u32,
    pub box_2d: [u16; 4],
}

fn sources_schema() -> serde_json::Value {
    let fields: Vec<&str> = uncertain_field_names().collect();
    serde_json::json!({
        "type": "array",
        "description": "For each field you filled: the photo you read it from (0 for the first photo sent, 1 for the second, ...) and box_2d, where it is printed on that photo: [y_min, x_min, y_max, x_max], each from 0 to 1000 relative to the photo's height and width.",
        "items": {
            "type": "object",
            "properties": {
                "field": {"type": "string", "enum": fields},
                "photo": {"type": "integer", "minimum": 0},
                "box_2d": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 1000}}
            },
            "required": ["field", "photo", "box_2d"]
        }
    })
}

/// The usable entries of an answer's `sources` (the array) for a request of `photos` photos: a product field
/// (not `uncertain_fields`), a photo that was sent, a box of four numbers in 0–1000 with min < max;
/// the first entry per field. Anything else — a missing or malformed list included — is dropped,
/// never an error: where a value was read is a help, not part of the product.
pub fn field_sources(sources: &serde_json::Value, photos: usize) -> Vec<FieldSource> {
    let Some(entries) = sources.as_array() else { return Vec::new() };
    let mut sources: Vec<FieldSource> = Vec::new();
    for entry in entries.iter().take(64) {
        let Some(field) = entry.get("field").and_then(serde_json::Value::as_str) else { continue };
        if !uncertain_field_names().any(|f| f == field) || sources.iter().any(|s| s.field == field) {
            continue;
        }
        let Some(photo) = entry.get("photo").and_then(serde_json::Value::as_u64) else { continue };
        if usize::try_from(photo).map_or(true, |p| p >= photos) {
            continue;
        }
        let Some(raw) = entry.get("box_2d").and_then(serde_json::Value::as_array) else { continue };
        let numbers: Vec<u16> = raw
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .filter(|v| v.is_finite() && (0.0..=1000.0).contains(v))
            .map(|v| v.round() as u16)
            .collect();
        let [y_min, x_min, y_max, x_max] = numbers[..] else { continue };
        if raw.len() != 4 || y_min >= y_max || x_min >= x_max {
            continue;
        }
        sources.push(FieldSource {
            field: field.to_owned(),
            photo: photo as u32,
            box_2d: [y_min, x_min, y_max, x_max],
        });
    }
    sources
}
