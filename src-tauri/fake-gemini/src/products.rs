//! What the fake "sees" in a photo, shaped to fit whatever `responseJsonSchema` the client sent:
//! for a demo photo ([`crate::demo_photos`]) what it really shows; for any other photo one of six
//! built-in products, picked by hashing the image bytes, marked as invented in its name and
//! description so that nobody mistakes it for something read from the photo.

use serde_json::{json, Map, Value};

/// The built-in products, in the field names of the core's `pe_core::product::Product` (the core's
/// `gemini_client` tests check that each one fits its schema and reads back unchanged).
///
/// - the shoe lists `size` in `uncertain_fields` (the review UI shows an "uncertain" flag);
/// - the shampoo's GTIN has a wrong check digit (should be 6): the review UI shows it invalid.
pub fn catalog() -> Vec<Value> {
    vec![
        json!({
            "name": "Crunchy Oat Granola", "brand": "Morning Field", "category": "Breakfast cereal",
            "description": "Baked oat clusters with honey and almonds in a resealable bag.",
            "price": {"amount": 3.49, "currency": "EUR"}, "gtin": "4006381333931",
            "color": null, "size": null, "material": null,
            "net_content": {"value": 500.0, "unit": "g"},
            "attributes": [{"name": "Flavor", "value": "Honey & Almond"}, {"name": "Diet", "value": "Vegetarian"}],
            "uncertain_fields": []
        }),
        json!({
            "name": "Trail Runner 3", "brand": "Stridewell", "category": "Running shoes",
            "description": "Lightweight trail running shoe with a lugged rubber sole.",
            "price": {"amount": 89.95, "currency": "USD"}, "gtin": "7612345678900",
            "color": "Blue", "size": "42", "material": "Mesh",
            "net_content": null,
            "attributes": [{"name": "Drop", "value": "6 mm"}],
            "uncertain_fields": ["size"]
        }),
        json!({
            "name": "Repair & Shine Shampoo", "brand": "Alpenkraut", "category": "Shampoo",
            "description": "Shampoo for dry and damaged hair with herbal extracts.",
            "price": {"amount": 4.95, "currency": "EUR"}, "gtin": "8712345678903",
            "color": null, "size": null, "material": null,
            "net_content": {"value": 250.0, "unit": "ml"},
            "attributes": [{"name": "Hair type", "value": "Dry, damaged"}, {"name": "Scent", "value": "Chamomile"}],
            "uncertain_fields": []
        }),
        json!({
            "name": "Espresso Roast Whole Beans", "brand": "Casa Tostada", "category": "Coffee",
            "description": "Dark roasted whole coffee beans for espresso.",
            "price": {"amount": 15.99, "currency": "EUR"}, "gtin": "5901234123457",
            "color": null, "size": null, "material": null,
            "net_content": {"value": 1.0, "unit": "kg"},
            "attributes": [{"name": "Roast", "value": "Dark"}, {"name": "Origin", "value": "Brazil, Colombia"}],
            "uncertain_fields": []
        }),
        json!({
            "name": "Stoneware Mug", "brand": "Hearth & Clay", "category": "Mugs",
            "description": "Glazed stoneware mug with a rounded handle.",
            "price": {"amount": 12.0, "currency": "GBP"}, "gtin": null,
            "color": "Sage green", "size": "350 ml", "material": "Stoneware",
            "net_content": null,
            "attributes": [{"name": "Dishwasher safe", "value": "Yes"}],
            "uncertain_fields": []
        }),
        json!({
            "name": "Extra Virgin Olive Oil", "brand": "Oliveto Verde", "category": "Cooking oil",
            "description": "Cold-extracted extra virgin olive oil in a dark glass bottle.",
            "price": {"amount": 8.99, "currency": "EUR"}, "gtin": "8001234567897",
            "color": null, "size": null, "material": null,
            "net_content": {"value": 750.0, "unit": "ml"},
            "attributes": [{"name": "Origin", "value": "Italy"}],
            "uncertain_fields": []
        }),
    ]
}

