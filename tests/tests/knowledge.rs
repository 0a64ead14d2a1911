//! Long-term knowledge through the real binary with fake-llm as the model: entries from the
//! command line and from the curator (a tool-less isolated call), merged once a project
//! passes `consolidate_at`, shown to the model as a note that changes only when they do, and
//! exported into the repository's AGENTS.md between the managed markers — everything
//! outside them byte for byte, a second export changing nothing, a person's lines read back.

use std::path::Path;

use agent_lsp_tests::cli_run::{point_at, run, setup};
use agent_lsp_tests::lsp_client::prompted;
use agent_lsp_tests::memory::{json_command_in, with_content as with};
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::{Value, json};

const CURATOR: &str = "You keep the long-term knowledge of a software project";
const CONSOLIDATOR: &str = "You tidy the long-term knowledge of a software project";
const BEGIN: &str = "<!-- agent-lsp:knowledge:begin -->";
const END: &str = "<!-- agent-lsp:knowledge:end -->";

fn knowledge_in(env: &TestEnv, cwd: &Path, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["knowledge"];
    all.extend(args);
    json_command_in(env, cwd, &all)
}

fn ok(env: &TestEnv, args: &[&str]) -> Value {
    let (code, v, err) = knowledge_in(env, &env.workspace(), args);
    assert_eq!(code, 0, "{args:?}: {err}");
    v
}

fn entries(env: &TestEnv) -> Vec<Value> {
    ok(env, &["list"])["entries"].as_array().unwrap().clone()
}

/// A curator turn: the request must be the curator's, with no tools.
fn curator_turn(entries: Value) -> Value {
    json!({"expect": {"system_contains": CURATOR, "no_tools": true},
           "reply": {"text": format!("```json\n{}\n```", json!({"entries": entries}))}})
}

/// A workspace with one finished session (a prompt and its answer), then pointed at
/// `curator` for what follows.
fn a_session(curator: &FakeLlm, extra: &str) -> (TestEnv, String) {
    let talk = FakeLlm::start(
        &json!({"turns": [{"reply": {"text": "Done; remember that the tests need Postgres."}}]}),
        "openai",
    );
    let env = setup(&talk, "openai", "");
    let one = run(
        &env,
        &["--yes", "the tests need a running Postgres; we chose pnpm"],
    );
    assert_eq!(one.code, 0, "{}", one.stderr);
    point_at(&env, curator, extra);
    (env, one.session())
}

#[test]
fn entries_are_added_listed_and_forgotten_and_every_projects_ones_cross_projects() {
    let llm = FakeLlm::start(&json!({"turns": []}), "openai");
    let env = setup(&llm, "openai", "");
    let other = env.home().join("other");
    std::fs::create_dir_all(&other).unwrap();

    let mine = ok(
        &env,
        &["add", "Migrations live in db/migrate", "--kind", "fact"],
    );
    assert_eq!(mine["created"], true);
    let again = ok(&env, &["add", "migrations live in  db/migrate."]);
    assert_eq!(
        (&again["created"], &again["id"]),
        (&json!(false), &mine["id"])
    );
    ok(
        &env,
        &[
            "add",
            "Prefer small commits",
            "--kind",
            "pattern",
            "--global",
        ],
    );

    let listed = entries(&env);
    assert_eq!(listed.len(), 2, "{listed:#?}");
    let fact = with(&listed, "Migrations live in db/migrate");
    assert_eq!(
        (&fact["kind"], &fact["source"]),
        (&json!("fact"), &json!("user"))
    );
    assert!(with(&listed, "Prefer small commits")["project"].is_null());

    // Another project sees the global entry only, and cannot forget this one's.
    let (code, seen, _) = knowledge_in(&env, &other, &["list"]);
    assert_eq!(code, 0);
    let seen = seen["entries"].as_array().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["content"], "Prefer small commits");
    let id = mine["id"].as_str().unwrap();
    let (code, _, err) = knowledge_in(&env, &other, &["forget", id]);
    assert_ne!(code, 0);
    assert!(err.contains("another project"), "{err}");

    // Without cross-project knowledge, the global entry is not shown here.
    std::fs::write(
        env.workspace().join(".agent-lsp.toml"),
        "[knowledge]\ncross_project = false\n",
    )
    .unwrap();
    assert_eq!(entries(&env).len(), 1);
    std::fs::remove_file(env.workspace().join(".agent-lsp.toml")).unwrap();

    // Bad input is refused with the reason, and nothing is written.
    let (code, _, err) = knowledge_in(&env, &env.workspace(), &["add", "  "]);
    assert_ne!(code, 0);
    assert!(err.contains("needs some text"), "{err}");
    let (code, _, err) = knowledge_in(&env, &env.workspace(), &["add", "x <!-- y"]);
    assert_ne!(code, 0);
    assert!(err.contains("markers"), "{err}");
    let (code, _, err) = knowledge_in(&env, &env.workspace(), &["forget", "nope"]);
    assert_ne!(code, 0);
    assert!(err.contains("no knowledge entry nope"), "{err}");

    ok(&env, &["forget", id]);
    assert_eq!(entries(&env).len(), 1);
}

