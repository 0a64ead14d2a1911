//! The model script format that the `scripted` provider and the `fake-llm` test server replay.
//! External tests write scripts in it: keep it stable.
//!
//! ```json
//! {"turns": [
//!   {"reply": {"text": "Let me look.", "reasoning": "optional",
//!              "tool_calls": [{"name": "read", "arguments": {"filePath": "src/lib.rs"}}]}},
//!   {"expect": {"last_message_contains": "fn main"}, "reply": {"text": "Done."}},
//!   {"fault": {"status": 429, "retry_after_s": 1, "body": "rate limited"}},
//!   {"fault": {"disconnect_after_chunks": 2}},
//!   {"fault": {"context_overflow": true}}
//! ],
//!  "chunk_delay_ms": 0}
//! ```
//!
//! Each request consumes the next turn — unless it meets the `expect` of one of the `side`
//! turns, which answer such requests (isolated calls like distillation, which come between
//! the turns) as often as they come, without using a turn up:
//!
//! ```json
//! {"side": [{"expect": {"system_contains": "observer"}, "reply": {"text": "- [10:00] [high] ..."}}],
//!  "turns": [...]}
//! ```
//!
//! `fake-llm` also serves `/v1/embeddings` (see [`Embeddings`]):
//! `{"embeddings": {"vectors": {"some text": [1.0, 0.0]}, "fault": {"delay_ms": 5000}}}`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub turns: Vec<Turn>,
    /// Standing answers for requests that meet their `expect` (which each must have).
    #[serde(default)]
    pub side: Vec<Turn>,
    /// Pause between streamed chunks.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// Characters of text (or of tool-call arguments) per streamed chunk.
    #[serde(default)]
    pub chunk_chars: Option<usize>,
    /// A model server's window: a request whose body counts more tokens than this is
    /// answered with the context-too-long error, and the turn is not used up.
    #[serde(default)]
    pub max_context_tokens: Option<u64>,
    /// How `fake-llm`'s `/v1/embeddings` answers (by default: a hashed bag of words).
    #[serde(default)]
    pub embeddings: Embeddings,
    /// `fake-llm` only: which local server's model-information endpoints it answers, and
    /// the window they report.
    #[serde(default)]
    pub server: Option<ServerInfo>,
}

/// The model-information endpoints of one local server, as `fake-llm` imitates them:
/// `llamacpp` (`GET /props`), `vllm` and `openrouter` (`GET /v1/models`), `lmstudio`
/// (`GET /api/v0/models/{id}`), `ollama` (`POST /api/show`, `GET /api/ps`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerInfo {
    pub flavor: String,
    /// The window the server runs the model with.
    pub context: u64,
    /// Ollama: the window the model was trained for (`model_info.*.context_length`).
    #[serde(default)]
    pub trained: Option<u64>,
    /// Ollama: whether `num_ctx` is among the model's parameters (else only `/api/ps` of a
    /// loaded model, or Ollama's default, tells the window).
    #[serde(default)]
    pub num_ctx_set: bool,
    /// Ollama: whether the model is loaded (listed by `/api/ps` with its context).
    #[serde(default)]
    pub loaded: bool,
}

/// The embeddings endpoint of `fake-llm`: each input gets the vector given for its exact
/// text, else a bag of its lower-cased words hashed into 64 dimensions (texts that share
/// words are near). A fault (`status`, `delay_ms`, `body`) applies to every request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Embeddings {
    #[serde(default)]
    pub vectors: std::collections::BTreeMap<String, Vec<f32>>,
    #[serde(default)]
    pub fault: Option<Fault>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    #[serde(default)]
    pub expect: Option<Expect>,
    #[serde(default)]
    pub reply: Option<Reply>,
    #[serde(default)]
    pub fault: Option<Fault>,
    /// `fake-llm` only: answer with this captured SSE stream, byte for byte (a path
    /// relative to the script's folder, or absolute); the turn's faults still apply.
    #[serde(default)]
    pub replay: Option<std::path::PathBuf>,
}

/// Checks on the request; a failed check answers 500 with the reason.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Text that the last message's content must contain.
    #[serde(default)]
    pub last_message_contains: Option<String>,
    /// Text that the system prompt must contain.
    #[serde(default)]
    pub system_contains: Option<String>,
    /// Text that must appear anywhere in the request body.
    #[serde(default)]
    pub request_contains: Option<String>,
    /// Tool names the request must offer.
    #[serde(default)]
    pub tools_include: Vec<String>,
    /// The request must offer no tools.
    #[serde(default)]
    pub no_tools: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Overrides the stop reason (e.g. "length" / "max_tokens").
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    /// An object; a string is sent as the raw argument text (to test invalid JSON).
    #[serde(default)]
    pub arguments: Value,
    #[serde(default)]
    pub id: Option<String>,
}