/// FNV-1a: a stable hash of the image, so the same photo always shows the same product.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// Appended to the name of every invented product.
pub const INVENTED_NAME_SUFFIX: &str = " (invented by the demo)";

/// The start of every invented product's description.
pub const INVENTED_NOTE: &str =
    "Invented by the demo: this photo is not one of the demo's sample photos, so nothing here was read from it.";

/// The product the fake "sees" in these image bytes: what a demo photo shows, else an invented
/// product that says so.
pub fn product_for_image(image: &[u8]) -> Value {
    match crate::demo_photos::recognize(image) {
        Some(photo) => photo.product(),
        None => invented_product(image),
    }
}

/// The product the fake "sees" in a request's photos (one product from several sides): what the
/// demo photos among them show together — each field from the first photo that shows it, the
/// attributes of all of them — else an invented product from the first photo.
pub fn product_for_images(images: &[Vec<u8>]) -> Value {
    let seen: Vec<(usize, &crate::demo_photos::DemoPhoto)> =
        images.iter().enumerate().filter_map(|(i, image)| Some((i, crate::demo_photos::recognize(image)?))).collect();
    let Some(((_, first), rest)) = seen.split_first() else {
        return invented_product(images.first().map(Vec::as_slice).unwrap_or(&[]));
    };
    let mut product = first.product();
    for (_, other) in rest {
        combine(&mut product, other.product());
    }
    // Where each field is printed: the first photo that shows it (as `sources` in the answer,
    // when the request's schema asks for them).
    let mut sources: Vec<Value> = Vec::new();
    for (index, photo) in &seen {
        for (field, box_2d) in photo.sources {
            if !sources.iter().any(|s| s["field"] == *field) {
                sources.push(json!({"field": field, "photo": index, "box_2d": box_2d}));
            }
        }
    }
    if !sources.is_empty() {
        product["sources"] = Value::Array(sources);
    }
    product
}

/// Fills `into`'s missing fields from `other` and adds the attributes it lacks.
fn combine(into: &mut Value, other: Value) {
    let (Value::Object(into), Value::Object(other)) = (into, other) else { return };
    for (key, value) in other {
        match (into.get_mut(&key), value) {
            (Some(Value::Array(mine)), Value::Array(theirs)) if key == "attributes" => {
                for attribute in theirs {
                    if !mine.iter().any(|a| a["name"] == attribute["name"]) {
                        mine.push(attribute);
                    }
                }
            }
            (Some(slot @ Value::Null), value) => *slot = value,
            (None, value) => {
                into.insert(key, value);
            }
            _ => {}
        }
    }
}

/// One of the built-in products, chosen by hashing the image bytes (the same photo always gets
/// the same one), its name and description saying it was invented.
pub fn invented_product(image: &[u8]) -> Value {
    let all = catalog();
    let index = (fnv1a(image) % all.len() as u64) as usize;
    let mut product = all[index].clone();
    let name = format!("{}{INVENTED_NAME_SUFFIX}", product["name"].as_str().unwrap_or_default());
    let description = format!("{INVENTED_NOTE} {}", product["description"].as_str().unwrap_or_default());
    product["name"] = Value::String(name);
    product["description"] = Value::String(description.trim_end().to_string());
    product
}

/// A value that fits `schema`, taking values from `source` where they fit.
///
/// Understands `type` (a string or an array with `"null"`), `properties`/`required`, `items`,
/// `enum`, `const`, `anyOf`/`oneOf`/`allOf` and OpenAPI's `nullable`. Optional properties without
/// a source value are sent as `null` when the schema allows it, else left out.
pub fn fit_to_schema(schema: &Value, source: Option<&Value>) -> Value {
    fit(schema, source.filter(|v| !v.is_null()), 0)
}

