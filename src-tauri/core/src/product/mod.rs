//! The product schema: what Gemini is asked for, what the reviewer edits, what the catalog stores.
//!
//! **One field table.** Each field of [`Product`] is one entry below: its Rust type, its doc
//! comment (the description Gemini reads in the JSON Schema), its label, its [`FieldKind`], its
//! limits, whether the catalog lists it, and the line the prompt gives it. The struct, [`FieldKey`]
//! and [`PRODUCT_FIELDS`] are written from that list ([`fields`]), and everything that goes field
//! by field reads the table and decides by kind: the JSON Schema sent to Gemini as
//! `responseJsonSchema` and the system instruction ([`schema`]), validation and cleaning (here),
//! the review diff and a re-extract's take ([`diff`]), the CSV export, the CLI's text, and the UI's
//! form (through the generated bindings). Adding a field is one entry (plus a migration when it is
//! `listed`); `added_field` tests it with an extra field in a test build.
//!
//! Validation never drops a value: a field that fails a check is kept as it is and reported as a
//! [`FieldFlag`], so the reviewer sees it highlighted and decides.
//!
//! Two things are changed in a model's answer before anyone sees it ([`Product::cleaned`]), each
//! with a flag on the field: control characters other than tab and newline are removed (a NUL
//! cannot be stored on a PostgreSQL catalog, an escape sequence acts on a terminal), and a value
//! longer than its field's maximum ([`max_chars`]) is cut there.

mod checks;
mod diff;
mod fields;
mod schema;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

pub use checks::{check_currency, check_gtin, gtin_key, price_text};
pub use diff::{diff, take_fields, FieldChange, UnknownField};
use fields::product_fields;
pub use fields::{kind_parts, FieldKind, FieldType, KindParts, ProductField, Slot, Value};
pub use schema::{field_sources, response_json_schema, system_instruction, FieldSource, SOURCES_KEY};

product_fields! {
    /// A product as extracted from one photo.
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(default)]
    #[ts(export)]
    pub struct Product {
        /// The product's name as printed on the package or label, without the brand if the brand is
        /// a separate word group.
        name: String as Name {
            label: "Name",
            required: true,
            max_chars: Some(255),
            listed: true,
            rule: Some(
                "the product name as printed, without the brand when the brand is a separate word group. \
It is required; if nothing is printed, give a short plain description such as \"White ceramic mug\".",
            ),
            ..ProductField::OPTIONAL
        },
        /// The brand or manufacturer.
        brand: Option<String> as Brand {
            label: "Brand",
            max_chars: Some(120),
            listed: true,
            rule: Some("the brand or manufacturer as printed."),
            ..ProductField::OPTIONAL
        },
        /// A short product category, e.g. "Breakfast cereal", "Running shoes".
        category: Option<String> as Category {
            label: "Category",
            max_chars: Some(255),
            listed: true,
            ..ProductField::OPTIONAL
        },
        /// One or two sentences describing the product, from what is visible.
        description: Option<String> as Description {
            label: "Description",
            kind: FieldKind::LongText,
            max_chars: Some(5000),
            ..ProductField::OPTIONAL
        },
        /// The price, only if a price tag or printed price is visible.
        price: Option<Price> as Price {
            label: "Price",
            kind: FieldKind::Price,
            listed: true,
            rule: Some(
                "only from a visible price tag or printed price. amount is a number without currency \
symbols; currency is the ISO 4217 code in upper case (EUR, USD, GBP, CHF, ...), inferred from the \
symbol only when unambiguous.",
            ),
            ..ProductField::OPTIONAL
        },
        /// The GTIN / EAN / UPC barcode digits, only if legible (8, 12, 13 or 14 digits).
        gtin: Option<String> as Gtin {
            label: "GTIN",
            kind: FieldKind::Gtin,
            max_chars: Some(32),
            listed: true,
            rule: Some(
                "the barcode digits (EAN-8, UPC-A, EAN-13, GTIN-14) only when every digit is legible; \
digits only, no spaces or dashes.",
            ),
            ..ProductField::OPTIONAL
        },
        /// The main color.
        color: Option<String> as Color { label: "Color", max_chars: Some(120), ..ProductField::OPTIONAL },
        /// The size, e.g. "M", "42", "30 x 40 cm".
        size: Option<String> as Size { label: "Size", max_chars: Some(120), ..ProductField::OPTIONAL },
        /// The main material.
        material: Option<String> as Material { label: "Material", max_chars: Some(120), ..ProductField::OPTIONAL },
        /// The net content, e.g. 500 g or 1.5 l.
        net_content: Option<NetContent> as NetContent {
            label: "Net content",
            kind: FieldKind::NetContent,
            rule: Some(
                "the quantity printed on the pack (e.g. 500 g, 1.5 l, 12 pcs), value as a number \
and unit as printed in lower case.",
            ),
            ..ProductField::OPTIONAL
        },
        #[cfg(feature = "added-field-test")]
        /// How long the product keeps once opened, as printed (e.g. "3 days").
        shelf_life: Option<String> as ShelfLife {
            label: "Shelf life",
            max_chars: Some(60),
            rule: Some("how long the product keeps once opened, as printed."),
            ..ProductField::OPTIONAL
        },
        /// Further attributes visible on the product (e.g. "Flavor": "Vanilla").
        attributes: Vec<Attribute> as Attributes {
            label: "Attributes",
            kind: FieldKind::Attributes,
            rule: Some("other useful printed facts (flavor, variety, scent, origin, ...) as name/value pairs."),
            ..ProductField::OPTIONAL
        },
        /// The names of the fields above whose values you are unsure of (e.g. ["price", "gtin"]).
        uncertain_fields: Vec<String> as UncertainFields {
            label: "Unsure fields",
            kind: FieldKind::FieldNames,
            rule: Some(
                "list the names of the fields whose values you are not sure of (partly hidden, \
blurry, inferred), e.g. [\"price\", \"gtin\"].",
            ),
            ..ProductField::OPTIONAL
        },
    }
}

