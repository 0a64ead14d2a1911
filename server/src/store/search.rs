//! Recall: every message text and tool result in an FTS5 index (porter + unicode61), with
//! identifiers also split into words (`userStore`, `user_store` → `user store`), so the model
//! and the user can find what a session no longer shows — by words, not exact strings.
//!
//! The index is a projection (`recall` table): `projection::apply` keeps it in step with the
//! parts, so a rebuild from the log rebuilds it too.

use rusqlite::{Transaction, params};
use serde::Serialize;
use serde_json::Value;

use super::{Result, Store};

/// Where to search.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The current session.
    Session,
    /// Every session of this workspace.
    Project,
    /// Every session.
    All,
}

/// One ranked match.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    pub session_id: String,
    pub session_title: String,
    pub message_id: String,
    pub part_id: String,
    /// `user`, `assistant` or `tool NAME`.
    pub source: String,
    pub snippet: String,
    pub created_at: i64,
    /// File paths the matched text names.
    pub paths: Vec<String>,
}

/// `userStore` → `user store`, `HTTPServer2` → `http server 2`, `a_b` → `a b`: the words of
/// every identifier that has more than one, for the index's second column.
pub fn split_identifiers(text: &str) -> String {
    let mut out = String::new();
    for token in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let words = identifier_words(token);
        if words.len() > 1 {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&words.join(" ").to_lowercase());
        }
    }
    out
}

/// The words of one identifier: `userStore` → `user`, `Store`; `HTTPServer2` → `HTTP`, `Server`, `2`.
pub fn identifier_words(token: &str) -> Vec<String> {
    let chars: Vec<char> = token.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        if let Some(&prev) = word.chars().last().as_ref() {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_uppercase() && c.is_uppercase() && next_lower)
                || (prev.is_alphabetic() != c.is_alphabetic());
            if boundary {
                words.push(std::mem::take(&mut word));
            }
        }
        word.push(c);
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Path-like words of `text` (with a `/`, or a name with a short extension), at most 10.
fn paths_in(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || "\"'`()[]{}<>,;|".contains(c)) {
        let word = word.trim_matches(|c: char| c == '.' || c == ':');
        // `src/a.rs:12:3` → `src/a.rs`
        let word = word.split(':').next().unwrap_or(word);
        if word.len() < 3 || word.len() > 200 || word.contains("://") {
            continue;
        }
        let ext_ok = word.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty()
                && (1..=6).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        });
        let pathy = word.contains('/') && word.chars().any(|c| c.is_alphabetic());
        if (ext_ok || pathy) && !out.iter().any(|p| p == word) {
            out.push(word.to_string());
            if out.len() == 10 {
                break;
            }
        }
    }
    out
}

/// What the index holds for a part: (source, text), or `None` for parts it skips (notes,
/// steps, usage, unfinished text).
fn indexed(kind: &str, role: &str, data: &Value, status: Option<&str>) -> Option<(String, String)> {
    match kind {
        "text" if status != Some("streaming") => {
            let text = data["text"].as_str()?;
            (!text.trim().is_empty()).then(|| (role.to_string(), text.to_string()))
        }
        "tool" if matches!(status, Some("completed") | Some("error") | Some("failed")) => {
            let name = data["name"].as_str().unwrap_or("tool");
            let input = data["input"].as_str().unwrap_or("");
            let output = data["output"].as_str().unwrap_or("");
            Some((format!("tool {name}"), format!("{name} {input}\n{output}")))
        }
        _ => None,
    }
}

/// Brings the index entry of one part up to date with its row (called by the projection
/// after every change to a part but streamed text batches).
pub(super) fn reindex_part(tx: &Transaction<'_>, part_id: &str) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM recall WHERE part_id = ?1", params![part_id])?;
    let row = tx.query_row(
        "SELECT p.kind, p.data, p.status, p.message_id, p.session_id, m.role, m.created_at
         FROM part p JOIN message m ON m.id = p.message_id WHERE p.id = ?1",
        params![part_id],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, i64>(6)?,
            ))
        },
    );
    let Ok((kind, data, status, message_id, session_id, role, at)) = row else {
        return Ok(());
    };
    let data: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
    let Some((source, text)) = indexed(&kind, &role, &data, status.as_deref()) else {
        return Ok(());
    };
    insert(
        tx,
        &text,
        session_id.as_deref(),
        &message_id,
        part_id,
        &source,
        at,
    )
}

