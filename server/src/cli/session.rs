//! `agent-lsp session ...`: list, show and rebuild stored sessions.

use std::io::Write;

use anyhow::{Context, bail};

use super::SessionCommand;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::agent::Agent;
use crate::agent::revert::to_json;
use crate::config::Layers;
use crate::editor::{Headless, PermissionReply};
use crate::status::PartKind;
use crate::store::{SessionView, Store};

/// `agent-lsp snapshot stats|gc`.
pub fn snapshot(cmd: super::SnapshotCommand) -> anyhow::Result<i32> {
    let cwd = match &cmd {
        super::SnapshotCommand::Stats { cwd } | super::SnapshotCommand::Gc { cwd } => cwd.clone(),
    };
    let cwd = match cwd {
        Some(d) => d,
        None => std::env::current_dir()?,
    };
    let workspace = crate::workspace::root_for_file(&std::fs::canonicalize(&cwd)?.join("."));
    let agent = agent_in(Store::open_default()?, &workspace);
    let Some(snapshots) = agent.snapshots() else {
        eprintln!(
            "agent-lsp: snapshots are off or unavailable for {}",
            workspace.display()
        );
        return Ok(1);
    };
    let mut out = std::io::stdout().lock();
    match cmd {
        super::SnapshotCommand::Stats { .. } => {
            let s = snapshots.lock().unwrap_or_else(|p| p.into_inner());
            let (bytes, loose, packs) = s.stats()?;
            writeln!(
                out,
                "{}\n{:.1} MB, {loose} loose objects, {packs} packs",
                s.git_dir().display(),
                bytes as f64 / 1e6
            )?;
        }
        super::SnapshotCommand::Gc { .. } => match agent.snapshot_gc() {
            Ok(n) => writeln!(out, "removed {n} unreachable objects")?,
            Err(e) => {
                eprintln!("agent-lsp: {e}");
                return Ok(1);
            }
        },
    }
    Ok(0)
}

/// An agent without a model for `workspace` (revert, undo, snapshots).
pub(super) fn agent_in(store: Store, workspace: &std::path::Path) -> Agent {
    let mut layers = Layers::default();
    for problem in layers.load_files(Some(workspace)) {
        eprintln!("{problem}");
    }
    let editor = Arc::new(Headless {
        answer: PermissionReply::Reject { message: None },
    });
    Agent::new(
        Arc::new(Mutex::new(store)),
        layers.effective(),
        workspace,
        None,
        editor,
    )
}

/// An agent for a stored session's workspace, without a model (for revert and friends).
fn agent_for(store: Store, prefix: &str) -> anyhow::Result<(Agent, String)> {
    let id = resolve_id(&store, prefix)?;
    let view = store.session(&id)?.context("the session vanished")?;
    let workspace = PathBuf::from(&view.summary.workspace);
    Ok((agent_in(store, &workspace), id))
}

/// Prints a revert-like result, as JSON or as text.
pub(super) fn report(json: bool, value: serde_json::Value, text: String) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{text}")?;
    }
    Ok(0)
}

/// A revert for a person: what it put back, and what it left as it was and why.
fn revert_text(info: &crate::agent::revert::RevertInfo) -> String {
    let mut text = files_text("reverted", &info.files);
    if !info.not_restored.is_empty() {
        text += "\nleft as they are:";
        for u in &info.not_restored {
            text += &format!("\n  {}: {}", u.path, u.reason);
        }
    }
    text
}

fn files_text(verb: &str, files: &[String]) -> String {
    if files.is_empty() {
        format!("{verb} nothing: no file differed")
    } else {
        format!("{verb} {} file(s):\n  {}", files.len(), files.join("\n  "))
    }
}

pub async fn run(cmd: SessionCommand) -> anyhow::Result<i32> {
    let store = Store::open_default().context("cannot open the database")?;
    match cmd {
        SessionCommand::Revert { .. }
        | SessionCommand::Unrevert { .. }
        | SessionCommand::Undo { .. }
        | SessionCommand::Redo { .. }
        | SessionCommand::Compact { .. } => revert_command(store, cmd).await,
        _ => read_command(store, cmd),
    }
}

