//! What each Gemini model family supports, in one table: how its thinking is controlled (a token
//! budget on 2.5, a level on 3), whether thinking can be turned off, and whether lowering the
//! temperature is advised against. Every request setting that depends on the model is decided
//! here, from the family, never at a call site.
//!
//! A model id names its family directly (`gemini-2.5-flash-lite`, `gemini-3-flash-preview`), or
//! is an alias (`gemini-flash-latest`) that `GET /v1beta/models/{model}` resolves
//! ([`family_of_model_info`]). An unknown family gets no thinking field at all: the model's own
//! default, which is always accepted.

use super::config::{MediaResolution, Thinking};
use super::wire::{ModelInfo, ThinkingConfig};

/// The wire value of `[gemini] media_resolution`, or `None` for the model's default.
pub fn media_resolution_wire(setting: MediaResolution) -> Option<&'static str> {
    match setting {
        MediaResolution::Low => Some("MEDIA_RESOLUTION_LOW"),
        MediaResolution::Medium => Some("MEDIA_RESOLUTION_MEDIUM"),
        MediaResolution::High => Some("MEDIA_RESOLUTION_HIGH"),
        MediaResolution::ModelDefault => None,
    }
}

/// How a family's thinking is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingControl {
    /// `thinkingBudget` in tokens (Gemini 2.5). `off` is `Some(0)` where thinking can be turned
    /// off; `min` is the smallest budget that still thinks.
    Budget { off: Option<u32>, min: u32, low: u32, medium: u32, high: u32 },
    /// `thinkingLevel` (Gemini 3): the levels the family accepts, lowest first.
    Level { levels: &'static [&'static str] },
}

/// A model family and what it supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// The id prefix that names the family, e.g. `gemini-2.5-flash-lite`.
    pub prefix: &'static str,
    pub thinking: ThinkingControl,
    /// Gemini 3: Google advises keeping the default temperature (1.0); lower values may loop or
    /// degrade answers. We then send a temperature only when the user set one.
    pub keep_default_temperature: bool,
    /// How an image is billed (input tokens).
    pub image_tokens: ImageTokens,
}

/// How a family bills an image, by `mediaResolution` (Google's published rules, spec "Media
/// resolution").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageTokens {
    /// Gemini 2.5: by default 258 tokens per 768×768 tile (258 in all when both sides are at most
    /// 384 px); with a resolution set, a fixed count per image.
    Tiles { low: u64, medium: u64, high: u64 },
    /// Gemini 3: a fixed count per image whatever its size (the default is `high`).
    PerImage { low: u64, medium: u64, high: u64 },
}

const TILES_2_5: ImageTokens = ImageTokens::Tiles { low: 64, medium: 256, high: 256 };
const PER_IMAGE_3: ImageTokens = ImageTokens::PerImage { low: 280, medium: 560, high: 1120 };

/// The input tokens Gemini bills for one image of `width`×`height` sent to a model of `family`
/// (`None`: unknown, counted by the tile rule) with `[gemini] media_resolution` = `setting`. The
/// one image-token rule: the cost estimate, the budget check and the benchmarks use it.
pub fn image_tokens(family: Option<&Family>, setting: MediaResolution, width: u32, height: u32) -> u64 {
    let rule = family.map_or(TILES_2_5, |f| f.image_tokens);
    let pick = |low, medium, high, default| match setting {
        MediaResolution::Low => low,
        MediaResolution::Medium => medium,
        MediaResolution::High => high,
        MediaResolution::ModelDefault => default,
    };
    match rule {
        ImageTokens::Tiles { low, medium, high } => pick(low, medium, high, tiles(width, height)),
        ImageTokens::PerImage { low, medium, high } => pick(low, medium, high, high),
    }
}

/// 258 tokens per 768×768 tile; 258 when both sides are at most 384 px.
fn tiles(width: u32, height: u32) -> u64 {
    const TILE: u32 = 768;
    const TILE_TOKENS: u64 = 258;
    if width <= 384 && height <= 384 {
        return TILE_TOKENS;
    }
    u64::from(width.div_ceil(TILE).max(1)) * u64::from(height.div_ceil(TILE).max(1)) * TILE_TOKENS
}

