//! What a Gemini call costs: the price table (list prices as defaults, the user's `[pricing]`
//! rows over them), the one cost rule, the daily budget, and the token estimate for a call not
//! made yet.
//!
//! The rule (Google's price list, see `shared/specs/gemini-api.md`): input tokens are
//! `promptTokenCount`, of which `cachedContentTokenCount` is billed at the cached-input price and
//! the rest at the input price; output is `candidatesTokenCount + thoughtsTokenCount` at the output
//! price; a batch call is multiplied by the model's `batch_discount`. A model without a row has no
//! price: its tokens are shown with "price unknown", never a made-up price.
//!
//! Money is [`Usd`], whole billionths of a dollar in an `i64`: a call's cost is computed in integer
//! picodollars from prices with up to six decimals per million tokens and rounded once, and sums
//! of stored costs are exact, however many calls they add up.
//!
//! ```toml
//! [pricing]
//! daily_budget_usd = 5.0                 # off when absent
//! [pricing."gemini-2.5-flash-lite"]      # overrides the list price; new ids extend the table
//! input_per_million = 0.10
//! output_per_million = 0.40
//! cached_input_per_million = 0.01        # optional: the input price when absent
//! batch_discount = 0.5                   # optional: 0.5 when absent
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use ts_rs::TS;

/// When the list prices below were taken (from Google's price list, via the project's Gemini
/// spec). They change: a user's `[pricing."model"]` row overrides them.
pub const LIST_PRICES_AS_OF: &str = "2026-12-03";

/// The standard-tier list prices per million tokens, in dollars: (model, input, output, cached
/// input). Cached input is 10 % of input, as Google lists it for 2.5 and later models (the spec
/// gives gemini-3.1-flash-lite's $0.025); batch is half price for all of them. The one place the
/// defaults live.
const LIST_PRICES: &[(&str, f64, f64, f64)] = &[
    ("gemini-2.5-flash", 0.30, 2.50, 0.03),
    ("gemini-2.5-flash-lite", 0.10, 0.40, 0.01),
    ("gemini-3-flash-preview", 0.50, 3.00, 0.05),
    ("gemini-3.1-flash-lite", 0.25, 1.50, 0.025),
];

/// The batch discount when a row does not give one (the Batch API is half price).
pub const DEFAULT_BATCH_DISCOUNT: f64 = 0.5;

/// An amount of US dollars, in whole nanodollars (10⁻⁹ $). Serialized as a JSON number of dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usd(i64);

impl Usd {
    pub const ZERO: Usd = Usd(0);

    pub const fn from_nanos(nanos: i64) -> Self {
        Self(nanos)
    }

    pub const fn nanos(self) -> i64 {
        self.0
    }

    /// Dollars, rounded to the nanodollar; `None` for a negative, infinite or absurd amount.
    pub fn from_dollars(dollars: f64) -> Option<Self> {
        let nanos = (dollars * 1e9).round();
        (dollars.is_finite() && dollars >= 0.0 && nanos < 9e18).then_some(Self(nanos as i64))
    }

    /// For display and JSON only: sums are made on the nanodollars.
    pub fn dollars(self) -> f64 {
        self.0 as f64 / 1e9
    }

    pub fn saturating_add(self, other: Usd) -> Usd {
        Usd(self.0.saturating_add(other.0))
    }
}

impl std::iter::Sum for Usd {
    fn sum<I: Iterator<Item = Usd>>(iter: I) -> Usd {
        iter.fold(Usd::ZERO, Usd::saturating_add)
    }
}

/// `$0.000125`, `$1.25`: at least two decimals, at most six, trailing zeros dropped.
impl fmt::Display for Usd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micros = (self.0 + 500).div_euclid(1000);
        let (whole, frac) = (micros / 1_000_000, micros % 1_000_000);
        let mut frac = format!("{frac:06}");
        while frac.len() > 2 && frac.ends_with('0') {
            frac.pop();
        }
        write!(f, "${whole}.{frac}")
    }
}

impl Serialize for Usd {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.dollars())
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let dollars = f64::deserialize(d)?;
        Usd::from_dollars(dollars).ok_or_else(|| serde::de::Error::custom("an amount of dollars, 0 or more"))
    }
}

impl TS for Usd {
    type WithoutGenerics = Self;
    type OptionInnerType = Self;
    fn name(_: &ts_rs::Config) -> String {
        "number".into()
    }
    fn inline(_: &ts_rs::Config) -> String {
        "number".into()
    }
}

