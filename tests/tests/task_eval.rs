//! The task evaluation's harness: every task's oracle script does the task (so the checks
//! accept the work), and a model that does nothing fails every task (so no check passes
//! without it).

use std::time::Duration;

use agent_lsp_tests::task_eval::{self, Model, Options, tasks};

fn run(model: Model) -> task_eval::Report {
    task_eval::run(&Options {
        model,
        timeout: Duration::from_secs(300),
        only: None,
        config: String::new(),
    })
    .expect("the tasks load and none passes untouched")
}

#[test]
fn the_oracle_passes_every_task() {
    let report = run(Model::Oracle);
    assert!(
        report.outcomes.len() >= 12,
        "a dozen tasks: {}",
        report.table()
    );
    assert_eq!(report.passed(), report.outcomes.len(), "{}", report.table());
    for o in &report.outcomes {
        assert!(o.steps >= 1 && o.tokens > 0, "{}", report.table());
    }
}

#[test]
fn a_model_that_does_nothing_fails_every_task() {
    let report = run(Model::Idle);
    eprintln!("{}", report.table());
    assert_eq!(report.outcomes.len(), tasks().unwrap().len());
    for o in &report.outcomes {
        let why = o
            .failure
            .as_deref()
            .unwrap_or_else(|| panic!("{} passed: {}", o.task, report.table()));
        assert!(
            !why.contains("exited"),
            "the run itself worked: {}",
            report.table()
        );
    }
}
