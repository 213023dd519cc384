//! `[gemini]`: how to reach Gemini, what to ask of the model, where the key is kept, and the key
//! itself ([`ApiKey`], never printed). `crate::config` reads the file and composes the sections.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
pub const DEFAULT_MODEL: &str = "gemini-flash-latest";

/// How to reach Gemini.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GeminiConfig {
    pub base_url: String,
    pub model: String,
    /// Only in the file when the user chose to keep it there (`key_storage = "config_file"`), or
    /// written by an earlier version (it moves into the OS keyring on start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<ApiKey>,
    /// Where the app keeps a key typed into Settings or `key set`: the OS keyring (default), or,
    /// by the user's explicit choice, this file in plain text.
    pub key_storage: KeyStorage,
    /// The whole call, from sending to the last byte of the answer.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Establishing the connection (TCP and TLS).
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// The longest pause between two reads once connected.
    #[serde(with = "humantime_serde")]
    pub read_timeout: Duration,
    /// The largest answer body read; past it the call fails (`response_too_large`) at once.
    pub max_response_bytes: u64,
    /// How much the model may think (`thinkingConfig`, per model family: `gemini::models`).
    pub thinking: Thinking,
    /// `maxOutputTokens`: the answer and the thinking together.
    pub max_output_tokens: u32,
    /// `temperature`; unset means 0.2, except for Gemini 3, which keeps its default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// `mediaResolution`: the tokens an image may cost.
    pub media_resolution: MediaResolution,
}

/// `[gemini] thinking`: how much the model may think before answering.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum Thinking {
    /// The least the model allows: none where it can be turned off, else its smallest budget or
    /// level.
    #[default]
    Off,
    /// The smallest amount of thinking that is still thinking.
    Minimal,
    Low,
    Medium,
    High,
    /// No thinking field: the model decides (2.5 and 3 Flash think dynamically by default).
    ModelDefault,
}

/// `[gemini] media_resolution`: how many tokens an image may cost (`generationConfig.mediaResolution`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum MediaResolution {
    Low,
    Medium,
    High,
    /// Not sent: the model's default (Gemini 2.x: 258 tokens per 768 px tile; Gemini 3: high).
    #[default]
    ModelDefault,
}

impl Default for GeminiConfig {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.into(),
            model: DEFAULT_MODEL.into(),
            api_key: None,
            key_storage: KeyStorage::Keyring,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            thinking: Thinking::Off,
            max_output_tokens: 8192,
            temperature: None,
            media_resolution: MediaResolution::ModelDefault,
            max_response_bytes: 10_000_000,
        }
    }
}

/// Where the API key is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum KeyStorage {
    /// The OS keyring (the Secret Service on Linux).
    #[default]
    Keyring,
    /// `api_key` in the config file, plain text (mode 0600): only by the user's explicit choice.
    ConfigFile,
}

/// A Gemini API key. Never printed: `Debug` and `Display` show only a masked hint.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    /// A trimmed, non-empty key, or `None`.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into().trim().to_string();
        (!key.is_empty()).then_some(Self(key))
    }

    /// The key itself, for the `x-goog-api-key` header and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What the UI may show: the last four characters, e.g. `••••x9Q2`.
    pub fn masked(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        if chars.len() <= 8 {
            return "••••".into();
        }
        let tail: String = chars[chars.len() - 4..].iter().collect();
        format!("••••{tail}")
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKey({})", self.masked())
    }
}

impl std::fmt::Display for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.masked())
    }
}