fn fit(schema: &Value, source: Option<&Value>, depth: usize) -> Value {
    let Some(obj) = schema.as_object() else {
        // `true` or a non-object schema: anything goes.
        return source.cloned().unwrap_or(Value::Null);
    };
    if depth > 16 {
        return Value::Null;
    }
    if let Some(c) = obj.get("const") {
        return c.clone();
    }
    if let Some(Value::Array(options)) = obj.get("enum") {
        if let Some(s) = source.filter(|s| options.contains(s)) {
            return s.clone();
        }
        if source.is_none() && options.contains(&Value::Null) {
            return Value::Null;
        }
        return options.iter().find(|o| !o.is_null()).cloned().unwrap_or(Value::Null);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alternatives)) = obj.get(key) {
            if source.is_none() && alternatives.iter().any(allows_null) {
                return Value::Null;
            }
            let chosen = source
                .and_then(|s| alternatives.iter().find(|a| !is_only_null(a) && accepts_kind(a, s)))
                .or_else(|| alternatives.iter().find(|a| !is_only_null(a)))
                .or(alternatives.first());
            return chosen.map(|a| fit(a, source, depth + 1)).unwrap_or(Value::Null);
        }
    }
    if let Some(Value::Array(all)) = obj.get("allOf") {
        if let Some(first) = all.first() {
            return fit(first, source, depth + 1);
        }
    }
    let types = types_of(obj);
    let nullable = types.iter().any(|t| t == "null") || obj.get("nullable") == Some(&Value::Bool(true));
    if source.is_none() && nullable {
        return Value::Null;
    }
    let non_null: Vec<&str> = types.iter().map(String::as_str).filter(|t| *t != "null").collect();
    let ty = source
        .and_then(|s| non_null.iter().copied().find(|t| kind_matches(t, s)))
        .or_else(|| non_null.first().copied());
    match ty {
        Some("object") => {
            let required: Vec<&str> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = Map::new();
            if let Some(Value::Object(props)) = obj.get("properties") {
                for (name, sub) in props {
                    let value = source.and_then(|s| s.get(name)).filter(|v| !v.is_null());
                    if value.is_some() || required.contains(&name.as_str()) || allows_null(sub) {
                        out.insert(name.clone(), fit(sub, value, depth + 1));
                    }
                }
            }
            Value::Object(out)
        }
        Some("array") => {
            let items = obj.get("items").cloned().unwrap_or(Value::Bool(true));
            let max = obj.get("maxItems").and_then(Value::as_u64).unwrap_or(u64::MAX) as usize;
            match source {
                Some(Value::Array(values)) => {
                    Value::Array(values.iter().take(max).map(|v| fit(&items, Some(v), depth + 1)).collect())
                }
                _ => Value::Array(Vec::new()),
            }
        }
        Some("string") => match source {
            Some(Value::String(s)) => Value::String(s.clone()),
            Some(Value::Number(n)) => Value::String(n.to_string()),
            Some(Value::Bool(b)) => Value::String(b.to_string()),
            Some(Value::Object(o)) => o.values().find(|v| v.is_string()).cloned().unwrap_or_else(|| json!("")),
            _ => json!(""),
        },
        Some("number") => match source.and_then(as_number) {
            Some(n) => json!(n),
            None => json!(0.0),
        },
        Some("integer") => match source.and_then(as_number) {
            Some(n) => json!(n.round() as i64),
            None => json!(0),
        },
        Some("boolean") => Value::Bool(source.and_then(Value::as_bool).unwrap_or(false)),
        Some(_) | None => source.cloned().unwrap_or(Value::Null),
    }
}

fn types_of(obj: &Map<String, Value>) -> Vec<String> {
    match obj.get("type") {
        Some(Value::String(t)) => vec![t.to_ascii_lowercase()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).map(str::to_ascii_lowercase).collect(),
        _ if obj.contains_key("properties") => vec!["object".into()],
        _ if obj.contains_key("items") => vec!["array".into()],
        _ => Vec::new(),
    }
}

