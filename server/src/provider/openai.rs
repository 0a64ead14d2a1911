//! OpenAI Chat Completions, streamed: OpenAI itself and every server that speaks it
//! (Ollama, LM Studio, vLLM, llama.cpp, OpenRouter); only `base_url` differs.

use std::collections::BTreeSet;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{
    ChatMessage, ChatRequest, EventStream, Provider, ProviderError, ProviderEvent, StopReason,
    Usage, sse,
};

pub struct OpenAi {
    base_url: String,
    api_key: Option<String>,
    key_env: Option<String>,
    http: reqwest::Client,
}

impl OpenAi {
    pub fn new(base_url: String, api_key: Option<String>, key_env: Option<String>) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            key_env,
            http: super::http_client(),
        }
    }
}

/// The request body in Chat Completions form.
pub fn request_body(req: &ChatRequest) -> Value {
    let mut messages = Vec::new();
    // One system message: several confuse some local servers' chat templates.
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system.join("\n\n")}));
    }
    for m in &req.messages {
        messages.push(match m {
            ChatMessage::User { text } => json!({"role": "user", "content": text}),
            ChatMessage::Assistant { text, tool_calls, .. } => {
                let mut msg = json!({"role": "assistant", "content": if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { Value::String(text.clone()) }});
                if !tool_calls.is_empty() {
                    msg["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                }
                msg
            }
            ChatMessage::ToolResult { call_id, content, .. } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        });
    }
    let mut body = json!({
        "model": req.model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages,
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
        body["tool_choice"] = json!("auto");
    }
    body
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        _ => StopReason::Other,
    }
}

/// Turns Chat Completions chunks into provider events.
#[derive(Default)]
struct Decoder {
    started: BTreeSet<usize>,
    finish: Option<StopReason>,
    done: bool,
}

impl sse::Decode for Decoder {
    fn event(&mut self, e: &sse::SseEvent) -> Vec<Result<ProviderEvent, ProviderError>> {
        self.chunk(&e.data)
    }

    fn finish(&mut self) -> Vec<Result<ProviderEvent, ProviderError>> {
        self.finish()
    }
}

impl Decoder {
    fn chunk(&mut self, data: &str) -> Vec<Result<ProviderEvent, ProviderError>> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Vec::new();
        }
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                // One unreadable event is skipped; the rest of the answer still counts.
                tracing::warn!(error = %e, data, "skipping an SSE event that is not JSON");
                return Vec::new();
            }
        };
        if let Some(err) = v.get("error") {
            let message = err["message"]
                .as_str()
                .unwrap_or("the provider reported an error")
                .to_string();
            return vec![Err(ProviderError::StreamBroken { message })];
        }
        let mut out = Vec::new();
        if let Some(choice) = v["choices"].get(0) {
            let d = &choice["delta"];
            for key in ["reasoning_content", "reasoning"] {
                if let Some(r) = d[key].as_str().filter(|s| !s.is_empty()) {
                    out.push(Ok(ProviderEvent::ReasoningDelta(r.into())));
                }
            }
            if let Some(t) = d["content"].as_str().filter(|s| !s.is_empty()) {
                out.push(Ok(ProviderEvent::TextDelta(t.into())));
            }
            for call in d["tool_calls"].as_array().into_iter().flatten() {
                let index = call["index"].as_u64().unwrap_or(0) as usize;
                if self.started.insert(index) {
                    out.push(Ok(ProviderEvent::ToolCallStart {
                        index,
                        id: call["id"]
                            .as_str()
                            .map(String::from)
                            .unwrap_or_else(|| format!("call_{index}")),
                        name: call["function"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    }));
                }
                if let Some(a) = call["function"]["arguments"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                {
                    out.push(Ok(ProviderEvent::ToolCallDelta {
                        index,
                        arguments: a.into(),
                    }));
                }
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                self.finish = Some(stop_reason(f));
            }
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            out.push(Ok(ProviderEvent::Usage(Usage {
                input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
                cache_read_tokens: u["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap_or(0),
            })));
        }
        out
    }

    /// Closes the answer: ends open tool calls and reports the stop reason.
    fn finish(&mut self) -> Vec<Result<ProviderEvent, ProviderError>> {
        if !self.done && self.finish.is_none() {
            return vec![Err(ProviderError::StreamBroken {
                message: "the stream ended before the answer was complete".into(),
            })];
        }
        let mut out: Vec<_> = self
            .started
            .iter()
            .map(|&index| Ok(ProviderEvent::ToolCallEnd { index }))
            .collect();
        let reason = match self.finish {
            Some(r) => r,
            None if !self.started.is_empty() => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        out.push(Ok(ProviderEvent::Finish(reason)));
        out
    }
}

impl Provider for OpenAi {
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, ProviderError>> {
        Box::pin(async move {
            let mut http = self
                .http
                .post(format!("{}/chat/completions", self.base_url))
                .json(&request_body(request));
            if let Some(key) = &self.api_key {
                http = http.bearer_auth(key);
            }
            sse::answer(http, self.key_env.as_deref(), Decoder::default()).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_text_tool_calls_usage_and_done() {
        let mut d = Decoder::default();
        let mut events = Vec::new();
        for data in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}"#,
            "not json",
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
            "[DONE]",
        ] {
            events.extend(d.chunk(data).into_iter().map(Result::unwrap));
        }
        events.extend(d.finish().into_iter().map(Result::unwrap));
        assert_eq!(
            events,
            vec![
                ProviderEvent::TextDelta("Hi".into()),
                ProviderEvent::ToolCallStart {
                    index: 0,
                    id: "c1".into(),
                    name: "read".into()
                },
                ProviderEvent::ToolCallDelta {
                    index: 0,
                    arguments: "{\"a\"".into()
                },
                ProviderEvent::ToolCallDelta {
                    index: 0,
                    arguments: ":1}".into()
                },
                ProviderEvent::Usage(Usage {
                    input_tokens: 5,
                    output_tokens: 2,
                    cache_read_tokens: 0
                }),
                ProviderEvent::ToolCallEnd { index: 0 },
                ProviderEvent::Finish(StopReason::ToolUse),
            ]
        );
        let mut cut = Decoder::default();
        cut.chunk(r#"{"choices":[{"index":0,"delta":{"content":"Hal"}}]}"#);
        assert!(matches!(
            cut.finish()[0],
            Err(ProviderError::StreamBroken { .. })
        ));
    }
}