/// A price: an amount in an ISO 4217 currency.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export)]
pub struct Price {
    /// The amount, e.g. 3.49.
    pub amount: f64,
    /// The ISO 4217 currency code, e.g. "EUR", "USD".
    pub currency: String,
}

/// A quantity with its unit, e.g. 500 g.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export)]
pub struct NetContent {
    /// The numeric value, e.g. 500.
    pub value: f64,
    /// The unit, e.g. "g", "kg", "ml", "l", "pcs".
    pub unit: String,
}

/// A free-form name/value attribute.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export)]
pub struct Attribute {
    pub name: String,
    pub value: String,
}

/// Why a field is flagged for the reviewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum FlagKind {
    /// The value fails a check (bad check digit, unknown currency, ...). Saving is refused.
    Invalid,
    /// The model said it is unsure of this value. Saving is allowed.
    Uncertain,
    /// A barcode read on the photo decided (or could not decide) the value: the message says
    /// what the barcode says and what Gemini read. Saving is allowed.
    Barcode,
    /// Control characters (other than tab and newline) were removed from Gemini's answer for
    /// this field ([`Product::cleaned`]): what is left may read differently. Saving is allowed.
    ControlCharactersRemoved,
    /// Gemini's answer for this field was longer than the field's maximum ([`max_chars`]) and is
    /// cut there ([`Product::cleaned`]). Saving is allowed.
    TooLong,
}

/// A field the reviewer should look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[ts(export)]
pub struct FieldFlag {
    /// The field's name in [`Product`], e.g. "gtin", "price.currency", "attributes[2].name".
    pub field: String,
    pub kind: FlagKind,
    /// What is wrong, for a person: "check digit should be 7, not 3".
    pub message: String,
}

impl FieldFlag {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), kind: FlagKind::Invalid, message: message.into() }
    }
}

/// The most attributes a product keeps; a model's answer with more keeps the first ones, with a
/// [`FlagKind::TooLong`] flag on `attributes`.
pub const MAX_ATTRIBUTES: usize = 100;

/// The most entries `uncertain_fields` keeps (a model's longer list is cut silently: only field
/// names count).
pub const MAX_UNCERTAIN_FIELDS: usize = 32;

/// The most characters (Unicode scalar values) `field` holds, by field as [`FieldFlag`] names it:
/// a text field's [`ProductField::max_chars`] ("name": 255, Shopify's limit for a product's title,
/// so every saved product exports), or a part's, the same for every field of its kind
/// ([`FieldKind::part_max_chars`]: "price.currency", "attributes[3].value").
pub fn max_chars(field: &str) -> Option<usize> {
    let (name, part) = match field.split_once(['.', '[']) {
        Some((name, rest)) => (name, Some(rest.rsplit('.').next().unwrap_or(rest))),
        None => (field, None),
    };
    let spec = PRODUCT_FIELDS.iter().find(|f| f.name() == name)?;
    match part {
        None => spec.max_chars.map(|max| max as usize),
        Some(part) => spec.kind.part_max_chars(part),
    }
}

