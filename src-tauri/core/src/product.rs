//! The product schema: what Gemini is asked for, what the reviewer edits, what the catalog stores.
//!
//! One Rust type, [`Product`], is the single source of truth: the JSON Schema sent to Gemini as
//! `responseJsonSchema` is generated from it (schemars), and so are the UI's TypeScript types
//! (ts-rs). Validation never drops a value: a field that fails a check is kept as it is and
//! reported as a [`FieldFlag`], so the reviewer sees it highlighted and decides.
//!
//! Two things are changed in a model's answer before anyone sees it ([`Product::cleaned`]), each
//! with a flag on the field: control characters other than tab and newline are removed (a NUL
//! cannot be stored on a PostgreSQL catalog, an escape sequence acts on a terminal), and a value
//! longer than its field's maximum ([`MAX_CHARS`]) is cut there.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// A product as extracted from one photo.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(default)]
#[ts(export)]
pub struct Product {
    /// The product's name as printed on the package or label, without the brand if the brand is
    /// a separate word group.
    pub name: String,
    /// The brand or manufacturer.
    pub brand: Option<String>,
    /// A short product category, e.g. "Breakfast cereal", "Running shoes".
    pub category: Option<String>,
    /// One or two sentences describing the product, from what is visible.
    pub description: Option<String>,
    /// The price, only if a price tag or printed price is visible.
    pub price: Option<Price>,
    /// The GTIN / EAN / UPC barcode digits, only if legible (8, 12, 13 or 14 digits).
    pub gtin: Option<String>,
    /// The main color.
    pub color: Option<String>,
    /// The size, e.g. "M", "42", "30 x 40 cm".
    pub size: Option<String>,
    /// The main material.
    pub material: Option<String>,
    /// The net content, e.g. 500 g or 1.5 l.
    pub net_content: Option<NetContent>,
    /// Further attributes visible on the product (e.g. "Flavor": "Vanilla").
    pub attributes: Vec<Attribute>,
    /// The names of the fields above whose values you are unsure of (e.g. ["price", "gtin"]).
    pub uncertain_fields: Vec<String>,
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
    /// Gemini's answer for this field was longer than the field's maximum ([`MAX_CHARS`]) and is
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

/// The most characters (Unicode scalar values) each text field holds, by field as [`FieldFlag`]
/// names it (`attributes[].name` for every attribute's name). A model's longer answer is cut there
/// with a [`FlagKind::TooLong`] flag ([`Product::cleaned`]); a longer value saved in review is
/// invalid ([`Product::validate`]). The name's 255 is Shopify's limit for a product's title, so
/// every saved product exports; the others are generous for what a label shows.
pub const MAX_CHARS: [(&str, usize); 12] = [
    ("name", 255),
    ("brand", 120),
    ("category", 255),
    ("description", 5000),
    ("gtin", 32),
    ("color", 120),
    ("size", 120),
    ("material", 120),
    ("price.currency", 16),
    ("net_content.unit", 32),
    ("attributes[].name", 120),
    ("attributes[].value", 1000),
];

/// The most attributes a product keeps; a model's answer with more keeps the first ones, with a
/// [`FlagKind::TooLong`] flag on `attributes`.
pub const MAX_ATTRIBUTES: usize = 100;

/// The most entries `uncertain_fields` keeps (a model's longer list is cut silently: only field
/// names count, and there are 11).
pub const MAX_UNCERTAIN_FIELDS: usize = 32;

/// The most characters `field` holds (see [`MAX_CHARS`]); `attributes[3].value` is
/// `attributes[].value`'s.
pub fn max_chars(field: &str) -> Option<usize> {
    let general = match field.split_once('[') {
        Some((list, rest)) => rest.split_once(']').map(|(_, tail)| format!("{list}[]{tail}")),
        None => None,
    };
    let field = general.as_deref().unwrap_or(field);
    MAX_CHARS.iter().find(|(name, _)| *name == field).map(|(_, max)| *max)
}

/// A field of [`Product`], by its serialized name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum FieldKey {
    Name,
    Brand,
    Category,
    Description,
    Price,
    Gtin,
    Color,
    Size,
    Material,
    NetContent,
    Attributes,
    UncertainFields,
}

/// What a field holds, which decides how the review form edits it and how a diff shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum FieldKind {
    /// One line of text.
    Text,
    /// A few sentences.
    LongText,
    /// An amount and an ISO 4217 currency.
    Price,
    /// Barcode digits with a check digit.
    Gtin,
    /// A value and a unit.
    NetContent,
    /// Name/value pairs.
    Attributes,
    /// Names of other fields (the model's unsure list).
    FieldNames,
}