/// The tokens a call is billed for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BilledTokens {
    /// `promptTokenCount`, the cached part included.
    pub input: u64,
    /// `cachedContentTokenCount`: the part of `input` billed at the cached price.
    pub cached_input: u64,
    /// `candidatesTokenCount + thoughtsTokenCount`.
    pub output: u64,
}

/// One model's prices, per million tokens, in dollars.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields)]
#[ts(export)]
pub struct ModelPrice {
    pub input_per_million: f64,
    pub output_per_million: f64,
    /// The input price when absent (never cheaper than what is known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_million: Option<f64>,
    /// The factor a Batch API call is billed at (0.5: half price).
    #[serde(default = "default_batch_discount")]
    pub batch_discount: f64,
}

fn default_batch_discount() -> f64 {
    DEFAULT_BATCH_DISCOUNT
}

/// Picodollars per token for a price per million tokens in dollars ($1 per million = 10⁶ pico
/// per token), exact for prices with up to six decimals.
fn pico_per_token(per_million: f64) -> i128 {
    (per_million * 1e6).round() as i128
}

impl ModelPrice {
    /// The cost rule: cached input at the cached price, the rest of the input at the input
    /// price, output (answer and thinking) at the output price, times the batch discount for a
    /// batch call; rounded once, to the nanodollar.
    pub fn cost(&self, tokens: BilledTokens, batch: bool) -> Usd {
        let cached = tokens.cached_input.min(tokens.input);
        let fresh = tokens.input - cached;
        let cached_price = self.cached_input_per_million.unwrap_or(self.input_per_million);
        let mut pico = i128::from(fresh) * pico_per_token(self.input_per_million)
            + i128::from(cached) * pico_per_token(cached_price)
            + i128::from(tokens.output) * pico_per_token(self.output_per_million);
        if batch {
            pico = pico * (self.batch_discount * 1e6).round() as i128 / 1_000_000;
        }
        // Half a nanodollar rounds up.
        let nanos = (pico + 500) / 1000;
        Usd(i64::try_from(nanos).unwrap_or(i64::MAX))
    }

    fn validate(&self, model: &str) -> Result<(), String> {
        let prices = [
            ("input_per_million", Some(self.input_per_million)),
            ("output_per_million", Some(self.output_per_million)),
            ("cached_input_per_million", self.cached_input_per_million),
        ];
        for (key, value) in prices {
            if let Some(v) = value {
                if !(v.is_finite() && (0.0..=1000.0).contains(&v)) {
                    return Err(format!("pricing.\"{model}\".{key}: must be between 0 and 1000 dollars"));
                }
            }
        }
        if !(self.batch_discount.is_finite() && (0.0..=1.0).contains(&self.batch_discount)) {
            return Err(format!("pricing.\"{model}\".batch_discount: must be between 0 and 1"));
        }
        Ok(())
    }
}

/// The list price of a model, if it has one.
pub fn list_price(model: &str) -> Option<ModelPrice> {
    LIST_PRICES.iter().find(|(id, ..)| *id == model).map(|&(_, input, output, cached)| ModelPrice {
        input_per_million: input,
        output_per_million: output,
        cached_input_per_million: Some(cached),
        batch_discount: DEFAULT_BATCH_DISCOUNT,
    })
}

/// Every model with a list price, with it.
pub fn list_prices() -> Vec<(String, ModelPrice)> {
    LIST_PRICES.iter().filter_map(|(id, ..)| Some((id.to_string(), list_price(id)?))).collect()
}

/// The `[pricing]` section: the user's rows (over the list prices) and the daily budget.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PricingConfig {
    /// Stop sending once today's spend would pass this (local day). Off when `None`.
    pub daily_budget_usd: Option<f64>,
    /// The user's rows, by model id: they override the list prices and extend the table. Only
    /// these are written back to the file, so the defaults stay the program's.
    pub models: BTreeMap<String, ModelPrice>,
}

/// The model a price was found for, and the price.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceMatch {
    pub model: String,
    pub price: ModelPrice,
}

impl PricingConfig {
    /// The price for a call to `called` that Gemini answered as `model_version`.
    ///
    /// The response's `modelVersion` is looked up first: it names the model that billed the
    /// call, and an alias such as `gemini-flash-latest` is billed as the model it points to.
    /// Then the id we called (a user's row for an alias, or a call with no answer). At each step
    /// the user's row wins over the list price. No match: no price.
    pub fn price_for(&self, called: &str, model_version: Option<&str>) -> Option<PriceMatch> {
        let candidates = model_version.map(normalized_id).into_iter().chain([normalized_id(called)]);
        for id in candidates.filter(|id| !id.is_empty()) {
            if let Some(price) = self.models.get(id).copied().or_else(|| list_price(id)) {
                return Some(PriceMatch { model: id.to_string(), price });
            }
        }
        None
    }

