//! The field table's machinery: what a field is ([`ProductField`], [`FieldKind`]), how a field's
//! value is read and written whatever its Rust type ([`Value`], [`Slot`]), and the macro that
//! turns the one list of fields in [`super`] into the [`super::Product`] struct, the
//! [`super::FieldKey`] enum and [`super::PRODUCT_FIELDS`].
//!
//! Everything that goes field by field (validation, cleaning, normalization, the review diff, a
//! re-extract's take, the prompt's rules, the CSV export, the CLI's text, the UI's form through the
//! bindings) iterates [`super::PRODUCT_FIELDS`] and decides by [`FieldKind`], never by a field's
//! name. What a kind means is written once, here or in the module that owns the format.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::{Attribute, FieldKey, NetContent, Price};

/// What a field holds, which decides how it is checked, normalized, diffed, exported and edited.
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

impl FieldKind {
    /// Every kind.
    pub const ALL: [FieldKind; 7] =
        [Self::Text, Self::LongText, Self::Price, Self::Gtin, Self::NetContent, Self::Attributes, Self::FieldNames];

    /// The two parts of a kind edited and flagged as two values ("price.amount", "price.currency"),
    /// the first a number; `None` for a kind that is one value or a list.
    pub const fn parts(self) -> Option<[&'static str; 2]> {
        match self {
            Self::Price => Some(["amount", "currency"]),
            Self::NetContent => Some(["value", "unit"]),
            _ => None,
        }
    }

    /// One text value: a line, sentences or barcode digits.
    pub const fn is_text(self) -> bool {
        matches!(self, Self::Text | Self::LongText | Self::Gtin)
    }

    /// Shown as one value in a diff and the CLI (attributes and the unsure list have their own ways).
    pub const fn is_scalar(self) -> bool {
        !matches!(self, Self::Attributes | Self::FieldNames)
    }

    /// The most characters of a part ("currency", "unit", an attribute's "name" and "value"): the
    /// same for every field of the kind.
    pub const fn part_max_chars(self, part: &str) -> Option<usize> {
        match (self, part.as_bytes()) {
            (Self::Price, b"currency") => Some(16),
            (Self::NetContent, b"unit") => Some(32),
            (Self::Attributes, b"name") => Some(120),
            (Self::Attributes, b"value") => Some(1000),
            _ => None,
        }
    }
}

/// A kind edited and flagged as two values, with their names: the UI's form reads these
/// ([`kind_parts`], exported to the bindings) instead of knowing "amount" and "unit" itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct KindParts {
    pub kind: FieldKind,
    #[ts(type = "readonly [string, string]")]
    pub parts: [&'static str; 2],
}

/// [`FieldKind::parts`] of every kind that has two.
pub fn kind_parts() -> Vec<KindParts> {
    FieldKind::ALL.into_iter().filter_map(|kind| Some(KindParts { kind, parts: kind.parts()? })).collect()
}

/// One field of a [`super::Product`]: the field table's entry. Exported to the UI (without the prompt's
/// rule, which only Gemini reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct ProductField {
    pub key: FieldKey,
    /// How people see the field's name ("Net content").
    #[ts(type = "string")]
    pub label: &'static str,
    pub kind: FieldKind,
    /// Saving needs a value.
    pub required: bool,
    /// The most characters (Unicode scalar values) a text field holds; a model's longer answer is
    /// cut there with a flag, a longer value saved in review is invalid.
    pub max_chars: Option<u32>,
    /// Denormalized into the catalog's `products` row, for the table, sorting and filters
    /// (`catalog::queries::listed_column_names`; a test holds both schemas to it).
    pub listed: bool,
    /// What the model is told about this field, one line of the system instruction
    /// ([`super::system_instruction`]); `None` when the schema's description says enough.
    #[serde(skip)]
    #[ts(skip)]
    pub rule: Option<&'static str>,
}

impl ProductField {
    /// An optional field that is not listed and has no rule: the base every entry fills in.
    pub const OPTIONAL: ProductField = ProductField {
        key: FieldKey::Name,
        label: "",
        kind: FieldKind::Text,
        required: false,
        max_chars: None,
        listed: false,
        rule: None,
    };

    /// The serialized name, e.g. "net_content".
    pub fn name(&self) -> &'static str {
        self.key.as_str()
    }

    /// The name of one part of this field, as a flag names it: "price.currency".
    pub fn part(&self, part: &str) -> String {
        format!("{}.{part}", self.key.as_str())
    }

    /// The field as flat columns (a CSV's, the catalog's listed ones): one named after it, or one
    /// per part of a two-part kind (`price_amount`, `price_currency`).
    pub fn column_names(&self) -> Vec<String> {
        match self.kind.parts() {
            Some(parts) => parts.iter().map(|part| format!("{}_{part}", self.name())).collect(),
            None => vec![self.name().to_owned()],
        }
    }
}