/// One field of [`Product`] as people see it: the key, the label, the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct ProductField {
    pub key: FieldKey,
    #[ts(type = "string")]
    pub label: &'static str,
    pub kind: FieldKind,
    /// Saving needs a value.
    pub required: bool,
}

const fn field(key: FieldKey, label: &'static str, kind: FieldKind) -> ProductField {
    ProductField { key, label, kind, required: matches!(key, FieldKey::Name) }
}

/// Every field of [`Product`], in schema order: the one list the review form, the diffs, the
/// re-extract merge and the UI (through the generated bindings) go by.
pub const PRODUCT_FIELDS: [ProductField; 12] = [
    field(FieldKey::Name, "Name", FieldKind::Text),
    field(FieldKey::Brand, "Brand", FieldKind::Text),
    field(FieldKey::Category, "Category", FieldKind::Text),
    field(FieldKey::Description, "Description", FieldKind::LongText),
    field(FieldKey::Price, "Price", FieldKind::Price),
    field(FieldKey::Gtin, "GTIN", FieldKind::Gtin),
    field(FieldKey::Color, "Color", FieldKind::Text),
    field(FieldKey::Size, "Size", FieldKind::Text),
    field(FieldKey::Material, "Material", FieldKind::Text),
    field(FieldKey::NetContent, "Net content", FieldKind::NetContent),
    field(FieldKey::Attributes, "Attributes", FieldKind::Attributes),
    field(FieldKey::UncertainFields, "Unsure fields", FieldKind::FieldNames),
];