/// The field names a model may list in `uncertain_fields`: every field but that list itself.
pub fn uncertain_field_names() -> impl Iterator<Item = &'static str> {
    PRODUCT_FIELDS.iter().filter(|f| f.kind != FieldKind::FieldNames).map(|f| f.key.as_str())
}

impl Product {
    /// Checks every field and returns what the reviewer must look at. Invalid values are kept as
    /// they are; only the flags say what is wrong.
    pub fn validate(&self) -> Vec<FieldFlag> {
        let mut flags = Vec::new();
        for spec in PRODUCT_FIELDS.iter().filter(|f| f.required) {
            if let Value::Text(text) = self.value(spec.key) {
                if text.is_none_or(|t| t.trim().is_empty()) {
                    flags.push(FieldFlag::invalid(spec.name(), format!("a {} is required", spec.name())));
                }
            }
        }
        for (field, value) in self.texts() {
            let max = max_chars(&field).unwrap_or(usize::MAX);
            if value.chars().nth(max).is_some() {
                flags.push(FieldFlag::invalid(field, format!("at most {max} characters")));
            }
        }
        for spec in PRODUCT_FIELDS {
            if let Value::Attributes(attributes) = self.value(spec.key) {
                if attributes.len() > MAX_ATTRIBUTES {
                    flags.push(FieldFlag::invalid(spec.name(), format!("at most {MAX_ATTRIBUTES} attributes")));
                }
            }
        }
        for spec in PRODUCT_FIELDS {
            match self.value(spec.key) {
                Value::Price(Some(price)) => {
                    if !price.amount.is_finite() || price.amount < 0.0 {
                        flags.push(FieldFlag::invalid(spec.part("amount"), "the price must be zero or more"));
                    }
                    if let Err(message) = check_currency(&price.currency) {
                        flags.push(FieldFlag::invalid(spec.part("currency"), message));
                    }
                }
                Value::Text(Some(gtin)) if spec.kind == FieldKind::Gtin => {
                    if let Err(message) = check_gtin(gtin) {
                        flags.push(FieldFlag::invalid(spec.name(), message));
                    }
                }
                Value::NetContent(Some(content)) => {
                    if !content.value.is_finite() || content.value <= 0.0 {
                        flags.push(FieldFlag::invalid(spec.part("value"), "the amount must be more than zero"));
                    }
                    if content.unit.trim().is_empty() {
                        flags.push(FieldFlag::invalid(spec.part("unit"), "a unit is required, e.g. g or ml"));
                    }
                }
                Value::Attributes(attributes) => {
                    for (i, attribute) in attributes.iter().enumerate() {
                        if attribute.name.trim().is_empty() {
                            let field = format!("{}[{i}].name", spec.name());
                            flags.push(FieldFlag::invalid(field, "an attribute needs a name"));
                        }
                    }
                }
                _ => {}
            }
        }
        for field in &self.uncertain_fields {
            let known = uncertain_field_names().any(|name| name == field.as_str());
            if known && !flags.iter().any(|f| f.field == *field || f.field.starts_with(&format!("{field}."))) {
                flags.push(FieldFlag {
                    field: field.clone(),
                    kind: FlagKind::Uncertain,
                    message: "Gemini was not sure of this value".into(),
                });
            }
        }
        flags
    }

    /// True when no field is invalid (uncertain fields are allowed).
    pub fn is_valid(&self) -> bool {
        self.validate().iter().all(|f| f.kind != FlagKind::Invalid)
    }

    /// Every text a person reads, with its name as a [`FieldFlag`] names it, in schema order: the
    /// text fields, a price's currency, a quantity's unit, each attribute's name and value (the
    /// unsure list is not text a person reads).
    fn texts(&self) -> Vec<(String, &str)> {
        let mut texts = Vec::new();
        for spec in PRODUCT_FIELDS {
            match self.value(spec.key) {
                Value::Text(text) => texts.extend(text.map(|t| (spec.name().to_owned(), t))),
                Value::Price(price) => texts.extend(price.map(|p| (spec.part("currency"), p.currency.as_str()))),
                Value::NetContent(content) => texts.extend(content.map(|c| (spec.part("unit"), c.unit.as_str()))),
                Value::Attributes(attributes) => {
                    for (i, a) in attributes.iter().enumerate() {
                        texts.push((format!("{}[{i}].name", spec.name()), &a.name));
                        texts.push((format!("{}[{i}].value", spec.name()), &a.value));
                    }
                }
                Value::FieldNames(_) => {}
            }
        }
        texts
    }

