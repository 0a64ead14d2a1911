//! The context evaluation with fake-llm (see `agent_lsp_tests::context_eval`; the
//! `context-eval` binary runs it against a real model too). Prints the report.

use agent_lsp_tests::context_eval::{DEPTHS, Options, run};
use agent_lsp_tests::process::{FakeLlm, workspace_bin};
use serde_json::json;

#[test]
fn a_long_session_stays_inside_the_window_and_every_fact_stays_reachable() {
    let report = run(&Options::default());
    println!("{}", report.table());
    assert!(
        report.session_tokens >= 150_000,
        "{}",
        report.session_tokens
    );
    assert_eq!(report.over_window, 0, "every request fit the window");
    assert!(report.tokens_max <= 32_768, "{}", report.tokens_max);
    assert_eq!(report.requests, 170, "one request per turn");
    assert!(report.distillations.0 > 0, "the session was distilled");
    // Between cuts each request extends the previous one byte for byte.
    assert!(report.cuts > 0);
    assert_eq!(
        report.extending + report.cuts,
        report.requests - 1,
        "{}",
        report.table()
    );
    for (name, range) in DEPTHS {
        let facts = &report.facts[range];
        assert!(
            facts.iter().all(|f| f.reachable()),
            "{name}: {}",
            report.table()
        );
    }
    let recalled = report
        .facts
        .iter()
        .filter(|f| f.recall_rank.is_some())
        .count();
    assert!(recalled >= 18, "recall found {recalled}/20");
}

#[test]
fn the_harness_runs_against_an_openai_compatible_endpoint_and_grades_answers() {
    // fake-llm standing in for a real server: every answer names no fact.
    let turns: Vec<_> = (0..45)
        .map(|_| json!({"reply": {"text": "Noted."}}))
        .collect();
    let side = json!([{"expect": {"system_contains": "observer of a coding session"},
                       "reply": {"text": "- [00:00] [low] notes"}}]);
    let llm = FakeLlm::start(&json!({"turns": turns, "side": side}), "openai");
    let out = std::process::Command::new(workspace_bin("context-eval"))
        .args([
            "--base-url",
            &format!("{}/v1", llm.url),
            "--model",
            "m",
            "--turns",
            "25",
        ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains("| depth | in the request | recall top 5 | reachable | answered |"));
    assert!(
        table.contains("| early | 0/7 | 7/7 | 7/7 | 0/7 |"),
        "{table}"
    );
    assert_eq!(
        llm.requests().iter().filter(|r| r.side.is_none()).count(),
        45
    );
}