#[test]
fn the_curator_extracts_entries_with_provenance_skips_known_ones_and_never_repeats_itself() {
    let curator = FakeLlm::start(
        &json!({"turns": [curator_turn(json!([
            {"kind": "gotcha", "text": "The tests need a running Postgres", "messages": [1, 2]},
            {"kind": "decision", "text": "The project uses pnpm", "messages": [1]},
            {"kind": "pattern", "text": "The user prefers small commits", "global": true},
            {"kind": "fact", "text": "x <!-- breaks the file -->"}
        ]))]}),
        "openai",
    );
    let (env, sid) = a_session(&curator, "");
    ok(
        &env,
        &["add", "The project uses pnpm.", "--kind", "decision"],
    );

    let out = ok(&env, &["curate"]);
    let report = &out["sessions"][0]["report"];
    assert_eq!(out["sessions"][0]["sessionId"], sid.as_str());
    assert_eq!(
        (&report["added"], &report["known"], &report["rejected"]),
        (&json!(2), &json!(1), &json!(1)),
        "{out:#}"
    );

    // One tool-less request with the conversation and the entries already kept.
    let requests = curator.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].error.is_none(), "{:?}", requests[0].error);
    let body = &requests[0].body;
    assert!(body.get("tools").is_none(), "no tools at all: {body}");
    let text = body.to_string();
    assert!(text.contains("we chose pnpm") && text.contains("The project uses pnpm."));

    let all = entries(&env);
    assert_eq!(all.len(), 3, "{all:#?}");
    let gotcha = with(&all, "The tests need a running Postgres");
    assert_eq!(
        (&gotcha["kind"], &gotcha["source"], &gotcha["sessionId"]),
        (&json!("gotcha"), &json!("curator"), &json!(sid))
    );
    assert_eq!(gotcha["messageIds"].as_array().unwrap().len(), 2);
    assert!(gotcha["curationId"].is_string());
    assert!(with(&all, "The user prefers small commits")["project"].is_null());

    // Nothing new: no second request.
    let again = ok(&env, &["curate"]);
    assert_eq!(again["sessions"][0]["report"]["curations"], json!([]));
    assert_eq!(curator.requests().len(), 1);
}

#[test]
fn a_failed_call_writes_nothing_and_is_done_again_and_a_garbled_answer_is_recorded() {
    let failing = FakeLlm::start(
        &json!({"turns": [{"fault": {"status": 400, "body": "bad request"}}]}),
        "openai",
    );
    let (env, _) = a_session(&failing, "");
    let (code, _, err) = knowledge_in(&env, &env.workspace(), &["curate"]);
    assert_ne!(code, 0);
    assert!(err.contains("a curation failed"), "{err}");
    assert!(entries(&env).is_empty());

    // The same messages again, to a model that answers prose: recorded with its error,
    // and not read again.
    let garbled = FakeLlm::start(
        &json!({"turns": [{"expect": {"system_contains": CURATOR},
                           "reply": {"text": "I would rather not."}}]}),
        "openai",
    );
    point_at(&env, &garbled, "");
    let out = ok(&env, &["curate"]);
    let curation = &out["sessions"][0]["report"]["curations"][0];
    assert!(
        curation["error"]
            .as_str()
            .is_some_and(|e| e.contains("not the JSON")),
        "{out:#}"
    );
    let again = ok(&env, &["curate"]);
    assert_eq!(again["sessions"][0]["report"]["curations"], json!([]));
    assert_eq!(garbled.requests().len(), 1);
}

