//! Long-term knowledge: the patterns, decisions, gotchas and facts that matter across
//! sessions (and, for the entries that hold everywhere, across projects). Entries are events
//! in the log with their provenance (`store::knowledge` holds the projection). This module is
//! the part that needs no model: writing and forgetting an entry, what the curator is told
//! and how its answer is read, and the note a prompt gets. The curator's calls are the
//! agent's (`agent/curate.rs`); the agents file's managed section is `agents_file.rs`.

pub mod agents_file;

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use crate::status::{KnowledgeKind, KnowledgeSource};
use crate::store::{Event, KnowledgeEntry, Store, new_id};

/// The most characters of one entry (one sentence, or a few).
pub const MAX_CHARS: usize = 1_000;
/// How alike two entries' words must be to be the same entry (as facts).
pub const DUPLICATE: f64 = crate::facts::dream::DUPLICATE;

#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    /// Bad input: empty or too long text, text that would break the agents file.
    #[error("{0}")]
    Invalid(String),
    #[error("no knowledge entry {0}")]
    NotFound(String),
    #[error("knowledge entry {0} belongs to another project")]
    Elsewhere(String),
    /// The agents file cannot be read back or written (nothing was changed).
    #[error("{0}")]
    AgentsFile(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// An entry to write.
#[derive(Debug, Clone)]
pub struct NewEntry {
    pub kind: KnowledgeKind,
    pub content: String,
    /// `None`: it holds in every project.
    pub project: Option<String>,
    pub source: KnowledgeSource,
    pub session_id: Option<String>,
    pub message_ids: Vec<String>,
    pub curation_id: Option<String>,
    pub replaces: Vec<String>,
}

impl NewEntry {
    /// The user's own entry (the CLI, the agents file).
    pub fn by(
        source: KnowledgeSource,
        kind: KnowledgeKind,
        content: &str,
        project: Option<String>,
    ) -> Self {
        Self {
            kind,
            content: content.into(),
            project,
            source,
            session_id: None,
            message_ids: Vec::new(),
            curation_id: None,
            replaces: Vec::new(),
        }
    }
}

/// What an add did: the entry's id, and whether it is new (else the same text was there).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Written {
    pub id: String,
    pub created: bool,
}

/// The text of an entry as kept: trimmed, on one line, within bounds, and free of the
/// comment markers the agents file's section is built of.
pub fn checked(content: &str) -> Result<String, KnowledgeError> {
    let text = crate::markdown::one_line(content.trim());
    if text.is_empty() {
        return Err(KnowledgeError::Invalid("an entry needs some text".into()));
    }
    let n = text.chars().count();
    if n > MAX_CHARS {
        return Err(KnowledgeError::Invalid(format!(
            "the entry is {n} characters; at most {MAX_CHARS} fit"
        )));
    }
    if text.contains("<!--") || text.contains("-->") {
        return Err(KnowledgeError::Invalid(
            "an entry cannot hold `<!--` or `-->` (the agents file's markers)".into(),
        ));
    }
    Ok(text)
}

/// The event that writes `entry` (checked), with its new id.
pub fn added(entry: NewEntry) -> Result<(String, Event), KnowledgeError> {
    let content = checked(&entry.content)?;
    let id = new_id();
    let event = Event::KnowledgeAdded {
        entry_id: id.clone(),
        kind: entry.kind,
        content,
        project: entry.project,
        source: entry.source,
        session_id: entry.session_id,
        message_ids: entry.message_ids,
        curation_id: entry.curation_id,
        replaces: entry.replaces,
    };
    Ok((id, event))
}

/// Writes one entry; the same text in the same place finds the entry that holds it.
pub fn add(store: &mut Store, entry: NewEntry) -> Result<Written, KnowledgeError> {
    let (project, content) = (entry.project.clone(), entry.content.clone());
    let (id, event) = added(entry)?;
    store.append(None, &event)?;
    if store.knowledge_entry(&id)?.is_some() {
        return Ok(Written { id, created: true });
    }
    let holder = store.knowledge_with_text(project.as_deref(), &content)?;
    Ok(Written {
        id: holder.map_or(id, |e| e.id),
        created: false,
    })
}

/// The live entry `id` if project `project` sees it (its own, or one of every project's).
pub fn visible(store: &Store, project: &str, id: &str) -> Result<KnowledgeEntry, KnowledgeError> {
    let entry = store
        .knowledge_entry(id)?
        .ok_or_else(|| KnowledgeError::NotFound(id.into()))?;
    match &entry.project {
        Some(p) if p != project => Err(KnowledgeError::Elsewhere(id.into())),
        _ => Ok(entry),
    }
}

