//! The session state file (`.agent-lsp/STATE.md` by default, `state_file` to move it): what a
//! person — or the next session — needs to pick the work up. Three sections: **Current**
//! (focus, phase, task, blockers, next, handoff; replaced by each checkpoint), **Decisions**
//! (append-only; `[REJECTED]` marks what was tried and failed) and **Log** (append-only, the
//! oldest trimmed past [`LOG_LIMIT`]; `[auto]` entries are the server's own).
//!
//! Every change is a read-modify-write under one lock, written atomically (a temporary file
//! renamed over the old one): a reader never sees half a file. Values are kept on one line
//! each, so nothing in them can break the sections apart.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The most characters of a Current field (the handoff and discoveries may hold more).
pub const FIELD_CAP: usize = 1_000;
pub const LONG_CAP: usize = 2_000;
/// Log entries kept; older ones are trimmed.
pub const LOG_LIMIT: usize = 200;
/// What marks the server's own Log entries.
pub const AUTO: &str = "[auto]";

const FIELDS: [&str; 6] = ["Focus", "Phase", "Task", "Blockers", "Next", "Handoff"];

/// The Current section: each field optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Current {
    pub focus: Option<String>,
    pub phase: Option<String>,
    pub task: Option<String>,
    pub blockers: Option<String>,
    pub next: Option<String>,
    pub handoff: Option<String>,
    /// When the last checkpoint was written (`YYYY-MM-DD HH:MM:SS UTC`).
    pub updated: Option<String>,
}

impl Current {
    fn slot(&mut self, label: &str) -> Option<&mut Option<String>> {
        Some(match label {
            "Focus" => &mut self.focus,
            "Phase" => &mut self.phase,
            "Task" => &mut self.task,
            "Blockers" => &mut self.blockers,
            "Next" => &mut self.next,
            "Handoff" => &mut self.handoff,
            "Updated" => &mut self.updated,
            _ => return None,
        })
    }

    fn fields(&self) -> [(&'static str, &Option<String>); 7] {
        [
            ("Focus", &self.focus),
            ("Phase", &self.phase),
            ("Task", &self.task),
            ("Blockers", &self.blockers),
            ("Next", &self.next),
            ("Handoff", &self.handoff),
            ("Updated", &self.updated),
        ]
    }
}

/// The whole file. Lines of a section that are not ours (a person's notes) are kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    pub current: Current,
    pub decisions: Vec<String>,
    pub log: Vec<String>,
    /// Other lines of the Current section, as written.
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{0}")]
    Invalid(String),
    #[error("the state file {path} cannot be {doing}: {source}")]
    Io {
        path: PathBuf,
        doing: &'static str,
        source: std::io::Error,
    },
}

/// Where the state file of `workspace` is.
pub fn path(workspace: &Path, configured: &Path) -> PathBuf {
    workspace.join(configured)
}

/// Now, as the file writes times.
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M:%S UTC")
        .to_string()
}

/// A time the file wrote, in milliseconds since the epoch.
pub fn parse_time(text: &str) -> Option<i64> {
    let t = text.trim().trim_end_matches(" UTC");
    let civil = jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M:%S", t).ok()?;
    jiff::tz::TimeZone::UTC
        .to_timestamp(civil)
        .ok()
        .map(|t| t.as_millisecond())
}

impl State {
    pub fn parse(text: &str) -> State {
        let mut state = State::default();
        let mut section = "";
        for line in text.lines() {
            if let Some(heading) = line.strip_prefix("## ") {
                section = match heading.trim() {
                    "Current" => "current",
                    "Decisions" => "decisions",
                    "Log" => "log",
                    _ => "",
                };
                continue;
            }
            let item = line.strip_prefix("- ").map(str::trim);
            match (section, item) {
                ("current", Some(item)) => {
                    let parsed = item.split_once(": ").and_then(|(label, value)| {
                        let label = label.trim_matches('*').trim_end_matches(':');
                        state.current.slot(label).map(|slot| (slot, value))
                    });
                    match parsed {
                        Some((slot, value)) => *slot = Some(value.trim().to_string()),
                        None => state.notes.push(line.to_string()),
                    }
                }
                ("current", None) if !line.trim().is_empty() => state.notes.push(line.to_string()),
                ("decisions", Some(item)) if !item.is_empty() => {
                    state.decisions.push(item.to_string())
                }
                ("log", Some(item)) if !item.is_empty() => state.log.push(item.to_string()),
                _ => {}
            }
        }
        state
    }

