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
    /// An Ollama server: its own API tells the window first.
    pub ollama: bool,
}

impl OpenAi {
    pub fn new(base_url: String, api_key: Option<String>, key_env: Option<String>) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            key_env,
            http: super::http_client(),
            ollama: false,
        }
    }

    /// How this server takes the answer's limit: OpenAI's own API wants
    /// `max_completion_tokens` (its reasoning models refuse `max_tokens`); every
    /// compatible server reads `max_tokens`.
    fn limit_field(&self) -> LimitField {
        if self.base_url.contains("api.openai.com") {
            LimitField::MaxCompletionTokens
        } else {
            LimitField::MaxTokens
        }
    }
}

/// The name the answer's token limit goes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitField {
    MaxTokens,
    MaxCompletionTokens,
}

/// The request body in Chat Completions form.
pub fn request_body(req: &ChatRequest, limit: LimitField) -> Value {
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
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.input_object().to_string()}}))
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
    // Without a limit llama.cpp's server answers until its context is full.
    let limit_key = match limit {
        LimitField::MaxTokens => "max_tokens",
        LimitField::MaxCompletionTokens => "max_completion_tokens",
    };
    body[limit_key] = json!(req.max_tokens);
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
        body["tool_choice"] = json!("auto");
        // Independent reads in one answer run concurrently (see agent::turn).
        body["parallel_tool_calls"] = json!(true);
    }
    body
}

