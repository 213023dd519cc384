//! Two versions of a product side by side: what changed ([`diff`], the review's and the history's
//! view) and a re-extract's changes taken one by one ([`take_fields`]). Both go by the field table
//! and decide by kind.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::{price_text, Attribute, FieldKey, Product, Value, PRODUCT_FIELDS};

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
/// Order: the table's (schema) order. A scalar field is one change; attributes are matched by
/// name, in `after`'s order, then those `before` had and `after` has not, each named
/// "attributes.Flavor"; a name that appears more than once is one change with its values joined
/// by "; "; the unsure list is one change. Values are compared as displayed, so a change always
/// shows two different strings.
pub fn diff(before: Option<&Product>, after: &Product) -> Vec<FieldChange> {
    let empty = Product::default();
    let before = before.unwrap_or(&empty);
    let mut changes = Vec::new();
    let mut push = |field: String, before: Option<String>, after: Option<String>| {
        if before != after {
            changes.push(FieldChange { field, before, after });
        }
    };
    for spec in PRODUCT_FIELDS {
        match (before.value(spec.key), after.value(spec.key)) {
            (Value::Attributes(old), Value::Attributes(new)) => {
                let (old, new) = (attribute_values(old), attribute_values(new));
                let value_of = |attributes: &[(String, String)], name: &str| {
                    attributes.iter().find(|(n, _)| n == name).map(|(_, value)| value.clone())
                };
                for (name, value) in &new {
                    push(spec.part(name), value_of(&old, name), Some(value.clone()));
                }
                for (name, value) in &old {
                    if value_of(&new, name).is_none() {
                        push(spec.part(name), Some(value.clone()), None);
                    }
                }
            }
            (Value::FieldNames(old), Value::FieldNames(new)) => {
                push(spec.name().into(), non_empty(old.join(", ")), non_empty(new.join(", ")));
            }
            _ => push(spec.name().into(), display_value(before, spec.key), display_value(after, spec.key)),
        }
    }
    changes
}

/// A scalar field of `p` as people read it ("4.99 EUR", "500 ml"); `None` when empty, and for
/// the kinds shown their own way (attributes, the unsure list).
pub(super) fn display_value(p: &Product, key: FieldKey) -> Option<String> {
    match p.value(key) {
        Value::Text(text) => text.map(str::to_owned).and_then(non_empty),
        Value::Price(price) => price.map(price_text),
        Value::NetContent(content) => content.map(|c| format!("{} {}", c.value, c.unit).trim().to_string()),
        Value::Attributes(_) | Value::FieldNames(_) => None,
    }
}

/// A name [`take_fields`] was given that is neither a field nor one attribute.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not a product field")]
pub struct UnknownField(pub String);

/// `saved` with the changes named by `fields` taken from `proposal`, as the reviewer ticks them
/// in a re-extract's diff. A name is a [`FieldChange::field`] of [`diff`]: a product field
/// ("price"), or one attribute by name ("attributes.Flavor"), which replaces every attribute of
/// that name with the proposal's (where the first of them was, or at the end when it is new) or
/// removes them when the proposal has none. Taking every change of `diff(saved, proposal)`
/// leaves nothing to diff; taking some leaves exactly the others. An unknown name is refused.
pub fn take_fields(saved: &Product, proposal: &Product, fields: &[String]) -> Result<Product, UnknownField> {
    let mut next = saved.clone();
    let mut from = proposal.clone();
    for name in fields {
        let unknown = || UnknownField(name.clone());
        let (field, attribute) = match name.split_once('.') {
            Some((field, attribute)) => (field, Some(attribute)),
            None => (name.as_str(), None),
        };
        let key = FieldKey::parse(field).ok_or_else(unknown)?;
        match (attribute, next.slot(key)) {
            (None, slot) => slot.swap(from.slot(key)),
            (Some(attribute), super::Slot::Attributes(attributes)) => {
                let Value::Attributes(taken) = proposal.value(key) else { unreachable!("one field, one type") };
                take_attribute(attributes, taken, attribute);
            }
            (Some(_), _) => return Err(unknown()),
        }
    }
    Ok(next)
}

/// Every attribute named `name` in `attributes` replaced by `taken`'s of that name.
fn take_attribute(attributes: &mut Vec<Attribute>, taken: &[Attribute], name: &str) {
    let at = attributes.iter().position(|a| a.name == name).unwrap_or(attributes.len());
    attributes.retain(|a| a.name != name);
    let taken = taken.iter().filter(|a| a.name == name).cloned();
    // Every attribute before `at` has another name, so `at` is still where the first was.
    attributes.splice(at..at, taken);
}

/// Each attribute name once, in first-appearance order, with its values joined by "; ".
fn attribute_values(attributes: &[Attribute]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for attribute in attributes {
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

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}
