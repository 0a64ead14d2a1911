//! Token accounting: a real tokenizer that works offline (tiktoken's o200k table, embedded
//! in `tiktoken-rs`), calibrated against what the provider reports, and each model's
//! context limits.
//!
//! Other models' tokenizers differ from o200k by some percent either way; the ratio of the
//! provider's reported input tokens to our count of the same request (kept in the session's
//! usage parts) corrects for it.
//!
//! Loading the o200k table costs about 150 ms and 20 MB, more than the rest of a short
//! session. A step's request is therefore sized with [`estimate`], a table-free count by
//! character classes, calibrated the same way; the table is loaded only when an
//! uncalibrated request comes near the window (and for compaction's finer cuts).

use serde_json::Value;

use crate::provider::{ChatMessage, ChatRequest};

/// Tokens a chat format spends around each message (role markers, separators).
const PER_MESSAGE: usize = 4;

/// Tokens in `text`.
pub fn count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_with_special_tokens(text)
        .len()
}

/// A table-free token estimate: words of up to about seven letters are one token, digits go
/// in threes, punctuation mostly one token per character pair, a line break or an indent
/// one, and CJK text three tokens in four characters. Within about ±25% of o200k on code, prose and JSON
/// (tested below); calibration corrects the rest.
pub fn estimate(text: &str) -> usize {
    #[derive(PartialEq, Clone, Copy)]
    enum Class {
        Word,
        Digit,
        Space,
        Punct,
        Wide,
    }
    fn class(c: char) -> Class {
        if c.is_ascii_digit() {
            Class::Digit
        } else if c.is_alphabetic() && (c as u32) < 0x2E80 {
            Class::Word
        } else if c.is_whitespace() {
            Class::Space
        } else if (c as u32) >= 0x2E80 {
            Class::Wide
        } else {
            Class::Punct
        }
    }
    let mut n = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let k = class(c);
        let mut len = 1usize;
        let mut newline = c == '\n';
        while let Some(&next) = chars.peek() {
            if class(next) != k {
                break;
            }
            newline |= next == '\n';
            len += 1;
            chars.next();
        }
        n += match k {
            Class::Word => 1 + len / 8,
            Class::Digit => len.div_ceil(3),
            // A single space joins the next word's token (not a number's); a break or an
            // indent is one.
            Class::Space => {
                let before_digit = chars.peek().is_some_and(char::is_ascii_digit);
                usize::from(newline || len > 1 || before_digit)
            }
            Class::Punct => len.div_ceil(2),
            Class::Wide => (len * 3).div_ceil(4),
        };
    }
    n
}

/// Tokens a request sends (by the o200k table): system blocks, messages, tool calls and
/// results, and the tool definitions.
pub fn count_request(request: &ChatRequest) -> usize {
    count_request_with(request, count)
}

/// [`count_request`] by the table-free [`estimate`].
pub fn estimate_request(request: &ChatRequest) -> usize {
    count_request_with(request, estimate)
}

fn count_request_with(request: &ChatRequest, count: fn(&str) -> usize) -> usize {
    let messages = request
        .messages
        .iter()
        .map(|m| count_message_with(m, count))
        .sum::<usize>();
    count_fixed_with(request, count) + messages
}

/// What every request of a session sends whatever the conversation: the system blocks and
/// the tool definitions, by the [`estimate`].
pub fn estimate_fixed(request: &ChatRequest) -> usize {
    count_fixed_with(request, estimate)
}

fn count_fixed_with(request: &ChatRequest, count: fn(&str) -> usize) -> usize {
    let mut n = request.system.iter().map(|s| count(s)).sum::<usize>();
    for t in &request.tools {
        n += count(&t.name) + count(&t.description) + count(&t.parameters.to_string());
    }
    n
}

/// One message of a request by the [`estimate`].
pub fn estimate_message(message: &ChatMessage) -> usize {
    count_message_with(message, estimate)
}

fn count_message_with(message: &ChatMessage, count: fn(&str) -> usize) -> usize {
    PER_MESSAGE
        + match message {
            ChatMessage::User { text } => count(text),
            ChatMessage::Assistant {
                text,
                reasoning,
                tool_calls,
            } => {
                count(text)
                    + reasoning.as_ref().map_or(0, |(r, _)| count(r))
                    + tool_calls
                        .iter()
                        .map(|c| count(&c.name) + count(&c.arguments) + PER_MESSAGE)
                        .sum::<usize>()
            }
            ChatMessage::ToolResult { content, .. } => count(content),
        }
}