    /// The cost of a call's tokens; `None` when the model has no price.
    pub fn cost(&self, called: &str, model_version: Option<&str>, tokens: BilledTokens, batch: bool) -> Option<Usd> {
        self.price_for(called, model_version).map(|m| m.price.cost(tokens, batch))
    }

    /// The daily budget as money; `None` when off.
    pub fn daily_budget(&self) -> Option<Usd> {
        self.daily_budget_usd.and_then(Usd::from_dollars)
    }

    /// Every price in force: the list prices with the user's rows over them.
    pub fn table(&self) -> BTreeMap<String, ModelPrice> {
        let mut table: BTreeMap<String, ModelPrice> = list_prices().into_iter().collect();
        table.extend(self.models.iter().map(|(k, v)| (k.clone(), *v)));
        table
    }

    /// Checks ranges; the message names the key.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if let Some(budget) = self.daily_budget_usd {
            if !(budget.is_finite() && budget > 0.0 && budget < 1e9) {
                return Err(("pricing.daily_budget_usd".into(), "must be more than 0 dollars".into()));
            }
        }
        for (model, price) in &self.models {
            if model.trim().is_empty() {
                return Err(("pricing".into(), "a model id is required".into()));
            }
            price.validate(model).map_err(|message| (format!("pricing.\"{model}\""), message))?;
        }
        Ok(())
    }
}

/// `models/gemini-2.5-flash` and `gemini-2.5-flash` are the same model.
fn normalized_id(id: &str) -> &str {
    let id = id.trim();
    id.strip_prefix("models/").unwrap_or(id)
}

/// The file's layout: `daily_budget_usd` next to one table per model.
impl Serialize for PricingConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(budget) = self.daily_budget_usd {
            map.serialize_entry("daily_budget_usd", &budget)?;
        }
        for (model, price) in &self.models {
            map.serialize_entry(model, price)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for PricingConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = PricingConfig;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("daily_budget_usd and a table of prices per model id")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PricingConfig, A::Error> {
                let mut config = PricingConfig::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "daily_budget_usd" {
                        config.daily_budget_usd = map.next_value()?;
                    } else {
                        // Anything else is a model's row: a stray number or a typo in a price's
                        // key is an error naming it.
                        let price: ModelPrice = map.next_value()?;
                        config.models.insert(key, price);
                    }
                }
                Ok(config)
            }
        }
        d.deserialize_map(Fields)
    }
}

// ---------------------------------------------------------------------------------------------
// Estimates for calls not made yet
// ---------------------------------------------------------------------------------------------

/// The output we expect from one extraction before any was measured: a filled-in product of
/// about 600 characters (the fake's answers and real ones are 100–200 tokens) with thinking off.
pub const ESTIMATED_OUTPUT_TOKENS: u64 = 200;

/// The tokens of a call on an image billed `image_tokens` (see
/// [`crate::gemini::models::image_tokens`]) with `text_chars` of instructions, prompt and schema
/// (about four characters a token).
pub fn estimated_tokens(image_tokens: u64, text_chars: usize) -> BilledTokens {
    BilledTokens {
        input: image_tokens + (text_chars as u64).div_ceil(4),
        cached_input: 0,
        output: ESTIMATED_OUTPUT_TOKENS,
    }
}

/// The size of a photo prepared with this long edge, for an estimate before it is read: a 4:3
/// frame, what most cameras shoot.
pub fn prepared_size(max_long_edge: u32) -> (u32, u32) {
    (max_long_edge, max_long_edge * 3 / 4)
}

/// A local calendar day, for the daily budget and the spend per day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalDay {
    /// Its first millisecond (unix ms).
    pub start: i64,
    /// The next day's first millisecond.
    pub end: i64,
    /// The local time's offset from UTC at `now`, in ms.
    pub utc_offset_ms: i64,
}

