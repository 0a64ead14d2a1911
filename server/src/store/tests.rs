use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::status::SessionStatus;

fn temp_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("agent-lsp.db")).unwrap();
    (dir, store)
}

#[test]
fn a_session_is_projected_from_its_events() {
    let (_dir, mut store) = temp_store();
    let s = Some("s1");
    store
        .append(
            s,
            &Event::SessionCreated {
                workspace: "/w".into(),
                title: "first".into(),
            },
        )
        .unwrap();
    store
        .append(
            s,
            &Event::InputAdmitted {
                input_id: "i1".into(),
                text: "hello".into(),
                context: Value::Null,
            },
        )
        .unwrap();
    assert_eq!(store.inbox("s1").unwrap().len(), 1);
    store
        .append(
            s,
            &Event::InputPromoted {
                input_id: "i1".into(),
                message_id: "m1".into(),
                part_id: "p1".into(),
            },
        )
        .unwrap();
    store
        .append_all(&[
            (
                s,
                Event::MessageStarted {
                    message_id: "m2".into(),
                    role: "assistant".into(),
                    meta: json!({"model": "x"}),
                },
            ),
            (
                s,
                Event::PartAdded {
                    part_id: "p2".into(),
                    message_id: "m2".into(),
                    kind: PartKind::Text,
                    data: json!({"text": ""}),
                    status: None,
                },
            ),
            (
                s,
                Event::TextAppended {
                    part_id: "p2".into(),
                    text: "Hi ".into(),
                },
            ),
            (
                s,
                Event::TextAppended {
                    part_id: "p2".into(),
                    text: "there 🦀".into(),
                },
            ),
        ])
        .unwrap();
    let view = store.session("s1").unwrap().unwrap();
    assert!(view.inbox.is_empty());
    assert_eq!(view.messages.len(), 2);
    assert_eq!(view.messages[0].parts[0].data["text"], "hello");
    assert_eq!(view.messages[1].parts[0].data["text"], "Hi there 🦀");
    assert_eq!(view.summary.messages, 2);

    store
        .append(
            s,
            &Event::MessagesDeleted {
                from_message_id: "m2".into(),
            },
        )
        .unwrap();
    assert_eq!(store.session("s1").unwrap().unwrap().messages.len(), 1);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn reopening_does_not_migrate_twice_and_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let mut s = Store::open(&path).unwrap();
        assert!(matches!(
            s.append(None, &Event::SessionDeleted),
            Err(StoreError::MissingSession("session_deleted"))
        ));
        s.append(Some("x"), &Event::SessionDeleted).unwrap();
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(s.event_count().unwrap(), 1);
    s.conn.pragma_update(None, "user_version", 999).unwrap();
    drop(s);
    assert!(matches!(
        Store::open(&path),
        Err(StoreError::TooNew { found: 999, .. })
    ));
}