    /// Calls `each` with every text of [`Product::texts`], to change in place.
    fn each_text_mut(&mut self, mut each: impl FnMut(String, &mut String)) {
        for spec in PRODUCT_FIELDS {
            match self.slot(spec.key) {
                Slot::Required(text) => each(spec.name().to_owned(), text),
                Slot::Text(Some(text)) => each(spec.name().to_owned(), text),
                Slot::Price(Some(price)) => each(spec.part("currency"), &mut price.currency),
                Slot::NetContent(Some(content)) => each(spec.part("unit"), &mut content.unit),
                Slot::Attributes(attributes) => {
                    for (i, a) in attributes.iter_mut().enumerate() {
                        each(format!("{}[{i}].name", spec.name()), &mut a.name);
                        each(format!("{}[{i}].value", spec.name()), &mut a.value);
                    }
                }
                _ => {}
            }
        }
    }

    /// A model's answer made fit for the catalog, with a flag for each change ([`Product::normalized`]
    /// too): control characters other than tab and newline removed from every text
    /// ([`FlagKind::ControlCharactersRemoved`]; NUL, DEL and C1 included), then every text longer
    /// than its maximum ([`max_chars`]) cut at a character boundary, and attributes beyond
    /// [`MAX_ATTRIBUTES`] dropped ([`FlagKind::TooLong`]).
    pub fn cleaned(mut self) -> (Self, Vec<FieldFlag>) {
        let mut flags = Vec::new();
        self.each_text_mut(|field, text| {
            if let Some(kept) = crate::text::strip_controls(text) {
                let removed = text.chars().count() - kept.chars().count();
                *text = kept;
                let message = format!("{removed} control character(s) removed from Gemini's answer");
                flags.push(FieldFlag { field, kind: FlagKind::ControlCharactersRemoved, message });
            }
        });
        for spec in PRODUCT_FIELDS {
            if let Slot::FieldNames(names) = self.slot(spec.key) {
                names.truncate(MAX_UNCERTAIN_FIELDS);
                for name in names {
                    if let Some(kept) = crate::text::strip_controls(name) {
                        *name = kept;
                    }
                }
            }
        }
        let mut product = self.normalized();
        for spec in PRODUCT_FIELDS {
            if let Slot::Attributes(attributes) = product.slot(spec.key) {
                if attributes.len() > MAX_ATTRIBUTES {
                    let message =
                        format!("Gemini gave {} attributes; the first {MAX_ATTRIBUTES} are kept", attributes.len());
                    attributes.truncate(MAX_ATTRIBUTES);
                    flags.push(FieldFlag { field: spec.name().into(), kind: FlagKind::TooLong, message });
                }
            }
        }
        product.each_text_mut(|field, text| {
            let Some(max) = max_chars(&field) else { return };
            if let Some(cut) = crate::text::cut_to_chars(text, max) {
                let message =
                    format!("Gemini's answer was {} characters long; the first {max} are kept", text.chars().count());
                *text = cut.trim_end().to_owned();
                flags.push(FieldFlag { field, kind: FlagKind::TooLong, message });
            }
        });
        (product, flags)
    }

    /// Trims every string, turns blank optional strings into `None`, takes the spaces and dashes
    /// out of a GTIN, upper-cases the currency, drops blank attributes and unsure names, and
    /// removes control characters other than tab and newline (the catalog never holds them;
    /// [`Product::cleaned`] flags them in a model's answer). Applied to what the model returns and
    /// to what the reviewer saves.
    pub fn normalized(mut self) -> Self {
        self.each_text_mut(|_, text| {
            if let Some(kept) = crate::text::strip_controls(text) {
                *text = kept;
            }
        });
        for spec in PRODUCT_FIELDS {
            match self.slot(spec.key) {
                Slot::Required(text) => *text = text.trim().to_owned(),
                Slot::Text(text) => {
                    *text = text.take().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
                    if spec.kind == FieldKind::Gtin {
                        *text = text.take().map(|g| g.chars().filter(|c| !c.is_whitespace() && *c != '-').collect());
                    }
                }
                Slot::Price(Some(price)) => price.currency = price.currency.trim().to_ascii_uppercase(),
                Slot::NetContent(Some(content)) => content.unit = content.unit.trim().to_owned(),
                Slot::Attributes(attributes) => {
                    attributes.retain(|a| !(a.name.trim().is_empty() && a.value.trim().is_empty()));
                    for a in attributes {
                        a.name = a.name.trim().to_owned();
                        a.value = a.value.trim().to_owned();
                    }
                }
                Slot::FieldNames(names) => names.retain(|f| !f.trim().is_empty()),
                Slot::Price(None) | Slot::NetContent(None) => {}
            }
        }
        self
    }

