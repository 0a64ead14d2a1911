//! The dream through the real binary (`agent-lsp memory dream`) with fake-llm as the model:
//! a tool-less isolated call that reads what is new in a session, writes the facts it finds
//! with their provenance, skips what is known, keeps both sides of a contradiction flagged
//! until someone resolves it, never shows a local-only fact, never touches another
//! project's facts, and resumes a dream that was cut off without writing anything twice.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_lsp_tests::cli_run::{point_at, run, setup};
use agent_lsp_tests::memory::{ok_in as ok, with_content as with};
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::{Value, json};

const DREAMER: &str = "pick out what is worth remembering";

fn facts(env: &TestEnv, cwd: &Path) -> Vec<Value> {
    ok(env, cwd, &["list"])["facts"].as_array().unwrap().clone()
}

/// A dream turn: the request must be the dreamer's, with no tools.
fn dream_turn(facts: Value) -> Value {
    json!({"expect": {"system_contains": DREAMER, "no_tools": true},
           "reply": {"text": format!("Here they are:\n```json\n{}\n```", json!({"facts": facts}))}})
}

/// A workspace with one finished session: a prompt and its answer.
fn a_session(env_llm_script: &Value) -> (FakeLlm, TestEnv, String) {
    let llm = FakeLlm::start(env_llm_script, "openai");
    let env = setup(&llm, "openai", "");
    let one = run(
        &env,
        &[
            "--yes",
            "we ship with `make ship`; and use pnpm from now on",
        ],
    );
    assert_eq!(one.code, 0, "{}", one.stderr);
    (llm, env, one.session())
}

#[test]
fn a_dream_writes_new_facts_with_provenance_skips_known_ones_and_flags_contradictions() {
    let (_talk, env, sid) = a_session(&json!({"turns": [{"reply": {"text": "Noted."}}]}));
    let ws = env.workspace();
    let npm = ok(
        &env,
        &ws,
        &["add", "The project installs packages with npm"],
    );
    let npm = npm["id"].as_str().unwrap().to_string();
    ok(&env, &ws, &["add", "Releases are shipped with make ship"]);
    ok(
        &env,
        &ws,
        &[
            "add",
            "The staging password is hunter2",
            "--sensitivity",
            "local-only",
        ],
    );

    let dream = FakeLlm::start(
        &json!({"turns": [dream_turn(json!([
            {"fact": "Releases are shipped with make ship.", "messages": [1], "confidence": 0.9},
            {"fact": "The project installs packages with pnpm, not npm", "messages": [1],
             "confidence": 0.9, "contradicts": npm},
            {"fact": "The user may like tabs", "confidence": 0.2},
            {"fact": "CI is red until the lockfile is regenerated", "tier": "temporary",
             "ttlHours": 2, "confidence": 0.8, "messages": [1, 2]}
        ]))]}),
        "openai",
    );
    point_at(&env, &dream, "");
    let out = ok(&env, &ws, &["dream"]);
    let report = &out["sessions"][0]["report"];
    assert_eq!(out["sessions"][0]["sessionId"], sid.as_str());
    assert_eq!(
        (
            &report["created"],
            &report["conflicted"],
            &report["duplicates"],
            &report["rejected"]
        ),
        (&json!(1), &json!(1), &json!(1), &json!(1)),
        "{out:#}"
    );

    // The request: the dreamer's system prompt, no tools, the conversation, the known facts
    // with their ids, and never the local-only fact.
    let requests = dream.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].error.is_none(), "{:?}", requests[0].error);
    let body = &requests[0].body;
    assert!(body.get("tools").is_none(), "no tools at all: {body}");
    let text = body.to_string();
    assert!(text.contains("use pnpm from now on") && text.contains(&npm));
    assert!(!text.contains("hunter2"), "local-only in a dream: {text}");

    let all = facts(&env, &ws);
    let temporary = with(&all, "CI is red until the lockfile is regenerated");
    assert_eq!(
        (&temporary["source"], &temporary["tier"]),
        (&json!("dream"), &json!("temporary"))
    );
    assert_eq!(temporary["sessionId"], sid.as_str());
    assert_eq!(temporary["messageIds"].as_array().unwrap().len(), 2);
    assert!(temporary["dreamId"].is_string());
    assert!((temporary["confidence"].as_f64().unwrap() - 0.8).abs() < 1e-9);
    assert!(temporary["expiresAt"].is_i64(), "{temporary}");
    assert!(all.iter().all(|f| f["content"] != "The user may like tabs"));
    assert_eq!(
        all.iter()
            .filter(|f| f["content"]
                .as_str()
                .unwrap()
                .starts_with("Releases are shipped"))
            .count(),
        1,
        "a duplicate is not written"
    );

    // Both sides of the contradiction stay, flagged, until one is resolved.
    let pnpm = with(&all, "The project installs packages with pnpm, not npm");
    let old = with(&all, "The project installs packages with npm");
    assert_eq!(
        (&pnpm["conflicted"], &old["conflicted"]),
        (&json!(true), &json!(true))
    );
    assert_eq!(pnpm["conflictsWith"], npm.as_str());
    ok(&env, &ws, &["forget", &npm]);
    let all = facts(&env, &ws);
    let pnpm = with(&all, "The project installs packages with pnpm, not npm");
    assert_eq!(
        pnpm["conflicted"], false,
        "resolved by forgetting the old one"
    );

    // What has been dreamt is not dreamt again: nothing new, no request.
    let out = ok(&env, &ws, &["dream"]);
    assert_eq!(out["sessions"][0]["report"]["dreams"], json!([]), "{out:#}");
    assert_eq!(dream.requests().len(), 1);
}