fn any_event() -> impl Strategy<Value = (Option<String>, Event)> {
    let id = || prop_oneof![Just("a"), Just("b"), Just("c")].prop_map(String::from);
    let session = prop_oneof![Just(Some("s1".to_string())), Just(Some("s2".to_string()))];
    let text = "[a-z🦀 ]{0,6}";
    let event = prop_oneof![
        text.prop_map(|t| Event::SessionCreated {
            workspace: "/w".into(),
            title: t
        }),
        text.prop_map(|t| Event::SessionRenamed { title: t }),
        prop_oneof![Just(SessionStatus::Idle), Just(SessionStatus::Busy)]
            .prop_map(|status| Event::SessionStatus { status }),
        Just(Event::SessionModeSet {
            mode: "plan".into()
        }),
        Just(Event::SessionDeleted),
        (id(), text).prop_map(|(i, t)| Event::InputAdmitted {
            input_id: i,
            text: t,
            context: Value::Null
        }),
        (id(), id(), id()).prop_map(|(i, m, p)| Event::InputPromoted {
            input_id: i,
            message_id: format!("m{m}"),
            part_id: format!("p{p}")
        }),
        id().prop_map(|m| Event::MessageStarted {
            message_id: format!("m{m}"),
            role: "assistant".into(),
            meta: Value::Null
        }),
        (id(), id()).prop_map(|(p, m)| Event::PartAdded {
            part_id: format!("p{p}"),
            message_id: format!("m{m}"),
            kind: PartKind::Text,
            data: json!({"text": ""}),
            status: Some(PartStatus::Pending)
        }),
        (id(), text).prop_map(|(p, t)| Event::TextAppended {
            part_id: format!("p{p}"),
            text: t
        }),
        id().prop_map(|p| Event::PartUpdated {
            part_id: format!("p{p}"),
            data: None,
            status: Some(PartStatus::Completed)
        }),
        id().prop_map(|m| Event::MessagesDeleted {
            from_message_id: format!("m{m}")
        }),
        id().prop_map(|p| Event::PermissionGranted {
            project: "proj".into(),
            permission: "bash".into(),
            pattern: p
        }),
        id().prop_map(|p| Event::PermissionRevoked {
            project: "proj".into(),
            permission: "bash".into(),
            pattern: p
        }),
        id().prop_map(|e| Event::ContextEpochStarted {
            epoch_id: e.clone(),
            baseline: "base".into(),
            change_record: json!({}),
            snapshot: None,
            summary: (e.len() % 2 == 0).then(|| format!("summary {e}")),
            first_kept: (e.len() % 2 == 0).then(|| format!("m{e}")),
        }),
        id().prop_map(|m| Event::RevertStaged {
            message_id: format!("m{m}"),
            snapshot: "tree".into(),
            files: vec!["a.rs".into()]
        }),
        Just(Event::RevertCleared),
        (
            id(),
            id(),
            id(),
            0u32..2,
            proptest::collection::vec(id(), 0..3)
        )
            .prop_map(|(d, from, to, generation, consolidates)| Event::Distilled {
                distillation_id: format!("d{d}{generation}"),
                generation,
                text: format!("observed {from}..{to}"),
                from_message_id: format!("m{from}"),
                to_message_id: format!("m{to}"),
                consolidates: consolidates.into_iter().map(|c| format!("d{c}0")).collect(),
            }),
        (
            id(),
            prop_oneof![Just("same text"), Just("Same  text."), Just("other")],
            any::<bool>(),
            proptest::option::of(id())
        )
            .prop_map(|(f, t, global, against)| Event::FactWritten {
                fact_id: format!("f{f}"),
                content: t.into(),
                tier: crate::status::Tier::Archival,
                scope: if global {
                    crate::status::FactScope::Global
                } else {
                    crate::status::FactScope::Project
                },
                project: (!global).then(|| "proj".into()),
                sensitivity: crate::status::Sensitivity::Normal,
                expires_at: None,
                source: crate::status::FactSource::Model,
                session_id: Some("s1".into()),
                message_id: None,
                confidence: 0.5,
                message_ids: Vec::new(),
                dream_id: None,
                conflicts_with: against.map(|a| format!("f{a}")),
            }),
        (id(), any::<bool>()).prop_map(|(f, useful)| Event::FactFeedback {
            fact_id: format!("f{f}"),
            useful,
            query: (!useful).then(|| "a prompt".into()),
        }),
        (id(), id(), id()).prop_map(|(d, from, to)| Event::DreamStarted {
            dream_id: format!("r{d}"),
            project: "proj".into(),
            from_message_id: format!("m{from}"),
            to_message_id: format!("m{to}"),
        }),
        id().prop_map(|d| Event::DreamExtracted {
            dream_id: format!("r{d}"),
            candidates: Vec::new(),
        }),
        id().prop_map(|d| Event::DreamCompleted {
            dream_id: format!("r{d}"),
            outcomes: Vec::new(),
            error: None,
        }),
        (
            id(),
            prop_oneof![Just("same entry"), Just("Same  entry."), Just("another")],
            any::<bool>(),
            proptest::collection::vec(id(), 0..2)
        )
            .prop_map(|(k, t, global, replaces)| Event::KnowledgeAdded {
                entry_id: format!("k{k}"),
                kind: crate::status::KnowledgeKind::Gotcha,
                content: t.into(),
                project: (!global).then(|| "proj".into()),
                source: crate::status::KnowledgeSource::Curator,
                session_id: Some("s1".into()),
                message_ids: Vec::new(),
                curation_id: None,
                replaces: replaces.into_iter().map(|r| format!("k{r}")).collect(),
            }),
        (id(), text).prop_map(|(k, t)| Event::KnowledgeUpdated {
            entry_id: format!("k{k}"),
            content: t,
            kind: crate::status::KnowledgeKind::Fact,
        }),
        id().prop_map(|k| Event::KnowledgeForgotten {
            entry_id: format!("k{k}")
        }),
        (id(), any::<bool>()).prop_map(|(c, consolidation)| Event::KnowledgeCurated {
            curation_id: format!("c{c}"),
            project: "proj".into(),
            consolidation,
            session_id: Some("s1".into()),
            from_message_id: None,
            to_message_id: None,
            added: vec![format!("k{c}")],
            error: None,
        }),
        proptest::collection::vec(id(), 0..3).prop_map(|ids| Event::KnowledgeExported {
            project: "proj".into(),
            file: "AGENTS.md".into(),
            entry_ids: ids.into_iter().map(|k| format!("k{k}")).collect(),
        }),
        id().prop_map(|f| Event::FactForgotten {
            fact_id: format!("f{f}")
        }),
        (id(), text).prop_map(|(f, t)| Event::FactUpdated {
            fact_id: format!("f{f}"),
            content: t
        }),
        proptest::collection::vec(text, 0..3).prop_map(|items| Event::TodosReplaced {
            todos: items
                .into_iter()
                .map(|c| Todo {
                    content: c,
                    status: "pending".into(),
                    priority: "high".into()
                })
                .collect()
        }),
    ];
    (session, event).prop_map(|(sid, e)| {
        // Grants belong to a project, not a session.
        let sid = if e.is_session_scoped() { sid } else { None };
        (sid, e)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn rebuild_equals_live(events in proptest::collection::vec(any_event(), 1..60)) {
        let (_dir, mut store) = temp_store();
        for (sid, e) in &events {
            store.append(sid.as_deref(), e).unwrap();
        }
        let live = store.projection_dump().unwrap();
        let report = store.rebuild().unwrap();
        prop_assert_eq!(report.events, events.len() as u64);
        prop_assert_eq!(store.projection_dump().unwrap(), live);
    }
}

/// A session in workspace `ws` with one user prompt and one tool result per `(prompt, tool
/// output)` pair.
fn session_with(store: &mut Store, sid: &str, ws: &str, turns: &[(&str, &str)]) {
    let s = Some(sid);
    store
        .append(
            s,
            &Event::SessionCreated {
                workspace: ws.into(),
                title: format!("session {sid}"),
            },
        )
        .unwrap();
    for (i, (prompt, output)) in turns.iter().enumerate() {
        let (input, user, answer) = (
            format!("{sid}-i{i}"),
            format!("{sid}-u{i}"),
            format!("{sid}-a{i}"),
        );
        store
            .append_all(&[
                (
                    s,
                    Event::InputAdmitted {
                        input_id: input.clone(),
                        text: prompt.to_string(),
                        context: Value::Null,
                    },
                ),
                (
                    s,
                    Event::InputPromoted {
                        input_id: input,
                        message_id: user,
                        part_id: format!("{sid}-up{i}"),
                    },
                ),
                (
                    s,
                    Event::MessageStarted {
                        message_id: answer.clone(),
                        role: "assistant".into(),
                        meta: json!({}),
                    },
                ),
                (
                    s,
                    Event::PartAdded {
                        part_id: format!("{sid}-t{i}"),
                        message_id: answer,
                        kind: PartKind::Tool,
                        data: json!({"callId": "c", "name": "bash", "input": "{\"command\":\"cargo test\"}", "output": output}),
                        status: Some(PartStatus::Completed),
                    },
                ),
            ])
            .unwrap();
    }
}

#[test]
fn recall_finds_words_identifiers_and_paths_and_forgets_deleted_messages() {
    let (_dir, mut store) = temp_store();
    session_with(
        &mut store,
        "s1",
        "/w",
        &[
            ("set up the project", "Compiling app v0.1.0\nFinished"),
            (
                "run the tests",
                "error[E0599]: no method named `fetchAll` on `userStore` in src/store/users.rs:41:9",
            ),
            ("what next?", "3 passed; 0 failed"),
        ],
    );
    session_with(
        &mut store,
        "s2",
        "/other",
        &[("user store in the other project", "ok")],
    );

    // Words find the identifier `userStore` (and the other session's plain words).
    let hits = store
        .search("user store", Scope::All, None, None, 5)
        .unwrap();
    let ids: Vec<&str> = hits.iter().map(|h| h.part_id.as_str()).collect();
    assert!(
        ids[..2].contains(&"s1-t1") && ids[..2].contains(&"s2-up0"),
        "{hits:?}"
    );
    let hits = store
        .search("fetchAll", Scope::Session, Some("s1"), None, 5)
        .unwrap();
    assert_eq!(hits[0].part_id, "s1-t1", "{hits:?}");
    assert_eq!(hits[0].source, "tool bash");
    assert_eq!(hits[0].paths, ["src/store/users.rs"]);
    assert!(
        hits[0].snippet.contains("«fetchAll»"),
        "{}",
        hits[0].snippet
    );
    // Porter stemming: "failing tests" finds "failed" and "tests".
    let hits = store
        .search("failing tests", Scope::Session, Some("s1"), None, 5)
        .unwrap();
    assert!(hits.iter().any(|h| h.part_id == "s1-t2"), "{hits:?}");
    // Scopes.
    let project = store
        .search("user store", Scope::Project, None, Some("/other"), 5)
        .unwrap();
    assert!(project.iter().all(|h| h.session_id == "s2") && !project.is_empty());
    assert!(
        store
            .search("?!", Scope::All, None, None, 5)
            .unwrap()
            .is_empty()
    );

    // A committed revert deletes the messages, and their entries with them.
    store
        .append(
            Some("s1"),
            &Event::MessagesDeleted {
                from_message_id: "s1-u1".into(),
            },
        )
        .unwrap();
    let hits = store.search("fetchAll", Scope::All, None, None, 5).unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    // And a rebuild from the log gives the same index.
    let before = store.projection_dump().unwrap();
    store.rebuild().unwrap();
    assert_eq!(store.projection_dump().unwrap(), before);
    assert_eq!(
        store
            .search("compiling", Scope::All, None, None, 5)
            .unwrap()
            .len(),
        1
    );
}

/// Session `s` with assistant messages `m0..m{n}` (one text part each).
fn with_messages(store: &mut Store, n: usize) {
    store
        .append(
            Some("s"),
            &Event::SessionCreated {
                workspace: "/w".into(),
                title: "t".into(),
            },
        )
        .unwrap();
    for i in 0..n {
        store
            .append_all(&[
                (
                    Some("s"),
                    Event::MessageStarted {
                        message_id: format!("m{i}"),
                        role: "assistant".into(),
                        meta: Value::Null,
                    },
                ),
                (
                    Some("s"),
                    Event::PartAdded {
                        part_id: format!("p{i}"),
                        message_id: format!("m{i}"),
                        kind: PartKind::Text,
                        data: json!({"text": format!("message {i}")}),
                        status: Some(PartStatus::Completed),
                    },
                ),
            ])
            .unwrap();
    }
}

fn distilled(id: &str, generation: u32, text: &str, range: (&str, &str), of: &[&str]) -> Event {
    Event::Distilled {
        distillation_id: id.into(),
        generation,
        text: text.into(),
        from_message_id: range.0.into(),
        to_message_id: range.1.into(),
        consolidates: of.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn consolidated_distillations_are_archived_and_still_found() {
    let (_dir, mut store) = temp_store();
    with_messages(&mut store, 6);
    let s = Some("s");
    store
        .append(
            s,
            &distilled("d0", 0, "observed the zeppelin", ("m0", "m2"), &[]),
        )
        .unwrap();
    store
        .append(
            s,
            &distilled("d1", 0, "fixed the quokka", ("m3", "m4"), &[]),
        )
        .unwrap();
    store
        .append(
            s,
            &distilled("w", 1, "working context", ("m0", "m4"), &["d0", "d1"]),
        )
        .unwrap();
    // One for messages that do not exist changes nothing.
    store
        .append(s, &distilled("x", 0, "ghost", ("m0", "m99"), &[]))
        .unwrap();
    let all = store.distillations("s").unwrap();
    let state: Vec<_> = all.iter().map(|d| (d.id.as_str(), d.archived)).collect();
    assert_eq!(state, [("d0", true), ("d1", true), ("w", false)]);
    let hits = store
        .search("zeppelin", Scope::Session, Some("s"), None, 5)
        .unwrap();
    assert_eq!(hits.len(), 1, "an archived observation is still recalled");
    assert_eq!(hits[0].source, "distillation 0");
    assert_eq!(hits[0].message_id, "m2");
    assert_eq!(store.session("s").unwrap().unwrap().distillations, all);

    // A revert from m4 on drops what covered m4 (d1, w) and brings d0 back.
    store
        .append(
            s,
            &Event::MessagesDeleted {
                from_message_id: "m4".into(),
            },
        )
        .unwrap();
    let state: Vec<_> = store
        .distillations("s")
        .unwrap()
        .into_iter()
        .map(|d| (d.id, d.archived))
        .collect();
    assert_eq!(state, [("d0".to_string(), false)]);
    assert!(
        store
            .search("quokka", Scope::Session, Some("s"), None, 5)
            .unwrap()
            .is_empty()
    );
    let live = store.projection_dump().unwrap();
    store.rebuild().unwrap();
    assert_eq!(store.projection_dump().unwrap(), live);
}