/// Forgets entry `id` of project `project` (or one of every project's).
pub fn forget(
    store: &mut Store,
    project: &str,
    id: &str,
) -> Result<KnowledgeEntry, KnowledgeError> {
    let entry = visible(store, project, id)?;
    store.append(
        None,
        &Event::KnowledgeForgotten {
            entry_id: entry.id.clone(),
        },
    )?;
    Ok(entry)
}

/// The entry in `known` that says what `content` says (the same words, or nearly), if any.
pub fn known_as<'a>(content: &str, known: &'a [KnowledgeEntry]) -> Option<&'a KnowledgeEntry> {
    let norm = crate::facts::normalize(content);
    known.iter().find(|e| {
        crate::facts::normalize(&e.content) == norm
            || crate::facts::dream::likeness(&e.content, content) >= DUPLICATE
    })
}

/// The order kinds are shown in, with their headings.
pub const KINDS: [(KnowledgeKind, &str); 4] = [
    (KnowledgeKind::Pattern, "Patterns"),
    (KnowledgeKind::Decision, "Decisions"),
    (KnowledgeKind::Gotcha, "Gotchas"),
    (KnowledgeKind::Fact, "Facts"),
];

/// The kind a heading or a word names (`Gotchas`, `gotcha`, …).
pub fn kind_named(word: &str) -> Option<KnowledgeKind> {
    let w = word.trim().to_lowercase();
    KINDS
        .iter()
        .find(|(k, heading)| w == k.as_str() || w == heading.to_lowercase())
        .map(|(k, _)| *k)
}

// ---------------------------------------------------------------------------------------
// The curator

/// The system prompt of an extraction: a tool-less reader of one stretch of a session.
pub const CURATOR: &str = "You keep the long-term knowledge of a software project: what a \
developer (or an agent) starting a new session would want to know. You read a stretch of a \
coding session and extract entries of four kinds: `pattern` (how things are done here: a \
convention, an idiom, a layout), `decision` (what was chosen and why), `gotcha` (what breaks or \
misleads, and how to avoid it) and `fact` (how the project is built, tested, run; where things \
live). Leave out what only mattered for the moment, what the code says plainly, guesses and \
secrets (keys, passwords, tokens).\n\
\n\
Each entry is one self-contained sentence with exact names, paths and commands. You are shown \
the entries already kept: do not repeat them. Set `global` only for what holds beyond this \
project (a preference of the user's, how a tool behaves everywhere).\n\
\n\
Answer with JSON only, no prose around it:\n\
{\"entries\": [{\"kind\": \"pattern\" | \"decision\" | \"gotcha\" | \"fact\", \"text\": \"...\", \
\"global\": false, \"messages\": [2, 3]}]}\n\
`messages` are the numbers of the messages an entry comes from. When nothing is worth keeping, \
answer {\"entries\": []}.";

/// The system prompt of a consolidation: merging a project's entries.
pub const CONSOLIDATOR: &str = "You tidy the long-term knowledge of a software project. You \
are shown its entries, each with its id. Merge the entries that say the same thing, or that \
belong together, into one self-contained sentence each, keeping every name, path, command \
and reason they hold. Never merge entries that say different things, never drop information, \
never invent any.\n\
\n\
Answer with JSON only, no prose around it:\n\
{\"merged\": [{\"kind\": \"pattern\" | \"decision\" | \"gotcha\" | \"fact\", \"text\": \"...\", \
\"from\": [\"id\", \"id\"]}]}\n\
List only the merges (each of at least two entries); the entries you leave alone stay as they \
are. When nothing should be merged, answer {\"merged\": []}.";

/// An entry the curator found.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub kind: KnowledgeKind,
    pub content: String,
    pub global: bool,
    pub message_ids: Vec<String>,
}

/// A merge the consolidator proposed.
#[derive(Debug, Clone, PartialEq)]
pub struct Merge {
    pub kind: KnowledgeKind,
    pub content: String,
    pub from: Vec<String>,
}

/// Why a curation found nothing to write: it ends with this error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CurationError {
    #[error("the curator's answer is not the JSON asked for: {0:?}")]
    NotJson(String),
    #[error("the curator's answer has no `{0}` list")]
    NoList(&'static str),
}

/// The kept entries, then the transcript (its messages numbered from 1).
pub fn extraction_prompt(known: &[KnowledgeEntry], transcript: &str) -> String {
    let mut text = String::from("<kept>\n");
    for e in known {
        text.push_str(&format!("- ({}) {}\n", e.kind, e.content));
    }
    text.push_str("</kept>\n\n<conversation>\n");
    text.push_str(transcript);
    text.push_str("</conversation>\n\nAnswer with the JSON of the entries worth keeping.");
    text
}