    /// The scalar fields with a value, as people read them, in schema order: label and text
    /// ([`diff::display_value`]). The CLI prints a product this way.
    pub fn display_rows(&self) -> Vec<(&'static ProductField, String)> {
        PRODUCT_FIELDS
            .iter()
            .filter(|f| f.kind.is_scalar())
            .filter_map(|f| Some((f, diff::display_value(self, f.key)?)))
            .collect()
    }
}

#[cfg(feature = "added-field-test")]
mod added_field;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtin_check_digits() {
        for ok in ["4006381333931", "036000291452", "96385074", "10614141000415", "5901234123457"] {
            assert_eq!(check_gtin(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_gtin("4006381333932"), Err("the check digit should be 1, not 2".into()));
        assert!(check_gtin("40063813339").unwrap_err().contains("not 11"));
        assert!(check_gtin("40063a1333931").unwrap_err().contains("digits only"));
        assert!(check_gtin("").is_err());
        assert_eq!(gtin_key("036000291452"), gtin_key("0036000291452"));
        assert_eq!(gtin_key("96385074"), "00000096385074");
        assert_eq!(gtin_key("12x"), "12x");
    }

    #[test]
    fn field_sources_keep_only_usable_boxes() {
        let answer = serde_json::json!({"name": "Soup", "sources": [
            {"field": "name", "photo": 0, "box_2d": [100, 200, 300, 400]},
            {"field": "name", "photo": 1, "box_2d": [1, 2, 3, 4]},
            {"field": "gtin", "photo": 1, "box_2d": [600.4, 300, 700, 699.6]},
            {"field": "brand", "photo": 2, "box_2d": [1, 2, 3, 4]},
            {"field": "price", "photo": 0, "box_2d": [300, 200, 100, 400]},
            {"field": "color", "photo": 0, "box_2d": [0, 0, 1001, 10]},
            {"field": "size", "photo": 0, "box_2d": [0, 0, 10]},
            {"field": "uncertain_fields", "photo": 0, "box_2d": [0, 0, 10, 10]},
            {"field": "secret", "photo": 0, "box_2d": [0, 0, 10, 10]},
            {"field": "material", "photo": -1, "box_2d": [0, 0, 10, 10]},
            "not an object"
        ]});
        let sources = field_sources(&answer[SOURCES_KEY], 2);
        let kept: Vec<(&str, u32, [u16; 4])> = sources.iter().map(|s| (s.field.as_str(), s.photo, s.box_2d)).collect();
        assert_eq!(kept, [("name", 0, [100, 200, 300, 400]), ("gtin", 1, [600, 300, 700, 700])]);
        assert!(field_sources(&serde_json::Value::Null, 1).is_empty());
        assert!(field_sources(&serde_json::json!({"field": "name"}), 1).is_empty());
        // The schema asks for them last, so the product's fields come first in the answer.
        let schema = response_json_schema();
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys.last().map(|k| k.as_str()), Some(SOURCES_KEY));
    }

    #[test]
    fn currencies() {
        assert!(check_currency("EUR").is_ok());
        assert!(check_currency("USD").is_ok());
        assert!(check_currency("XYZ").unwrap_err().contains("not an ISO 4217"));
        assert!(check_currency("eur").is_err());
        assert!(check_currency("EURO").is_err());
    }

    #[test]
    fn invalid_values_are_flagged_not_dropped() {
        let p = Product {
            name: "Muesli".into(),
            gtin: Some("4006381333932".into()),
            price: Some(Price { amount: -1.0, currency: "EURO".into() }),
            uncertain_fields: vec!["brand".into(), "gtin".into(), "bogus".into()],
            ..Default::default()
        };
        let flags = p.validate();
        let fields: Vec<_> = flags.iter().map(|f| (f.field.as_str(), f.kind)).collect();
        assert_eq!(
            fields,
            vec![
                ("price.amount", FlagKind::Invalid),
                ("price.currency", FlagKind::Invalid),
                ("gtin", FlagKind::Invalid),
                ("brand", FlagKind::Uncertain),
            ]
        );
        assert_eq!(p.gtin.as_deref(), Some("4006381333932"));
        assert!(!p.is_valid());
    }