/// The provider's count over ours, from the session's latest usage part for `model` that
/// recorded both (`inputTokens` and our `estimate`); `None` when there is none yet. Clamped
/// to 0.5–2.0 so that one odd report cannot derail the accounting.
pub fn calibration<'a>(
    usage_parts: impl DoubleEndedIterator<Item = &'a Value>,
    model: &str,
) -> Option<f64> {
    usage_parts
        .rev()
        .filter(|u| u["model"].as_str().is_none_or(|m| m == model))
        .find_map(|u| {
            let reported = u["inputTokens"].as_f64()?;
            let estimate = u["estimate"].as_f64()?;
            (estimate > 0.0 && reported > 0.0).then(|| reported / estimate)
        })
        .map(|r| r.clamp(0.5, 2.0))
}

/// Whether `request` overflows `budget` input tokens: its [`estimate`] (returned, for the
/// usage record) times the session's calibration; with no calibration yet, the o200k count
/// decides once the estimate is past half the budget.
pub fn over_budget(request: &ChatRequest, calibration: Option<f64>, budget: u32) -> (bool, usize) {
    let estimate = estimate_request(request);
    let budget = f64::from(budget);
    let over = match calibration {
        Some(ratio) => estimate as f64 * ratio > budget,
        None if (estimate as f64) < budget / 2.0 => false,
        None => count_request(request) as f64 > budget,
    };
    (over, estimate)
}

/// A model's context window and how much of it an answer may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub context_window: u32,
    pub max_output_tokens: u32,
    /// Whether these came from a known model name or the configuration (not the fallback).
    pub known: bool,
}

impl Limits {
    /// The window and output budget for `model`: from the configuration when set, else
    /// from the model's name, else a conservative fallback (32k window, 4k answers) — small
    /// local models are the common unknown ones, and compacting early is cheaper than an
    /// overflow.
    pub fn for_model(model: &str, window: Option<u32>, output: Option<u32>) -> Limits {
        let by_name = limits_by_name(model);
        let (w, o) = by_name.unwrap_or((32_768, 4_096));
        Limits {
            context_window: window.unwrap_or(w),
            max_output_tokens: output.unwrap_or(o).min(window.unwrap_or(w) / 2),
            known: by_name.is_some() || window.is_some(),
        }
    }

    /// What the input may use: the window less the answer's reserve.
    pub fn usable_input(&self) -> u32 {
        self.context_window.saturating_sub(self.max_output_tokens)
    }
}