impl FieldKey {
    /// The serialized name, e.g. "net_content".
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Brand => "brand",
            Self::Category => "category",
            Self::Description => "description",
            Self::Price => "price",
            Self::Gtin => "gtin",
            Self::Color => "color",
            Self::Size => "size",
            Self::Material => "material",
            Self::NetContent => "net_content",
            Self::Attributes => "attributes",
            Self::UncertainFields => "uncertain_fields",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        PRODUCT_FIELDS.iter().map(|f| f.key).find(|k| k.as_str() == name)
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
        if self.name.trim().is_empty() {
            flags.push(FieldFlag::invalid("name", "a name is required"));
        }
        for (field, value) in self.texts() {
            let max = max_chars(&field).unwrap_or(usize::MAX);
            if value.chars().nth(max).is_some() {
                flags.push(FieldFlag::invalid(field, format!("at most {max} characters")));
            }
        }
        if self.attributes.len() > MAX_ATTRIBUTES {
            flags.push(FieldFlag::invalid("attributes", format!("at most {MAX_ATTRIBUTES} attributes")));
        }
        if let Some(price) = &self.price {
            if !price.amount.is_finite() || price.amount < 0.0 {
                flags.push(FieldFlag::invalid("price.amount", "the price must be zero or more"));
            }
            if let Err(message) = check_currency(&price.currency) {
                flags.push(FieldFlag::invalid("price.currency", message));
            }
        }
        if let Some(gtin) = &self.gtin {
            if let Err(message) = check_gtin(gtin) {
                flags.push(FieldFlag::invalid("gtin", message));
            }
        }
        if let Some(content) = &self.net_content {
            if !content.value.is_finite() || content.value <= 0.0 {
                flags.push(FieldFlag::invalid("net_content.value", "the amount must be more than zero"));
            }
            if content.unit.trim().is_empty() {
                flags.push(FieldFlag::invalid("net_content.unit", "a unit is required, e.g. g or ml"));
            }
        }
        for (i, attribute) in self.attributes.iter().enumerate() {
            if attribute.name.trim().is_empty() {
                flags.push(FieldFlag::invalid(format!("attributes[{i}].name"), "an attribute needs a name"));
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

    /// Every text field with its name as a [`FieldFlag`] names it, in schema order (the unsure
    /// list is not text a person reads).
    fn texts(&self) -> Vec<(String, &str)> {
        let mut texts = vec![("name".to_owned(), self.name.as_str())];
        let optional = [
            ("brand", &self.brand),
            ("category", &self.category),
            ("description", &self.description),
            ("gtin", &self.gtin),
            ("color", &self.color),
            ("size", &self.size),
            ("material", &self.material),
        ];
        texts.extend(optional.into_iter().filter_map(|(f, v)| Some((f.to_owned(), v.as_deref()?))));
        if let Some(price) = &self.price {
            texts.push(("price.currency".into(), &price.currency));
        }
        if let Some(content) = &self.net_content {
            texts.push(("net_content.unit".into(), &content.unit));
        }
        for (i, a) in self.attributes.iter().enumerate() {
            texts.push((format!("attributes[{i}].name"), &a.name));
            texts.push((format!("attributes[{i}].value"), &a.value));
        }
        texts
    }

    /// [`Product::texts`], to change in place.
    fn texts_mut(&mut self) -> Vec<(String, &mut String)> {
        let mut texts = vec![("name".to_owned(), &mut self.name)];
        let optional = [
            ("brand", &mut self.brand),
            ("category", &mut self.category),
            ("description", &mut self.description),
            ("gtin", &mut self.gtin),
            ("color", &mut self.color),
            ("size", &mut self.size),
            ("material", &mut self.material),
        ];
        texts.extend(optional.into_iter().filter_map(|(f, v)| Some((f.to_owned(), v.as_mut()?))));
        if let Some(price) = &mut self.price {
            texts.push(("price.currency".into(), &mut price.currency));
        }
        if let Some(content) = &mut self.net_content {
            texts.push(("net_content.unit".into(), &mut content.unit));
        }
        for (i, a) in self.attributes.iter_mut().enumerate() {
            texts.push((format!("attributes[{i}].name"), &mut a.name));
            texts.push((format!("attributes[{i}].value"), &mut a.value));
        }
        texts
    }

    /// A model's answer made fit for the catalog, with a flag for each change ([`Product::normalized`]
    /// too): control characters other than tab and newline removed from every text
    /// ([`FlagKind::ControlCharactersRemoved`]; NUL, DEL and C1 included), then every text longer
    /// than its maximum ([`MAX_CHARS`]) cut at a character boundary, and attributes beyond
    /// [`MAX_ATTRIBUTES`] dropped ([`FlagKind::TooLong`]).
    pub fn cleaned(mut self) -> (Self, Vec<FieldFlag>) {
        let mut flags = Vec::new();
        for (field, text) in self.texts_mut() {
            if let Some(kept) = crate::text::strip_controls(text) {
                let removed = text.chars().count() - kept.chars().count();
                *text = kept;
                let message = format!("{removed} control character(s) removed from Gemini's answer");
                flags.push(FieldFlag { field, kind: FlagKind::ControlCharactersRemoved, message });
            }
        }
        self.uncertain_fields.truncate(MAX_UNCERTAIN_FIELDS);
        for field in &mut self.uncertain_fields {
            if let Some(kept) = crate::text::strip_controls(field) {
                *field = kept;
            }
        }
        let mut product = self.normalized();
        if product.attributes.len() > MAX_ATTRIBUTES {
            let message =
                format!("Gemini gave {} attributes; the first {MAX_ATTRIBUTES} are kept", product.attributes.len());
            product.attributes.truncate(MAX_ATTRIBUTES);
            flags.push(FieldFlag { field: "attributes".into(), kind: FlagKind::TooLong, message });
        }
        for (field, text) in product.texts_mut() {
            let Some(max) = max_chars(&field) else { continue };
            if let Some(cut) = crate::text::cut_to_chars(text, max) {
                let message =
                    format!("Gemini's answer was {} characters long; the first {max} are kept", text.chars().count());
                *text = cut.trim_end().to_owned();
                flags.push(FieldFlag { field, kind: FlagKind::TooLong, message });
            }
        }
        (product, flags)
    }

    /// Trims every string, turns blank optional strings into `None` and upper-cases the currency,
    /// and removes control characters other than tab and newline (the catalog never holds them;
    /// [`Product::cleaned`] flags them in a model's answer). Applied to what the model returns and
    /// to what the reviewer saves.
    pub fn normalized(mut self) -> Self {
        fn opt(s: Option<String>) -> Option<String> {
            s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
        }
        for (_, text) in self.texts_mut() {
            if let Some(kept) = crate::text::strip_controls(text) {
                *text = kept;
            }
        }
        self.name = self.name.trim().to_string();
        self.brand = opt(self.brand);
        self.category = opt(self.category);
        self.description = opt(self.description);
        self.gtin = opt(self.gtin).map(|g| g.chars().filter(|c| !c.is_whitespace() && *c != '-').collect());
        self.color = opt(self.color);
        self.size = opt(self.size);
        self.material = opt(self.material);
        if let Some(price) = &mut self.price {
            price.currency = price.currency.trim().to_ascii_uppercase();
        }
        if let Some(content) = &mut self.net_content {
            content.unit = content.unit.trim().to_string();
        }
        self.attributes.retain(|a| !(a.name.trim().is_empty() && a.value.trim().is_empty()));
        for a in &mut self.attributes {
            a.name = a.name.trim().to_string();
            a.value = a.value.trim().to_string();
        }
        self.uncertain_fields.retain(|f| !f.trim().is_empty());
        self
    }
}

/// One field that differs between two versions of a product, as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct FieldChange {
    /// A [`Product`] field ("name", "price", "net_content", "uncertain_fields", ...) or one
    /// attribute, by name: "attributes.Flavor".
    pub field: String,
    /// The value before, for display ("4.99 EUR", "500 ml"); `None` when it was empty.
    pub before: Option<String>,
    /// The value after; `None` when it is now empty (removed).
    pub after: Option<String>,
}

/// What changed from `before` to `after`, one [`FieldChange`] per field whose displayed value
/// differs; `before: None` compares against an empty product, so every filled field of `after`
/// is a change.
///
/// Order: the schema's fields (name, brand, category, description, price, gtin, color, size,
/// material, net_content), then the attributes in `after`'s order, then attributes `before` had
/// and `after` has not, then `uncertain_fields` as one field. Attributes are matched by name; a
/// name that appears more than once is one change with its values joined by "; ". Values are
/// compared as displayed, so a change always shows two different strings.
pub fn diff(before: Option<&Product>, after: &Product) -> Vec<FieldChange> {
    let empty = Product::default();
    let before = before.unwrap_or(&empty);
    let mut changes = Vec::new();
    let mut push = |field: String, before: Option<String>, after: Option<String>| {
        if before != after {
            changes.push(FieldChange { field, before, after });
        }
    };
    for f in PRODUCT_FIELDS.iter().filter(|f| is_scalar(f.kind)) {
        push(f.key.as_str().to_string(), display_value(before, f.key), display_value(after, f.key));
    }
    let old_attributes = attribute_values(before);
    let new_attributes = attribute_values(after);
    let value_of = |attributes: &[(String, String)], name: &str| {
        attributes.iter().find(|(n, _)| n == name).map(|(_, value)| value.clone())
    };
    for (name, value) in &new_attributes {
        push(format!("attributes.{name}"), value_of(&old_attributes, name), Some(value.clone()));
    }
    for (name, value) in &old_attributes {
        if value_of(&new_attributes, name).is_none() {
            push(format!("attributes.{name}"), Some(value.clone()), None);
        }
    }
    let uncertain = |p: &Product| non_empty(p.uncertain_fields.join(", "));
    push("uncertain_fields".into(), uncertain(before), uncertain(after));
    changes
}

/// A field [`diff`] shows as one value (attributes and the unsure list are shown their own way).
fn is_scalar(kind: FieldKind) -> bool {
    !matches!(kind, FieldKind::Attributes | FieldKind::FieldNames)
}

/// A scalar field of `p` as [`diff`] displays it; `None` when empty.
fn display_value(p: &Product, key: FieldKey) -> Option<String> {
    let text = |value: &Option<String>| value.clone().and_then(non_empty);
    match key {
        FieldKey::Name => non_empty(p.name.clone()),
        FieldKey::Brand => text(&p.brand),
        FieldKey::Category => text(&p.category),
        FieldKey::Description => text(&p.description),
        FieldKey::Price => p.price.as_ref().map(price_text),
        FieldKey::Gtin => text(&p.gtin),
        FieldKey::Color => text(&p.color),
        FieldKey::Size => text(&p.size),
        FieldKey::Material => text(&p.material),
        FieldKey::NetContent => p.net_content.as_ref().map(|c| format!("{} {}", c.value, c.unit).trim().to_string()),
        FieldKey::Attributes | FieldKey::UncertainFields => None,
    }
}

/// `saved` with the changes named by `fields` taken from `proposal`, as the reviewer ticks them
/// in a re-extract's diff. A name is a [`FieldChange::field`] of [`diff`]: a product field
/// ("price"), or one attribute by name ("attributes.Flavor"), which replaces every attribute of
/// that name with the proposal's (where the first of them was, or at the end when it is new) or
/// removes them when the proposal has none. Taking every change of `diff(saved, proposal)`
/// leaves nothing to diff; taking some leaves exactly the others. An unknown name is refused.
pub fn take_fields(saved: &Product, proposal: &Product, fields: &[String]) -> Result<Product, String> {
    let mut next = saved.clone();
    for name in fields {
        if let Some(attribute) = name.strip_prefix("attributes.") {
            let at = next.attributes.iter().position(|a| a.name == attribute).unwrap_or(next.attributes.len());
            next.attributes.retain(|a| a.name != attribute);
            let taken = proposal.attributes.iter().filter(|a| a.name == attribute).cloned();
            // Every attribute before `at` has another name, so `at` is still where the first was.
            next.attributes.splice(at..at, taken);
            continue;
        }
        let key = FieldKey::parse(name).ok_or_else(|| format!("\"{name}\" is not a product field"))?;
        match key {
            FieldKey::Name => next.name = proposal.name.clone(),
            FieldKey::Brand => next.brand = proposal.brand.clone(),
            FieldKey::Category => next.category = proposal.category.clone(),
            FieldKey::Description => next.description = proposal.description.clone(),
            FieldKey::Price => next.price = proposal.price.clone(),
            FieldKey::Gtin => next.gtin = proposal.gtin.clone(),
            FieldKey::Color => next.color = proposal.color.clone(),
            FieldKey::Size => next.size = proposal.size.clone(),
            FieldKey::Material => next.material = proposal.material.clone(),
            FieldKey::NetContent => next.net_content = proposal.net_content.clone(),
            FieldKey::Attributes => next.attributes = proposal.attributes.clone(),
            FieldKey::UncertainFields => next.uncertain_fields = proposal.uncertain_fields.clone(),
        }
    }
    Ok(next)
}

/// Each attribute name once, in first-appearance order, with its values joined by "; ".
fn attribute_values(p: &Product) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for attribute in &p.attributes {
        match out.iter_mut().find(|(name, _)| *name == attribute.name) {
            Some((_, value)) => {
                value.push_str("; ");
                value.push_str(&attribute.value);
            }
            None => out.push((attribute.name.clone(), attribute.value.clone())),
        }
    }
    out
}