/// Low, medium and high budgets on 2.5: the values Google's OpenAI-compatible endpoint maps
/// `reasoning_effort` low/medium/high to.
const BUDGET_LOW: u32 = 1024;
const BUDGET_MEDIUM: u32 = 8192;
const BUDGET_HIGH: u32 = 24_576;

/// The families we know, most specific prefix first (`-lite` before its parent).
pub const FAMILIES: &[Family] = &[
    // 2.5 Flash-Lite: budget 512–24576, 0 turns thinking off.
    Family {
        prefix: "gemini-2.5-flash-lite",
        thinking: ThinkingControl::Budget {
            off: Some(0),
            min: 512,
            low: BUDGET_LOW,
            medium: BUDGET_MEDIUM,
            high: BUDGET_HIGH,
        },
        keep_default_temperature: false,
        image_tokens: TILES_2_5,
    },
    // 2.5 Flash: budget 1–24576, 0 turns thinking off; 512 as its smallest "on", like Flash-Lite.
    Family {
        prefix: "gemini-2.5-flash",
        thinking: ThinkingControl::Budget {
            off: Some(0),
            min: 512,
            low: BUDGET_LOW,
            medium: BUDGET_MEDIUM,
            high: BUDGET_HIGH,
        },
        keep_default_temperature: false,
        image_tokens: TILES_2_5,
    },
    // 2.5 Pro: budget 128–32768; thinking cannot be turned off.
    Family {
        prefix: "gemini-2.5-pro",
        thinking: ThinkingControl::Budget { off: None, min: 128, low: BUDGET_LOW, medium: BUDGET_MEDIUM, high: 32_768 },
        keep_default_temperature: false,
        image_tokens: TILES_2_5,
    },
    // Gemini 3 Flash and Flash-Lite (3, 3.1, ...): minimal, low, medium, high.
    Family {
        prefix: "gemini-3-flash",
        thinking: ThinkingControl::Level { levels: &["minimal", "low", "medium", "high"] },
        keep_default_temperature: true,
        image_tokens: PER_IMAGE_3,
    },
    Family {
        prefix: "gemini-3.1-flash",
        thinking: ThinkingControl::Level { levels: &["minimal", "low", "medium", "high"] },
        keep_default_temperature: true,
        image_tokens: PER_IMAGE_3,
    },
    // Gemini 3 Pro: low and high only (no minimal: it cannot stop thinking).
    Family {
        prefix: "gemini-3-pro",
        thinking: ThinkingControl::Level { levels: &["low", "high"] },
        keep_default_temperature: true,
        image_tokens: PER_IMAGE_3,
    },
    Family {
        prefix: "gemini-3.1-pro",
        thinking: ThinkingControl::Level { levels: &["low", "medium", "high"] },
        keep_default_temperature: true,
        image_tokens: PER_IMAGE_3,
    },
];

/// The temperature we send when the user set none and the family does not advise against it.
pub const DEFAULT_TEMPERATURE: f64 = 0.2;

/// The family a concrete model id belongs to (`models/` prefix allowed), or `None`.
pub fn family_of(model_id: &str) -> Option<&'static Family> {
    let id = model_id.trim().strip_prefix("models/").unwrap_or(model_id.trim()).to_ascii_lowercase();
    FAMILIES.iter().find(|f| id == f.prefix || id.strip_prefix(f.prefix).is_some_and(|rest| rest.starts_with('-')))
}

/// What `models.get` says about a model, resolved to a family: its `baseModelId`, else its name
/// (`models/…`), else its `version` when that looks like a model id. `None` when the model does
/// not think at all (`thinking: false`) or no family matches.
pub fn family_of_model_info(info: &ModelInfo) -> Option<&'static Family> {
    if info.thinking == Some(false) {
        return None;
    }
    [info.base_model_id.as_deref(), info.name.as_deref(), info.version.as_deref()]
        .into_iter()
        .flatten()
        .find_map(family_of)
}

