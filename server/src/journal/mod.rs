//! The journal: an opt-in, append-only log the model writes for the user, kept as markdown
//! files with front matter in `$XDG_CONFIG_HOME/agent-lsp/journal/` — a person can read,
//! grep and back them up, and add entries of their own. Search (`search.rs`) indexes the
//! files in the store's full-text index and, with an embeddings model, ranks by meaning too;
//! each entry's vector sits in a sidecar beside it (`<entry>.embedding.json`).

pub mod search;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Caps on what one entry holds.
pub const MAX_TITLE: usize = 200;
pub const MAX_BODY: usize = 20_000;
pub const MAX_TAGS: usize = 10;
pub const MAX_TAG: usize = 40;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{0}")]
    Invalid(String),
    #[error("no journal entry {0}")]
    NotFound(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// An entry's front matter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Meta {
    pub id: String,
    pub title: String,
    /// RFC 3339, UTC.
    pub created: String,
    pub project: String,
    pub model: String,
    pub provider: String,
    pub mode: String,
    pub session: String,
    pub tags: Vec<String>,
}

/// One entry as read from its file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    #[serde(flatten)]
    pub meta: Meta,
    pub body: String,
    pub path: PathBuf,
}

/// `$XDG_CONFIG_HOME/agent-lsp/journal`.
pub fn dir() -> PathBuf {
    crate::paths::config_dir().join("journal")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A file name's part from a title: lower-case words joined by `-`, at most 48 characters.
fn slug(title: &str) -> String {
    let mut out = String::new();
    for word in title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if out.len() + word.len() > 48 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word.to_lowercase());
    }
    if out.is_empty() { "entry".into() } else { out }
}

/// Checks an entry's parts against the caps; tags are trimmed, empty ones dropped.
pub fn check(title: &str, body: &str, tags: &[String]) -> Result<Vec<String>, JournalError> {
    let invalid = |m: String| Err(JournalError::Invalid(m));
    let title_chars = title.trim().chars().count();
    if title_chars == 0 || title_chars > MAX_TITLE || title.contains('\n') {
        return invalid(format!(
            "a title is one line of 1 to {MAX_TITLE} characters"
        ));
    }
    if body.chars().count() > MAX_BODY {
        return invalid(format!("a body is at most {MAX_BODY} characters"));
    }
    let tags: Vec<String> = tags
        .iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    if tags.len() > MAX_TAGS || tags.iter().any(|t| t.chars().count() > MAX_TAG) {
        return invalid(format!(
            "at most {MAX_TAGS} tags of at most {MAX_TAG} characters each"
        ));
    }
    Ok(tags)
}

/// Writes a new entry into `dir` (made if needed) through a temporary file, so a reader never
/// sees half of one. Entries are never rewritten: each write is a new file.
pub fn write(dir: &Path, mut meta: Meta, body: &str) -> Result<Entry, JournalError> {
    meta.tags = check(&meta.title, body, &meta.tags)?;
    meta.title = meta.title.trim().to_string();
    if meta.id.is_empty() {
        meta.id = crate::store::new_id();
    }
    let now = jiff::Timestamp::now();
    if meta.created.is_empty() {
        meta.created = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let short: String = meta.id.chars().rev().take(8).collect::<String>();
    let short: String = short.chars().rev().collect();
    let name = format!(
        "{}-{}-{short}.md",
        now.strftime("%Y-%m-%d"),
        slug(&meta.title)
    );
    let path = dir.join(&name);
    let mut body = body.trim_end().to_string();
    body.push('\n');
    let text = crate::frontmatter::render(&meta, &body);
    crate::paths::replace_file(&path, &text).map_err(|(at, e)| io(&at)(e))?;
    Ok(Entry { meta, body, path })
}

/// Reads the entry at `path`. A file without front matter is an entry of its own too: its
/// title is its first line (or its name), its id its file name.
pub fn read(path: &Path) -> Result<Entry, JournalError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let (mut meta, body) =
        crate::frontmatter::parse::<Meta>(&text).map_err(|reason| JournalError::Unreadable {
            path: path.to_path_buf(),
            reason,
        })?;
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_string();
    if meta.id.is_empty() {
        meta.id = stem.clone();
    }
    if meta.title.trim().is_empty() {
        meta.title = body
            .lines()
            .map(|l| l.trim_start_matches('#').trim())
            .find(|l| !l.is_empty())
            .map_or(stem, |l| l.chars().take(MAX_TITLE).collect());
    }
    Ok(Entry {
        meta,
        body: body.to_string(),
        path: path.to_path_buf(),
    })
}