    #[test]
    fn empty_name_is_invalid() {
        let p = Product { name: "  ".into(), ..Default::default() };
        assert!(!p.is_valid());
        assert!(Product { name: "x".into(), ..Default::default() }.is_valid());
    }

    #[test]
    fn normalization() {
        let p = Product {
            name: "  Oat Drink ".into(),
            brand: Some("   ".into()),
            gtin: Some(" 4006-3813 33931 ".into()),
            price: Some(Price { amount: 2.0, currency: " eur".into() }),
            attributes: vec![Attribute { name: " ".into(), value: "".into() }],
            ..Default::default()
        }
        .normalized();
        assert_eq!(p.name, "Oat Drink");
        assert_eq!(p.brand, None);
        assert_eq!(p.gtin.as_deref(), Some("4006381333931"));
        assert_eq!(p.price.unwrap().currency, "EUR");
        assert!(p.attributes.is_empty());
    }

    /// A model's answer: control characters (NUL, ESC, DEL, C1) removed from every text field
    /// with a flag naming the field, tab and newline kept; every field over its maximum cut at a
    /// character boundary with a flag; the cleaned product validates and its flags allow saving.
    #[test]
    fn a_models_answer_is_cleaned_with_a_flag_per_field() {
        let answer = Product {
            name: "Oat\u{0} Drink\u{1b}[2J".into(),
            brand: Some("Oatly\u{7f}\u{9b}".into()),
            description: Some("Line one\nline\ttwo\r".into()),
            price: Some(Price { amount: 2.0, currency: "E\u{0}UR".into() }),
            attributes: vec![Attribute { name: "Fla\u{0}vor".into(), value: "Vanilla\u{85}".into() }],
            ..Default::default()
        };
        let (p, flags) = answer.cleaned();
        assert_eq!(p.name, "Oat Drink[2J");
        assert_eq!(p.brand.as_deref(), Some("Oatly"));
        assert_eq!(p.description.as_deref(), Some("Line one\nline\ttwo"), "tab and newline stay");
        assert_eq!(p.price.as_ref().unwrap().currency, "EUR");
        assert_eq!((p.attributes[0].name.as_str(), p.attributes[0].value.as_str()), ("Flavor", "Vanilla"));
        let flagged: Vec<_> = flags.iter().map(|f| (f.field.as_str(), f.kind)).collect();
        let removed = FlagKind::ControlCharactersRemoved;
        assert_eq!(
            flagged,
            [
                ("name", removed),
                ("brand", removed),
                ("description", removed),
                ("price.currency", removed),
                ("attributes[0].name", removed),
                ("attributes[0].value", removed)
            ]
        );
        assert_eq!(flags[0].message, "2 control character(s) removed from Gemini's answer");
        assert!(p.is_valid(), "{:?}", p.validate());

        let clean = Product { name: "Oat Drink".into(), description: Some("a\tb\nc".into()), ..Default::default() };
        assert_eq!(clean.clone().cleaned(), (clean, Vec::new()), "nothing to clean: no flag");
    }

    #[test]
    fn a_models_answer_over_a_fields_maximum_is_cut_with_a_flag() {
        let answer = Product {
            name: "é".repeat(300),
            brand: Some("b".repeat(121)),
            description: Some(format!("{} end", "d".repeat(4999))),
            attributes: (0..150).map(|i| Attribute { name: format!("k{i}"), value: "v".repeat(1001) }).collect(),
            ..Default::default()
        };
        let (p, flags) = answer.cleaned();
        assert_eq!(p.name, "é".repeat(255), "cut at a character boundary");
        assert_eq!(p.brand.as_deref().map(str::len), Some(120));
        assert_eq!(p.description.as_deref(), Some("d".repeat(4999).as_str()), "cut, then trimmed");
        assert_eq!(p.attributes.len(), MAX_ATTRIBUTES);
        assert!(p.attributes.iter().all(|a| a.value.chars().count() == 1000));
        let too_long: Vec<_> = flags.iter().filter(|f| f.kind == FlagKind::TooLong).map(|f| f.field.as_str()).collect();
        assert_eq!(&too_long[..4], ["attributes", "name", "brand", "description"]);
        assert_eq!(too_long.len(), 4 + MAX_ATTRIBUTES, "each attribute's value");
        let name = flags.iter().find(|f| f.field == "name").unwrap();
        assert_eq!(name.message, "Gemini's answer was 300 characters long; the first 255 are kept");
        assert!(p.is_valid(), "{:?}", p.validate());

        // Just at the maximum: kept whole, no flag.
        let (p, flags) = Product { name: "n".repeat(255), ..Default::default() }.cleaned();
        assert_eq!((p.name.len(), flags.len()), (255, 0));
    }