/// A field's value, read whatever its Rust type. A blank required text is `Text(Some(""))`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Text(Option<&'a str>),
    Price(Option<&'a Price>),
    NetContent(Option<&'a NetContent>),
    Attributes(&'a [Attribute]),
    FieldNames(&'a [String]),
}

/// A field's value, to change in place.
#[derive(Debug)]
pub enum Slot<'a> {
    /// A text that is always there (the name).
    Required(&'a mut String),
    Text(&'a mut Option<String>),
    Price(&'a mut Option<Price>),
    NetContent(&'a mut Option<NetContent>),
    Attributes(&'a mut Vec<Attribute>),
    FieldNames(&'a mut Vec<String>),
}

impl Slot<'_> {
    /// Exchanges the values of two slots of the same field (of two products).
    pub fn swap(self, other: Slot<'_>) {
        use std::mem::swap;
        match (self, other) {
            (Slot::Required(a), Slot::Required(b)) => swap(a, b),
            (Slot::Text(a), Slot::Text(b)) => swap(a, b),
            (Slot::Price(a), Slot::Price(b)) => swap(a, b),
            (Slot::NetContent(a), Slot::NetContent(b)) => swap(a, b),
            (Slot::Attributes(a), Slot::Attributes(b)) => swap(a, b),
            (Slot::FieldNames(a), Slot::FieldNames(b)) => swap(a, b),
            (a, b) => unreachable!("one field has one type: {a:?} and {b:?}"),
        }
    }
}

/// The Rust types a field may have, each read as a [`Value`] and written as a [`Slot`].
pub trait FieldType {
    fn value(&self) -> Value<'_>;
    fn slot(&mut self) -> Slot<'_>;
}

impl FieldType for String {
    fn value(&self) -> Value<'_> {
        Value::Text(Some(self))
    }
    fn slot(&mut self) -> Slot<'_> {
        Slot::Required(self)
    }
}

impl FieldType for Option<String> {
    fn value(&self) -> Value<'_> {
        Value::Text(self.as_deref())
    }
    fn slot(&mut self) -> Slot<'_> {
        Slot::Text(self)
    }
}

impl FieldType for Option<Price> {
    fn value(&self) -> Value<'_> {
        Value::Price(self.as_ref())
    }
    fn slot(&mut self) -> Slot<'_> {
        Slot::Price(self)
    }
}

impl FieldType for Option<NetContent> {
    fn value(&self) -> Value<'_> {
        Value::NetContent(self.as_ref())
    }
    fn slot(&mut self) -> Slot<'_> {
        Slot::NetContent(self)
    }
}

impl FieldType for Vec<Attribute> {
    fn value(&self) -> Value<'_> {
        Value::Attributes(self)
    }
    fn slot(&mut self) -> Slot<'_> {
        Slot::Attributes(self)
    }
}

impl FieldType for Vec<String> {
    fn value(&self) -> Value<'_> {
        Value::FieldNames(self)
    }
    fn slot(&mut self) -> Slot<'_> {
        Slot::FieldNames(self)
    }
}

/// Writes the product's struct, [`FieldKey`] and `PRODUCT_FIELDS` from one list of entries:
///
/// ```text
/// /// The doc comment: the field's description in the JSON Schema Gemini gets.
/// brand: Option<String> as Brand { label: "Brand", max_chars: Some(120), ..ProductField::OPTIONAL },
/// ```
///
/// An entry may start with `#[cfg(...)]` (the test build's extra field does).
macro_rules! product_fields {
    (
        $(#[$struct_meta:meta])*
        pub struct $product:ident {
            $(
                $(#[cfg($cfg:meta)])?
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty as $key:ident { $($entry:tt)* }
            ),* $(,)?
        }
    ) => {
        $(#[$struct_meta])*
        pub struct $product {
            $(
                $(#[cfg($cfg)])?
                $(#[doc = $doc])*
                pub $field: $ty,
            )*
        }

        /// A field of [`Product`], by its serialized name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
        #[serde(rename_all = "snake_case")]
        #[ts(export)]
        pub enum FieldKey {
            $(
                $(#[cfg($cfg)])?
                $key,
            )*
        }

        impl FieldKey {
            /// The serialized name, e.g. "net_content".
            pub fn as_str(self) -> &'static str {
                match self {
                    $(
                        $(#[cfg($cfg)])?
                        Self::$key => stringify!($field),
                    )*
                }
            }

            pub fn parse(name: &str) -> Option<Self> {
                PRODUCT_FIELDS.iter().map(|f| f.key).find(|k| k.as_str() == name)
            }
        }

        /// Every field of [`Product`], in schema order: the one table everything that goes field
        /// by field reads (the UI through the generated bindings).
        pub const PRODUCT_FIELDS: &[ProductField] = &[
            $(
                $(#[cfg($cfg)])?
                ProductField { key: FieldKey::$key, $($entry)* },
            )*
        ];

        impl $product {
            /// The value of field `key`.
            pub fn value(&self, key: FieldKey) -> Value<'_> {
                match key {
                    $(
                        $(#[cfg($cfg)])?
                        FieldKey::$key => FieldType::value(&self.$field),
                    )*
                }
            }

            /// Field `key`, to change in place.
            pub fn slot(&mut self, key: FieldKey) -> Slot<'_> {
                match key {
                    $(
                        $(#[cfg($cfg)])?
                        FieldKey::$key => FieldType::slot(&mut self.$field),
                    )*
                }
            }
        }
    };
}

pub(super) use product_fields;
