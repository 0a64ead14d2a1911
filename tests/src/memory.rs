//! Memory facts for the editors' inspector tests: a workspace seeded with one fact of each
//! kind the inspector must show (core, archival, local-only, and a dreamt fact in conflict
//! with another), and the facts as the command line lists them afterwards.

use std::path::Path;

use serde_json::Value;

use crate::process::TestEnv;

/// `agent-lsp ARGS --cwd CWD --json` (with `$FAKE_KEY` set, for the model of a dream or a
/// curation): the exit code, the JSON printed (`null` if none) and stderr.
pub fn json_command_in(env: &TestEnv, cwd: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = env
        .command(args)
        .arg("--cwd")
        .arg(cwd)
        .arg("--json")
        .env("FAKE_KEY", "k")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run agent-lsp");
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// `agent-lsp memory ARGS --cwd CWD --json`.
pub fn memory_in(env: &TestEnv, cwd: &Path, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["memory"];
    all.extend(args);
    json_command_in(env, cwd, &all)
}

/// [`memory_in`] folder `cwd`, which must succeed: its JSON.
pub fn ok_in(env: &TestEnv, cwd: &Path, args: &[&str]) -> Value {
    let (code, v, err) = memory_in(env, cwd, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    v
}

/// [`ok_in`] the test workspace.
pub fn memory(env: &TestEnv, args: &[&str]) -> Value {
    ok_in(env, &env.workspace(), args)
}

/// The workspace's live facts.
pub fn list(env: &TestEnv) -> Vec<Value> {
    memory(env, &["list"])["facts"].as_array().unwrap().clone()
}

/// Five facts: "Answer in British English" (core), "Releases are shipped with make ship",
/// a local-only "The staging password is hunter2", "The project installs packages with npm"
/// and a dreamt "The project installs packages with pnpm" (two messages, confidence 0.8)
/// that contradicts it. Returns the npm fact's id.
pub fn seed_for_inspector(env: &TestEnv) -> String {
    let add = |args: &[&str]| {
        let mut all = vec!["add"];
        all.extend(args);
        memory(env, &all)["id"].as_str().unwrap().to_string()
    };
    add(&["Answer in British English", "--tier", "core"]);
    add(&["Releases are shipped with make ship"]);
    add(&[
        "The staging password is hunter2",
        "--sensitivity",
        "local-only",
    ]);
    let npm = add(&["The project installs packages with npm"]);
    // As a dream writes one (a dream needs a session and a model; its own tests cover it).
    let project = list(env)[0]["project"].as_str().unwrap().to_string();
    let mut store = agent_lsp::store::Store::open(&env.database()).unwrap();
    use agent_lsp::status::{FactScope, FactSource, Sensitivity, Tier};
    agent_lsp::facts::write(
        &mut store,
        &project,
        agent_lsp::facts::NewFact {
            content: "The project installs packages with pnpm".into(),
            tier: Tier::Archival,
            scope: FactScope::Project,
            sensitivity: Sensitivity::Normal,
            ttl_hours: None,
            source: FactSource::Dream,
            session_id: Some("a-dreamt-session".into()),
            message_id: Some("m1".into()),
            confidence: 0.8,
            message_ids: vec!["m1".into(), "m2".into()],
            dream_id: Some("d1".into()),
            conflicts_with: Some(npm.clone()),
        },
        agent_lsp::facts::now_ms(),
    )
    .unwrap();
    npm
}

/// What the inspector tests did, as the store holds it: the release fact edited to
/// "… make release", the npm fact forgotten, and so no conflict left.
pub fn assert_inspector_edits(env: &TestEnv) {
    let after = list(env);
    let contents: Vec<&str> = after
        .iter()
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    assert!(
        contents.contains(&"Releases are shipped with make release"),
        "{contents:?}"
    );
    assert!(!contents.contains(&"The project installs packages with npm"));
    assert!(after.iter().all(|f| f["conflicted"] == false), "{after:#?}");
}

/// Adds a long-term knowledge entry of `kind` to the test workspace from the command line.
pub fn add_knowledge(env: &TestEnv, text: &str, kind: &str) {
    let (code, _, err) = json_command_in(
        env,
        &env.workspace(),
        &["knowledge", "add", text, "--kind", kind],
    );
    assert_eq!(code, 0, "{err}");
}

/// Writes the journal entry the editors' journal tests search for: "Release day"
/// (2026-11-20, tag ops), "Thursdays, after standup".
pub fn seed_journal(env: &TestEnv) {
    let journal = env.config_home().join("agent-lsp/journal");
    std::fs::create_dir_all(&journal).unwrap();
    std::fs::write(
        journal.join("release-day.md"),
        "---\ntitle: Release day\ncreated: 2026-11-20T09:00:00Z\ntags: [ops]\n---\nThursdays, after standup\n",
    )
    .unwrap();
}

/// The item of `items` (facts or knowledge entries, as listed) whose content is `content`.
pub fn with_content<'a>(items: &'a [Value], content: &str) -> &'a Value {
    items
        .iter()
        .find(|i| i["content"] == content)
        .unwrap_or_else(|| panic!("nothing with content {content:?} in {items:#?}"))
}
