//! `fake-llm`: a loopback HTTP server that replays a model script in the OpenAI Chat
//! Completions or the Anthropic Messages wire format, injects faults, and records every
//! request it receives.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_lsp::provider::script::{Fault, Reply, Script, Usage};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Openai,
    Anthropic,
}

/// One received request, as recorded.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Recorded {
    /// Which turn answered it (0-based); `null` once the script was exhausted or when a
    /// side turn answered.
    pub turn: Option<usize>,
    /// Which side turn answered it, if one did.
    #[serde(default)]
    pub side: Option<usize>,
    pub path: String,
    pub body: Value,
    /// Why the request was answered with an error by the fake itself (failed expect,
    /// exhausted script, unreadable body).
    pub error: Option<String>,
    /// When it arrived, in microseconds since the Unix epoch (for start-up benchmarks).
    #[serde(default)]
    pub received_unix_us: u64,
}

struct Shared {
    script: Script,
    format: Format,
    next_turn: usize,
    records: Vec<Recorded>,
    record_file: Option<std::fs::File>,
}

type AppState = Arc<Mutex<Shared>>;

/// The router serving `format`'s endpoint, plus `GET /_fake/requests` (what was recorded).
pub fn router(script: Script, format: Format, record: Option<PathBuf>) -> std::io::Result<Router> {
    let record_file = match record {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?,
        ),
        None => None,
    };
    let state = Arc::new(Mutex::new(Shared {
        script,
        format,
        next_turn: 0,
        records: Vec::new(),
        record_file,
    }));
    let path = match format {
        Format::Openai => "/v1/chat/completions",
        Format::Anthropic => "/v1/messages",
    };
    Ok(Router::new()
        .route(path, post(complete))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .route("/props", get(props))
        .route("/_fake/slow/{ms}", get(slow_page))
        .route("/api/show", post(ollama_show))
        .route("/api/ps", get(ollama_ps))
        .route("/api/v0/models/{*id}", get(lmstudio_model))
        .route("/_fake/requests", get(requests))
        // Model servers take big requests (and answer "context too long" when they must).
        .layer(axum::extract::DefaultBodyLimit::max(512 * 1024 * 1024))
        .with_state(state))
}

/// A page that takes `ms` to come: recorded when asked (`received_unix_us`), so that
/// tests see whether calls overlapped.
async fn slow_page(
    State(state): State<AppState>,
    axum::extract::Path(ms): axum::extract::Path<u64>,
    uri: axum::http::Uri,
) -> Response {
    {
        let mut shared = state.lock().unwrap();
        let rec = Recorded {
            turn: None,
            side: None,
            path: uri.path().to_string(),
            body: Value::Null,
            error: None,
            received_unix_us: 0,
        };
        record(&mut shared, rec);
    }
    tokio::time::sleep(Duration::from_millis(ms)).await;
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("text/plain"));
    (StatusCode::OK, headers, format!("a page that took {ms} ms")).into_response()
}

/// The script's `server`, when it imitates `flavor`.
fn server_info(state: &AppState, flavor: &str) -> Option<agent_lsp::provider::script::ServerInfo> {
    let shared = state.lock().unwrap();
    shared.script.server.clone().filter(|s| s.flavor == flavor)
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "404 page not found").into_response()
}

/// `/v1/models`: one model, with the window where vLLM and OpenRouter put it.
async fn models(State(state): State<AppState>) -> impl IntoResponse {
    let mut model = json!({"id": "fake-model", "object": "model"});
    if let Some(s) = server_info(&state, "vllm") {
        model["max_model_len"] = json!(s.context);
    }
    if let Some(s) = server_info(&state, "openrouter") {
        model["context_length"] = json!(s.context);
        model["top_provider"] = json!({"context_length": s.context});
    }
    axum::Json(json!({"object": "list", "data": [model]}))
}

/// llama.cpp's `/props`.
async fn props(State(state): State<AppState>) -> Response {
    match server_info(&state, "llamacpp") {
        Some(s) => axum::Json(json!({
            "default_generation_settings": {"n_ctx": s.context, "params": {"n_predict": -1}},
            "total_slots": 1,
            "model_path": "/models/fake.gguf",
        }))
        .into_response(),
        None => not_found(),
    }
}