/// The local day containing `now_ms` (the caller's clock).
pub fn local_day(now_ms: i64) -> LocalDay {
    use chrono::{Local, Offset, TimeZone};
    let now = Local.timestamp_millis_opt(now_ms).single().unwrap_or_else(Local::now);
    let utc_offset_ms = i64::from(now.offset().fix().local_minus_utc()) * 1000;
    let midnight = |date: chrono::NaiveDate| {
        Local.from_local_datetime(&date.and_time(chrono::NaiveTime::MIN)).earliest().map(|d| d.timestamp_millis())
    };
    let date = now.date_naive();
    let start = midnight(date).unwrap_or(now_ms - (now_ms + utc_offset_ms).rem_euclid(86_400_000));
    let end = date.succ_opt().and_then(midnight).unwrap_or(start + 86_400_000);
    LocalDay { start, end, utc_offset_ms }
}

/// The first millisecond of a local date given as `YYYY-MM-DD`; `None` when it is not one.
pub fn local_date_start(date: &str) -> Option<i64> {
    use chrono::{Local, TimeZone};
    let date = chrono::NaiveDate::parse_from_str(date.trim(), "%Y-%m-%d").ok()?;
    Local.from_local_datetime(&date.and_time(chrono::NaiveTime::MIN)).earliest().map(|d| d.timestamp_millis())
}