fn allows_null(schema: &Value) -> bool {
    let Some(obj) = schema.as_object() else { return true };
    types_of(obj).iter().any(|t| t == "null")
        || obj.get("nullable") == Some(&Value::Bool(true))
        || ["anyOf", "oneOf"]
            .iter()
            .any(|k| obj.get(*k).and_then(Value::as_array).is_some_and(|a| a.iter().any(allows_null)))
}

fn is_only_null(schema: &Value) -> bool {
    schema.as_object().is_some_and(|o| {
        let t = types_of(o);
        !t.is_empty() && t.iter().all(|t| t == "null")
    })
}

fn accepts_kind(schema: &Value, value: &Value) -> bool {
    match schema.as_object() {
        Some(o) => {
            let t = types_of(o);
            t.is_empty() || t.iter().any(|t| kind_matches(t, value))
        }
        None => true,
    }
}

fn kind_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|n| n.fract() == 0.0),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

/// A number from a number, a numeric string, or an object's first numeric field (`{amount}`).
fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Object(o) => o.values().find_map(Value::as_f64),
        _ => None,
    }
}

/// The input tokens one image is billed for, by Google's published rules (gemini-api.md, "Media
/// resolution"), for the concrete `model` and the request's `generationConfig.mediaResolution`:
///
/// - Gemini 3: a fixed count per image by level: low 280, medium 560, high 1120 (also when unset:
///   high is the default for images), ultra high 2240; the image's size does not matter.
/// - Gemini 2.x and models the fake does not know: low 64, medium 256, high 256 (the SDK's enum
///   text: "zoomed reframing with 256 tokens"); unset, the tile rule: 258 for an image with both
///   sides ≤ 384 px, else 258 per 768×768 tile. Dimensions come from the JPEG or PNG header;
///   unknown formats count 258.
pub fn image_tokens(image: &[u8], model: &str, media_resolution: Option<&str>) -> u32 {
    let level = media_resolution.and_then(|r| r.strip_prefix("MEDIA_RESOLUTION_")).unwrap_or("UNSPECIFIED");
    if model.starts_with("gemini-3") {
        return match level {
            "LOW" => 280,
            "MEDIUM" => 560,
            "ULTRA_HIGH" => 2240,
            _ => 1120,
        };
    }
    match level {
        "LOW" => 64,
        "MEDIUM" | "HIGH" => 256,
        _ => match image_dimensions(image) {
            Some((w, h)) if w > 384 || h > 384 => w.div_ceil(768).max(1) * h.div_ceil(768).max(1) * 258,
            _ => 258,
        },
    }
}