/// Ollama's `/api/show`: the trained window in `model_info`, `num_ctx` among the
/// parameters when the model sets it.
async fn ollama_show(State(state): State<AppState>) -> Response {
    let Some(s) = server_info(&state, "ollama") else {
        return not_found();
    };
    let parameters = if s.num_ctx_set {
        format!(
            "num_ctx                        {}\nstop                           \"<|im_end|>\"",
            s.context
        )
    } else {
        "stop                           \"<|im_end|>\"".to_string()
    };
    axum::Json(json!({
        "parameters": parameters,
        "model_info": {"general.architecture": "qwen2", "qwen2.context_length": s.trained.unwrap_or(s.context)},
        "capabilities": ["completion", "tools"],
    }))
    .into_response()
}

/// Ollama's `/api/ps`: the loaded models with the context they run with.
async fn ollama_ps(State(state): State<AppState>) -> Response {
    let Some(s) = server_info(&state, "ollama") else {
        return not_found();
    };
    let models = if s.loaded {
        json!([{"name": "fake-model", "model": "fake-model", "context_length": s.context}])
    } else {
        json!([])
    };
    axum::Json(json!({ "models": models })).into_response()
}

/// LM Studio's `/api/v0/models/{id}`.
async fn lmstudio_model(State(state): State<AppState>) -> Response {
    match server_info(&state, "lmstudio") {
        Some(s) => axum::Json(json!({
            "id": "fake-model", "object": "model", "type": "llm", "state": "loaded",
            "max_context_length": s.trained.unwrap_or(s.context),
            "loaded_context_length": s.context,
        }))
        .into_response(),
        None => not_found(),
    }
}

async fn requests(State(state): State<AppState>) -> impl IntoResponse {
    let records = state.lock().unwrap().records.clone();
    axum::Json(records)
}

/// `/v1/embeddings` in OpenAI's format: the script's vector for a text, else its words hashed
/// into 64 dimensions; the script's fault, if any, first.
async fn embeddings(State(state): State<AppState>, uri: axum::http::Uri, body: Bytes) -> Response {
    let (config, format, body) = {
        let mut shared = state.lock().unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let rec = Recorded {
            turn: None,
            side: None,
            path: uri.path().to_string(),
            body: body.clone(),
            error: None,
            received_unix_us: 0,
        };
        record(&mut shared, rec);
        (shared.script.embeddings.clone(), shared.format, body)
    };
    if let Some(fault) = &config.fault {
        if let Some(ms) = fault.delay_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(status) = fault.status {
            let message = fault.body.as_deref().unwrap_or("injected fault");
            return error_response(format, status, error_type(status), message, None);
        }
        if let Some(text) = &fault.body {
            return (StatusCode::OK, text.clone()).into_response();
        }
    }
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_string())
            .collect(),
        _ => return error_response(format, 400, "invalid_request_error", "no input", None),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let v = config
                .vectors
                .get(text)
                .cloned()
                .unwrap_or_else(|| bag_of_words(text));
            json!({"object": "embedding", "index": i, "embedding": v})
        })
        .collect();
    axum::Json(json!({"object": "list", "data": data, "model": body["model"]})).into_response()
}

/// A text's lower-cased words, each counted in one of 64 dimensions by its FNV hash.
pub fn bag_of_words(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; 64];
    for word in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        v[(agent_lsp::hash::stable([word.as_bytes()]) % 64) as usize] += 1.0;
    }
    v
}

/// The first tool call in the history whose arguments are not JSON, as llama.cpp's server
/// checks them.
fn unparsable_arguments(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .filter_map(|c| c["function"]["arguments"].as_str())
        .find(|a| serde_json::from_str::<Value>(a).is_err())
        .map(String::from)
}

/// Records a request the fake answered with an error of its own (no turn used).
fn refused(shared: &mut Shared, path: String, body: Value, error: String) {
    let rec = Recorded {
        turn: None,
        side: None,
        path,
        body,
        error: Some(error),
        received_unix_us: 0,
    };
    record(shared, rec);
}

fn record(shared: &mut Shared, mut rec: Recorded) {
    rec.received_unix_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    if let Some(f) = &mut shared.record_file {
        let _ = writeln!(f, "{}", serde_json::to_string(&rec).unwrap_or_default());
        let _ = f.flush();
    }
    shared.records.push(rec);
}

