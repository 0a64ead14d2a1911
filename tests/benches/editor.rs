//! Editor-side figures while a session streams at full speed (build first:
//! `cargo build --release --bins`): latency of `textDocument/codeAction` and of a
//! `didChange` followed by a request (p50/p99), and the rate of `agent/update`
//! notifications the editor receives.
//!
//! Run with `cargo bench -p agent-lsp-tests --bench editor`.

use std::time::{Duration, Instant};

use agent_lsp_tests::lsp_client::{LspClient, file_uri, initialize_params};
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::json;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    // A long answer streamed as fast as fake-llm can: 20,000 chunks of 4 characters.
    let text: String = "word ".repeat(16_000);
    let llm = FakeLlm::start(
        &json!({"chunk_chars": 4, "turns": [{"reply": {"text": text}}]}),
        "openai",
    );
    let env = TestEnv::new();
    env.write_user_config(&format!(
        "provider = \"openai\"\nmodel = \"m\"\nbase_url = \"{}/v1\"\napi_key_env = \"K\"\n",
        llm.url
    ));
    let client = LspClient::spawn(&env, &[("K", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["experimental"] = json!({"agent": {"updates": true}});
    client.initialize(params).await;
    let uri = file_uri(&env.workspace().join("a.rs"));
    client
        .notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": "fn a() {}\n"}}))
        .await;

    let started = Instant::now();
    client
        .request("agent/prompt", json!({"text": "stream"}))
        .await
        .unwrap();
    client
        .wait_for("agent/update", |u| {
            u["params"]["update"]["kind"] == "message_chunk"
        })
        .await;
    let mut actions = Vec::new();
    let mut changes = Vec::new();
    let mut version = 1;
    let streaming = |c: &LspClient| {
        !c.received("agent/update")
            .iter()
            .any(|u| u["params"]["update"]["status"] == "idle")
    };
    while streaming(&client) && actions.len() < 400 {
        let t = Instant::now();
        client
            .request("textDocument/codeAction", json!({"textDocument": {"uri": uri},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 2}}, "context": {"diagnostics": []}}))
            .await
            .unwrap();
        actions.push(t.elapsed());
        version += 1;
        let t = Instant::now();
        client
            .notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x"}]}))
            .await;
        client
            .request("agent/documentText", json!({"uri": uri}))
            .await
            .unwrap();
        changes.push(t.elapsed());
    }
    client
        .wait_for("agent/update", |u| {
            u["params"]["update"]["status"] == "idle"
        })
        .await;
    let elapsed = started.elapsed();
    let chunks = client
        .received("agent/update")
        .iter()
        .filter(|u| u["params"]["update"]["kind"] == "message_chunk")
        .count();
    actions.sort();
    changes.sort();
    println!(
        "while streaming 20,000 chunks: codeAction p50 {:.2} ms, p99 {:.2} ms; didChange → next reply p50 {:.2} ms, p99 {:.2} ms ({} samples)",
        percentile(&actions, 0.5),
        percentile(&actions, 0.99),
        percentile(&changes, 0.5),
        percentile(&changes, 0.99),
        actions.len()
    );
    println!(
        "agent/update: {chunks} message notifications for 20,000 chunks (the whole turn took {:.2} s; \
         chunks of one session wait at most 16 ms, so at most ~60 notifications a second)",
        elapsed.as_secs_f64()
    );
    client.shutdown_and_exit().await;
}