#[test]
fn past_consolidate_at_the_projects_own_entries_are_merged_and_no_others() {
    let nobody = FakeLlm::start(&json!({"turns": []}), "openai");
    let (env, _) = a_session(&nobody, "");
    let a = ok(&env, &["add", "The tests need Postgres"])["id"].clone();
    let b = ok(&env, &["add", "Postgres must be version 16 for the tests"])["id"].clone();
    let global = ok(&env, &["add", "The user likes tabs", "--global"])["id"].clone();
    // The consolidator's answer names the two, the global one, and an unknown id.
    let answer = json!({"merged": [
        {"kind": "gotcha", "text": "The tests need Postgres 16 running",
         "from": [a, b, "not-an-entry"]},
        {"kind": "fact", "text": "Tabs and tests", "from": [global, "not-an-entry"]}
    ]});
    // (fake-llm replays a script: write the answer into it now that the ids are known.)
    let script = json!({"turns": [
        curator_turn(json!([{"kind": "fact", "text": "Run the tests with make test"}])),
        {"expect": {"system_contains": CONSOLIDATOR, "no_tools": true},
         "reply": {"text": answer.to_string()}}
    ]});
    let curator = FakeLlm::start(&script, "openai");
    point_at(&env, &curator, "[knowledge]\nconsolidate_at = 2\n");

    let out = ok(&env, &["curate"]);
    let report = &out["sessions"][0]["report"];
    assert_eq!(
        (&report["added"], &report["merged"]),
        (&json!(1), &json!(2)),
        "{out:#}"
    );
    let requests = curator.requests();
    assert_eq!(requests.len(), 2);
    let asked = requests[1].body.to_string();
    assert!(
        !asked.contains("The user likes tabs"),
        "a global entry in a consolidation: {asked}"
    );

    let all = entries(&env);
    let contents: Vec<&str> = all.iter().map(|e| e["content"].as_str().unwrap()).collect();
    assert!(
        !contents.contains(&"The tests need Postgres"),
        "{contents:?}"
    );
    assert!(!contents.contains(&"Tabs and tests"), "{contents:?}");
    assert!(contents.contains(&"The user likes tabs"));
    assert!(contents.contains(&"Run the tests with make test"));
    let merged = with(&all, "The tests need Postgres 16 running");
    assert_eq!(merged["source"], "consolidation");
    let mut replaces: Vec<Value> = merged["replaces"].as_array().unwrap().clone();
    replaces.sort_by_key(|v| v.to_string());
    let mut expected = vec![a, b];
    expected.sort_by_key(|v| v.to_string());
    assert_eq!(replaces, expected);
}

