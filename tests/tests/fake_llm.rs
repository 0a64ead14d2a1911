//! fake-llm speaks both providers' wire formats faithfully and injects the faults asked for.

use agent_lsp_tests::process::FakeLlm;
use futures::StreamExt;
use serde_json::{Value, json};

/// (event name, data) pairs of an SSE body.
fn sse(body: &str) -> Vec<(Option<String>, String)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = Some(e.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push(d);
                }
            }
            (event, data.join("\n"))
        })
        .collect()
}

async fn post(url: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn tool_script() -> Value {
    json!({"turns": [
        {"reply": {"text": "Let me look at the file.", "reasoning": "The user wants a read.",
                   "tool_calls": [{"name": "read", "arguments": {"filePath": "src/lib.rs", "limit": 20}},
                                  {"name": "glob", "arguments": {"pattern": "**/*.rs"}}]}},
        {"expect": {"last_message_contains": "fn main"}, "reply": {"text": "Done."}}
    ]})
}

#[tokio::test]
async fn openai_stream_chunks_tool_calls_usage_and_done() {
    let llm = FakeLlm::start(&tool_script(), "openai");
    let url = format!("{}/v1/chat/completions", llm.url);
    let resp = post(
        &url,
        json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
               "messages": [{"role": "user", "content": "read it"}]}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = sse(&resp.text().await.unwrap());
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut args = [String::new(), String::new()];
    let mut arg_chunks = [0, 0];
    let mut names = Vec::new();
    let mut finish = None;
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        let Some(choice) = c["choices"].get(0) else {
            continue;
        };
        let d = &choice["delta"];
        text += d["content"].as_str().unwrap_or("");
        reasoning += d["reasoning_content"].as_str().unwrap_or("");
        for call in d["tool_calls"].as_array().into_iter().flatten() {
            let i = call["index"].as_u64().unwrap() as usize;
            if let Some(n) = call["function"]["name"].as_str() {
                names.push(n.to_string());
                assert!(call["id"].is_string());
            }
            let piece = call["function"]["arguments"].as_str().unwrap_or("");
            if !piece.is_empty() {
                arg_chunks[i] += 1;
            }
            args[i] += piece;
        }
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].as_str().map(String::from);
        }
    }
    assert_eq!(text, "Let me look at the file.");
    assert_eq!(reasoning, "The user wants a read.");
    assert_eq!(names, ["read", "glob"]);
    assert!(
        arg_chunks.iter().all(|n| *n >= 2),
        "arguments split: {arg_chunks:?}"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&args[0]).unwrap(),
        json!({"filePath": "src/lib.rs", "limit": 20})
    );
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    let usage = &chunks.last().unwrap()["usage"];
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(chunks.last().unwrap()["choices"], json!([]));

    // The expect of turn 2 fails: 500 with the reason, recorded.
    let resp = post(
        &url,
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hello"}]}),
    )
    .await;
    assert_eq!(resp.status(), 500);
    let body: Value = resp.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("fn main")
    );
    // Exhausted.
    let resp = post(&url, json!({"model": "m", "messages": []})).await;
    assert_eq!(resp.status(), 500);
    assert!(resp.text().await.unwrap().contains("script exhausted"));

    let recorded = llm.requests();
    assert_eq!(recorded.len(), 3);
    assert_eq!(recorded[0].turn, Some(0));
    assert_eq!(recorded[0].body["messages"][0]["content"], "read it");
    assert!(
        recorded[1]
            .error
            .as_deref()
            .unwrap()
            .contains("expected the last message")
    );
    assert_eq!(recorded[2].error.as_deref(), Some("script exhausted"));
}