#[test]
fn a_conflict_is_resolved_by_an_update_and_a_dream_cannot_flag_another_projects_fact() {
    let (_talk, env, _sid) = a_session(&json!({"turns": [{"reply": {"text": "Noted."}}]}));
    let ws = env.workspace();
    let other = env.dir.path().join("other");
    std::fs::create_dir_all(other.join(".git")).unwrap();
    let theirs = ok(
        &env,
        &other,
        &["add", "The project installs packages with npm"],
    );
    let theirs = theirs["id"].as_str().unwrap().to_string();
    let ours = ok(&env, &ws, &["add", "The deploy target is fly.io"]);
    let ours = ours["id"].as_str().unwrap().to_string();

    let dream = FakeLlm::start(
        &json!({"turns": [dream_turn(json!([
            // Another project's id: the dreamer was never shown it, and cannot flag it.
            {"fact": "The project installs packages with pnpm", "confidence": 0.9, "contradicts": theirs},
            {"fact": "The deploy target is Render", "confidence": 0.9, "contradicts": ours}
        ]))]}),
        "openai",
    );
    point_at(&env, &dream, "");
    ok(&env, &ws, &["dream"]);
    assert!(
        !dream.requests()[0].body.to_string().contains(&theirs),
        "another project's fact in a dream"
    );
    let theirs_now = facts(&env, &other);
    assert_eq!(theirs_now.len(), 1);
    assert_eq!(
        theirs_now[0]["conflicted"], false,
        "isolation: {theirs_now:#?}"
    );
    let all = facts(&env, &ws);
    let pnpm = with(&all, "The project installs packages with pnpm");
    assert_eq!(
        (&pnpm["conflicted"], &pnpm["conflictsWith"]),
        (&json!(false), &Value::Null),
        "a contradiction of a fact out of reach is a plain new fact"
    );
    let render = with(&all, "The deploy target is Render");
    assert_eq!(render["conflicted"], true);
    assert_eq!(
        with(&all, "The deploy target is fly.io")["conflicted"],
        true
    );

    // Updating one side settles it: both are clear.
    ok(
        &env,
        &ws,
        &["update", &ours, "The deploy target was fly.io until May"],
    );
    let all = facts(&env, &ws);
    assert!(
        all.iter().all(|f| f["conflicted"] == false),
        "resolved: {all:#?}"
    );
}