impl Family {
    /// The `thinkingConfig` for a setting: exactly one of budget or level, or none.
    pub fn thinking_config(&self, setting: Thinking) -> Option<ThinkingConfig> {
        match (self.thinking, setting) {
            (_, Thinking::ModelDefault) => None,
            (ThinkingControl::Budget { off, min, low, medium, high }, _) => {
                let budget = match setting {
                    Thinking::Off => off.unwrap_or(min),
                    Thinking::Minimal => min,
                    Thinking::Low => low,
                    Thinking::Medium => medium,
                    Thinking::High | Thinking::ModelDefault => high,
                };
                Some(ThinkingConfig { thinking_budget: Some(budget), thinking_level: None })
            }
            (ThinkingControl::Level { levels }, _) => {
                let wanted = match setting {
                    Thinking::Off | Thinking::Minimal => "minimal",
                    Thinking::Low => "low",
                    Thinking::Medium => "medium",
                    Thinking::High | Thinking::ModelDefault => "high",
                };
                // The wanted level if the family has it, else the next higher one it has, else
                // its highest.
                const ORDER: [&str; 4] = ["minimal", "low", "medium", "high"];
                let rank = |l: &str| ORDER.iter().position(|o| *o == l).unwrap_or(ORDER.len());
                let level = levels.iter().find(|l| rank(l) >= rank(wanted)).or(levels.last()).map(|l| (*l).to_string());
                Some(ThinkingConfig { thinking_budget: None, thinking_level: level })
            }
        }
    }

    /// The temperature to send: the user's when set; else ours, unless the family keeps its own.
    pub fn temperature(&self, configured: Option<f64>) -> Option<f64> {
        configured.or((!self.keep_default_temperature).then_some(DEFAULT_TEMPERATURE))
    }
}