#[tokio::test]
async fn anthropic_stream_follows_the_messages_event_sequence() {
    let llm = FakeLlm::start(&tool_script(), "anthropic");
    let url = format!("{}/v1/messages", llm.url);
    let resp = post(
        &url,
        json!({"model": "claude", "stream": true, "max_tokens": 100,
                                 "messages": [{"role": "user", "content": "read it"}]}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let events = sse(&resp.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    assert!(names.contains(&"ping"));
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial: Vec<String> = Vec::new();
    for (name, data) in &events {
        let d: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            d["type"],
            name.as_deref().unwrap(),
            "event name matches data.type"
        );
        match name.as_deref().unwrap() {
            "content_block_start" => {
                assert_eq!(d["index"].as_u64().unwrap() as usize, blocks.len());
                blocks.push(d["content_block"].clone());
                partial.push(String::new());
            }
            "content_block_delta" => {
                let i = d["index"].as_u64().unwrap() as usize;
                let delta = &d["delta"];
                match delta["type"].as_str().unwrap() {
                    "text_delta" => partial[i] += delta["text"].as_str().unwrap(),
                    "thinking_delta" => partial[i] += delta["thinking"].as_str().unwrap(),
                    "input_json_delta" => partial[i] += delta["partial_json"].as_str().unwrap(),
                    "signature_delta" => assert!(delta["signature"].is_string()),
                    other => panic!("unknown delta {other}"),
                }
            }
            "message_delta" => assert_eq!(d["delta"]["stop_reason"], "tool_use"),
            _ => {}
        }
    }
    let kinds: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["thinking", "text", "tool_use", "tool_use"]);
    assert_eq!(partial[0], "The user wants a read.");
    assert_eq!(partial[1], "Let me look at the file.");
    assert_eq!(blocks[2]["name"], "read");
    assert_eq!(
        serde_json::from_str::<Value>(&partial[3]).unwrap(),
        json!({"pattern": "**/*.rs"})
    );

    // Non-streaming, turn 2, its expect met through an Anthropic tool_result block.
    let resp = post(&url, json!({"model": "claude", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "fn main() {}"}]}
    ]}))
    .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["content"][0], json!({"type": "text", "text": "Done."}));
    assert_eq!(body["stop_reason"], "end_turn");
}

#[tokio::test]
async fn faults_status_retry_after_overflow_disconnect_and_stream_errors() {
    let script = json!({"turns": [
        {"fault": {"status": 429, "retry_after_s": 1, "body": "rate limited"}},
        {"fault": {"context_overflow": true}},
        {"fault": {"disconnect_after_chunks": 2}},
        {"fault": {"stream_error_after_chunks": 3}},
        {"fault": {"status": 401, "body": "bad key"}}
    ]});
    for format in ["openai", "anthropic"] {
        let llm = FakeLlm::start(&script, format);
        let url = match format {
            "openai" => format!("{}/v1/chat/completions", llm.url),
            _ => format!("{}/v1/messages", llm.url),
        };
        let req =
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});

        let resp = post(&url, req.clone()).await;
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "1");
        let body: Value = resp.json().await.unwrap();
        let message = match format {
            "openai" => &body["error"]["message"],
            _ => {
                assert_eq!(body["type"], "error");
                assert_eq!(body["error"]["type"], "rate_limit_error");
                &body["error"]["message"]
            }
        };
        assert_eq!(message, "rate limited");

        let resp = post(&url, req.clone()).await;
        assert_eq!(resp.status(), 400);
        let body: Value = resp.json().await.unwrap();
        match format {
            "openai" => assert_eq!(body["error"]["code"], "context_length_exceeded"),
            _ => assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("prompt is too long")
            ),
        }

        let resp = post(&url, req.clone()).await;
        assert_eq!(resp.status(), 200);
        let mut stream = resp.bytes_stream();
        let mut got = 0;
        let mut broke = false;
        while let Some(item) = stream.next().await {
            match item {
                Ok(b) => got += b.len(),
                Err(_) => {
                    broke = true;
                    break;
                }
            }
        }
        assert!(broke && got > 0, "{format}: stream cut after some output");

        let resp = post(&url, req.clone()).await;
        let events = sse(&resp.text().await.unwrap());
        let (name, data) = events.last().unwrap();
        let data: Value = serde_json::from_str(data).unwrap();
        match format {
            "openai" => assert!(data["error"]["message"].is_string()),
            _ => {
                assert_eq!(name.as_deref(), Some("error"));
                assert_eq!(data["error"]["type"], "overloaded_error");
            }
        }

        let resp = post(&url, req.clone()).await;
        assert_eq!(resp.status(), 401);
        assert_eq!(llm.requests().len(), 5);
    }
}
