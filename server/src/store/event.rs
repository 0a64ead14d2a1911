//! The events of the ledger. Every change to a session is one of these; the projections are
//! derived from them and can be rebuilt from them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::status::{
    FactScope, FactSource, KnowledgeKind, KnowledgeSource, PartKind, PartStatus, Sensitivity,
    SessionStatus, Tier,
};

/// One todo item as the model writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Todo {
    pub content: String,
    pub status: String,
    #[serde(default)]
    pub priority: String,
}

/// A fact a dream found in the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DreamCandidate {
    pub content: String,
    pub tier: Tier,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_hours: Option<f64>,
    pub confidence: f64,
    #[serde(default)]
    pub message_ids: Vec<String>,
    /// The id of an existing fact it contradicts, as the model said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contradicts: Option<String>,
}

/// What became of one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DreamOutcome {
    /// `created`, `duplicate`, `conflicted` or `rejected`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact_id: Option<String>,
    /// For a duplicate or a conflict: the existing fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An event as stored: `type` is the tag, the rest is the payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    SessionCreated {
        workspace: String,
        title: String,
    },
    SessionRenamed {
        title: String,
    },
    SessionStatus {
        status: SessionStatus,
    },
    SessionModeSet {
        mode: String,
    },
    SessionDeleted,
    /// User input, persisted before it is acknowledged; it waits in the inbox.
    InputAdmitted {
        input_id: String,
        text: String,
        #[serde(default)]
        context: Value,
    },
    /// Inbox input becomes a user message with one text part.
    InputPromoted {
        input_id: String,
        message_id: String,
        part_id: String,
    },
    MessageStarted {
        message_id: String,
        role: String,
        #[serde(default)]
        meta: Value,
    },
    /// A part of a message.
    PartAdded {
        part_id: String,
        message_id: String,
        kind: PartKind,
        #[serde(default)]
        data: Value,
        #[serde(default)]
        status: Option<PartStatus>,
    },
    /// Streamed text appended to a text or reasoning part (deltas are batched by the writer).
    TextAppended {
        part_id: String,
        text: String,
    },
    /// Replaces a part's data and/or status.
    PartUpdated {
        part_id: String,
        #[serde(default)]
        data: Option<Value>,
        #[serde(default)]
        status: Option<PartStatus>,
    },
    /// Deletes a message and every later one of its session (revert commit).
    MessagesDeleted {
        from_message_id: String,
    },
    PermissionGranted {
        project: String,
        permission: String,
        pattern: String,
    },
    PermissionRevoked {
        project: String,
        permission: String,
        pattern: String,
    },
    /// A new context: the baseline note as printed; after a compaction also the summary of
    /// what came before `first_kept` (the first message still sent verbatim).
    ContextEpochStarted {
        epoch_id: String,
        baseline: String,
        #[serde(default)]
        change_record: Value,
        #[serde(default)]
        snapshot: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_kept: Option<String>,
    },
    TodosReplaced {
        todos: Vec<Todo>,
    },
    /// Files were reverted to before `message_id`; `snapshot` is the state saved for redo.
    RevertStaged {
        message_id: String,
        snapshot: String,
        files: Vec<String>,
    },
    /// The staged revert ended: undone (redo) or committed.
    RevertCleared,
    /// A distillation of the messages `from_message_id..=to_message_id`: an observation log
    /// (generation 0) or a working-context document (generation 1) that consolidates the
    /// distillations in `consolidates`, which are archived by it (never deleted: recall
    /// still finds them).
    Distilled {
        distillation_id: String,
        generation: u32,
        text: String,
        from_message_id: String,
        to_message_id: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        consolidates: Vec<String>,
    },
    /// A memory fact was written. The same text (up to case and spacing) in the same scope
    /// and project updates the fact that holds it instead.
    FactWritten {
        fact_id: String,
        content: String,
        tier: Tier,
        scope: FactScope,
        /// The workspace key, for a project fact.
        #[serde(default)]
        project: Option<String>,
        sensitivity: Sensitivity,
        /// When a temporary fact expires (ms since the epoch).
        #[serde(default)]
        expires_at: Option<i64>,
        source: FactSource,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        message_id: Option<String>,
        confidence: f64,
        /// A dreamt fact's messages (the first is `message_id`) and its dream.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        message_ids: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dream_id: Option<String>,
        /// The fact this one contradicts: both stay, marked conflicted, until one is updated
        /// or forgotten. Only a fact of the same project (or a global one, by a global
        /// fact) is marked; the projection checks it again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conflicts_with: Option<String>,
    },
    /// A fact's text was changed (by the user or the model).
    FactUpdated {
        fact_id: String,
        content: String,
    },
    FactForgotten {
        fact_id: String,
    },
    /// Facts were shown to the model with a prompt (exposure, which is not evidence).
    FactsSurfaced {
        fact_ids: Vec<String>,
    },
    /// Someone said a fact was useful (which confirms it) or irrelevant, for the prompt
    /// `query` when known (similar prompts then rank it lower).
    FactFeedback {
        fact_id: String,
        useful: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query: Option<String>,
    },
    /// A dream began on the session's messages `from_message_id..=to_message_id` of
    /// workspace `project` (phase one: an interrupted dream is resumed from here).
    DreamStarted {
        dream_id: String,
        project: String,
        from_message_id: String,
        to_message_id: String,
    },
    /// The dream's model answered: the facts it found (recorded before any is written, so a
    /// resumed dream writes these rather than asking again).
    DreamExtracted {
        dream_id: String,
        candidates: Vec<DreamCandidate>,
    },
    /// The dream is over (phase two): what became of each candidate, or why it failed.
    DreamCompleted {
        dream_id: String,
        #[serde(default)]
        outcomes: Vec<DreamOutcome>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A long-term knowledge entry was written; `project` is `None` for one that holds in
    /// every project. The same text (up to case and spacing) in the same place is not added
    /// twice. A consolidation's entry `replaces` the entries it merges (they leave the store's
    /// reach, never its log).
    KnowledgeAdded {
        entry_id: String,
        kind: KnowledgeKind,
        content: String,
        #[serde(default)]
        project: Option<String>,
        source: KnowledgeSource,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        message_ids: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        curation_id: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        replaces: Vec<String>,
    },
    /// An entry's text (and kind) changed: by the user, or in the agents file.
    KnowledgeUpdated {
        entry_id: String,
        content: String,
        kind: KnowledgeKind,
    },
    KnowledgeForgotten {
        entry_id: String,
    },
    /// A curation is over: it read the session's messages `from_message_id..=to_message_id`
    /// (an extraction) or merged the project's entries (a consolidation). Written in one
    /// batch with the entries it added, so a curation cut off short has added nothing and
    /// is simply done again.
    KnowledgeCurated {
        curation_id: String,
        project: String,
        consolidation: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_message_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to_message_id: Option<String>,
        #[serde(default)]
        added: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The project's entries were written into its agents file (the ids in its managed
    /// section: one a person deletes there is forgotten on the next export).
    KnowledgeExported {
        project: String,
        file: String,
        entry_ids: Vec<String>,
    },
    /// The agent wrote a memory block (`scope` is `global` or `project`); the file is the
    /// block's home, this is its provenance.
    MemoryWritten {
        scope: String,
        label: String,
        content: String,
    },
}

impl Event {
    /// Everything but permission grants and memory facts belongs to a session and needs its
    /// id (a fact names its session in its provenance).
    pub fn is_session_scoped(&self) -> bool {
        !matches!(
            self,
            Self::PermissionGranted { .. }
                | Self::PermissionRevoked { .. }
                | Self::FactWritten { .. }
                | Self::FactUpdated { .. }
                | Self::FactForgotten { .. }
                | Self::FactFeedback { .. }
                | Self::FactsSurfaced { .. }
                | Self::KnowledgeAdded { .. }
                | Self::KnowledgeUpdated { .. }
                | Self::KnowledgeForgotten { .. }
                | Self::KnowledgeCurated { .. }
                | Self::KnowledgeExported { .. }
        )
    }

    /// The stored `type` column.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::SessionCreated { .. } => "session_created",
            Self::SessionRenamed { .. } => "session_renamed",
            Self::SessionStatus { .. } => "session_status",
            Self::SessionModeSet { .. } => "session_mode_set",
            Self::SessionDeleted => "session_deleted",
            Self::InputAdmitted { .. } => "input_admitted",
            Self::InputPromoted { .. } => "input_promoted",
            Self::MessageStarted { .. } => "message_started",
            Self::PartAdded { .. } => "part_added",
            Self::TextAppended { .. } => "text_appended",
            Self::PartUpdated { .. } => "part_updated",
            Self::MessagesDeleted { .. } => "messages_deleted",
            Self::MemoryWritten { .. } => "memory_written",
            Self::Distilled { .. } => "distilled",
            Self::FactWritten { .. } => "fact_written",
            Self::FactUpdated { .. } => "fact_updated",
            Self::FactForgotten { .. } => "fact_forgotten",
            Self::FactFeedback { .. } => "fact_feedback",
            Self::FactsSurfaced { .. } => "facts_surfaced",
            Self::DreamStarted { .. } => "dream_started",
            Self::DreamExtracted { .. } => "dream_extracted",
            Self::DreamCompleted { .. } => "dream_completed",
            Self::KnowledgeAdded { .. } => "knowledge_added",
            Self::KnowledgeUpdated { .. } => "knowledge_updated",
            Self::KnowledgeForgotten { .. } => "knowledge_forgotten",
            Self::KnowledgeCurated { .. } => "knowledge_curated",
            Self::KnowledgeExported { .. } => "knowledge_exported",
            Self::PermissionGranted { .. } => "permission_granted",
            Self::PermissionRevoked { .. } => "permission_revoked",
            Self::ContextEpochStarted { .. } => "context_epoch_started",
            Self::TodosReplaced { .. } => "todos_replaced",
            Self::RevertStaged { .. } => "revert_staged",
            Self::RevertCleared => "revert_cleared",
        }
    }
}

/// A stored event with its place in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Envelope {
    pub seq: i64,
    pub session_id: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub event: Event,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_name_matches_the_serde_tag() {
        let samples = [
            Event::SessionDeleted,
            Event::SessionCreated {
                workspace: "/w".into(),
                title: "t".into(),
            },
            Event::TodosReplaced { todos: vec![] },
            Event::Distilled {
                distillation_id: "d".into(),
                generation: 1,
                text: "t".into(),
                from_message_id: "a".into(),
                to_message_id: "b".into(),
                consolidates: vec!["c".into()],
            },
            Event::ContextEpochStarted {
                epoch_id: "e".into(),
                baseline: "b".into(),
                change_record: Value::Null,
                snapshot: None,
                summary: Some("s".into()),
                first_kept: Some("m".into()),
            },
        ];
        for e in samples {
            let v = serde_json::to_value(&e).unwrap();
            assert_eq!(v["type"], e.type_name());
        }
    }
}
