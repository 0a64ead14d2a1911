//! Long-term knowledge for the user and the model: listing, adding and forgetting entries,
//! the note a prompt gets, and the export into the repository's agents file (which first
//! reads back what a person changed in its managed section). The curator is `curate.rs`.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Value, json};

use super::{Agent, AgentError, Result};
use crate::knowledge::agents_file::{self, Line};
use crate::knowledge::{self, KnowledgeError, NewEntry, Written};
use crate::status::{KnowledgeKind, KnowledgeSource, PartKind};
use crate::store::{Event, KnowledgeEntry, MessageView};

/// What an export did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportReport {
    pub file: PathBuf,
    /// Whether the file changed (an export with nothing new leaves it as it was).
    pub written: bool,
    /// The entries in its section now.
    pub entries: usize,
    /// What was read back from the section first: lines a person added, changed, deleted.
    pub imported: usize,
    pub updated: usize,
    pub forgotten: usize,
}

impl From<KnowledgeError> for AgentError {
    fn from(e: KnowledgeError) -> Self {
        match e {
            KnowledgeError::Store(e) => Self::Store(e),
            KnowledgeError::Invalid(_) => Self::Invalid(e.to_string()),
            KnowledgeError::NotFound(_) => Self::NotFound(e.to_string()),
            KnowledgeError::Elsewhere(_) | KnowledgeError::AgentsFile(_) => {
                Self::Refused(e.to_string())
            }
        }
    }
}

impl Agent {
    pub(super) fn knowledge_on(&self, what: &str) -> Result<()> {
        if self.config.knowledge.enabled {
            Ok(())
        } else {
            Err(AgentError::refused(format!(
                "long-term knowledge is off ([knowledge] enabled = false): no {what}"
            )))
        }
    }

    /// The entries this workspace sees: its own, and (with `cross_project`) those of every
    /// project.
    pub fn knowledge_list(&self) -> Result<Vec<KnowledgeEntry>> {
        let cross = self.config.knowledge.cross_project;
        self.with_store(|s| s.knowledge(&self.project(), cross))
    }

    /// Adds the user's entry, to this project or (`global`) to every project.
    pub fn knowledge_add(&self, kind: KnowledgeKind, text: &str, global: bool) -> Result<Written> {
        let project = (!global).then(|| self.project());
        let entry = NewEntry::by(KnowledgeSource::User, kind, text, project);
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        Ok(knowledge::add(&mut store, entry)?)
    }

    /// Forgets entry `id` (this project's, or one of every project's).
    pub fn knowledge_forget(&self, id: &str) -> Result<KnowledgeEntry> {
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        Ok(knowledge::forget(&mut store, &self.project(), id)?)
    }

    /// The agents file of the export.
    pub fn agents_file(&self) -> PathBuf {
        self.workspace.join(&self.config.knowledge.agents_file)
    }

