//! The real-model smoke checks against fake-llm imitating llama.cpp's server: a model that
//! behaves passes every check, one that never calls a tool (in three tries) fails that
//! check alone.

use std::time::Duration;

use agent_lsp_tests::model_smoke::{self, Report};
use agent_lsp_tests::process::{FakeLlm, ModelServer};
use serde_json::{Value, json};

fn smoke(turns: Value) -> Report {
    let script = json!({
        "server": {"flavor": "llamacpp", "context": 8192},
        "max_context_tokens": 8192,
        "turns": turns,
    });
    let llm = FakeLlm::start(&script, "openai");
    model_smoke::run(&ModelServer::fake(&llm, "openai"), Duration::from_secs(60))
}

fn failed(report: &Report) -> Vec<&str> {
    report
        .checks
        .iter()
        .filter(|c| c.failure.is_some())
        .map(|c| c.name)
        .collect()
}

#[test]
fn a_model_that_behaves_passes_every_check() {
    let report = smoke(json!([
        {"reply": {"text": "Hello there."}},
        {"reply": {"tool_calls": [{"name": "read", "arguments": {"filePath": "notes.txt"}}]}},
        {"reply": {"text": "The code word is PELICAN."}},
        {"reply": {"text": "Once upon a time "}, "fault": {"endless": true}},
        {"reply": {"text": "Hello from the editor."}},
    ]));
    eprintln!("{}", report.table());
    assert!(report.passed(), "{}", report.table());
    let window = &report.checks[0];
    assert!(window.detail.contains("8192"), "{}", report.table());
}

#[test]
fn a_model_without_tool_calls_fails_the_tool_check() {
    let report = smoke(json!([
        {"reply": {"text": "Hello there."}},
        {"reply": {"text": "I cannot read files."}},
        {"reply": {"text": "I still cannot."}},
        {"reply": {"text": "Nor now."}},
        {"reply": {"text": "Once upon a time "}, "fault": {"endless": true}},
        {"reply": {"text": "Hello from the editor."}},
    ]));
    assert_eq!(failed(&report), ["tool call"], "{}", report.table());
}