async fn complete(State(state): State<AppState>, uri: axum::http::Uri, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let (format, turn_index, turn, script) = {
        let mut shared = state.lock().unwrap();
        let body_value: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                let reason = format!("request body is not JSON: {e}");
                refused(
                    &mut shared,
                    path,
                    Value::String(String::from_utf8_lossy(&body).into()),
                    reason.clone(),
                );
                return (StatusCode::BAD_REQUEST, reason).into_response();
            }
        };
        if let Some(max) = shared.script.max_context_tokens {
            let tokens = agent_lsp::tokens::count(&body_value.to_string()) as u64;
            if tokens > max {
                let reason = format!("{tokens} tokens > {max} maximum");
                refused(
                    &mut shared,
                    path,
                    body_value,
                    format!("context overflow: {reason}"),
                );
                return overflow_response(shared.format, &reason);
            }
        }
        if shared.format == Format::Openai
            && let Some(bad) = unparsable_arguments(&body_value)
        {
            // llama.cpp's server refuses such a history, and every later one like it.
            let reason = format!("Failed to parse tool call arguments as JSON: {bad}");
            refused(&mut shared, path, body_value, reason.clone());
            return error_response(Format::Openai, 500, "server_error", &reason, None);
        }
        if let Some((side, turn)) = shared.script.side_turn(&body_value) {
            let turn = turn.clone();
            record(
                &mut shared,
                Recorded {
                    received_unix_us: 0,
                    turn: None,
                    side: Some(side),
                    path,
                    body: body_value.clone(),
                    error: None,
                },
            );
            // Side answers number their calls apart from the turns'.
            let index = 100_000 + side;
            (
                shared.format,
                index,
                turn,
                (shared.script.clone(), body_value),
            )
        } else {
            let index = shared.next_turn;
            let Some(turn) = shared.script.turns.get(index).cloned() else {
                refused(&mut shared, path, body_value, "script exhausted".into());
                let format = shared.format;
                return error_response(format, 500, "api_error", "script exhausted", None);
            };
            shared.next_turn += 1;
            let failed = turn.expect.as_ref().and_then(|e| e.check(&body_value));
            record(
                &mut shared,
                Recorded {
                    received_unix_us: 0,
                    turn: Some(index),
                    side: None,
                    path,
                    body: body_value.clone(),
                    error: failed.clone(),
                },
            );
            if let Some(reason) = failed {
                let format = shared.format;
                return error_response(
                    format,
                    500,
                    "api_error",
                    &format!("expect failed: {reason}"),
                    None,
                );
            }
            (
                shared.format,
                index,
                turn,
                (shared.script.clone(), body_value),
            )
        }
    };
    let (script, request) = script;
    let fault = turn.fault.clone().unwrap_or_default();
    if let Some(ms) = fault.delay_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if fault.context_overflow {
        return overflow_response(format, "131072 tokens > 128000 maximum");
    }
    if let (Some(status), Some(body)) = (fault.status, &fault.body_json) {
        // A server's own error body, as it sends it (llama.cpp's carries `n_ctx`).
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (status, axum::Json(body.clone())).into_response();
    }
    if let Some(status) = fault.status {
        let message = fault
            .body
            .clone()
            .unwrap_or_else(|| "injected fault".into());
        let mut resp = error_response(format, status, error_type(status), &message, None);
        if let Some(s) = fault.retry_after_s {
            resp.headers_mut()
                .insert("retry-after", HeaderValue::from(s));
        }
        if let Some(ms) = fault.retry_after_ms {
            resp.headers_mut()
                .insert("retry-after-ms", HeaderValue::from(ms));
        }
        return resp;
    }

    if let Some(path) = &turn.replay {
        // A captured stream, byte for byte, whatever the request asked.
        return match std::fs::read_to_string(path) {
            Ok(text) => sse_response(
                replayed_events(&text),
                &fault,
                format,
                script.chunk_delay_ms,
            ),
            Err(e) => error_response(
                format,
                500,
                "api_error",
                &format!("fake-llm cannot read the replay {}: {e}", path.display()),
                None,
            ),
        };
    }
    let mut reply = turn.reply.clone().unwrap_or_else(|| Reply {
        text: "This answer is cut off in the middle of a sentence because".into(),
        ..Default::default()
    });
    // Unless the script says otherwise, report the request's size as a provider would (its
    // tokens), so that the server's calibration sees plausible numbers.
    if reply.usage.is_none() {
        reply.usage = Some(Usage {
            input_tokens: agent_lsp::tokens::count(&request.to_string()) as u64,
            output_tokens: (reply.text.len() as u64 / 4).max(1),
            cache_read_tokens: 0,
        });
    }
    let chunk_chars = script.chunk_chars.unwrap_or(8).max(1);
    let model = request["model"]
        .as_str()
        .unwrap_or("fake-model")
        .to_string();
    let stream = request["stream"].as_bool().unwrap_or(false);
    if !stream {
        return match format {
            Format::Openai => axum::Json(openai_whole(&reply, &model, turn_index)).into_response(),
            Format::Anthropic => {
                axum::Json(anthropic_whole(&reply, &model, turn_index)).into_response()
            }
        };
    }
    let include_usage = request["stream_options"]["include_usage"]
        .as_bool()
        .unwrap_or(false);
    let events = match format {
        Format::Openai => openai_events(&reply, &model, turn_index, chunk_chars, include_usage),
        Format::Anthropic => anthropic_events(&reply, &model, turn_index, chunk_chars),
    };
    let events = events.iter().map(encode).collect();
    sse_response(events, &fault, format, script.chunk_delay_ms)
}