    /// Writes the project's entries into the agents file's managed section, after reading
    /// back what a person changed there since the last export. Only the project's own
    /// entries go in (one of every project's could say something of another project in a
    /// repository that may be public). A section with broken markers is an error, and the
    /// file stays as it was.
    pub fn knowledge_export(&self) -> Result<ExportReport> {
        self.knowledge_on("export")?;
        let path = self.agents_file();
        let original = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(KnowledgeError::AgentsFile(format!(
                    "cannot read {}: {e}",
                    path.display()
                ))
                .into());
            }
        };
        let broken = |e: agents_file::SectionError| {
            KnowledgeError::AgentsFile(format!(
                "the knowledge section of {} is broken: {e}; fix its markers and export again \
                 (the file was not changed)",
                path.display()
            ))
        };
        let lines = agents_file::read(&original).map_err(broken)?;
        let mut report = ExportReport {
            file: path.clone(),
            ..ExportReport::default()
        };
        if let Some(lines) = &lines {
            self.import(lines, &mut report)?;
        }
        let project = self.project();
        let entries = self.with_store(|s| s.knowledge(&project, false))?;
        let section = agents_file::render(&entries);
        let text = agents_file::splice(&original, &section).map_err(broken)?;
        if text != original {
            crate::paths::replace_file(&path, &text).map_err(|(at, e)| {
                KnowledgeError::AgentsFile(format!("cannot write {}: {e}", at.display()))
            })?;
            report.written = true;
        }
        let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
        let file = self.config.knowledge.agents_file.display().to_string();
        if self.with_store(|s| s.knowledge_exported(&project, &file))? != ids {
            self.with_store(|s| {
                s.append(
                    None,
                    &Event::KnowledgeExported {
                        project: project.clone(),
                        file,
                        entry_ids: ids,
                    },
                )
            })?;
        }
        report.entries = entries.len();
        Ok(report)
    }

    /// Reads back the section's lines: a line without an id is a person's new entry, a line
    /// whose text or heading changed changes its entry, and an entry the last export wrote
    /// whose line is gone is forgotten. (No section at all forgets nothing: it may simply
    /// not be there yet.)
    fn import(&self, lines: &[Line], report: &mut ExportReport) -> Result<()> {
        let project = self.project();
        let file = self.config.knowledge.agents_file.display().to_string();
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let known = store.knowledge(&project, false)?;
        for line in lines {
            let entry = line
                .id
                .as_ref()
                .and_then(|id| known.iter().find(|e| &e.id == id));
            match entry {
                Some(e) if e.content != line.text || e.kind != line.kind => {
                    match knowledge::checked(&line.text) {
                        Ok(content) => {
                            store.append(
                                None,
                                &Event::KnowledgeUpdated {
                                    entry_id: e.id.clone(),
                                    content,
                                    kind: line.kind,
                                },
                            )?;
                            report.updated += 1;
                        }
                        Err(err) => tracing::warn!(entry = %e.id, "not read back: {err}"),
                    }
                }
                Some(_) => {}
                // The line of an entry since forgotten or merged: the export drops it.
                None if line.id.is_some() => {}
                None if knowledge::known_as(&line.text, &known).is_some() => {}
                None => {
                    let entry = NewEntry::by(
                        KnowledgeSource::Import,
                        line.kind,
                        &line.text,
                        Some(project.clone()),
                    );
                    match knowledge::add(&mut store, entry) {
                        Ok(w) if w.created => report.imported += 1,
                        Ok(_) => {}
                        Err(KnowledgeError::Store(e)) => return Err(e.into()),
                        Err(err) => tracing::warn!("a line of {file} not read back: {err}"),
                    }
                }
            }
        }
        let in_file: Vec<&str> = lines.iter().filter_map(|l| l.id.as_deref()).collect();
        for id in store.knowledge_exported(&project, &file)? {
            if !in_file.contains(&id.as_str()) && known.iter().any(|e| e.id == id) {
                store.append(None, &Event::KnowledgeForgotten { entry_id: id })?;
                report.forgotten += 1;
            }
        }
        Ok(())
    }

    /// The knowledge note of the next prompt of session `sid`, as note data: the entries
    /// that fit in the knowledge share of the window (less the baseline, which holds the
    /// instructions), leaving out those the instructions already show (the agents file's
    /// section). `None` when knowledge is off, there is nothing to show, or the context
    /// already shows the same note (so the requests keep extending each other).
    pub(super) fn knowledge_note(&self, sid: &str) -> Result<Option<Value>> {
        if !self.config.knowledge.enabled {
            return Ok(None);
        }
        let (view, epoch) = {
            let store = self.store.lock().unwrap_or_else(|p| p.into_inner());
            (store.session(sid)?, store.latest_epoch(sid)?)
        };
        let Some(view) = view else { return Ok(None) };
        let mut entries = self.knowledge_list()?;
        let file = self.agents_file();
        if super::baseline::instruction_files(&self.workspace).contains(&file)
            && let Ok(text) = std::fs::read_to_string(&file)
            && let Ok(Some(lines)) = agents_file::read(&text)
        {
            entries.retain(|e| !lines.iter().any(|l| l.id.as_deref() == Some(&e.id)));
        }
        let shares = super::context::shares(self);
        let baseline = epoch
            .as_ref()
            .map_or(0, |e| crate::tokens::estimate(&e.baseline));
        let budget = shares.knowledge.saturating_sub(baseline);
        let Some((text, ids)) = knowledge::note(&entries, budget) else {
            return Ok(None);
        };
        let from = epoch
            .as_ref()
            .and_then(|e| e.first_kept.as_ref())
            .and_then(|first| view.messages.iter().position(|m| &m.message_id == first))
            .unwrap_or(0);
        if last_knowledge_note(&view.messages[from..]) == Some(text.as_str()) {
            return Ok(None);
        }
        Ok(Some(json!({ "text": text, "knowledge": ids })))
    }
}

/// The text of the newest knowledge note among `messages`.
fn last_knowledge_note(messages: &[MessageView]) -> Option<&str> {
    messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter(|p| p.kind == PartKind::Note && p.data.get("knowledge").is_some())
        .filter_map(|p| p.data["text"].as_str())
        .next_back()
}
