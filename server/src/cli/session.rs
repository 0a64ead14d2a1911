//! `agent-lsp session ...`: list, show and rebuild stored sessions.

use std::io::Write;

use anyhow::{Context, bail};

use super::SessionCommand;
use crate::store::{SessionView, Store};

pub fn run(cmd: SessionCommand) -> anyhow::Result<i32> {
    let mut store = Store::open_default().context("cannot open the database")?;
    let mut out = std::io::stdout().lock();
    match cmd {
        SessionCommand::List { json } => {
            let sessions = store.sessions()?;
            if json {
                serde_json::to_writer_pretty(&mut out, &sessions)?;
                writeln!(out)?;
            } else if sessions.is_empty() {
                writeln!(out, "no sessions yet")?;
            } else {
                for s in sessions {
                    writeln!(
                        out,
                        "{}  {:<7}  {:>3} msgs  {}  {}",
                        s.session_id, s.status, s.messages, s.workspace, s.title
                    )?;
                }
            }
        }
        SessionCommand::Show { id, json } => {
            let id = resolve_id(&store, &id)?;
            let view = store.session(&id)?.context("the session vanished")?;
            if json {
                serde_json::to_writer_pretty(&mut out, &view)?;
                writeln!(out)?;
            } else {
                write_transcript(&mut out, &view)?;
            }
        }
        SessionCommand::Rebuild => {
            let report = store.rebuild()?;
            let health = store.integrity_check()?;
            writeln!(
                out,
                "rebuilt the projections of {} from {} events ({} unreadable skipped); integrity: {health}",
                store.path().display(),
                report.events,
                report.unreadable
            )?;
        }
    }
    Ok(0)
}

/// A full id, or a prefix that names exactly one session.
pub(super) fn resolve_id(store: &Store, prefix: &str) -> anyhow::Result<String> {
    let matches: Vec<String> = store
        .sessions()?
        .into_iter()
        .map(|s| s.session_id)
        .filter(|id| id.starts_with(prefix))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!("no session {prefix:?}"),
        many => bail!(
            "{prefix:?} matches {} sessions; give more of the id",
            many.len()
        ),
    }
}

fn write_transcript(out: &mut impl Write, view: &SessionView) -> std::io::Result<()> {
    let s = &view.summary;
    writeln!(out, "session {}  ({})", s.session_id, s.status)?;
    writeln!(out, "workspace {}", s.workspace)?;
    writeln!(out, "title {}", s.title)?;
    for m in &view.messages {
        writeln!(out, "\n## {} ({})", m.role, m.message_id)?;
        for p in &m.parts {
            match p.kind.as_str() {
                "text" | "reasoning" => {
                    let text = p.data.get("text").and_then(|t| t.as_str()).unwrap_or("");
                    if p.kind == "reasoning" {
                        writeln!(out, "[reasoning] {text}")?;
                    } else {
                        writeln!(out, "{text}")?;
                    }
                }
                kind => writeln!(
                    out,
                    "[{kind}{}] {}",
                    p.status
                        .as_deref()
                        .map(|s| format!(" {s}"))
                        .unwrap_or_default(),
                    p.data
                )?,
            }
        }
    }
    if !view.inbox.is_empty() {
        writeln!(out, "\n## pending input")?;
        for i in &view.inbox {
            writeln!(out, "- {}", i.text)?;
        }
    }
    if !view.todos.is_empty() {
        writeln!(out, "\n## todos")?;
        for t in &view.todos {
            writeln!(out, "- [{}] {}", t.status, t.content)?;
        }
    }
    Ok(())
}