/// The temperature for a model of unknown family: the user's, else ours.
pub fn temperature_for(family: Option<&Family>, configured: Option<f64>) -> Option<f64> {
    match family {
        Some(f) => f.temperature(configured),
        None => configured.or(Some(DEFAULT_TEMPERATURE)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn image_tokens_follow_each_familys_rule() {
        use MediaResolution::*;
        let flash_lite = family_of("gemini-2.5-flash-lite");
        for (w, h, tokens) in [
            (384, 384, 258),
            (100, 384, 258),
            (385, 100, 258),
            (768, 768, 258),
            (769, 768, 516),
            (1536, 1152, 1032),
            (1152, 1536, 1032),
            (1536, 384, 516),
            (4000, 3000, 6 * 4 * 258),
        ] {
            assert_eq!(image_tokens(flash_lite, ModelDefault, w, h), tokens, "{w}x{h}");
            assert_eq!(image_tokens(None, ModelDefault, w, h), tokens, "unknown family, {w}x{h}");
        }
        assert_eq!(
            [Low, Medium, High].map(|r| image_tokens(flash_lite, r, 4000, 3000)),
            [64, 256, 256],
            "2.5 with a resolution set: a fixed count"
        );
        let three = family_of("gemini-3-flash-preview");
        assert_eq!(
            [ModelDefault, Low, Medium, High].map(|r| image_tokens(three, r, 1536, 1152)),
            [1120, 280, 560, 1120]
        );
        assert_eq!(image_tokens(three, ModelDefault, 200, 100), 1120, "any size");
    }

    use super::*;

    fn config(model: &str, t: Thinking) -> Option<(Option<u32>, Option<String>)> {
        family_of(model).and_then(|f| f.thinking_config(t)).map(|c| (c.thinking_budget, c.thinking_level))
    }

    #[test]
    fn ids_name_their_family() {
        let cases = [
            ("gemini-2.5-flash", Some("gemini-2.5-flash")),
            ("models/gemini-2.5-flash-lite", Some("gemini-2.5-flash-lite")),
            ("gemini-2.5-flash-lite-preview-09-2025", Some("gemini-2.5-flash-lite")),
            ("gemini-2.5-flash-preview-05-20", Some("gemini-2.5-flash")),
            ("gemini-2.5-pro", Some("gemini-2.5-pro")),
            ("gemini-3-flash-preview", Some("gemini-3-flash")),
            ("gemini-3.1-flash-lite", Some("gemini-3.1-flash")),
            ("gemini-3-pro-preview", Some("gemini-3-pro")),
            ("gemini-flash-latest", None),
            ("gemini-2.0-flash", None),
            ("gemini-2.5-flashy", None),
            ("my-tuned-model", None),
        ];
        for (id, family) in cases {
            assert_eq!(family_of(id).map(|f| f.prefix), family, "{id}");
        }
    }

    #[test]
    fn off_is_the_least_each_family_allows_and_never_both_fields() {
        assert_eq!(config("gemini-2.5-flash", Thinking::Off), Some((Some(0), None)));
        assert_eq!(config("gemini-2.5-flash-lite", Thinking::Off), Some((Some(0), None)));
        assert_eq!(config("gemini-2.5-pro", Thinking::Off), Some((Some(128), None)));
        assert_eq!(config("gemini-3-flash-preview", Thinking::Off), Some((None, Some("minimal".into()))));
        assert_eq!(config("gemini-3-pro-preview", Thinking::Off), Some((None, Some("low".into()))));
        assert_eq!(config("gemini-3-pro-preview", Thinking::Medium), Some((None, Some("high".into()))));
        assert_eq!(config("gemini-2.5-flash", Thinking::Medium), Some((Some(8192), None)));
        assert_eq!(config("gemini-2.5-pro", Thinking::High), Some((Some(32_768), None)));
        for family in FAMILIES {
            assert_eq!(family.thinking_config(Thinking::ModelDefault), None);
            for t in [Thinking::Off, Thinking::Minimal, Thinking::Low, Thinking::Medium, Thinking::High] {
                let c = family.thinking_config(t).unwrap();
                assert!(c.thinking_budget.is_some() != c.thinking_level.is_some(), "{} {t:?}", family.prefix);
            }
        }
    }

    #[test]
    fn temperature_is_left_to_gemini_3_unless_set() {
        let flash3 = family_of("gemini-3-flash-preview").unwrap();
        let flash25 = family_of("gemini-2.5-flash").unwrap();
        assert_eq!(flash3.temperature(None), None);
        assert_eq!(flash3.temperature(Some(0.5)), Some(0.5));
        assert_eq!(flash25.temperature(None), Some(DEFAULT_TEMPERATURE));
        assert_eq!(temperature_for(None, None), Some(DEFAULT_TEMPERATURE));
        assert_eq!(temperature_for(None, Some(1.0)), Some(1.0));
    }

    #[test]
    fn model_info_resolves_aliases() {
        let info = |base: Option<&str>, name: &str, version: Option<&str>, thinking: Option<bool>| ModelInfo {
            name: Some(name.into()),
            base_model_id: base.map(str::to_string),
            version: version.map(str::to_string),
            thinking,
        };
        let alias = info(Some("gemini-3-flash-preview"), "models/gemini-flash-latest", Some("3"), Some(true));
        assert_eq!(family_of_model_info(&alias).map(|f| f.prefix), Some("gemini-3-flash"));
        let by_version = info(None, "models/gemini-flash-latest", Some("gemini-2.5-flash-preview-09-2025"), None);
        assert_eq!(family_of_model_info(&by_version).map(|f| f.prefix), Some("gemini-2.5-flash"));
        let no_thinking = info(Some("gemini-2.5-flash"), "models/x", None, Some(false));
        assert_eq!(family_of_model_info(&no_thinking), None);
        assert_eq!(family_of_model_info(&info(None, "models/gemini-flash-latest", Some("001"), Some(true))), None);
    }
}