/// A project's entries with their ids, for the consolidator.
pub fn consolidation_prompt(entries: &[KnowledgeEntry]) -> String {
    let mut text = String::from("<entries>\n");
    for e in entries {
        text.push_str(&format!("- [{}] ({}) {}\n", e.id, e.kind, e.content));
    }
    text.push_str("</entries>\n\nAnswer with the JSON of the merges.");
    text
}

/// The list under `key` in the model's answer (or the answer itself when it is a list).
fn items<'a>(value: &'a Value, key: &'static str) -> Result<&'a [Value], CurationError> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Object(o) => o
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .ok_or(CurationError::NoList(key)),
        _ => Err(CurationError::NoList(key)),
    }
}

fn text_and_kind(item: &Value) -> Option<(String, KnowledgeKind)> {
    let text = item
        .get("text")
        .or_else(|| item.get("content"))
        .and_then(Value::as_str)?
        .trim()
        .to_string();
    let kind = item
        .get("kind")
        .and_then(Value::as_str)
        .and_then(kind_named)
        .unwrap_or(KnowledgeKind::Fact);
    Some((text, kind))
}

/// Reads an extraction's answer; `messages` maps the numbers it cites to message ids.
pub fn parse_entries(answer: &str, messages: &[String]) -> Result<Vec<Candidate>, CurationError> {
    let value = crate::markdown::json_in(answer)
        .ok_or_else(|| CurationError::NotJson(answer.chars().take(120).collect()))?;
    Ok(items(&value, "entries")?
        .iter()
        .filter_map(|item| {
            let (content, kind) = text_and_kind(item)?;
            let message_ids = crate::markdown::cited_messages(item, messages);
            Some(Candidate {
                kind,
                content,
                global: item.get("global").and_then(Value::as_bool).unwrap_or(false),
                message_ids,
            })
        })
        .collect())
}

/// Reads a consolidation's answer. A merge counts only of at least two of `ids` (the
/// project's own entries: one it cannot see is never retired), each in one merge at most.
pub fn parse_merges(answer: &str, ids: &[String]) -> Result<Vec<Merge>, CurationError> {
    let value = crate::markdown::json_in(answer)
        .ok_or_else(|| CurationError::NotJson(answer.chars().take(120).collect()))?;
    let mut taken = BTreeSet::new();
    Ok(items(&value, "merged")?
        .iter()
        .filter_map(|item| {
            let (content, kind) = text_and_kind(item)?;
            let from: Vec<String> = item
                .get("from")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|id| ids.iter().any(|known| known == id))
                .map(String::from)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .filter(|id| !taken.contains(id))
                .collect();
            if from.len() < 2 {
                return None;
            }
            taken.extend(from.iter().cloned());
            Some(Merge {
                kind,
                content,
                from,
            })
        })
        .collect())
}

// ---------------------------------------------------------------------------------------
// The note

const NOTE_HEADER: &str = "<knowledge>\nWhat is known about this project and how to work on \
                           it (long-term knowledge, kept across sessions):\n";
const NOTE_FOOTER: &str = "</knowledge>";
const LEFT_OUT_LINE: usize = 24;