async fn revert_command(store: Store, cmd: SessionCommand) -> anyhow::Result<i32> {
    let fail = |e: String| -> anyhow::Result<i32> {
        eprintln!("agent-lsp: {e}");
        Ok(1)
    };
    match cmd {
        SessionCommand::Revert {
            id,
            message_id,
            json,
        } => {
            let (agent, sid) = agent_for(store, &id)?;
            match agent.revert_to(&sid, &message_id).await {
                Ok(info) => report(json, to_json(&info), revert_text(&info)),
                Err(e) => fail(e.to_string()),
            }
        }
        SessionCommand::Undo { id, json } => {
            let (agent, sid) = agent_for(store, &id)?;
            match agent.undo(&sid).await {
                Ok(info) => {
                    let text = format!(
                        "{}\nundone prompt: {}",
                        revert_text(&info),
                        info.text.clone().unwrap_or_default()
                    );
                    report(json, to_json(&info), text)
                }
                Err(e) => fail(e.to_string()),
            }
        }
        SessionCommand::Unrevert { id, json } | SessionCommand::Redo { id, json } => {
            let (agent, sid) = agent_for(store, &id)?;
            match agent.unrevert(&sid).await {
                Ok(files) => report(
                    json,
                    serde_json::json!({"files": files}),
                    files_text("restored", &files),
                ),
                Err(e) => fail(e.to_string()),
            }
        }
        SessionCommand::Compact { id, json } => {
            let (mut agent, sid) = agent_for(store, &id)?;
            match crate::provider::from_config(agent.config()) {
                Ok(p) => agent.set_provider(Arc::from(p)),
                Err(e) => return fail(format!("distillation needs the model: {e}")),
            }
            match agent.distill_now(&sid).await {
                Ok(r) => {
                    let current = r.distillations.iter().filter(|d| !d.archived);
                    let text = format!(
                        "observed {} message(s){}; the next request shows {} raw:\n\n{}",
                        r.observed_messages,
                        if r.reflected {
                            ", consolidated the observations"
                        } else {
                            ""
                        },
                        r.kept_messages,
                        current
                            .map(|d| d.text.as_str())
                            .collect::<Vec<_>>()
                            .join("\n\n")
                    );
                    report(json, crate::agent::distill::to_json(&r), text)
                }
                Err(e) => fail(e.to_string()),
            }
        }
        _ => unreachable!("run() routes only revert commands here"),
    }
}

fn read_command(mut store: Store, cmd: SessionCommand) -> anyhow::Result<i32> {
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
        SessionCommand::Search {
            query,
            session,
            limit,
            json,
        } => {
            let session = session.map(|id| resolve_id(&store, &id)).transpose()?;
            let scope = match session {
                Some(_) => crate::store::Scope::Session,
                None => crate::store::Scope::All,
            };
            let hits = store.search(&query, scope, session.as_deref(), None, limit)?;
            if json {
                serde_json::to_writer_pretty(&mut out, &hits)?;
                writeln!(out)?;
            } else if hits.is_empty() {
                writeln!(out, "nothing found")?;
            } else {
                for h in hits {
                    writeln!(
                        out,
                        "{}  {}  {}\n  {}",
                        h.session_id,
                        h.source,
                        h.paths.join(" "),
                        h.snippet.replace('\n', "\n  ")
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
        SessionCommand::Revert { .. }
        | SessionCommand::Unrevert { .. }
        | SessionCommand::Undo { .. }
        | SessionCommand::Redo { .. }
        | SessionCommand::Compact { .. } => unreachable!("run() routes these to revert_command"),
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
            match p.kind {
                PartKind::Text | PartKind::Reasoning => {
                    let text = p.data.get("text").and_then(|t| t.as_str()).unwrap_or("");
                    if p.kind == PartKind::Reasoning {
                        writeln!(out, "[reasoning] {text}")?;
                    } else {
                        writeln!(out, "{text}")?;
                    }
                }
                kind => writeln!(
                    out,
                    "[{kind}{}] {}",
                    p.status.map(|s| format!(" {s}")).unwrap_or_default(),
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
