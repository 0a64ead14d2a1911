//! store-writer: appends events to an agent-lsp database as fast as it can, for the
//! concurrency and crash tests. Usage: `store-writer DB SESSION COUNT`.
//!
//! Each round appends a batch (a message, a text part, ten deltas) in one transaction, then
//! prints the round number, so a test can tell how far a writer got before it was killed.

use std::io::Write;
use std::path::PathBuf;

use agent_lsp::store::{Event, Store};
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, db, session, count] = args.as_slice() else {
        eprintln!("usage: store-writer DB SESSION COUNT");
        std::process::exit(2);
    };
    let count: u64 = count.parse().expect("COUNT is a number");
    let mut store = Store::open(&PathBuf::from(db)).expect("open the database");
    let sid = Some(session.as_str());
    store
        .append(
            sid,
            &Event::SessionCreated {
                workspace: "/w".into(),
                title: session.clone(),
            },
        )
        .expect("create the session");
    let mut out = std::io::stdout().lock();
    for round in 0..count {
        let message_id = format!("{session}-m{round}");
        let part_id = format!("{session}-p{round}");
        let mut batch = vec![
            (
                sid,
                Event::MessageStarted {
                    message_id: message_id.clone(),
                    role: "assistant".into(),
                    meta: json!({"round": round}),
                },
            ),
            (
                sid,
                Event::PartAdded {
                    part_id: part_id.clone(),
                    message_id,
                    kind: agent_lsp::status::PartKind::Text,
                    data: json!({"text": ""}),
                    status: None,
                },
            ),
        ];
        for i in 0..10 {
            batch.push((
                sid,
                Event::TextAppended {
                    part_id: part_id.clone(),
                    text: format!("{i}"),
                },
            ));
        }
        store.append_all(&batch).expect("append a batch");
        writeln!(out, "{round}").unwrap();
        out.flush().unwrap();
    }
}