/// Known model families (prefix of the name, lower-cased, without a `provider/` prefix).
fn limits_by_name(model: &str) -> Option<(u32, u32)> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    const TABLE: &[(&str, u32, u32)] = &[
        ("claude-opus-4", 200_000, 32_000),
        ("claude-sonnet-4", 200_000, 64_000),
        ("claude-haiku-4", 200_000, 64_000),
        ("claude-3-7", 200_000, 64_000),
        ("claude-3-5", 200_000, 8_192),
        ("claude", 200_000, 8_192),
        ("gpt-5", 400_000, 128_000),
        ("gpt-4.1", 1_047_576, 32_768),
        ("gpt-4o", 128_000, 16_384),
        ("o1", 200_000, 100_000),
        ("o3", 200_000, 100_000),
        ("o4", 200_000, 100_000),
        ("gpt-oss", 131_072, 32_768),
        ("qwen3-coder", 262_144, 65_536),
        ("qwen2.5-coder", 32_768, 8_192),
        ("llama3.1", 131_072, 8_192),
        ("llama3", 8_192, 2_048),
        ("deepseek", 128_000, 8_192),
        ("mistral", 32_768, 8_192),
        ("gemini", 1_048_576, 65_536),
    ];
    TABLE
        .iter()
        .find(|(prefix, _, _)| name.starts_with(prefix))
        .map(|&(_, w, o)| (w, o))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolCallMsg;
    use serde_json::json;

    #[test]
    fn counts_with_the_o200k_table() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        // Far from characters / 4 for code and non-Latin text.
        let code = "fn main() { println!(\"{}\", 1 + 2); }";
        assert!(count(code) > 10 && count(code) < code.len());
        assert!(count("日本語のテキスト") < "日本語のテキスト".len() / 2);
    }

    #[test]
    fn the_estimate_stays_near_the_table() {
        let json = serde_json::to_string_pretty(&json!({"model": "gpt-4o", "messages": [
            {"role": "user", "content": "Read src/lib.rs and fix the failing test in tests/api.rs."},
            {"role": "tool", "tool_call_id": "call_8f2a", "content": "error[E0308]: mismatched types at 41:17"}
        ], "max_tokens": 4096, "temperature": 0.2}))
        .unwrap();
        let samples = [
            ("Rust", include_str!("agent/mod.rs")),
            ("Rust", include_str!("lsp/documents.rs")),
            (
                "Lua",
                include_str!("../../editors/nvim/lua/agent_lsp/chat.lua"),
            ),
            (
                "TypeScript",
                include_str!("../../editors/vscode/src/model.ts"),
            ),
            ("Markdown", include_str!("../../README.md")),
            ("Markdown", include_str!("../../ARCHITECTURE.md")),
            ("JSON", json.as_str()),
            (
                "Japanese",
                "日本語のテキストは文字ごとにほぼ一つのトークンになります。東京都の天気は晴れです。",
            ),
            (
                "numbers",
                "1 22 333 4444 55555 666666 7777777 3.14159 2026-12-03 0xdeadbeef",
            ),
        ];
        let ratios: Vec<String> = samples
            .iter()
            .map(|(what, text)| {
                let (exact, cheap) = (count(text) as f64, estimate(text) as f64);
                format!("{what}: {cheap} vs {exact} ({:.2})", cheap / exact)
            })
            .collect();
        for (what, text) in samples {
            let ratio = estimate(text) as f64 / count(text) as f64;
            assert!((0.75..=1.25).contains(&ratio), "{what}: {ratios:#?}");
        }
    }

    #[test]
    fn an_uncalibrated_request_near_the_window_is_counted_exactly() {
        let request = |text: String| ChatRequest {
            model: "m".into(),
            system: vec![],
            messages: vec![ChatMessage::User { text }],
            tools: Vec::new(),
            max_tokens: 100,
        };
        let small = request("hello ".repeat(10));
        assert!(!over_budget(&small, None, 1000).0);
        let big = request("hello ".repeat(900));
        let exact = count_request(&big) as u32;
        assert!(over_budget(&big, None, exact - 1).0);
        assert!(!over_budget(&big, None, exact + 1).0);
        // Calibrated: the estimate times the ratio decides.
        let (_, cheap) = over_budget(&big, Some(1.0), 0);
        assert!(over_budget(&big, Some(2.0), cheap as u32 + 1).0);
        assert!(!over_budget(&big, Some(1.0), cheap as u32 + 1).0);
    }

    #[test]
    fn a_request_counts_every_part() {
        let mut r = ChatRequest {
            model: "m".into(),
            system: vec!["You are a coding agent.".into()],
            messages: vec![ChatMessage::User { text: "hi".into() }],
            tools: Vec::new(),
            max_tokens: 100,
        };
        let base = count_request(&r);
        assert_eq!(
            base,
            count("You are a coding agent.") + count("hi") + PER_MESSAGE
        );
        r.messages.push(ChatMessage::Assistant {
            text: "reading".into(),
            reasoning: None,
            tool_calls: vec![ToolCallMsg {
                id: "c1".into(),
                name: "read".into(),
                arguments: "{\"filePath\":\"src/lib.rs\"}".into(),
            }],
        });
        r.messages.push(ChatMessage::ToolResult {
            call_id: "c1".into(),
            name: "read".into(),
            content: "pub fn a() {}".repeat(100),
            is_error: false,
        });
        assert!(count_request(&r) > base + 300);
    }

    #[test]
    fn calibration_uses_the_latest_report_for_the_model() {
        let parts = [
            json!({"model": "m", "inputTokens": 1200, "estimate": 1000}),
            json!({"model": "other", "inputTokens": 5000, "estimate": 1000}),
            json!({"inputTokens": 100}),
        ];
        assert_eq!(calibration(parts.iter(), "m"), Some(1.2));
        assert_eq!(calibration(parts.iter(), "other"), Some(2.0), "clamped");
        assert_eq!(calibration([].iter(), "m"), None);
        assert_eq!(calibration(parts[2..].iter(), "m"), None, "no estimate");
    }

    #[test]
    fn limits_come_from_config_then_the_name_then_a_fallback() {
        let l = Limits::for_model("claude-sonnet-4-5", None, None);
        assert_eq!(
            (l.context_window, l.max_output_tokens, l.known),
            (200_000, 64_000, true)
        );
        let l = Limits::for_model("openai/gpt-4o-mini", None, None);
        assert_eq!(l.context_window, 128_000);
        let l = Limits::for_model("my-local-model", None, None);
        assert_eq!(
            (l.context_window, l.max_output_tokens, l.known),
            (32_768, 4_096, false)
        );
        let l = Limits::for_model("my-local-model", Some(8_192), Some(8_192));
        assert_eq!(
            (l.context_window, l.max_output_tokens, l.usable_input()),
            (8_192, 4_096, 4_096),
            "an answer never takes more than half the window"
        );
    }
}
