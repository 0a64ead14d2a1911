//! Model providers: one request shape in, one stream of events out, whatever the wire format.
//!
//! `openai` speaks Chat Completions (OpenAI, Ollama, LM Studio, vLLM, llama.cpp, OpenRouter);
//! `anthropic` speaks the Messages API; `scripted` replays a model script in process. Errors
//! are classified once, here, so the loop's retry policy never parses provider bodies.

pub mod anthropic;
pub mod embeddings;
pub mod openai;
pub mod retry;
pub mod script;
pub mod scripted;
pub mod sse;
pub mod window;

use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::Serialize;

use crate::config::{Config, ProviderKind};
use crate::tools::ToolDefinition;

/// A tool call the model made, as sent back in later requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallMsg {
    pub id: String,
    pub name: String,
    /// The raw JSON argument text the model produced.
    pub arguments: String,
}

/// A call's argument text as the JSON object it should be; `None` when it is not one (a
/// call cut off inside its arguments, or a model that wrote garbage).
pub fn arguments_object(text: &str) -> Option<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .filter(serde_json::Value::is_object)
}

impl ToolCallMsg {
    /// The arguments as a JSON object to send back: what the model wrote when it is one,
    /// else `{}` — servers refuse a history whose arguments do not parse (llama.cpp answers
    /// every later request with HTTP 500), and a call cut off mid-argument is common.
    pub fn input_object(&self) -> serde_json::Value {
        arguments_object(&self.arguments).unwrap_or_else(|| serde_json::json!({}))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    User {
        text: String,
    },
    Assistant {
        text: String,
        /// Reasoning text and its provider signature (Anthropic thinking blocks).
        reasoning: Option<(String, Option<String>)>,
        tool_calls: Vec<ToolCallMsg>,
    },
    ToolResult {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
    },
}

/// One model request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    pub model: String,
    /// System blocks: the mode's prompt, then the baseline note. Both are stable across a
    /// session's steps, so prompt caches hit.
    pub system: Vec<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolDefinition>,
    pub max_tokens: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    /// The provider stopped the answer on its safety grounds (Anthropic's `refusal`,
    /// OpenAI's `content_filter`).
    Refusal,
    Other,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
}

/// What a provider streams.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    TextDelta(String),
    ReasoningDelta(String),
    /// The signature that must accompany reasoning sent back (Anthropic).
    ReasoningSignature(String),
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallDelta {
        index: usize,
        arguments: String,
    },
    ToolCallEnd {
        index: usize,
    },
    Usage(Usage),
    Finish(StopReason),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// 429, 5xx, 529, connection trouble before any output: worth retrying.
    #[error("{message}")]
    Retryable {
        message: String,
        retry_after: Option<Duration>,
    },
    /// 401/403: retrying cannot help.
    #[error("{message}")]
    Auth { message: String },
    #[error("context too long: {message}")]
    ContextOverflow {
        message: String,
        /// The window the server named in its error (llama.cpp's `n_ctx`).
        window: Option<u32>,
    },
    /// The stream broke after output began; what came is kept.
    #[error("the model's answer was cut off: {message}")]
    StreamBroken { message: String },
    #[error("{message}")]
    Other { message: String },
}

pub type EventStream = BoxStream<'static, Result<ProviderEvent, ProviderError>>;

pub trait Provider: Send + Sync {
    /// Starts one streamed answer. Errors before the first event come back here; errors
    /// after it arrive in the stream.
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, ProviderError>>;

    /// What the server says about `model`'s context window; by default nothing (the
    /// window then comes from the configuration or the model's name).
    fn window<'a>(&'a self, _model: &'a str) -> BoxFuture<'a, Option<window::Probe>> {
        Box::pin(async { None })
    }
}

/// Recognises the context-overflow messages of the common providers and local servers,
/// in an HTTP error answer (`status`) or an error event inside a stream (`None`).
pub fn is_context_overflow(status: Option<u16>, body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    status.is_none_or(|s| s == 400 || s == 413 || s == 500)
        && [
            "context_length_exceeded", // OpenAI
            "prompt is too long",      // Anthropic
            "maximum context length",  // OpenAI, vLLM, OpenRouter
            "context length",          // LM Studio ("loaded with context length of only")
            "context window",
            "context size", // llama.cpp ("exceeds the available context size")
            "exceed_context_size_error", // llama.cpp's error type
            "too many tokens",
            "input is too long",
            "exceeded max context length", // Ollama
        ]
        .iter()
        .any(|needle| b.contains(needle))
}

/// A server error that the same request would meet again: the server could not read what
/// we sent (llama.cpp's "Failed to parse tool call arguments as JSON", a chat template
/// that fails), so retrying only wastes the wait.
fn repeats(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    ["parse", "invalid", "template", "json"]
        .iter()
        .any(|w| m.contains(w))
}

/// Classifies an HTTP error answer.
pub fn classify(
    status: u16,
    body: &str,
    retry_after: Option<Duration>,
    key_env: Option<&str>,
) -> ProviderError {
    let message = error_message(body);
    if is_context_overflow(Some(status), body) {
        let window = window::in_overflow_error(body);
        return ProviderError::ContextOverflow { message, window };
    }
    if status == 500 && repeats(&message) {
        return ProviderError::Other {
            message: format!("HTTP {status}: {message}"),
        };
    }
    match status {
        401 | 403 => ProviderError::Auth {
            message: match key_env {
                Some(var) => format!(
                    "the provider refused the API key (HTTP {status}: {message}); check ${var}"
                ),
                None => format!("the provider refused the request (HTTP {status}: {message})"),
            },
        },
        429 | 500 | 502 | 503 | 504 | 529 => ProviderError::Retryable {
            message: format!("HTTP {status}: {message}"),
            retry_after,
        },
        _ => ProviderError::Other {
            message: format!("HTTP {status}: {message}"),
        },
    }
}