/// Width and height from a PNG IHDR or a JPEG SOFn marker, without decoding.
pub fn image_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() >= 24 && b.starts_with(b"\x89PNG\r\n\x1a\n") && &b[12..16] == b"IHDR" {
        let w = u32::from_be_bytes(b[16..20].try_into().ok()?);
        let h = u32::from_be_bytes(b[20..24].try_into().ok()?);
        return Some((w, h));
    }
    if !b.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    let mut i = 2;
    while i + 4 <= b.len() {
        if b[i] != 0xFF {
            return None;
        }
        let marker = b[i + 1];
        if marker == 0xFF {
            i += 1;
            continue;
        }
        if marker == 0x01 || (0xD0..=0xD9).contains(&marker) {
            i += 2;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        let is_sof = (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker);
        if is_sof && i + 9 <= b.len() {
            let h = u32::from(u16::from_be_bytes([b[i + 5], b[i + 6]]));
            let w = u32::from(u16::from_be_bytes([b[i + 7], b[i + 8]]));
            return Some((w, h));
        }
        i += 2 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_a_foreign_schema() {
        // The spec's example schema: price is a plain number there.
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"},
            "price": {"type": ["number", "null"]}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
            "kind": {"type": "string", "enum": ["food", "other"]}, "count": {"type": "integer"}},
            "required": ["name", "kind"]});
        let v = fit_to_schema(&schema, Some(&catalog()[0]));
        assert_eq!(v, json!({"name": "Crunchy Oat Granola", "price": 3.49, "kind": "food"}));
        let openapi = json!({"type": "OBJECT", "properties": {"name": {"type": "STRING"},
            "gtin": {"type": "STRING", "nullable": true}, "color": {"type": "STRING", "nullable": true}}});
        let v = fit_to_schema(&openapi, Some(&catalog()[0]));
        assert_eq!(v, json!({"name": "Crunchy Oat Granola", "gtin": "4006381333931", "color": null}));
    }

    #[test]
    fn choice_is_stable_and_varied() {
        let names: std::collections::BTreeSet<String> =
            (0u32..64).map(|i| product_for_image(&i.to_le_bytes())["name"].as_str().unwrap().to_string()).collect();
        assert!(names.len() >= 4, "{names:?}");
        assert_eq!(product_for_image(b"abc"), product_for_image(b"abc"));
    }

    #[test]
    fn an_unknown_photo_gets_an_invented_product_that_says_so() {
        for i in 0u32..64 {
            let p = product_for_image(&i.to_le_bytes());
            let name = p["name"].as_str().unwrap();
            assert!(name.ends_with(" (invented by the demo)"), "{name}");
            assert!(catalog().iter().any(|c| format!("{}{INVENTED_NAME_SUFFIX}", c["name"].as_str().unwrap()) == name));
            let description = p["description"].as_str().unwrap();
            assert!(description.starts_with("Invented by the demo: "), "{description}");
            assert!(description.len() > INVENTED_NOTE.len(), "the built-in description follows the note");
        }
    }

    #[test]
    fn image_token_counts() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend(1536u32.to_be_bytes());
        png.extend(1024u32.to_be_bytes());
        assert_eq!(image_dimensions(&png), Some((1536, 1024)));
        // JPEG: SOI, APP0 (len 4), SOF0 with 300x200.
        let jpeg = [0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8, 0, 200, 1, 44, 3, 0, 0, 0];
        assert_eq!(image_dimensions(&jpeg), Some((300, 200)));

        // Gemini 2.5 without a media resolution: the tile rule.
        for model in ["gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.5-pro", "some-other-model"] {
            assert_eq!(image_tokens(&png, model, None), 4 * 258, "{model}");
            assert_eq!(image_tokens(&png, model, Some("MEDIA_RESOLUTION_UNSPECIFIED")), 4 * 258, "{model}");
            assert_eq!(image_tokens(&jpeg, model, None), 258, "{model}");
            assert_eq!(image_tokens(b"not an image", model, None), 258, "{model}");
            // With one: the enum's fixed counts, whatever the size.
            for image in [&png[..], &jpeg[..]] {
                assert_eq!(image_tokens(image, model, Some("MEDIA_RESOLUTION_LOW")), 64, "{model}");
                assert_eq!(image_tokens(image, model, Some("MEDIA_RESOLUTION_MEDIUM")), 256, "{model}");
                assert_eq!(image_tokens(image, model, Some("MEDIA_RESOLUTION_HIGH")), 256, "{model}");
            }
        }
        // Gemini 3: a count per level, whatever the size; high when unset.
        for model in ["gemini-3-flash-preview", "gemini-3.1-flash-lite", "gemini-3-pro-preview"] {
            for image in [&png[..], &jpeg[..]] {
                assert_eq!(image_tokens(image, model, None), 1120, "{model}");
                assert_eq!(image_tokens(image, model, Some("MEDIA_RESOLUTION_LOW")), 280, "{model}");
                assert_eq!(image_tokens(image, model, Some("MEDIA_RESOLUTION_MEDIUM")), 560, "{model}");
                assert_eq!(image_tokens(image, model, Some("MEDIA_RESOLUTION_HIGH")), 1120, "{model}");
                assert_eq!(image_tokens(image, model, Some("MEDIA_RESOLUTION_ULTRA_HIGH")), 2240, "{model}");
            }
        }
    }
}
