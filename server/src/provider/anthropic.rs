//! The Anthropic Messages API, streamed, with `cache_control` on the stable prefix (tools and
//! system blocks) so prompt caching hits from the second step on.

use std::collections::BTreeSet;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{
    ChatMessage, ChatRequest, EventStream, Provider, ProviderError, ProviderEvent, StopReason,
    Usage, sse,
};

pub const VERSION: &str = "2023-06-01";

pub struct Anthropic {
    base_url: String,
    api_key: Option<String>,
    key_env: Option<String>,
    http: reqwest::Client,
}

impl Anthropic {
    pub fn new(base_url: String, api_key: Option<String>, key_env: Option<String>) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            key_env,
            http: super::http_client(),
        }
    }
}

/// Appends content blocks to the last message if it has `role`, else starts a new one
/// (the API wants user and assistant turns to alternate).
fn push(messages: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    if let Some(last) = messages.last_mut()
        && last["role"] == role
        && let Some(content) = last["content"].as_array_mut()
    {
        content.extend(blocks);
        return;
    }
    messages.push(json!({"role": role, "content": blocks}));
}

pub fn request_body(req: &ChatRequest) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for m in &req.messages {
        match m {
            ChatMessage::User { text } => push(
                &mut messages,
                "user",
                vec![json!({"type": "text", "text": text})],
            ),
            ChatMessage::Assistant {
                text,
                reasoning,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if let Some((thinking, Some(signature))) = reasoning {
                    blocks.push(
                        json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                    );
                }
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in tool_calls {
                    let input = c.input_object();
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": "(no answer)"}));
                }
                push(&mut messages, "assistant", blocks);
            }
            ChatMessage::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => push(
                &mut messages,
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}),
                ],
            ),
        }
    }
    let n = req.system.len();
    let system: Vec<Value> = req
        .system
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut block = json!({"type": "text", "text": s});
            if i + 1 == n {
                block["cache_control"] = json!({"type": "ephemeral"});
            }
            block
        })
        .collect();
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens,
        "stream": true,
        "system": system,
        "messages": messages,
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

#[derive(Default)]
struct Decoder {
    tool_blocks: BTreeSet<usize>,
    stop: Option<StopReason>,
    usage: Usage,
    finished: bool,
}

impl sse::Decode for Decoder {
    fn event(&mut self, e: &sse::SseEvent) -> Vec<Result<ProviderEvent, ProviderError>> {
        self.event(&e.event, &e.data)
    }

    fn finish(&mut self) -> Vec<Result<ProviderEvent, ProviderError>> {
        Decoder::finish(self)
    }
}