/// The entry files of `dir`, with their fingerprints (modification time in ms, size); none
/// when it does not exist.
pub fn scan(dir: &Path) -> Result<Vec<(PathBuf, i64, i64)>, JournalError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(dir)(e)),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".md") {
            continue;
        }
        let Ok(meta) = e.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        out.push((path, mtime, meta.len() as i64));
    }
    out.sort();
    Ok(out)
}

/// An entry's embedding, in the sidecar beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sidecar {
    /// The sidecar format's version.
    pub v: u32,
    pub model: String,
    pub dimension: usize,
    pub vector: Vec<f32>,
}

pub const SIDECAR_VERSION: u32 = 1;

/// `<entry>.embedding.json` beside the entry `<entry>.md`.
pub fn sidecar_path(entry: &Path) -> PathBuf {
    entry.with_extension("embedding.json")
}

/// The sidecar of `entry` if it holds a vector of `model` and `dimension`; one of another
/// model, dimension or version, or one that does not parse, is `None` (the entry is then
/// matched by its text only).
pub fn sidecar_for(entry: &Path, model: &str, dimension: usize) -> Option<Sidecar> {
    let text = std::fs::read_to_string(sidecar_path(entry)).ok()?;
    let car: Sidecar = serde_json::from_str(&text).ok()?;
    (car.v == SIDECAR_VERSION
        && car.model == model
        && car.dimension == dimension
        && car.vector.len() == dimension)
        .then_some(car)
}

/// Writes `entry`'s sidecar (through a temporary file).
pub fn write_sidecar(entry: &Path, model: &str, vector: &[f32]) -> Result<(), JournalError> {
    let car = Sidecar {
        v: SIDECAR_VERSION,
        model: model.into(),
        dimension: vector.len(),
        vector: vector.to_vec(),
    };
    let path = sidecar_path(entry);
    let text = serde_json::to_string(&car).unwrap_or_default();
    crate::paths::replace_file(&path, &text).map_err(|(at, e)| io(&at)(e))
}

/// The text an entry is embedded and indexed by.
pub fn text_of(entry: &Entry) -> String {
    format!(
        "{}\n{}\n{}",
        entry.meta.title,
        entry.meta.tags.join(" "),
        entry.body
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_and_a_persons_own_file_is_read_too() {
        let dir = tempfile::tempdir().unwrap();
        let meta = Meta {
            title: "Why the cache key includes the locale".into(),
            tags: vec![" cache ".into(), String::new()],
            project: "/w".into(),
            ..Default::default()
        };
        let e = write(dir.path(), meta, "Because of the **French** bug.").unwrap();
        assert_eq!(e.meta.tags, ["cache"]);
        assert!(
            e.path
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .contains("-why-the-cache-key-includes-the-locale-")
        );
        assert_eq!(read(&e.path).unwrap(), e);
        let own = dir.path().join("notes.md");
        std::fs::write(&own, "# Deploy checklist\n\nrun make ship\n").unwrap();
        let r = read(&own).unwrap();
        assert_eq!(
            (r.meta.id.as_str(), r.meta.title.as_str()),
            ("notes", "Deploy checklist")
        );
        assert_eq!(scan(dir.path()).unwrap().len(), 2);
        assert!(write(dir.path(), Meta::default(), "x").is_err(), "no title");
    }

    #[test]
    fn a_sidecar_of_another_model_or_dimension_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join("a.md");
        write_sidecar(&entry, "nomic-embed-text", &[1.0, 0.0]).unwrap();
        assert!(sidecar_for(&entry, "nomic-embed-text", 2).is_some());
        assert!(sidecar_for(&entry, "other", 2).is_none());
        assert!(sidecar_for(&entry, "nomic-embed-text", 3).is_none());
        std::fs::write(sidecar_path(&entry), "{\"v\": 9}").unwrap();
        assert!(sidecar_for(&entry, "nomic-embed-text", 2).is_none());
    }
}
