//! Journal search: the files are re-indexed where their fingerprint changed (edited, added or
//! deleted entries are picked up without a restart), matched by full text (the store's FTS5,
//! identifier-aware) and, with an embeddings model, by meaning. An entry whose sidecar is of
//! another model or dimension is matched by its text only; an entry without a sidecar gets
//! one. A query that matches an entry's title, either way round, ranks it first.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

use super::{Entry, JournalError, sidecar_for, text_of, write_sidecar};
use crate::provider::embeddings::{EmbedError, Embedder, cosine};
use crate::store::{IndexedEntry, Store};

/// The least cosine similarity that makes an entry a match by meaning alone.
pub const SEMANTIC_MIN: f32 = 0.5;
/// Full-text candidates considered before ranking.
const TEXT_CANDIDATES: usize = 50;

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalHit {
    pub id: String,
    pub title: String,
    pub path: String,
    pub created: String,
    pub project: String,
    pub tags: Vec<String>,
    /// Matched words in context (empty for a match by meaning alone).
    pub snippet: String,
    pub score: f64,
    /// How it matched: `title`, `text`, `meaning`, or `text+meaning`.
    pub matched: String,
}

/// What a search found, and whether meaning took part.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    pub hits: Vec<JournalHit>,
    /// `off` (no embeddings model), `on`, or why it could not be used this time.
    pub semantic: String,
}

fn lock(store: &Mutex<Store>) -> std::sync::MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(|p| p.into_inner())
}

/// Brings the index up to the files in `dir`: new and changed files are read and indexed,
/// vanished ones dropped. A file that cannot be read is skipped with a warning.
pub fn refresh(store: &Mutex<Store>, dir: &Path) -> Result<Vec<IndexedEntry>, JournalError> {
    let files = super::scan(dir)?;
    let known = lock(store).journal_fingerprints()?;
    let mut seen = std::collections::HashSet::new();
    for (path, mtime, size) in &files {
        let key = path.display().to_string();
        seen.insert(key.clone());
        if known.get(&key) == Some(&(*mtime, *size)) {
            continue;
        }
        match super::read(path) {
            Ok(e) => lock(store).journal_index(&indexed(&e), &e.body, (*mtime, *size))?,
            Err(e) => tracing::warn!("journal: {e}"),
        }
    }
    for gone in known.keys().filter(|k| !seen.contains(*k)) {
        lock(store).journal_unindex(gone)?;
    }
    Ok(lock(store).journal_entries()?)
}

fn indexed(e: &Entry) -> IndexedEntry {
    IndexedEntry {
        path: e.path.display().to_string(),
        id: e.meta.id.clone(),
        title: e.meta.title.clone(),
        created: e.meta.created.clone(),
        project: e.meta.project.clone(),
        tags: e.meta.tags.clone(),
    }
}

/// The entry with id `id` (or a unique prefix of it).
pub fn find(store: &Mutex<Store>, dir: &Path, id: &str) -> Result<Entry, JournalError> {
    let entries = refresh(store, dir)?;
    let exact = entries.iter().find(|e| e.id == id);
    let mut prefixed = entries.iter().filter(|e| e.id.starts_with(id));
    let found = exact.or_else(|| {
        let first = prefixed.next();
        if prefixed.next().is_some() {
            None
        } else {
            first
        }
    });
    let e = found.ok_or_else(|| JournalError::NotFound(id.into()))?;
    super::read(Path::new(&e.path))
}

/// Whether `query` and `title` hold one another (case-insensitive).
fn title_match(query: &str, title: &str) -> bool {
    let (q, t) = (query.trim().to_lowercase(), title.trim().to_lowercase());
    !q.is_empty() && !t.is_empty() && (q.contains(&t) || t.contains(&q))
}

/// Searches the journal in `dir` for `query`: at most `limit` entries, best first.
pub async fn search(
    store: &Mutex<Store>,
    dir: &Path,
    query: &str,
    limit: usize,
    embedder: Option<&Embedder>,
) -> Result<Found, JournalError> {
    let entries = refresh(store, dir)?;
    let text = lock(store).journal_text_search(query, TEXT_CANDIDATES)?;
    let best = text
        .iter()
        .map(|h| -h.bm25)
        .fold(f64::MIN_POSITIVE, f64::max);
    let text: HashMap<&str, (f64, &str)> = text
        .iter()
        .map(|h| (h.path.as_str(), ((-h.bm25) / best, h.snippet.as_str())))
        .collect();
    let (near, semantic) = match embedder {
        None => (HashMap::new(), "off".to_string()),
        Some(e) => match similarities(e, &entries, query).await {
            Ok(near) => (near, "on".to_string()),
            Err(err) => {
                tracing::warn!("journal search by meaning: {err}; by text only");
                (HashMap::new(), err.to_string())
            }
        },
    };
    let mut hits: Vec<JournalHit> = entries
        .iter()
        .filter_map(|e| {
            let by_text = text.get(e.path.as_str());
            let by_meaning = near.get(&e.path).copied();
            let titled = title_match(query, &e.title);
            let (score, matched) = match (by_text, by_meaning) {
                (Some((t, _)), Some(m)) => (0.5 * t + 0.5 * f64::from(m.max(0.0)), "text+meaning"),
                (Some((t, _)), None) => (*t, "text"),
                (None, Some(m)) if m >= SEMANTIC_MIN => (f64::from(m), "meaning"),
                _ if titled => (0.0, "title"),
                _ => return None,
            };
            let (score, matched) = if titled {
                (score + 10.0, "title")
            } else {
                (score, matched)
            };
            Some(JournalHit {
                id: e.id.clone(),
                title: e.title.clone(),
                path: e.path.clone(),
                created: e.created.clone(),
                project: e.project.clone(),
                tags: e.tags.clone(),
                snippet: by_text.map(|(_, s)| s.to_string()).unwrap_or_default(),
                score,
                matched: matched.into(),
            })
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| b.created.cmp(&a.created))
    });
    hits.truncate(limit);
    Ok(Found { hits, semantic })
}

/// Each entry's cosine similarity to `query`, by path: from its sidecar when it holds this
/// model's vector, embedded now (and a sidecar written) when it has none; an entry whose
/// sidecar is of another model or dimension is left out (matched by text only).
async fn similarities(
    embedder: &Embedder,
    entries: &[IndexedEntry],
    query: &str,
) -> Result<HashMap<String, f32>, EmbedError> {
    let q = embedder.embed(&[query]).await?.remove(0);
    let model = embedder.model();
    let mut out = HashMap::new();
    let mut missing: Vec<(String, String)> = Vec::new();
    for e in entries {
        let path = Path::new(&e.path);
        if let Some(car) = sidecar_for(path, model, q.len()) {
            out.insert(e.path.clone(), cosine(&q, &car.vector));
        } else if !super::sidecar_path(path).exists()
            && let Ok(entry) = super::read(path)
        {
            missing.push((e.path.clone(), text_of(&entry)));
        }
    }
    if !missing.is_empty() {
        let texts: Vec<&str> = missing.iter().map(|(_, t)| t.as_str()).collect();
        let vectors = embedder.embed(&texts).await?;
        for ((path, _), v) in missing.iter().zip(vectors) {
            if v.len() == q.len() {
                if let Err(e) = write_sidecar(Path::new(path), model, &v) {
                    tracing::warn!("journal: {e}");
                }
                out.insert(path.clone(), cosine(&q, &v));
            }
        }
    }
    Ok(out)
}