/// The budget pause's message.
pub fn budget_spent_message(budget: Usd) -> String {
    format!("Today's Gemini budget ({budget}) is spent; resumes tomorrow or raise it in Settings.")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: u64, cached_input: u64, output: u64) -> BilledTokens {
        BilledTokens { input, cached_input, output }
    }

    #[test]
    fn the_cost_rule_prices_each_kind_of_token() {
        let lite = list_price("gemini-2.5-flash-lite").unwrap();
        // 1M input at $0.10, 1M output at $0.40.
        assert_eq!(lite.cost(tokens(1_000_000, 0, 1_000_000), false), Usd::from_nanos(500_000_000));
        // Half of the input cached: $0.05 + $0.005 + $0.40.
        assert_eq!(lite.cost(tokens(1_000_000, 500_000, 1_000_000), false), Usd::from_nanos(455_000_000));
        // Batch: half of it all.
        assert_eq!(lite.cost(tokens(1_000_000, 500_000, 1_000_000), true), Usd::from_nanos(227_500_000));
        // A typical call: 1,900 in, 150 out = $0.00019 + $0.00006.
        assert_eq!(lite.cost(tokens(1_900, 0, 150), false), Usd::from_nanos(250_000));
        // More cached than input (a malformed count) never makes a negative price.
        assert_eq!(lite.cost(tokens(10, 20, 0), false), Usd::from_nanos(100));
        // No cached price: the input price.
        let row = ModelPrice { cached_input_per_million: None, ..lite };
        assert_eq!(row.cost(tokens(1_000, 1_000, 0), false), Usd::from_nanos(100_000));
    }

    #[test]
    fn a_batch_call_costs_the_models_batch_discount() {
        // Every list price: a batch call is half the price of the same tokens.
        for (model, price) in list_prices() {
            assert_eq!(price.batch_discount, 0.5, "{model}");
            for t in [tokens(2_000_000, 0, 200_000), tokens(1_969, 300, 387), tokens(1_000_000, 1_000_000, 0)] {
                let (batch, direct) = (price.cost(t, true).nanos(), price.cost(t, false).nanos());
                assert!((2 * batch - direct).abs() <= 1, "{model} {t:?}: batch {batch}, direct {direct}");
            }
        }
        // A user's row with its own discount; and through the table, by model.
        let row = ModelPrice {
            input_per_million: 1.0,
            output_per_million: 2.0,
            cached_input_per_million: None,
            batch_discount: 0.4,
        };
        assert_eq!(row.cost(tokens(1_000_000, 0, 1_000_000), true), Usd::from_nanos(1_200_000_000));
        let config = PricingConfig { models: [("mine".to_string(), row)].into(), ..Default::default() };
        assert_eq!(config.cost("mine", None, tokens(1_000_000, 0, 0), true), Some(Usd::from_nanos(400_000_000)));
        assert_eq!(config.cost("unpriced", None, tokens(1_000_000, 0, 0), true), None);
    }

    #[test]
    fn sums_of_costs_do_not_drift() {
        let lite = list_price("gemini-2.5-flash-lite").unwrap();
        let one = lite.cost(tokens(1, 0, 0), false);
        assert_eq!(one, Usd::from_nanos(100), "a token at $0.10 per million is 100 nanodollars");
        let call = lite.cost(tokens(1_033, 0, 157), false);
        let total: Usd = std::iter::repeat_n(call, 1_000_000).sum();
        assert_eq!(total.nanos(), call.nanos() * 1_000_000);
    }

    #[test]
    fn the_response_model_version_is_priced_first_then_the_called_id() {
        let mut config = PricingConfig::default();
        assert_eq!(
            config.price_for("gemini-flash-latest", Some("gemini-2.5-flash")).unwrap().model,
            "gemini-2.5-flash"
        );
        assert_eq!(config.price_for("gemini-2.5-flash-lite", None).unwrap().model, "gemini-2.5-flash-lite");
        assert_eq!(config.price_for("models/gemini-2.5-flash-lite", None).unwrap().model, "gemini-2.5-flash-lite");
        assert_eq!(config.price_for("gemini-flash-latest", None), None, "an alias with no answer has no price");
        assert_eq!(config.price_for("gemini-9-ultra", Some("gemini-9-ultra-001")), None);

        // A user's row overrides the list price and extends the table.
        let mine = ModelPrice {
            input_per_million: 0.2,
            output_per_million: 0.8,
            cached_input_per_million: None,
            batch_discount: 0.5,
        };
        config.models.insert("gemini-2.5-flash-lite".into(), mine);
        config.models.insert("gemini-flash-latest".into(), mine);
        assert_eq!(config.price_for("gemini-2.5-flash-lite", None).unwrap().price, mine);
        assert_eq!(config.price_for("gemini-flash-latest", None).unwrap().price, mine);
        assert_eq!(config.table().len(), LIST_PRICES.len() + 1);
    }

    #[test]
    fn the_section_reads_and_writes_as_the_readme_shows() {
        let text = "daily_budget_usd = 2.5\n[\"gemini-2.5-flash-lite\"]\ninput_per_million = 0.12\n\
                    output_per_million = 0.5\n[my-model]\ninput_per_million = 1\noutput_per_million = 2\n\
                    cached_input_per_million = 0.1\nbatch_discount = 0.4\n";
        let config: PricingConfig = toml::from_str(text).unwrap();
        assert_eq!(config.daily_budget(), Some(Usd::from_nanos(2_500_000_000)));
        assert_eq!(config.models["gemini-2.5-flash-lite"].batch_discount, 0.5);
        assert_eq!(config.models["gemini-2.5-flash-lite"].cached_input_per_million, None);
        assert_eq!(config.models["my-model"].batch_discount, 0.4);
        let written = toml::to_string(&config).unwrap();
        assert_eq!(toml::from_str::<PricingConfig>(&written).unwrap(), config);

        let err = toml::from_str::<PricingConfig>("[m]\ninput_per_million = 1\noutput = 2\n").unwrap_err();
        assert!(err.to_string().contains("output"), "{err}");
        let err = toml::from_str::<PricingConfig>("daily_budget = 5\n").unwrap_err();
        assert!(err.to_string().contains("daily_budget"), "{err}");
        let bad = PricingConfig { daily_budget_usd: Some(-1.0), ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().0, "pricing.daily_budget_usd");
    }

    #[test]
    fn money_prints_and_serializes_as_dollars() {
        assert_eq!(Usd::from_nanos(125_000).to_string(), "$0.000125");
        assert_eq!(Usd::from_nanos(1_250_000_000).to_string(), "$1.25");
        assert_eq!(Usd::ZERO.to_string(), "$0.00");
        assert_eq!(serde_json::to_string(&Usd::from_nanos(75_000)).unwrap(), "0.000075");
        assert_eq!(Usd::from_dollars(0.1), Some(Usd::from_nanos(100_000_000)));
        assert_eq!(Usd::from_dollars(-0.1), None);
    }

    #[test]
    fn a_local_day_holds_its_moment() {
        let now = 1_764_763_200_000; // 2025-12-03T12:00:00Z
        let day = local_day(now);
        assert!(day.start <= now && now < day.end, "{day:?}");
        assert!((82_800_000..=90_000_000).contains(&(day.end - day.start)), "{day:?}");
        assert_eq!(local_day(day.start), day);
        assert_eq!(local_day(day.end).start, day.end);
        let start = local_date_start("2025-12-03").unwrap();
        assert!(local_day(start).start == start && (start - now).abs() < 86_400_000, "{start}");
        assert_eq!(local_date_start("3 Dec"), None);
    }

    #[test]
    fn image_tokens_follow_the_tile_rule() {
        assert_eq!(prepared_size(1536), (1536, 1152));
    }
}
