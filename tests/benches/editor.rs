//! Editor-side figures while a session streams (build first: `cargo build --release
//! --bins`): latency of `textDocument/codeAction` and of a `didChange` followed by a request
//! (p50, p99, max), and the rate of `agent/update` notifications the editor receives. Two
//! passes: 20,000 chunks at full speed, and 2,000 small chunks 2 ms apart with both cores
//! kept busy by two spinning threads (the load under which a stall showed before).
//!
//! Run with `cargo bench -p agent-lsp-tests --bench editor`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_lsp_tests::lsp_client::{LspClient, file_uri, initialize_params};
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::{Value, json};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        percentile(&samples, 1.0)
    )
}

/// One streaming session with codeAction and didChange requests sent while it streams.
async fn pass(name: &str, script: Value, chunks_sent: usize) {
    let llm = FakeLlm::start(&script, "openai");
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
        client.code_actions(&uri, 0, 0, 2).await;
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
    let notifications = client
        .received("agent/update")
        .iter()
        .filter(|u| u["params"]["update"]["kind"] == "message_chunk")
        .count();
    println!(
        "{name}: codeAction {}; didChange → next reply {} ({} samples); {notifications} \
         agent/update message notifications for {chunks_sent} chunks in {:.2} s",
        summary(actions.clone()),
        summary(changes),
        actions.len(),
        elapsed.as_secs_f64()
    );
    client.shutdown_and_exit().await;
}

#[tokio::main]
async fn main() {
    // 20,000 chunks of 4 characters, as fast as fake-llm can.
    let text = "word ".repeat(16_000);
    pass(
        "20,000 chunks at full speed",
        json!({"chunk_chars": 4, "turns": [{"reply": {"text": text}}]}),
        20_000,
    )
    .await;

    // 2,000 chunks 2 ms apart while two threads spin on the two cores.
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                x
            })
        })
        .collect();
    let text = "word ".repeat(1_600);
    pass(
        "2,000 chunks 2 ms apart, both cores busy",
        json!({"chunk_chars": 4, "chunk_delay_ms": 2, "turns": [{"reply": {"text": text}}]}),
        2_000,
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        let _ = s.join();
    }
}