#[test]
fn a_dream_cut_off_before_the_answer_is_resumed_and_writes_each_fact_once() {
    let (_talk, env, sid) = a_session(&json!({"turns": [{"reply": {"text": "Noted."}}]}));
    let ws = env.workspace();
    // The first dreamer never answers in time: the process is killed while it waits.
    let slow = FakeLlm::start(
        &json!({"turns": [{"fault": {"delay_ms": 60_000}}]}),
        "openai",
    );
    point_at(&env, &slow, "");
    let mut child = env
        .command(&["memory", "dream", "--cwd", ws.to_str().unwrap(), "--json"])
        .env("FAKE_KEY", "k")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while slow.requests().is_empty() {
        assert!(Instant::now() < deadline, "the dream never asked");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let store = agent_lsp::store::Store::open(&env.database()).unwrap();
    let dreams = store.dreams(&sid).unwrap();
    assert_eq!(dreams.len(), 1);
    assert_eq!(dreams[0].state, "started", "in progress when cut off");
    let first = dreams[0].id.clone();
    drop(store);

    let answer = FakeLlm::start(
        &json!({"turns": [dream_turn(json!([
            {"fact": "Releases are shipped with make ship", "confidence": 0.9, "messages": [1]},
            {"fact": "The project installs packages with pnpm", "confidence": 0.9, "messages": [1]}
        ]))]}),
        "openai",
    );
    point_at(&env, &answer, "");
    let out = ok(&env, &ws, &["dream"]);
    let report = &out["sessions"][0]["report"];
    assert_eq!(
        (&report["resumed"], &report["created"]),
        (&json!(1), &json!(2)),
        "{out:#}"
    );
    assert_eq!(
        report["dreams"][0]["id"],
        first.as_str(),
        "the same dream, resumed"
    );
    assert_eq!(
        report["dreams"].as_array().unwrap().len(),
        1,
        "and no second one"
    );
    let all = facts(&env, &ws);
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|f| f["dreamId"] == first.as_str()));
}

#[test]
fn a_dream_cut_off_after_the_answer_writes_only_what_it_had_not_written() {
    let (_talk, env, sid) = a_session(&json!({"turns": [{"reply": {"text": "Noted."}}]}));
    let ws = env.workspace();
    // A ledger as a crash would leave it: the answer kept, one of its two facts written.
    {
        use agent_lsp::store::{DreamCandidate, Event, Store};
        let mut store = Store::open(&env.database()).unwrap();
        let view = store.session(&sid).unwrap().unwrap();
        let ids: Vec<String> = view.messages.iter().map(|m| m.message_id.clone()).collect();
        let candidate = |content: &str| DreamCandidate {
            content: content.into(),
            tier: agent_lsp::status::Tier::Archival,
            ttl_hours: None,
            confidence: 0.9,
            message_ids: vec![ids[0].clone()],
            contradicts: None,
        };
        let dream_id = "dream-crashed".to_string();
        let events = [
            Event::DreamStarted {
                dream_id: dream_id.clone(),
                project: view.summary.workspace.clone(),
                from_message_id: ids[0].clone(),
                to_message_id: ids[ids.len() - 1].clone(),
            },
            Event::DreamExtracted {
                dream_id: dream_id.clone(),
                candidates: vec![
                    candidate("Releases are shipped with make ship"),
                    candidate("The project installs packages with pnpm"),
                ],
            },
        ];
        let events: Vec<_> = events
            .into_iter()
            .map(|e| (Some(sid.as_str()), e))
            .collect();
        store.append_all(&events).unwrap();
        let fact = agent_lsp::facts::NewFact {
            content: "Releases are shipped with make ship".into(),
            tier: agent_lsp::status::Tier::Archival,
            scope: agent_lsp::status::FactScope::Project,
            sensitivity: agent_lsp::status::Sensitivity::Normal,
            ttl_hours: None,
            source: agent_lsp::status::FactSource::Dream,
            session_id: Some(sid.clone()),
            message_id: Some(ids[0].clone()),
            confidence: 0.9,
            message_ids: vec![ids[0].clone()],
            dream_id: Some(dream_id.clone()),
            conflicts_with: None,
        };
        agent_lsp::facts::write(
            &mut store,
            &view.summary.workspace,
            fact,
            agent_lsp::facts::now_ms(),
        )
        .unwrap();
    }
    // No model call is needed to finish it: a script with no turns answers nothing.
    let none = FakeLlm::start(&json!({"turns": []}), "openai");
    point_at(&env, &none, "");
    let out = ok(&env, &ws, &["dream"]);
    let report = &out["sessions"][0]["report"];
    assert_eq!(report["resumed"], 1, "{out:#}");
    assert!(
        none.requests().is_empty(),
        "the kept answer is not asked for again"
    );
    let all = facts(&env, &ws);
    assert_eq!(all.len(), 2, "{all:#?}");
    assert!(all.iter().all(|f| f["dreamId"] == "dream-crashed"));
}