/// Indexes a distillation (as source `distillation N`, under the last message it covers):
/// archived ones stay in the index, so recall finds what a consolidation left out.
pub(super) fn index_distillation(tx: &Transaction<'_>, id: &str) -> rusqlite::Result<()> {
    let row = tx.query_row(
        "SELECT text, generation, session_id, to_message_id, created_at FROM distillation WHERE id = ?1",
        params![id],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
            ))
        },
    );
    let Ok((text, generation, session_id, message_id, at)) = row else {
        return Ok(());
    };
    insert(
        tx,
        &text,
        session_id.as_deref(),
        &message_id,
        id,
        &format!("distillation {generation}"),
        at,
    )
}

fn insert(
    tx: &Transaction<'_>,
    text: &str,
    session_id: Option<&str>,
    message_id: &str,
    part_id: &str,
    source: &str,
    at: i64,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO recall (body, words, session_id, message_id, part_id, source, paths, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            text,
            split_identifiers(text),
            session_id,
            message_id,
            part_id,
            source,
            paths_in(text).join("\n"),
            at
        ],
    )?;
    Ok(())
}

/// The FTS5 query for what a person typed: its words (and identifiers' words), each quoted,
/// any of them (bm25 ranks texts with more of them first). `None` when there is no word.
pub(super) fn fts_query(query: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for token in query.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        // The identifier as written (found in the text itself) and its words.
        let whole = token.to_lowercase();
        if !whole.is_empty() && !whole.contains('_') && !terms.contains(&whole) {
            terms.push(whole);
        }
        for w in identifier_words(token) {
            let w = w.to_lowercase();
            if !w.is_empty() && !terms.contains(&w) {
                terms.push(w);
            }
        }
    }
    (!terms.is_empty()).then(|| {
        terms
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

impl Store {
    /// Ranked matches for `query`: in session `session` (scope `Session`), in the sessions of
    /// workspace `project` (`Project`), or everywhere (`All`).
    pub fn search(
        &self,
        query: &str,
        scope: Scope,
        session: Option<&str>,
        project: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Hit>> {
        let Some(q) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let (filter, key) = match scope {
            Scope::Session => ("r.session_id = ?2", session.unwrap_or_default()),
            Scope::Project => ("s.workspace = ?2", project.unwrap_or_default()),
            Scope::All => ("?2 = ?2", ""),
        };
        let sql = format!(
            "SELECT r.session_id, coalesce(s.title, ''), r.message_id, r.part_id, r.source,
                    snippet(recall, 0, '«', '»', '…', 24), r.created_at, r.paths
             FROM recall r LEFT JOIN session s ON s.id = r.session_id
             WHERE recall MATCH ?1 AND {filter}
             ORDER BY bm25(recall, 1.0, 0.7) LIMIT ?3"
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let hits = stmt
            .query_map(params![q, key, limit as i64], |r| {
                Ok(Hit {
                    session_id: r.get(0)?,
                    session_title: r.get(1)?,
                    message_id: r.get(2)?,
                    part_id: r.get(3)?,
                    source: r.get(4)?,
                    snippet: r.get(5)?,
                    created_at: r.get(6)?,
                    paths: r
                        .get::<_, String>(7)?
                        .lines()
                        .filter(|l| !l.is_empty())
                        .map(String::from)
                        .collect(),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_into_words() {
        assert_eq!(split_identifiers("the userStore is"), "user store");
        assert_eq!(
            split_identifiers("HTTPServer2 snake_case_name"),
            "http server 2 snake case name"
        );
        assert_eq!(split_identifiers("plain words only"), "");
        assert_eq!(split_identifiers("src/user_store.rs"), "user store");
    }

    #[test]
    fn paths_are_found_in_text() {
        assert_eq!(
            paths_in("error in src/lib.rs:12:5 and `Cargo.toml`; see https://x.y/z and v1.2"),
            ["src/lib.rs", "Cargo.toml"]
        );
    }

    #[test]
    fn queries_are_quoted_words() {
        assert_eq!(
            fts_query("userStore?").unwrap(),
            "\"userstore\" OR \"user\" OR \"store\""
        );
        assert_eq!(fts_query("\"; DROP"), Some("\"drop\"".into()));
        assert_eq!(fts_query("  ...  "), None);
    }
}
