//! The context evaluation with fake-llm (see `agent_lsp_tests::context_eval`; the
//! `context-eval` binary runs it against a real model too). Prints the report.

use agent_lsp_tests::context_eval::{DEPTHS, Options, run};

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