    pub fn render(&self) -> String {
        let mut out = String::from(
            "# Session state\n\n<!-- Kept by agent-lsp and by you. Current is replaced by each \
             checkpoint; Decisions and Log only grow (the Log keeps its newest entries). -->\n\n\
             ## Current\n\n",
        );
        for (label, value) in self.current.fields() {
            if let Some(v) = value {
                out.push_str(&format!("- {label}: {}\n", crate::markdown::one_line(v)));
            }
        }
        for note in &self.notes {
            out.push_str(note);
            out.push('\n');
        }
        out.push_str("\n## Decisions\n\n");
        for d in &self.decisions {
            out.push_str(&format!("- {}\n", crate::markdown::list_item(d)));
        }
        out.push_str("\n## Log\n\n");
        for l in &self.log {
            out.push_str(&format!("- {}\n", crate::markdown::list_item(l)));
        }
        out
    }

    /// The newest Log entry, if the server wrote it.
    pub fn last_auto(&self) -> Option<&str> {
        self.log
            .last()
            .map(String::as_str)
            .filter(|l| l.starts_with(AUTO))
    }

    /// The Current section as short lines (for the state block).
    pub fn current_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (label, value) in self.current.fields() {
            if let Some(v) = value {
                lines.push(format!("{label}: {v}"));
            }
        }
        lines
    }
}

/// What a checkpoint sets; unset fields are cleared.
#[derive(Debug, Clone, Default)]
pub struct Checkpoint {
    pub focus: String,
    pub phase: Option<String>,
    pub task: Option<String>,
    pub blockers: Option<String>,
    pub next: Option<String>,
    pub handoff: Option<String>,
}

/// Where a discovery goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Log,
    Decisions,
}

fn capped(label: &str, value: &str, cap: usize) -> Result<String, StateError> {
    let n = value.chars().count();
    if n > cap {
        return Err(StateError::Invalid(format!(
            "{label} is {n} characters; at most {cap} fit (put the rest in a file and name it)"
        )));
    }
    Ok(value.trim().to_string())
}

/// One change at a time in this process; the rename makes each one atomic for readers.
static LOCK: Mutex<()> = Mutex::new(());

/// Reads the file (a missing one is an empty state).
pub fn load(path: &Path) -> Result<State, StateError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(State::parse(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
        Err(source) => Err(StateError::Io {
            path: path.to_path_buf(),
            doing: "read",
            source,
        }),
    }
}

/// Applies `change` to the file's state and writes it back atomically.
pub fn update(
    workspace: &Path,
    path: &Path,
    change: impl FnOnce(&mut State) -> Result<(), StateError>,
) -> Result<State, StateError> {
    let _one_at_a_time = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut state = load(path)?;
    change(&mut state)?;
    if state.log.len() > LOG_LIMIT {
        let extra = state.log.len() - LOG_LIMIT;
        state.log.drain(..extra);
    }
    write_atomic(workspace, path, &state.render())?;
    Ok(state)
}

/// Replaces the Current section.
pub fn checkpoint(workspace: &Path, path: &Path, c: &Checkpoint) -> Result<State, StateError> {
    let current = Current {
        focus: Some(capped("focus", &c.focus, FIELD_CAP)?).filter(|f| !f.is_empty()),
        phase: opt("phase", &c.phase, FIELD_CAP)?,
        task: opt("task", &c.task, FIELD_CAP)?,
        blockers: opt("blockers", &c.blockers, FIELD_CAP)?,
        next: opt("next", &c.next, FIELD_CAP)?,
        handoff: opt("handoff", &c.handoff, LONG_CAP)?,
        updated: Some(now()),
    };
    if current.focus.is_none() {
        return Err(StateError::Invalid(
            "focus is empty: say what the work is on".into(),
        ));
    }
    update(workspace, path, |s| {
        s.current = current;
        Ok(())
    })
}

fn opt(label: &str, value: &Option<String>, cap: usize) -> Result<Option<String>, StateError> {
    value
        .as_deref()
        .map(|v| capped(label, v, cap))
        .transpose()
        .map(|v| v.filter(|v| !v.is_empty()))
}

/// Appends a dated entry to the Log or the Decisions.
pub fn discover(
    workspace: &Path,
    path: &Path,
    target: Target,
    content: &str,
) -> Result<State, StateError> {
    let content = capped("content", content, LONG_CAP)?;
    if content.is_empty() {
        return Err(StateError::Invalid("content is empty".into()));
    }
    let entry = format!("[{}] {content}", now());
    update(workspace, path, |s| {
        match target {
            Target::Log => s.log.push(entry),
            Target::Decisions => s.decisions.push(entry),
        }
        Ok(())
    })
}