/// The knowledge note of a prompt: the entries that fit in `budget` tokens — the project's
/// own before those of every project, newer before older — shown by kind. `None` without
/// entries. Returns the note's text and the ids it shows.
pub fn note(entries: &[KnowledgeEntry], budget: usize) -> Option<(String, Vec<String>)> {
    let mut by_priority: Vec<&KnowledgeEntry> = entries.iter().collect();
    by_priority.sort_by(|a, b| {
        (b.project.is_some(), b.updated_at, &b.id).cmp(&(a.project.is_some(), a.updated_at, &a.id))
    });
    // (With room for the line that says how many were left out.)
    let mut used =
        crate::tokens::estimate(NOTE_HEADER) + crate::tokens::estimate(NOTE_FOOTER) + LEFT_OUT_LINE;
    let mut shown = Vec::new();
    for e in by_priority {
        let cost = crate::tokens::estimate(&e.content) + 4;
        if used + cost > budget {
            continue;
        }
        used += cost;
        shown.push(e);
    }
    if shown.is_empty() {
        return None;
    }
    let left_out = entries.len() - shown.len();
    let mut text = String::from(NOTE_HEADER);
    for (kind, heading) in KINDS {
        let mut of_kind: Vec<&&KnowledgeEntry> = shown.iter().filter(|e| e.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        of_kind.sort_by_key(|e| (e.created_at, e.id.clone()));
        text.push_str(&format!("{heading}:\n"));
        for e in of_kind {
            text.push_str(&format!("- {}\n", e.content));
        }
    }
    if left_out > 0 {
        text.push_str(&format!(
            "({left_out} more entries did not fit; the user sees them with `agent-lsp knowledge list`.)\n"
        ));
    }
    text.push_str(NOTE_FOOTER);
    Some((text, shown.iter().map(|e| e.id.clone()).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry for the tests here and in `agents_file.rs`.
    pub(super) fn entry(
        id: &str,
        kind: KnowledgeKind,
        content: &str,
        project: Option<&str>,
        at: i64,
    ) -> KnowledgeEntry {
        KnowledgeEntry {
            id: id.into(),
            kind,
            content: content.into(),
            project: project.map(String::from),
            source: KnowledgeSource::User,
            session_id: None,
            message_ids: Vec::new(),
            curation_id: None,
            replaces: Vec::new(),
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn entries_are_one_line_within_bounds_and_free_of_markers() {
        assert_eq!(checked("  run `make`\nfirst ").unwrap(), "run `make` first");
        assert!(checked(" ").is_err());
        assert!(checked(&"x".repeat(MAX_CHARS + 1)).is_err());
        assert!(checked("see <!-- here").is_err());
        assert!(checked("a --> b").is_err());
    }

    #[test]
    fn reads_entries_with_kinds_scopes_and_cited_messages() {
        let ids = vec!["m1".to_string(), "m2".to_string()];
        let answer = "Sure:\n```json\n{\"entries\": [\
            {\"kind\": \"gotcha\", \"text\": \"Run migrations before tests\", \"messages\": [2, 9]},\
            {\"kind\": \"Decisions\", \"text\": \"We use pnpm\", \"global\": true},\
            {\"kind\": \"odd\", \"text\": \"A fact\"}, {\"nope\": 1}]}\n```";
        let found = parse_entries(answer, &ids).unwrap();
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].kind, KnowledgeKind::Gotcha);
        assert_eq!(found[0].message_ids, vec!["m2".to_string()]);
        assert_eq!(
            (found[1].kind, found[1].global),
            (KnowledgeKind::Decision, true)
        );
        assert_eq!(found[2].kind, KnowledgeKind::Fact);
        assert!(matches!(
            parse_entries("no idea", &ids),
            Err(CurationError::NotJson(_))
        ));
        assert_eq!(
            parse_entries("{\"x\": 1}", &ids),
            Err(CurationError::NoList("entries"))
        );
    }

    #[test]
    fn a_merge_needs_two_of_the_projects_own_entries_each_merged_once() {
        let ids: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let answer = r#"{"merged": [
            {"kind": "fact", "text": "A and B", "from": ["a", "b", "zzz"]},
            {"kind": "fact", "text": "B again", "from": ["b", "c"]},
            {"kind": "fact", "text": "only one known", "from": ["c", "other-project"]}]}"#;
        let merges = parse_merges(answer, &ids).unwrap();
        assert_eq!(merges.len(), 1);
        assert_eq!(merges[0].from, vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn the_note_shows_the_projects_own_and_newest_first_within_its_budget() {
        let entries = vec![
            entry(
                "g",
                KnowledgeKind::Pattern,
                "Everywhere: small commits",
                None,
                5,
            ),
            entry(
                "old",
                KnowledgeKind::Fact,
                "Old fact about the build",
                Some("p"),
                1,
            ),
            entry(
                "new",
                KnowledgeKind::Gotcha,
                "New gotcha about the tests",
                Some("p"),
                9,
            ),
        ];
        let (all, ids) = note(&entries, 10_000).unwrap();
        assert_eq!(ids, vec!["new", "old", "g"]);
        let patterns = all.find("Patterns:").unwrap();
        let gotchas = all.find("Gotchas:").unwrap();
        let facts = all.find("Facts:").unwrap();
        assert!(patterns < gotchas && gotchas < facts, "{all}");
        // A budget for about one entry keeps the newest of the project's own.
        let frame = crate::tokens::estimate(NOTE_HEADER)
            + crate::tokens::estimate(NOTE_FOOTER)
            + LEFT_OUT_LINE;
        let (one, ids) = note(&entries, frame + 12).unwrap();
        assert_eq!(ids, vec!["new"]);
        assert!(one.contains("2 more entries did not fit"), "{one}");
        assert!(note(&entries, 1).is_none());
        assert!(note(&[], 10_000).is_none());
    }

    #[test]
    fn near_duplicates_are_known() {
        let known = vec![entry(
            "a",
            KnowledgeKind::Fact,
            "The tests run with cargo nextest",
            Some("p"),
            1,
        )];
        assert_eq!(
            known_as("tests run with cargo nextest.", &known).map(|e| e.id.as_str()),
            Some("a")
        );
        assert!(known_as("The benches run with cargo criterion", &known).is_none());
    }
}