/// "4.99 EUR": the amount with the currency's minor digits (2 when unknown), or every digit it
/// needs when that would round it ("4.999 EUR").
pub fn price_text(price: &Price) -> String {
    let digits = iso_currency::Currency::from_code(&price.currency).and_then(|c| c.exponent()).unwrap_or(2);
    let fixed = format!("{:.*}", usize::from(digits), price.amount);
    let amount = if fixed.parse::<f64>().ok() == Some(price.amount) { fixed } else { price.amount.to_string() };
    format!("{amount} {}", price.currency).trim().to_string()
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// Checks a GTIN-8/12/13/14 (EAN, UPC): digits only, a valid length and the GS1 check digit.
pub fn check_gtin(gtin: &str) -> Result<(), String> {
    if gtin.is_empty() || !gtin.bytes().all(|b| b.is_ascii_digit()) {
        return Err("a GTIN has digits only".into());
    }
    if ![8, 12, 13, 14].contains(&gtin.len()) {
        return Err(format!("a GTIN has 8, 12, 13 or 14 digits, not {}", gtin.len()));
    }
    let digits: Vec<u32> = gtin.bytes().map(|b| u32::from(b - b'0')).collect();
    let (body, check) = digits.split_at(digits.len() - 1);
    // GS1: from the right, weights 3, 1, 3, ... over the body.
    let sum: u32 = body.iter().rev().enumerate().map(|(i, d)| if i % 2 == 0 { d * 3 } else { *d }).sum();
    let expected = (10 - sum % 10) % 10;
    if expected == check[0] {
        Ok(())
    } else {
        Err(format!("the check digit should be {expected}, not {}", check[0]))
    }
}

/// A GTIN in GS1's 14-digit form (left-padded with zeros), the key to compare GTINs by: a GTIN-12
/// `036000291452` and the GTIN-13 `0036000291452` are the same product. Meant for a GTIN that
/// passed [`check_gtin`]; anything else is returned as it is.
pub fn gtin_key(gtin: &str) -> String {
    if check_gtin(gtin).is_ok() {
        format!("{gtin:0>14}")
    } else {
        gtin.to_owned()
    }
}

/// Checks an ISO 4217 currency code.
pub fn check_currency(code: &str) -> Result<(), String> {
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!("\"{code}\" is not a three-letter ISO 4217 code such as EUR"));
    }
    match iso_currency::Currency::from_code(code) {
        Some(_) => Ok(()),
        None => Err(format!("\"{code}\" is not an ISO 4217 currency")),
    }
}

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
        // Only the name is required from the model; `#[serde(default)]` makes schemars list none.
        obj.insert("required".into(), serde_json::json!(["name"]));
        // Last, so Gemini writes the product first (it writes in the schema's order).
        if let Some(serde_json::Value::Object(properties)) = obj.get_mut("properties") {
            properties.insert(SOURCES_KEY.into(), sources_schema());
        }
    }
    value
}

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
        assert_eq!(take(&["bogus"]).unwrap_err(), "\"bogus\" is not a product field");
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