/// Writes `text` to `path` through a temporary file in the same folder. The folder is made
/// if needed; inside the workspace's `.agent-lsp/` the files stay out of git (a folder we
/// make ignores itself; in one the user made, a `.gitignore` of ours that ignores itself
/// names them, unless the user has one there).
fn write_atomic(workspace: &Path, path: &Path, text: &str) -> Result<(), StateError> {
    let io = |doing, source| StateError::Io {
        path: path.to_path_buf(),
        doing,
        source,
    };
    let top = workspace.join(crate::paths::WORKSPACE_DIR);
    if path.parent() == Some(top.as_path()) {
        let existed = top.is_dir();
        crate::paths::ensure_workspace_dir(workspace, "").map_err(|e| io("written", e))?;
        let ignore = top.join(".gitignore");
        if existed && !ignore.exists() {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("STATE.md");
            std::fs::write(&ignore, format!("/{name}\n/.{name}.tmp-*\n/.gitignore\n"))
                .map_err(|e| io("written", e))?;
        }
    } else if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io("written", e))?;
    }
    crate::paths::replace_file(path, text).map_err(|(_, e)| io("written", e))
}

/// The field labels a checkpoint takes, for messages.
pub fn field_labels() -> String {
    FIELDS.join(", ").to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_checkpoint_replaces_current_and_entries_only_grow() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let file = path(ws, Path::new(".agent-lsp/STATE.md"));
        let c = Checkpoint {
            focus: "the parser".into(),
            phase: Some("fixing".into()),
            next: Some("run the tests".into()),
            ..Default::default()
        };
        checkpoint(ws, &file, &c).unwrap();
        discover(ws, &file, Target::Decisions, "[REJECTED] a regex: too slow").unwrap();
        discover(ws, &file, Target::Log, "found the bug\nin lex.rs").unwrap();
        let c2 = Checkpoint {
            focus: "the lexer".into(),
            ..Default::default()
        };
        let s = checkpoint(ws, &file, &c2).unwrap();
        assert_eq!(s.current.focus.as_deref(), Some("the lexer"));
        assert_eq!(s.current.next, None, "replaced, not merged");
        assert_eq!(s.decisions.len(), 1);
        assert!(s.decisions[0].ends_with("[REJECTED] a regex: too slow"));
        let back = load(&file).unwrap();
        assert_eq!(back, s);
        assert!(back.log[0].ends_with("found the bug in lex.rs"), "one line");
        // Our folder ignores itself; no temporary file is left.
        let ignore = std::fs::read_to_string(ws.join(".agent-lsp/.gitignore")).unwrap();
        assert!(ignore.contains('*'));
        let names: Vec<_> = std::fs::read_dir(ws.join(".agent-lsp"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
        assert!(parse_time(s.current.updated.as_deref().unwrap()).is_some());
    }

    #[test]
    fn caps_and_empty_values_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".agent-lsp/STATE.md");
        let long = Checkpoint {
            focus: "x".repeat(FIELD_CAP + 1),
            ..Default::default()
        };
        let e = checkpoint(dir.path(), &file, &long)
            .unwrap_err()
            .to_string();
        assert!(e.contains("focus is 1001 characters; at most 1000"), "{e}");
        let e = discover(dir.path(), &file, Target::Log, " ").unwrap_err();
        assert!(e.to_string().contains("empty"));
        assert!(!file.exists(), "nothing written");
    }

    #[test]
    fn the_log_keeps_its_newest_entries() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".agent-lsp/STATE.md");
        for i in 0..LOG_LIMIT + 5 {
            update(dir.path(), &file, |s| {
                s.log.push(format!("entry {i}"));
                Ok(())
            })
            .unwrap();
        }
        let s = load(&file).unwrap();
        assert_eq!(s.log.len(), LOG_LIMIT);
        assert_eq!(s.log[0], "entry 5");
    }

    #[test]
    fn a_folder_the_user_made_gets_an_ignore_that_names_our_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".agent-lsp/skills")).unwrap();
        let file = dir.path().join(".agent-lsp/STATE.md");
        discover(dir.path(), &file, Target::Log, "hello").unwrap();
        let ignore = std::fs::read_to_string(dir.path().join(".agent-lsp/.gitignore")).unwrap();
        assert_eq!(ignore, "/STATE.md\n/.STATE.md.tmp-*\n/.gitignore\n");
    }

    proptest! {
        #[test]
        fn any_values_read_back_as_written(
            focus in "[^\r\n]{1,40}",
            entries in proptest::collection::vec("\\PC{0,30}", 0..6),
        ) {
            let focus = crate::markdown::one_line(&focus);
            prop_assume!(!focus.is_empty());
            let state = State {
                current: Current { focus: Some(focus.clone()), ..Default::default() },
                decisions: entries.iter().map(|e| crate::markdown::one_line(e))
                    .filter(|e| !e.is_empty()).collect(),
                log: vec!["## not a heading".into(), "- not a list".into()],
                notes: Vec::new(),
            };
            let back = State::parse(&state.render());
            prop_assert_eq!(back.current.focus, Some(focus));
            prop_assert_eq!(back.decisions.len(), state.decisions.len());
            prop_assert_eq!(back.log.len(), 2);
        }
    }
}