#[test]
fn an_unreadable_answer_ends_the_dream_with_its_error_and_a_bad_model_loses_nothing() {
    let (_talk, env, sid) = a_session(&json!({"turns": [{"reply": {"text": "Noted."}}]}));
    let ws = env.workspace();
    let garbage = FakeLlm::start(
        &json!({"turns": [
            {"expect": {"system_contains": DREAMER, "no_tools": true},
             "reply": {"text": "I think the user likes pnpm."}}
        ]}),
        "openai",
    );
    point_at(&env, &garbage, "");
    let out = ok(&env, &ws, &["dream"]);
    let dream = &out["sessions"][0]["report"]["dreams"][0];
    assert_eq!(dream["state"], "completed");
    assert!(
        dream["error"]
            .as_str()
            .unwrap()
            .contains("not the JSON asked for"),
        "{dream}"
    );
    assert!(facts(&env, &ws).is_empty());
    // The session itself is untouched: the same two messages, no dream in them.
    let store = agent_lsp::store::Store::open(&env.database()).unwrap();
    let view = store.session(&sid).unwrap().unwrap();
    assert_eq!(view.messages.len(), 2, "{:#?}", view.messages);
}

#[tokio::test]
async fn the_language_server_dreams_when_a_session_goes_quiet_and_the_editor_lists_the_facts() {
    use agent_lsp_tests::lsp_client::prompted;
    let script = json!({
        "side": [{"expect": {"system_contains": DREAMER, "no_tools": true},
                  "reply": {"text": json!({"facts": [
                      {"fact": "Releases are shipped with make ship", "confidence": 0.9, "messages": [1]}
                  ]}).to_string()}}],
        "turns": [{"reply": {"text": "Noted."}}]
    });
    let llm = FakeLlm::start(&script, "openai");
    let env = TestEnv::new();
    // (The curator's calls after a pause are tests/knowledge.rs's.)
    let config = "dream_idle_seconds = 1\n[knowledge]\nenabled = false\n";
    let (client, sid) = prompted(&env, &llm, config, "we ship with make ship").await;
    let mut listed = Value::Null;
    for _ in 0..200 {
        listed = client
            .request("agent/memory/list", json!({}))
            .await
            .unwrap();
        if !listed["facts"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fact = &listed["facts"][0];
    assert_eq!(
        fact["content"], "Releases are shipped with make ship",
        "{listed}"
    );
    assert_eq!(
        (&fact["source"], &fact["sessionId"]),
        (&json!("dream"), &json!(sid))
    );
    assert_eq!(fact["messageIds"].as_array().unwrap().len(), 1);
    // One dream for the quiet session, then nothing more is due.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let dreams = llm.requests().iter().filter(|q| q.side.is_some()).count();
    assert_eq!(dreams, 1);
    assert!(llm.requests().iter().all(|q| q.error.is_none()));
}

#[test]
fn a_local_only_fact_the_model_wrote_in_the_session_is_not_in_the_dream() {
    let talk = json!({"turns": [
        {"reply": {"tool_calls": [{"name": "memory_write", "arguments": {
            "content": "The admin password is hunter2", "sensitivity": "local-only"}}]}},
        {"reply": {"text": "Kept to myself."}}
    ]});
    let llm = FakeLlm::start(&talk, "openai");
    let env = setup(&llm, "openai", "");
    let ws = env.workspace();
    let one = run(&env, &["--yes", "note my admin password privately"]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let dream = FakeLlm::start(&json!({"turns": [dream_turn(json!([]))]}), "openai");
    point_at(&env, &dream, "");
    ok(&env, &ws, &["dream"]);
    let requests = dream.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].body.to_string();
    assert!(
        body.contains("memory_write"),
        "the call is shown, redacted: {body}"
    );
    assert!(
        !body.contains("hunter2"),
        "neither the call nor its result: {body}"
    );
}