/// The human part of an error body: `error.message` (OpenAI, Anthropic, llama.cpp, vLLM)
/// `error` as a string (Ollama, LM Studio), or `message` (vLLM).
pub fn error_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let error = &v["error"];
            error["message"]
                .as_str()
                .or_else(|| error.as_str())
                .or_else(|| v["message"].as_str()) // vLLM
                .map(String::from)
        })
        .unwrap_or_else(|| body.chars().take(500).collect())
}

/// `retry-after` (seconds) or `retry-after-ms` headers.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    get("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| get("retry-after").map(Duration::from_secs_f64))
}

/// Sends a request; an HTTP error answer comes back classified.
pub async fn send(
    request: reqwest::RequestBuilder,
    key_env: Option<&str>,
) -> Result<reqwest::Response, ProviderError> {
    let resp = request.send().await.map_err(transport_error)?;
    let status = resp.status().as_u16();
    if status >= 400 {
        let after = retry_after(resp.headers());
        let mut body = resp.text().await.unwrap_or_default();
        // Some servers echo the key they refused: it must not reach the event log.
        if let Some(key) = key_env
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| k.trim().len() >= 8)
        {
            body = body.replace(key.trim(), "[redacted]");
        }
        return Err(classify(status, &body, after, key_env));
    }
    Ok(resp)
}

/// A transport failure (no answer at all).
pub fn transport_error(e: reqwest::Error) -> ProviderError {
    if e.is_connect() || e.is_timeout() || e.is_request() {
        ProviderError::Retryable {
            message: format!("cannot reach the provider: {e}"),
            retry_after: None,
        }
    } else {
        ProviderError::Other {
            message: e.to_string(),
        }
    }
}

/// The provider `config` describes.
pub fn from_config(config: &Config) -> Result<Box<dyn Provider>, String> {
    let key = || {
        config
            .api_key_env
            .as_deref()
            .and_then(|var| std::env::var(var).ok())
            .filter(|k| !k.is_empty())
    };
    match config.provider {
        None => Err("no provider is configured: set `provider` and `model` (see README), or use --script for the offline scripted model".into()),
        Some(ProviderKind::Scripted) => {
            let path = config.script.as_ref().ok_or("the scripted provider needs `script` (a model script file)")?;
            let script = script::Script::from_file(path)?;
            Ok(Box::new(scripted::Scripted::new(script)))
        }
        Some(kind @ (ProviderKind::Openai | ProviderKind::Ollama)) => {
            let base = config.base_url.clone().or_else(|| kind.default_base_url().map(String::from)).unwrap_or_default();
            if kind == ProviderKind::Openai && key().is_none() && base.contains("api.openai.com") {
                return Err(format!(
                    "no API key: set ${} (or api_key_env to the variable that holds it)",
                    config.api_key_env.as_deref().unwrap_or("OPENAI_API_KEY")
                ));
            }
            let mut provider = openai::OpenAi::new(base, key(), config.api_key_env.clone());
            provider.ollama = kind == ProviderKind::Ollama;
            Ok(Box::new(provider))
        }
        Some(ProviderKind::Anthropic) => {
            let base = config.base_url.clone().unwrap_or_else(|| "https://api.anthropic.com".into());
            if key().is_none() && base.contains("api.anthropic.com") {
                return Err(format!(
                    "no API key: set ${} (or api_key_env to the variable that holds it)",
                    config.api_key_env.as_deref().unwrap_or("ANTHROPIC_API_KEY")
                ));
            }
            Ok(Box::new(anthropic::Anthropic::new(base, key(), config.api_key_env.clone())))
        }
    }
}

/// A shared HTTP client: no overall timeout (answers stream for minutes), but a connect
/// timeout and a read timeout between chunks.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .read_timeout(Duration::from_secs(300))
        .user_agent(concat!("agent-lsp/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_error_is_classified() {
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4100,"n_ctx":4096}}"#;
        match classify(400, llama, None, None) {
            ProviderError::ContextOverflow { window, message } => {
                assert_eq!(window, Some(4096));
                assert!(message.starts_with("the request exceeds"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let lmstudio = r#"{"error":"Trying to keep the first 5210 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough."}"#;
        assert!(matches!(
            classify(400, lmstudio, None, None),
            ProviderError::ContextOverflow { window: None, .. }
        ));
        let vllm = r#"{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","code":400}"#;
        assert!(matches!(
            classify(400, vllm, None, None),
            ProviderError::ContextOverflow { .. }
        ));
        // The same request would meet the same refusal: no retry.
        let parse = r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101]","type":"server_error"}}"#;
        match classify(500, parse, None, None) {
            ProviderError::Other { message } => assert!(message.contains("Failed to parse")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify(500, r#"{"error":{"message":"Loading model"}}"#, None, None),
            ProviderError::Retryable { .. }
        ));
        assert_eq!(
            error_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
    }
}