impl Decoder {
    fn event(&mut self, name: &str, data: &str) -> Vec<Result<ProviderEvent, ProviderError>> {
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, data, "skipping an SSE event that is not JSON");
                return Vec::new();
            }
        };
        let kind = if name.is_empty() {
            v["type"].as_str().unwrap_or_default()
        } else {
            name
        };
        let index = v["index"].as_u64().unwrap_or(0) as usize;
        match kind {
            "message_start" => {
                let u = &v["message"]["usage"];
                self.usage.input_tokens = u["input_tokens"].as_u64().unwrap_or(0);
                self.usage.cache_read_tokens = u["cache_read_input_tokens"].as_u64().unwrap_or(0);
                Vec::new()
            }
            "content_block_start" => {
                let block = &v["content_block"];
                if block["type"] == "tool_use" {
                    self.tool_blocks.insert(index);
                    vec![Ok(ProviderEvent::ToolCallStart {
                        index,
                        id: block["id"].as_str().unwrap_or_default().into(),
                        name: block["name"].as_str().unwrap_or_default().into(),
                    })]
                } else {
                    Vec::new()
                }
            }
            "content_block_delta" => {
                let d = &v["delta"];
                let text = |k: &str| d[k].as_str().unwrap_or_default().to_string();
                match d["type"].as_str().unwrap_or_default() {
                    "text_delta" => vec![Ok(ProviderEvent::TextDelta(text("text")))],
                    "thinking_delta" => vec![Ok(ProviderEvent::ReasoningDelta(text("thinking")))],
                    "signature_delta" => {
                        vec![Ok(ProviderEvent::ReasoningSignature(text("signature")))]
                    }
                    "input_json_delta" => vec![Ok(ProviderEvent::ToolCallDelta {
                        index,
                        arguments: text("partial_json"),
                    })],
                    _ => Vec::new(),
                }
            }
            "content_block_stop" if self.tool_blocks.contains(&index) => {
                vec![Ok(ProviderEvent::ToolCallEnd { index })]
            }
            "message_delta" => {
                self.stop = v["delta"]["stop_reason"].as_str().map(|s| match s {
                    "end_turn" | "stop_sequence" => StopReason::EndTurn,
                    "tool_use" => StopReason::ToolUse,
                    "max_tokens" => StopReason::MaxTokens,
                    "refusal" => StopReason::Refusal,
                    _ => StopReason::Other,
                });
                if let Some(out) = v["usage"]["output_tokens"].as_u64() {
                    self.usage.output_tokens = out;
                }
                Vec::new()
            }
            "message_stop" => {
                self.finished = true;
                vec![
                    Ok(ProviderEvent::Usage(self.usage)),
                    Ok(ProviderEvent::Finish(
                        self.stop.unwrap_or(StopReason::EndTurn),
                    )),
                ]
            }
            "error" => {
                let message = v["error"]["message"]
                    .as_str()
                    .unwrap_or("the provider reported an error")
                    .to_string();
                vec![Err(ProviderError::StreamBroken { message })]
            }
            _ => Vec::new(), // ping and future event types
        }
    }

    fn finish(&self) -> Vec<Result<ProviderEvent, ProviderError>> {
        if self.finished {
            Vec::new()
        } else {
            vec![Err(ProviderError::StreamBroken {
                message: "the stream ended before the answer was complete".into(),
            })]
        }
    }
}

impl Provider for Anthropic {
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, ProviderError>> {
        Box::pin(async move {
            let mut http = self
                .http
                .post(format!("{}/v1/messages", self.base_url))
                .header("anthropic-version", VERSION)
                .json(&request_body(request));
            if let Some(key) = &self.api_key {
                http = http.header("x-api-key", key);
            }
            sse::answer(http, self.key_env.as_deref(), Decoder::default()).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolCallMsg;

    #[test]
    fn tool_results_merge_into_one_user_turn_and_the_prefix_is_cached() {
        let req = ChatRequest {
            model: "m".into(),
            system: vec!["prompt".into(), "baseline".into()],
            messages: vec![
                ChatMessage::User { text: "hi".into() },
                ChatMessage::Assistant {
                    text: String::new(),
                    reasoning: Some(("think".into(), Some("sig".into()))),
                    tool_calls: vec![
                        ToolCallMsg {
                            id: "a".into(),
                            name: "read".into(),
                            arguments: "{\"filePath\":\"x\"}".into(),
                        },
                        ToolCallMsg {
                            id: "b".into(),
                            name: "glob".into(),
                            arguments: "not json".into(),
                        },
                    ],
                },
                ChatMessage::ToolResult {
                    call_id: "a".into(),
                    name: "read".into(),
                    content: "x".into(),
                    is_error: false,
                },
                ChatMessage::ToolResult {
                    call_id: "b".into(),
                    name: "glob".into(),
                    content: "bad".into(),
                    is_error: true,
                },
            ],
            tools: Vec::new(),
            max_tokens: 100,
        };
        let body = request_body(&req);
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[1]["content"][0]["type"], "thinking");
        assert_eq!(msgs[1]["content"][2]["input"], json!({}));
        assert_eq!(msgs[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(body["system"][1]["cache_control"]["type"], "ephemeral");
        assert!(body["system"][0].get("cache_control").is_none());
    }
}