/// The provider's "context too long" error, in its own words.
fn overflow_response(format: Format, reason: &str) -> Response {
    match format {
        Format::Openai => error_response(
            format,
            400,
            "invalid_request_error",
            &format!(
                "This model's maximum context length is exceeded ({reason}). Please reduce the length of the messages."
            ),
            Some("context_length_exceeded"),
        ),
        Format::Anthropic => error_response(
            format,
            400,
            "invalid_request_error",
            &format!("prompt is too long: {reason}"),
            None,
        ),
    }
}

fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// An error shaped as the provider shapes it.
fn error_response(
    format: Format,
    status: u16,
    kind: &str,
    message: &str,
    code: Option<&str>,
) -> Response {
    let body = match format {
        Format::Openai => {
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
        Format::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    (status, headers, body.to_string()).into_response()
}

fn chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn default_usage(reply: &Reply) -> Usage {
    reply.usage.unwrap_or(Usage {
        input_tokens: 100,
        output_tokens: (reply.text.len() as u64 / 4).max(1),
        cache_read_tokens: 0,
    })
}

fn call_id(turn: usize, i: usize, given: &Option<String>, prefix: &str) -> String {
    given
        .clone()
        .unwrap_or_else(|| format!("{prefix}_{turn}_{i}"))
}

/// One SSE event: (event name for Anthropic, data).
type SseEvent = (Option<&'static str>, String);

fn openai_events(
    reply: &Reply,
    model: &str,
    turn: usize,
    size: usize,
    include_usage: bool,
) -> Vec<SseEvent> {
    let id = format!("chatcmpl-fake-{turn}");
    let chunk = |delta: Value, finish: Value| {
        (
            None,
            json!({"id": id, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string(),
        )
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(r) = &reply.reasoning {
        for piece in chunks(r, size) {
            out.push(chunk(json!({"reasoning_content": piece}), Value::Null));
        }
    }
    for piece in chunks(&reply.text, size) {
        out.push(chunk(json!({"content": piece}), Value::Null));
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        out.push(chunk(
            json!({"tool_calls": [{"index": i, "id": call_id(turn, i, &call.id, "call"), "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        for piece in chunks(&call.arguments_text(), size) {
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    let finish = reply.finish_reason.clone().unwrap_or_else(|| {
        if reply.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .into()
    });
    out.push(chunk(json!({}), Value::String(finish)));
    if include_usage {
        let u = default_usage(reply);
        out.push((
            None,
            json!({"id": id, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model,
                   "choices": [],
                   "usage": {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                             "total_tokens": u.input_tokens + u.output_tokens,
                             "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens}}})
            .to_string(),
        ));
    }
    out.push((None, "[DONE]".into()));
    out
}

fn openai_whole(reply: &Reply, model: &str, turn: usize) -> Value {
    let u = default_usage(reply);
    let calls: Vec<Value> = reply
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"id": call_id(turn, i, &c.id, "call"), "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments_text()}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": reply.text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    if let Some(r) = &reply.reasoning {
        message["reasoning_content"] = Value::String(r.clone());
    }
    let finish = reply.finish_reason.clone().unwrap_or_else(|| {
        if reply.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .into()
    });
    json!({"id": format!("chatcmpl-fake-{turn}"), "object": "chat.completion", "created": 1_700_000_000,
           "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
           "usage": {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                     "total_tokens": u.input_tokens + u.output_tokens}})
}

fn anthropic_stop_reason(reply: &Reply) -> String {
    reply.finish_reason.clone().unwrap_or_else(|| {
        if reply.tool_calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        }
        .into()
    })
}

fn anthropic_events(reply: &Reply, model: &str, turn: usize, size: usize) -> Vec<SseEvent> {
    let u = default_usage(reply);
    let ev = |name: &'static str, data: Value| (Some(name), data.to_string());
    let mut out = vec![ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_fake_{turn}"), "type": "message",
               "role": "assistant", "content": [], "model": model, "stop_reason": null, "stop_sequence": null,
               "usage": {"input_tokens": u.input_tokens, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": u.cache_read_tokens, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    if let Some(r) = &reply.reasoning {
        out.push(ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": ""}}),
        ));
        for piece in chunks(r, size) {
            out.push(ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": piece}}),
            ));
        }
        out.push(ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": format!("sig-{turn}")}}),
        ));
        out.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    if !reply.text.is_empty() {
        out.push(ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        out.push(ev("ping", json!({"type": "ping"})));
        for piece in chunks(&reply.text, size) {
            out.push(ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        out.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        out.push(ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block":
                   {"type": "tool_use", "id": call_id(turn, i, &call.id, "toolu"), "name": call.name, "input": {}}}),
        ));
        for piece in chunks(&call.arguments_text(), size) {
            out.push(ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        out.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    out.push(ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": anthropic_stop_reason(reply), "stop_sequence": null},
               "usage": {"output_tokens": u.output_tokens}}),
    ));
    out.push(ev("message_stop", json!({"type": "message_stop"})));
    out
}

fn anthropic_whole(reply: &Reply, model: &str, turn: usize) -> Value {
    let u = default_usage(reply);
    let mut content = Vec::new();
    if let Some(r) = &reply.reasoning {
        content
            .push(json!({"type": "thinking", "thinking": r, "signature": format!("sig-{turn}")}));
    }
    if !reply.text.is_empty() {
        content.push(json!({"type": "text", "text": reply.text}));
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        let input: Value = serde_json::from_str(&c.arguments_text()).unwrap_or(Value::Null);
        content.push(json!({"type": "tool_use", "id": call_id(turn, i, &c.id, "toolu"), "name": c.name, "input": input}));
    }
    json!({"id": format!("msg_fake_{turn}"), "type": "message", "role": "assistant", "model": model,
           "content": content, "stop_reason": anthropic_stop_reason(reply), "stop_sequence": null,
           "usage": {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                     "cache_read_input_tokens": u.cache_read_tokens}})
}

fn encode(event: &SseEvent) -> Bytes {
    match event.0 {
        Some(name) => Bytes::from(format!("event: {name}\ndata: {}\n\n", event.1)),
        None => Bytes::from(format!("data: {}\n\n", event.1)),
    }
}

/// Streams `events`, applying the stream faults.
/// The bytes of a captured SSE stream, one item per event (each with its blank line), as
/// the server sent them.
fn replayed_events(text: &str) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.find("\n\n").map_or(rest.len(), |i| i + 2);
        out.push(Bytes::copy_from_slice(&rest.as_bytes()[..end]));
        rest = &rest[end..];
    }
    out
}

fn sse_response(events: Vec<Bytes>, fault: &Fault, format: Format, delay_ms: u64) -> Response {
    let mut items: Vec<Result<Bytes, std::io::Error>> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if fault.disconnect_after_chunks == Some(i) {
            items.push(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "fake-llm: injected disconnect",
            )));
            break;
        }
        if fault.stream_error_after_chunks == Some(i) {
            let error = match format {
                Format::Openai => (None, json!({"error": {"message": "Overloaded", "type": "server_error", "code": null}}).to_string()),
                Format::Anthropic => (Some("error"), json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string()),
            };
            items.push(Ok(encode(&error)));
            break;
        }
        if fault.malformed_sse && i == 1 {
            items.push(Ok(Bytes::from_static(b"data: {this is not json\n\n")));
        }
        items.push(Ok(e.clone()));
    }
    if fault.endless && events.len() > 1 {
        items.truncate(2);
        let again = events[1].clone();
        items.extend(std::iter::repeat_n(again, 100_000).map(Ok));
    }
    let delay = Duration::from_millis(delay_ms);
    let stream = futures::stream::iter(items).then(move |item| async move {
        if item.is_err() {
            // Let what came before reach the client first, so the cut is mid-stream.
            tokio::time::sleep(Duration::from_millis(100)).await;
        } else if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        item
    });
    let mut headers = HeaderMap::new();
    headers.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    (StatusCode::OK, headers, Body::from_stream(stream)).into_response()
}

/// Serves until the process ends. Prints `listening on http://127.0.0.1:PORT` first.
pub async fn serve(
    script: Script,
    format: Format,
    port: u16,
    record: Option<PathBuf>,
) -> std::io::Result<()> {
    let app = router(script, format, record)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{addr}")?;
        out.flush()?;
    }
    axum::serve(listener, app).await
}