/// A captured Chat Completions stream (its bytes as the server sent them), read as an
/// answer: how `--script` replays a capture and how the captures are tested.
pub fn replay(captured: Vec<u8>) -> EventStream {
    let body = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(captured))]);
    sse::read(body, Decoder::default())
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
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
        if v.get("error").is_some_and(|e| !e.is_null()) {
            // An error sent inside the stream (llama.cpp, vLLM, OpenRouter): an overflow
            // is one like the HTTP answer's; anything else breaks the answer.
            let message = super::error_message(data);
            if super::is_context_overflow(None, data) {
                let window = super::window::in_overflow_error(data);
                return vec![Err(ProviderError::ContextOverflow { message, window })];
            }
            return vec![Err(ProviderError::StreamBroken { message })];
        }
        let mut out = Vec::new();
        if let Some(choice) = v["choices"].get(0) {
            let d = &choice["delta"];
            // llama.cpp, vLLM and DeepSeek say `reasoning_content`; Ollama and OpenRouter
            // `reasoning` (some send both, the same text).
            let reasoning = ["reasoning_content", "reasoning"]
                .iter()
                .find_map(|key| d[*key].as_str().filter(|s| !s.is_empty()));
            if let Some(r) = reasoning {
                out.push(Ok(ProviderEvent::ReasoningDelta(r.into())));
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
                .json(&request_body(request, self.limit_field()));
            if let Some(key) = &self.api_key {
                http = http.bearer_auth(key);
            }
            sse::answer(http, self.key_env.as_deref(), Decoder::default()).await
        })
    }

    fn window<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Option<super::window::Probe>> {
        Box::pin(async move {
            // OpenAI's own API lists no windows; the name's table knows its models.
            if self.base_url.contains("api.openai.com") {
                return None;
            }
            let key = self.api_key.as_deref();
            Some(super::window::probe(&self.http, &self.base_url, key, model, self.ollama).await)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// A capture from `tests/wire`, read as the provider reads a live answer.
    fn replayed(name: &str) -> Vec<Result<ProviderEvent, ProviderError>> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/wire")
            .join(name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        futures::executor::block_on(replay(bytes).collect())
    }

    /// The text, reasoning and (name, arguments) of each call an answer streamed, and how
    /// it ended.
    type Gist = (
        String,
        String,
        Vec<(String, String)>,
        Option<StopReason>,
        Option<Usage>,
    );

    fn gist(events: &[Result<ProviderEvent, ProviderError>]) -> Gist {
        let (mut text, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
        let (mut stop, mut usage) = (None, None);
        for e in events.iter().flatten() {
            match e {
                ProviderEvent::TextDelta(t) => text.push_str(t),
                ProviderEvent::ReasoningDelta(t) => reasoning.push_str(t),
                ProviderEvent::ToolCallStart { name, .. } => {
                    calls.push((name.clone(), String::new()))
                }
                ProviderEvent::ToolCallDelta { index, arguments } => {
                    calls[*index].1.push_str(arguments)
                }
                ProviderEvent::Finish(r) => stop = Some(*r),
                ProviderEvent::Usage(u) => usage = Some(*u),
                _ => {}
            }
        }
        (text, reasoning, calls, stop, usage)
    }

    #[test]
    fn llama_cpp_captures() {
        let events = replayed("llama.cpp/plain.sse");
        let (text, _, calls, stop, usage) = gist(&events);
        assert!(text.starts_with("Say hello in five words."), "{text}");
        assert!(calls.is_empty());
        assert_eq!(
            stop,
            Some(StopReason::MaxTokens),
            "length is the output limit"
        );
        assert_eq!(
            usage.map(|u| (u.input_tokens, u.output_tokens)),
            Some((29, 40))
        );

        let events = replayed("llama.cpp/tool-auto.sse");
        let (_, _, calls, stop, usage) = gist(&events);
        assert_eq!(calls.len(), 6, "{calls:?}");
        for (name, arguments) in &calls {
            assert_eq!(name, "read");
            let v: Value = serde_json::from_str(arguments).unwrap();
            assert_eq!(v["filePath"], "src/main.rs");
        }
        assert_eq!(stop, Some(StopReason::MaxTokens));
        assert_eq!(
            usage.map(|u| u.input_tokens),
            Some(389),
            "usage with timings and empty choices"
        );
        let ids: Vec<_> = events
            .iter()
            .flatten()
            .filter_map(|e| match e {
                ProviderEvent::ToolCallStart { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            ids[0], "HtpAmSx55xjdI4UAjkma4KkKXcTTK08E",
            "the id of the first delta"
        );

        let (_, _, calls, stop, _) = gist(&replayed("llama.cpp/tool-cut.sse"));
        assert_eq!(stop, Some(StopReason::MaxTokens));
        assert_eq!(calls[0].0, "write");
        assert!(
            serde_json::from_str::<Value>(&calls[0].1).is_err(),
            "cut inside"
        );
    }

    #[test]
    fn reasoning_of_vllm_and_ollama() {
        let (text, reasoning, calls, stop, _) = gist(&replayed("vllm/reasoning-tool.sse"));
        assert_eq!(reasoning, "The userwants the README.");
        assert_eq!(text, "Reading it.");
        assert_eq!(
            calls,
            vec![("read".into(), "{\"filePath\": \"README.md\"}".into())]
        );
        assert_eq!(stop, Some(StopReason::ToolUse));
        let (text, reasoning, calls, stop, _) = gist(&replayed("ollama/reasoning-tool.sse"));
        assert_eq!(reasoning, "Need to look at main.rs");
        assert_eq!(text, "");
        assert_eq!(
            calls,
            vec![("read".into(), "{\"filePath\":\"src/main.rs\"}".into())]
        );
        assert_eq!(stop, Some(StopReason::ToolUse));
    }

    #[test]
    fn errors_inside_the_stream() {
        let events = replayed("openrouter/error-midstream.sse");
        let (text, ..) = gist(&events);
        assert_eq!(text, "Let me check", "what came before the error is kept");
        match events.last() {
            Some(Err(ProviderError::StreamBroken { message })) => {
                assert_eq!(message, "Provider returned error")
            }
            other => panic!("{other:?}"),
        }
        let events = replayed("openrouter/overflow-midstream.sse");
        assert!(
            matches!(
                events.last(),
                Some(Err(ProviderError::ContextOverflow { .. }))
            ),
            "{events:?}"
        );
    }

    #[test]
    fn the_request_carries_the_limit_and_valid_arguments() {
        let req = ChatRequest {
            model: "m".into(),
            system: vec!["s".into()],
            messages: vec![ChatMessage::Assistant {
                text: String::new(),
                reasoning: None,
                tool_calls: vec![super::super::ToolCallMsg {
                    id: "c".into(),
                    name: "write".into(),
                    arguments: "{\"content\": \"hel".into(),
                }],
            }],
            tools: vec![crate::tools::ToolDefinition {
                name: "read".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            max_tokens: 777,
        };
        let body = request_body(&req, LimitField::MaxTokens);
        assert_eq!(body["max_tokens"], 777);
        assert_eq!(body["parallel_tool_calls"], true);
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        let body = request_body(&req, LimitField::MaxCompletionTokens);
        assert_eq!(body["max_completion_tokens"], 777);
        assert!(body.get("max_tokens").is_none());
    }

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