impl ToolCall {
    pub fn arguments_text(&self) -> String {
        match &self.arguments {
            Value::String(raw) => raw.clone(),
            Value::Null => "{}".into(),
            other => other.to_string(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// Answer with this HTTP status and a provider-shaped error body.
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub retry_after_s: Option<u64>,
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    /// The error message.
    #[serde(default)]
    pub body: Option<String>,
    /// `fake-llm`: the whole error body, sent as it is (with `status`).
    #[serde(default)]
    pub body_json: Option<Value>,
    /// Stream the reply (or a default text), then drop the connection after this many chunks.
    #[serde(default)]
    pub disconnect_after_chunks: Option<usize>,
    /// Stream this many chunks, then an in-stream error event.
    #[serde(default)]
    pub stream_error_after_chunks: Option<usize>,
    /// Send an SSE event whose data is not JSON, after the first chunk.
    #[serde(default)]
    pub malformed_sse: bool,
    /// Answer with the provider's "context too long" error.
    #[serde(default)]
    pub context_overflow: bool,
    /// Wait this long before answering at all.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// After the first chunks, repeat the first text chunk without end (until the client
    /// hangs up, or 100,000 chunks).
    #[serde(default)]
    pub endless: bool,
}

impl Script {
    /// Reads a script file; replay paths become relative to its folder.
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut script = Self::from_json(&text)?;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        for turn in script.turns.iter_mut().chain(script.side.iter_mut()) {
            if let Some(replay) = &mut turn.replay {
                *replay = dir.join(&*replay);
            }
        }
        Ok(script)
    }

    pub fn from_json(text: &str) -> Result<Self, String> {
        let script: Self =
            serde_json::from_str(text).map_err(|e| format!("bad model script: {e}"))?;
        if let Some(i) = script
            .turns
            .iter()
            .position(|t| t.replay.is_some() && t.reply.is_some())
        {
            return Err(format!(
                "bad model script: turn {i} has both `replay` and `reply`"
            ));
        }
        if let Some(i) = script.side.iter().position(|t| t.expect.is_none()) {
            return Err(format!(
                "bad model script: side turn {i} has no `expect` (it would answer everything)"
            ));
        }
        Ok(script)
    }

    /// The side turn that answers `request`, with its index, if one does.
    pub fn side_turn(&self, request: &Value) -> Option<(usize, &Turn)> {
        self.side.iter().enumerate().find(|(_, t)| {
            t.expect
                .as_ref()
                .is_some_and(|e| e.check(request).is_none())
        })
    }
}

/// All text in a JSON value, joined by newlines (message content comes in several shapes).
pub fn text_of(value: &Value) -> String {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            Value::Object(map) => map.values().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut out);
    out.join("\n")
}

impl Expect {
    /// `None` when the request meets every check, else the first reason it does not.
    pub fn check(&self, request: &Value) -> Option<String> {
        let messages = request["messages"].as_array();
        if let Some(needle) = &self.last_message_contains {
            let last = messages
                .and_then(|m| m.last())
                .map(text_of)
                .unwrap_or_default();
            if !last.contains(needle.as_str()) {
                return Some(format!(
                    "expected the last message to contain {needle:?}; it was {:?}",
                    truncate(&last, 400)
                ));
            }
        }
        if let Some(needle) = &self.system_contains {
            // Anthropic: top-level `system`; OpenAI: messages with role system.
            let mut system = text_of(&request["system"]);
            for m in messages.into_iter().flatten() {
                if m["role"] == "system" || m["role"] == "developer" {
                    system.push_str(&text_of(&m["content"]));
                }
            }
            if !system.contains(needle.as_str()) {
                return Some(format!("expected the system prompt to contain {needle:?}"));
            }
        }
        if let Some(needle) = &self.request_contains
            && !request.to_string().contains(needle.as_str())
            && !text_of(request).contains(needle.as_str())
        {
            return Some(format!("expected the request to contain {needle:?}"));
        }
        let tools: Vec<String> = request["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                t["function"]["name"]
                    .as_str()
                    .or_else(|| t["name"].as_str())
                    .map(String::from)
            })
            .collect();
        for name in &self.tools_include {
            if !tools.contains(name) {
                return Some(format!(
                    "expected tool {name:?} in the request; got {tools:?}"
                ));
            }
        }
        if self.no_tools && !tools.is_empty() {
            return Some(format!("expected no tools; got {tools:?}"));
        }
        None
    }
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
