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
mod sse;

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
    ContextOverflow { message: String },
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
}

/// Recognises the context-overflow messages of the common providers and local servers.
pub fn is_context_overflow(status: u16, body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    (status == 400 || status == 413 || status == 500)
        && (b.contains("context_length_exceeded")
            || b.contains("prompt is too long")
            || b.contains("maximum context length")
            || b.contains("context length")
            || b.contains("context window")
            || b.contains("too many tokens")
            || b.contains("exceeds the available context")
            || b.contains("input is too long"))
}

/// Classifies an HTTP error answer.
pub fn classify(
    status: u16,
    body: &str,
    retry_after: Option<Duration>,
    key_env: Option<&str>,
) -> ProviderError {
    let message = error_message(body);
    if is_context_overflow(status, body) {
        return ProviderError::ContextOverflow { message };
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

/// The human part of an error body (`error.message` in both providers' shapes).
fn error_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(String::from))
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
        let body = resp.text().await.unwrap_or_default();
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
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let script = script::Script::from_json(&text)?;
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
            Ok(Box::new(openai::OpenAi::new(base, key(), config.api_key_env.clone())))
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
