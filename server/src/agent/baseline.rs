//! The baseline note: what the model is told about where it works, built once per context
//! epoch and kept byte-stable (prompt caches depend on it). Later changes (a new date,
//! edited instructions) are reported as supplemental notes instead of a new baseline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// One instruction file as read now.
#[derive(Debug, Clone, PartialEq)]
pub enum Instruction {
    Read {
        path: PathBuf,
        text: String,
    },
    /// It exists but cannot be read (its last good copy, if any, is kept).
    Unreadable {
        path: PathBuf,
        error: String,
    },
}

/// AGENTS.md from the filesystem root down to the workspace (CLAUDE.md where a folder has
/// no AGENTS.md), then the user's global AGENTS.md. Outer folders come first, so the most
/// specific instructions are read last.
pub fn instruction_files(workspace: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = workspace
        .ancestors()
        .filter_map(|dir| {
            ["AGENTS.md", "CLAUDE.md"]
                .iter()
                .map(|n| dir.join(n))
                .find(|p| p.exists())
        })
        .collect();
    found.reverse();
    let global = crate::paths::config_dir().join("AGENTS.md");
    if global.exists() {
        found.insert(0, global);
    }
    found
}

pub fn read_instructions(workspace: &Path) -> Vec<Instruction> {
    instruction_files(workspace)
        .into_iter()
        .map(|path| match std::fs::read_to_string(&path) {
            Ok(text) => Instruction::Read { path, text },
            Err(e) => Instruction::Unreadable {
                error: e.to_string(),
                path,
            },
        })
        .collect()
}

fn hash(text: &str) -> String {
    crate::hash::stable_hex(text.as_bytes())
}

/// Today's date (UTC), e.g. `2026-12-02`.
pub fn today() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d").to_string()
}

/// The baseline text and its change record, or the reason it cannot be built yet (an
/// instruction file that exists but cannot be read).
/// Fails when an instruction file exists but cannot be read (the first turn waits for it).
pub fn build(
    workspace: &Path,
    skills: &[(String, String)],
) -> Result<(String, Value), super::AgentError> {
    let instructions = read_instructions(workspace);
    let mut text = format!(
        "<env>\nWorking directory: {}\nPlatform: {}\nDate: {}\n</env>\n",
        workspace.display(),
        std::env::consts::OS,
        today()
    );
    let mut files = BTreeMap::new();
    for i in &instructions {
        match i {
            Instruction::Read { path, text: body } => {
                text.push_str(&format!(
                    "<instructions source=\"{}\">\n{}\n</instructions>\n",
                    path.display(),
                    body.trim_end()
                ));
                files.insert(
                    path.display().to_string(),
                    json!({"hash": hash(body), "text": body}),
                );
            }
            Instruction::Unreadable { path, error } => {
                return Err(super::AgentError::Baseline(format!(
                    "cannot read {}: {error}",
                    path.display()
                )));
            }
        }
    }
    let blocks = crate::memory::load(workspace);
    text.push_str(&crate::memory::baseline_section(&blocks));
    if !skills.is_empty() {
        text.push_str("<skills>\n");
        for (name, description) in skills {
            text.push_str(&format!("- {name}: {description}\n"));
        }
        text.push_str("</skills>\n");
    }
    Ok((
        text,
        json!({"date": today(), "files": files, "memory": memory_record(&blocks)}),
    ))
}

/// Each memory block's content hash, by label.
fn memory_record(blocks: &[crate::memory::Block]) -> Value {
    Value::Object(
        blocks
            .iter()
            .map(|b| (b.label.clone(), json!(hash(&b.content))))
            .collect(),
    )
}

/// What changed since `record`: the note to add (if any) and the new record. Unreadable
/// files keep their last good copy.
pub fn changes(workspace: &Path, record: &Value) -> (Option<String>, Value) {
    let mut notes = Vec::new();
    let mut new_record = record.clone();
    let date = today();
    if record["date"].as_str() != Some(date.as_str()) {
        notes.push(format!("The date is now {date}."));
        new_record["date"] = json!(date);
    }
    let mut files = record["files"].as_object().cloned().unwrap_or_default();
    for i in read_instructions(workspace) {
        if let Instruction::Read { path, text } = i {
            let key = path.display().to_string();
            let h = hash(&text);
            if files.get(&key).and_then(|f| f["hash"].as_str()) != Some(h.as_str()) {
                notes.push(format!(
                    "The instructions in {key} changed; they now read:\n<instructions source=\"{key}\">\n{}\n</instructions>",
                    text.trim_end()
                ));
                files.insert(key, json!({"hash": h, "text": text}));
            }
        }
    }
    new_record["files"] = Value::Object(files);
    // Memory blocks edited since (by the agent's tools or by hand) arrive as notes too.
    let blocks = crate::memory::load(workspace);
    let seen = record["memory"].as_object().cloned().unwrap_or_default();
    for b in &blocks {
        if seen.get(&b.label).and_then(Value::as_str) != Some(hash(&b.content).as_str()) {
            notes.push(format!(
                "The memory block {:?} now reads:\n<block label=\"{}\">\n{}\n</block>",
                b.label,
                b.label,
                b.content.trim_end()
            ));
        }
    }
    new_record["memory"] = memory_record(&blocks);
    let note =
        (!notes.is_empty()).then(|| format!("<system-note>\n{}\n</system-note>", notes.join("\n")));
    (note, new_record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_walk_up_and_changes_become_notes() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("a/b");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(dir.path().join("a/CLAUDE.md"), "outer rules").unwrap();
        std::fs::write(ws.join("AGENTS.md"), "inner rules").unwrap();
        let (text, record) = build(&ws, &[("release".into(), "cut a release".into())]).unwrap();
        let outer = text.find("outer rules").unwrap();
        let inner = text.find("inner rules").unwrap();
        assert!(outer < inner, "outer folders first");
        assert!(text.contains("- release: cut a release"));
        let (note, _) = changes(&ws, &record);
        assert_eq!(note, None, "nothing changed");
        std::fs::write(ws.join("AGENTS.md"), "new inner rules").unwrap();
        let (note, record2) = changes(&ws, &record);
        assert!(note.unwrap().contains("new inner rules"));
        assert_eq!(changes(&ws, &record2).0, None);
        // Unreadable: a folder where the file should be.
        std::fs::remove_file(ws.join("AGENTS.md")).unwrap();
        std::fs::create_dir(ws.join("AGENTS.md")).unwrap();
        assert!(
            build(&ws, &[])
                .unwrap_err()
                .to_string()
                .contains("cannot read")
        );
        assert_eq!(changes(&ws, &record2).0, None, "the last good copy is kept");
    }

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
    }
}