    /// A reviewer's value over a field's maximum is invalid (saving is refused, the field says
    /// the maximum); a control character typed or pasted is removed on save.
    #[test]
    fn a_saved_value_over_its_maximum_is_invalid_and_loses_control_characters() {
        let p = Product { name: "n".repeat(256), description: Some("x".repeat(5001)), ..Default::default() };
        let flags = p.validate();
        let invalid: Vec<_> = flags.iter().map(|f| (f.field.as_str(), f.kind, f.message.as_str())).collect();
        assert_eq!(
            invalid,
            [
                ("name", FlagKind::Invalid, "at most 255 characters"),
                ("description", FlagKind::Invalid, "at most 5000 characters")
            ]
        );
        let typed = Product { name: "Oat\u{0}\u{1b} Drink".into(), ..Default::default() }.normalized();
        assert_eq!(typed.name, "Oat Drink");
        assert_eq!(max_chars("attributes[7].value"), Some(1000));
        assert_eq!(max_chars("price.currency"), Some(16));
        assert_eq!(max_chars("uncertain_fields"), None);
    }

    /// Each field's rule is a line of the system instruction, in table order; the unsure list's
    /// comes after the rule on languages, last before the closing line.
    #[test]
    fn the_system_instruction_has_a_line_per_fields_rule() {
        let text = system_instruction();
        let mut at = 0;
        for f in PRODUCT_FIELDS.iter().filter(|f| f.kind != FieldKind::FieldNames) {
            let Some(rule) = f.rule else { continue };
            let line = format!("- {}: {rule}\n", f.name());
            at = at + text[at..].find(&line).unwrap_or_else(|| panic!("{line} missing or out of order"));
        }
        let languages = text.find("- Keep the text in the language printed").unwrap();
        assert!(at < languages && languages < text.find("- uncertain_fields: list the names").unwrap());
        assert!(text.starts_with("You extract product data from a photo"));
        assert!(text.ends_with("\nAnswer with the JSON object only."));
        assert!(!text.contains("- category:"), "a field without a rule has no line");
    }

    #[test]
    fn schema_is_inline_and_requires_name() {
        let schema = response_json_schema();
        let text = schema.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert!(!text.contains("$schema"), "{text}");
        assert_eq!(schema["required"], serde_json::json!(["name"]));
        assert_eq!(schema["type"], "object");
        for field in uncertain_field_names() {
            assert!(schema["properties"].get(field).is_some(), "{field} missing from {text}");
        }
        assert!(schema["properties"]["price"].to_string().contains("currency"));
    }

    fn change(field: &str, before: Option<&str>, after: Option<&str>) -> FieldChange {
        FieldChange { field: field.into(), before: before.map(Into::into), after: after.map(Into::into) }
    }

    #[test]
    fn diff_names_each_changed_field_in_schema_order() {
        let before = Product {
            name: "Oat Drnk".into(),
            brand: Some("Oatly".into()),
            price: Some(Price { amount: 2.5, currency: "EUR".into() }),
            net_content: Some(NetContent { value: 1.0, unit: "l".into() }),
            attributes: vec![
                Attribute { name: "Flavor".into(), value: "Oat".into() },
                Attribute { name: "Vegan".into(), value: "yes".into() },
            ],
            uncertain_fields: vec!["price".into()],
            ..Default::default()
        };
        let after = Product {
            name: "Oat Drink".into(),
            brand: Some("Oatly".into()),
            gtin: Some("4006381333931".into()),
            price: Some(Price { amount: 4.99, currency: "EUR".into() }),
            net_content: Some(NetContent { value: 500.0, unit: "ml".into() }),
            attributes: vec![
                Attribute { name: "Organic".into(), value: "yes".into() },
                Attribute { name: "Flavor".into(), value: "Vanilla".into() },
            ],
            ..Default::default()
        };
        assert_eq!(
            diff(Some(&before), &after),
            [
                change("name", Some("Oat Drnk"), Some("Oat Drink")),
                change("price", Some("2.50 EUR"), Some("4.99 EUR")),
                change("gtin", None, Some("4006381333931")),
                change("net_content", Some("1 l"), Some("500 ml")),
                change("attributes.Organic", None, Some("yes")),
                change("attributes.Flavor", Some("Oat"), Some("Vanilla")),
                change("attributes.Vegan", Some("yes"), None),
                change("uncertain_fields", Some("price"), None),
            ]
        );
        assert!(diff(Some(&after), &after).is_empty());
    }

