//! The event store under concurrent writers and crashes, and the `session` commands that read
//! it, through real processes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use agent_lsp::store::Store;
use agent_lsp_tests::process::{TestEnv, workspace_bin};
use serde_json::Value;

fn writer(env: &TestEnv, session: &str, rounds: u64) -> Command {
    let mut cmd = Command::new(workspace_bin("store-writer"));
    cmd.arg(env.database())
        .arg(session)
        .arg(rounds.to_string())
        .stdout(Stdio::piped());
    cmd
}

/// Every message must hold all ten of its deltas: batches are all or nothing.
fn assert_batches_whole(store: &Store, session: &str) -> usize {
    let view = store.session(session).unwrap().expect("session exists");
    for m in &view.messages {
        assert_eq!(m.parts.len(), 1, "{m:?}");
        assert_eq!(m.parts[0].data["text"], "0123456789", "{m:?}");
    }
    view.messages.len()
}

fn assert_rebuild_equals_live(store: &mut Store) {
    let live = store.projection_dump().unwrap();
    store.rebuild().unwrap();
    assert_eq!(store.projection_dump().unwrap(), live);
}

#[test]
fn two_processes_appending_at_once_lose_nothing() {
    let env = TestEnv::new();
    // Create the schema first so both writers race on appends, not only on migration.
    drop(Store::open(&env.database()).unwrap());
    let rounds = 150;
    let a = writer(&env, "alpha", rounds).spawn().unwrap();
    let b = writer(&env, "beta", rounds).spawn().unwrap();
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a writer failed: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().count() as u64,
            rounds
        );
    }
    let mut store = Store::open(&env.database()).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    assert_eq!(store.event_count().unwrap(), 2 * (1 + rounds as i64 * 12));
    assert_eq!(assert_batches_whole(&store, "alpha"), rounds as usize);
    assert_eq!(assert_batches_whole(&store, "beta"), rounds as usize);
    // seq is strictly increasing with no duplicates across both writers.
    let seqs: Vec<i64> = store.events(None).unwrap().iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert_rebuild_equals_live(&mut store);

    // The CLI reads the same database.
    let (code, out, err) = env.run(&["session", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let list: Value = serde_json::from_str(&out).unwrap();
    let mut titles: Vec<(String, i64)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["title"].as_str().unwrap().into(),
                s["messageCount"].as_i64().unwrap(),
            )
        })
        .collect();
    titles.sort();
    assert_eq!(
        titles,
        [
            ("alpha".into(), rounds as i64),
            ("beta".into(), rounds as i64)
        ]
    );
}

#[test]
fn a_writer_killed_mid_write_leaves_a_consistent_database() {
    let env = TestEnv::new();
    drop(Store::open(&env.database()).unwrap());
    let mut acknowledged = Vec::new();
    for i in 0..12u64 {
        let session = format!("kill{i}");
        let mut child = writer(&env, &session, 1_000_000).spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Let it commit a varying number of batches, then kill -9 in the middle of the next.
        let wait_for = 5 + i * 7;
        let mut seen = 0;
        for line in lines.by_ref() {
            line.unwrap();
            seen += 1;
            if seen >= wait_for {
                break;
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        acknowledged.push((session, seen));
    }
    let mut store = Store::open(&env.database()).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    for (session, seen) in &acknowledged {
        let messages = assert_batches_whole(&store, session);
        assert!(
            messages as u64 >= *seen,
            "{session}: {seen} batches acknowledged, {messages} stored"
        );
    }
    assert_rebuild_equals_live(&mut store);
    println!("killed 12 writers mid-write; integrity ok; every acknowledged batch kept whole");
}

#[test]
fn session_show_and_rebuild_from_the_command_line() {
    let env = TestEnv::new();
    let out = writer(&env, "0195c0de-show", 3).output().unwrap();
    assert!(out.status.success());

    let (code, text, err) = env.run(&["session", "show", "0195c0de"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("title 0195c0de-show"), "{text}");
    assert_eq!(text.matches("0123456789").count(), 3, "{text}");

    let (code, json, _) = env.run(&["session", "show", "0195c0de-show", "--json"]);
    assert_eq!(code, 0);
    let view: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(view["messages"].as_array().unwrap().len(), 3);
    assert_eq!(
        view["messages"][2]["parts"][0]["data"]["text"],
        "0123456789"
    );

    let (code, text, _) = env.run(&["session", "rebuild"]);
    assert_eq!(code, 0);
    assert!(text.contains("from 37 events"), "{text}");
    assert!(text.contains("integrity: ok"), "{text}");

    let (code, _, err) = env.run(&["session", "show", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("no session \"nope\""), "{err}");
}