#[test]
fn the_export_keeps_everything_outside_its_section_and_reads_a_persons_lines_back() {
    let llm = FakeLlm::start(&json!({"turns": []}), "openai");
    let env = setup(&llm, "openai", "");
    let agents = env.workspace().join("AGENTS.md");

    // Created when absent.
    ok(&env, &["add", "Build with make", "--kind", "fact"]);
    let first = ok(&env, &["export"]);
    assert_eq!(
        (&first["written"], &first["entries"]),
        (&json!(true), &json!(1))
    );
    let created = std::fs::read_to_string(&agents).unwrap();
    assert!(
        created.starts_with(BEGIN) && created.ends_with(&format!("{END}\n")),
        "{created}"
    );

    // A person's file: their text around the section stays byte for byte.
    let before = "# Our rules\r\n\r\nTabs, never spaces.  \n\n";
    let after = "\n\n## Deploying\n\n\tAsk Ana first.\n";
    let section = &created[..created.len() - 1];
    std::fs::write(&agents, format!("{before}{section}{after}")).unwrap();
    let gotcha = ok(
        &env,
        &["add", "The CI cache breaks on Mondays", "--kind", "gotcha"],
    );
    let out = ok(&env, &["export"]);
    assert_eq!(out["written"], true);
    let text = std::fs::read_to_string(&agents).unwrap();
    assert!(
        text.starts_with(before) && text.ends_with(after),
        "{text:?}"
    );
    assert!(text.contains("### Gotchas") && text.contains("The CI cache breaks on Mondays"));

    // A second export with nothing new changes nothing, not even the file's time.
    let mtime = std::fs::metadata(&agents).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let same = ok(&env, &["export"]);
    assert_eq!(same["written"], false, "{same}");
    assert_eq!(std::fs::read_to_string(&agents).unwrap(), text);
    assert_eq!(
        std::fs::metadata(&agents).unwrap().modified().unwrap(),
        mtime
    );

    // A person adds a line, changes one and deletes one inside the section.
    let gotcha_id = gotcha["id"].as_str().unwrap();
    let edited: String = text
        .lines()
        .filter(|l| !l.contains(gotcha_id))
        .map(|l| {
            if l.starts_with("- Build with make") {
                l.replace("Build with make", "Build with make -j4")
            } else {
                l.to_string()
            }
        })
        .map(|l| {
            if l == "### Facts" {
                format!("{l}\n\n- Deploys go out on Thursdays")
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    // (`lines()` drops the \r of the first lines: put the person's bytes back.)
    let edited = format!(
        "{before}{}{after}",
        &edited[edited.find(BEGIN).unwrap()..edited.find(END).unwrap() + END.len()]
    );
    std::fs::write(&agents, &edited).unwrap();
    let read_back = ok(&env, &["export"]);
    assert_eq!(
        (
            &read_back["imported"],
            &read_back["updated"],
            &read_back["forgotten"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{read_back}"
    );
    let all = entries(&env);
    assert_eq!(all.len(), 2, "{all:#?}");
    assert_eq!(
        with(&all, "Deploys go out on Thursdays")["source"],
        "import"
    );
    with(&all, "Build with make -j4");
    let final_text = std::fs::read_to_string(&agents).unwrap();
    assert!(final_text.starts_with(before) && final_text.ends_with(after));
    assert!(!final_text.contains("Mondays"));
    assert_eq!(ok(&env, &["export"])["written"], false);

    // Broken markers: an error that says so, and the file as it was.
    let broken = format!("{before}{BEGIN}\n- half a section\n");
    std::fs::write(&agents, &broken).unwrap();
    let (code, _, err) = knowledge_in(&env, &env.workspace(), &["export"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("broken") && err.contains("was not changed"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&agents).unwrap(), broken);

    // Another file, by configuration.
    std::fs::write(
        env.workspace().join(".agent-lsp.toml"),
        "[knowledge]\nagents_file = \"CLAUDE.md\"\n",
    )
    .unwrap();
    ok(&env, &["export"]);
    assert!(
        std::fs::read_to_string(env.workspace().join("CLAUDE.md"))
            .unwrap()
            .contains("Build with make -j4")
    );
}

#[test]
fn the_model_sees_the_entries_as_a_note_that_changes_only_when_they_do() {
    let talk = FakeLlm::start(
        &json!({"turns": [
            {"reply": {"text": "one"}}, {"reply": {"text": "two"}}, {"reply": {"text": "three"}}
        ]}),
        "openai",
    );
    let env = setup(&talk, "openai", "");
    ok(
        &env,
        &["add", "Never push to main on Fridays", "--kind", "decision"],
    );
    let one = run(&env, &["--yes", "first"]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let sid = one.session();
    let two = run(&env, &["--yes", "--session", &sid, "second"]);
    assert_eq!(two.code, 0, "{}", two.stderr);
    ok(
        &env,
        &[
            "add",
            "Staging is at staging.example.test",
            "--kind",
            "fact",
        ],
    );
    let three = run(&env, &["--yes", "--session", &sid, "third"]);
    assert_eq!(three.code, 0, "{}", three.stderr);

    let requests = talk.requests();
    assert_eq!(requests.len(), 3);
    let notes = |i: usize| requests[i].body.to_string().matches("<knowledge>").count();
    // The first request has the note; the second the same one (no new note), the third a
    // second note with the new entry; each request extends the one before.
    assert_eq!((notes(0), notes(1), notes(2)), (1, 1, 2));
    for i in 0..2 {
        let (before, next) = (
            &requests[i].body["messages"],
            &requests[i + 1].body["messages"],
        );
        let n = before.as_array().unwrap().len();
        assert_eq!(
            next.as_array().unwrap()[..n],
            before.as_array().unwrap()[..],
            "request {i}"
        );
    }
    assert!(
        requests[0]
            .body
            .to_string()
            .contains("Never push to main on Fridays")
    );
    assert!(
        requests[2]
            .body
            .to_string()
            .contains("staging.example.test")
    );

    // Off: no note, no curation, no export.
    std::fs::write(
        env.workspace().join(".agent-lsp.toml"),
        "[knowledge]\nenabled = false\n",
    )
    .unwrap();
    let off = FakeLlm::start(&json!({"turns": [{"reply": {"text": "off"}}]}), "openai");
    point_at(&env, &off, "");
    let four = run(&env, &["--yes", "fourth"]);
    assert_eq!(four.code, 0, "{}", four.stderr);
    assert!(!off.requests()[0].body.to_string().contains("<knowledge>"));
    for cmd in ["curate", "export"] {
        let (code, _, err) = knowledge_in(&env, &env.workspace(), &[cmd]);
        assert_ne!(code, 0, "{cmd}");
        assert!(err.contains("[knowledge] enabled = false"), "{cmd}: {err}");
    }
}

#[test]
fn auto_export_writes_the_agents_file_after_a_curation_that_added_entries() {
    let curator = FakeLlm::start(
        &json!({"turns": [curator_turn(json!([
            {"kind": "gotcha", "text": "The tests need a running Postgres", "messages": [1]}
        ]))]}),
        "openai",
    );
    let (env, _) = a_session(&curator, "[knowledge]\nauto_export = true\n");
    let out = ok(&env, &["curate"]);
    assert_eq!(
        out["sessions"][0]["report"]["exported"]["written"], true,
        "{out:#}"
    );
    let text = std::fs::read_to_string(env.workspace().join("AGENTS.md")).unwrap();
    assert!(text.contains("The tests need a running Postgres"), "{text}");
}

#[tokio::test]
async fn the_language_server_curates_after_enough_turns_and_the_editor_exports() {
    let script = json!({
        "side": [curator_turn(json!([
            {"kind": "gotcha", "text": "The answer must stay 42", "messages": [1]}
        ]))],
        "turns": [{"reply": {"text": "Noted."}}]
    });
    let llm = FakeLlm::start(&script, "openai");
    let env = TestEnv::new();
    let config = "dream = false\n[knowledge]\ncurate_after_turns = 1\n";
    let (client, sid) = prompted(&env, &llm, config, "the answer must stay 42").await;
    let entry = client
        .wait_until("a curated entry", || {
            entries(&env)
                .into_iter()
                .find(|e| e["content"] == "The answer must stay 42")
        })
        .await;
    assert_eq!(
        (&entry["source"], &entry["sessionId"]),
        (&json!("curator"), &json!(sid))
    );

    let exported = client
        .request("agent/knowledge/export", json!({}))
        .await
        .unwrap();
    assert_eq!(
        (&exported["written"], &exported["entries"]),
        (&json!(true), &json!(1))
    );
    let text = std::fs::read_to_string(env.workspace().join("AGENTS.md")).unwrap();
    assert!(
        text.contains("### Gotchas\n\n- The answer must stay 42 <!-- k:"),
        "{text}"
    );
    let curations = llm.requests().iter().filter(|q| q.side.is_some()).count();
    assert_eq!(curations, 1);
    assert!(llm.requests().iter().all(|q| q.error.is_none()));
}