    #[test]
    fn diff_against_nothing_lists_every_filled_field() {
        let p = Product {
            name: "Yen Snack".into(),
            price: Some(Price { amount: 300.0, currency: "JPY".into() }),
            attributes: vec![
                Attribute { name: "Allergen".into(), value: "Soy".into() },
                Attribute { name: "Allergen".into(), value: "Wheat".into() },
            ],
            ..Default::default()
        };
        assert_eq!(
            diff(None, &p),
            [
                change("name", None, Some("Yen Snack")),
                change("price", None, Some("300 JPY")),
                change("attributes.Allergen", None, Some("Soy; Wheat")),
            ]
        );
        assert_eq!(diff(None, &Product::default()), []);
        assert_eq!(price_text(&Price { amount: 4.999, currency: "EUR".into() }), "4.999 EUR");
        assert_eq!(price_text(&Price { amount: 3.0, currency: "XYZ".into() }), "3.00 XYZ");
    }

    #[test]
    fn take_fields_takes_only_what_is_named() {
        let attr = |name: &str, value: &str| Attribute { name: name.into(), value: value.into() };
        let saved = Product {
            name: "Oat Drink".into(),
            brand: Some("Oatly".into()),
            price: Some(Price { amount: 2.49, currency: "EUR".into() }),
            attributes: vec![attr("Flavor", "Plain"), attr("Pack", "1 l"), attr("Allergen", "Oat")],
            ..Default::default()
        };
        let proposal = Product {
            name: "Oat Drink Barista".into(),
            gtin: Some("7394376616037".into()),
            price: Some(Price { amount: 2.99, currency: "EUR".into() }),
            attributes: vec![attr("Allergen", "Gluten"), attr("Vegan", "yes"), attr("Allergen", "Soy")],
            uncertain_fields: vec!["gtin".into()],
            ..Default::default()
        };
        let take = |fields: &[&str]| {
            let fields: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
            take_fields(&saved, &proposal, &fields)
        };
        let next = take(&["name", "gtin", "brand"]).unwrap();
        assert_eq!(next.name, "Oat Drink Barista");
        assert_eq!(next.gtin.as_deref(), Some("7394376616037"));
        assert_eq!(next.brand, None, "taking an emptied field clears it");
        assert_eq!(next.price, saved.price);
        assert_eq!(next.attributes, saved.attributes);

        // An attribute name stands for every attribute of that name, as in the diff.
        let next = take(&["attributes.Allergen", "attributes.Vegan", "attributes.Pack"]).unwrap();
        assert_eq!(
            next.attributes,
            [attr("Flavor", "Plain"), attr("Allergen", "Gluten"), attr("Allergen", "Soy"), attr("Vegan", "yes")]
        );
        assert_eq!(take(&[]).unwrap(), saved);
        assert_eq!(take(&["bogus"]).unwrap_err().to_string(), "\"bogus\" is not a product field");
    }

    #[test]
    fn the_field_list_is_the_product() {
        let json = serde_json::to_value(Product::default()).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        let mut listed: Vec<&str> = PRODUCT_FIELDS.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(listed.len(), keys.len());
        listed.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(listed, keys);
        for f in PRODUCT_FIELDS {
            assert_eq!(serde_json::to_value(f.key).unwrap(), serde_json::json!(f.key.as_str()));
            assert_eq!(FieldKey::parse(f.key.as_str()), Some(f.key));
        }
        assert!(!uncertain_field_names().any(|f| f == "uncertain_fields"));
    }

    // The property tests (diff, take_fields, validation) are in tests/properties.rs.

    #[test]
    fn tolerant_deserialization() {
        let p: Product = serde_json::from_str(r#"{"name":"X","unknown":1}"#).unwrap();
        assert_eq!(p.name, "X");
        assert!(p.attributes.is_empty());
    }
}
