//! Memory facts: the memory that decides for itself what to remember and what to show.
//! Facts are events in the log with their provenance (`store::facts` holds the projection);
//! a prompt gets its core facts and the others it is about, through the lexical pipeline
//! (`surface.rs`), within a token budget. Local-only facts are the user's alone: they never
//! reach the model. So far: writing, updating, forgetting, feedback and surfacing, from the
//! CLI; the model's tools, the dream and the inspector are to come (issue 16).

pub mod dev;
pub mod surface;

use serde::Serialize;

use crate::status::{FactScope, FactSource, Sensitivity, Tier};
use crate::store::{Event, Fact, Store, new_id};

/// The text as facts are compared for sameness: lower case, spacing collapsed, a final
/// full stop dropped.
pub fn normalize(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.trim_end_matches(['.', '!', ';']).to_lowercase()
}

/// A fact to write.
#[derive(Debug, Clone)]
pub struct NewFact {
    pub content: String,
    pub tier: Tier,
    pub scope: FactScope,
    pub sensitivity: Sensitivity,
    /// For a temporary fact: how long it lasts.
    pub ttl_hours: Option<f64>,
    pub source: FactSource,
    pub session_id: Option<String>,
    pub message_id: Option<String>,
    pub confidence: f64,
}

/// What a write did: the fact's id, and whether it is new (else the same text was there).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Written {
    pub id: String,
    pub created: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum FactError {
    /// Bad input: empty or too long text, a tier without its time to live.
    #[error("{0}")]
    Invalid(String),
    #[error("no fact {0}")]
    NotFound(String),
    /// Another project's fact.
    #[error("fact {0} belongs to another project")]
    Elsewhere(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The most characters of one fact.
pub const MAX_CHARS: usize = 2_000;

/// Writes `fact` for the workspace `project`.
pub fn write(
    store: &mut Store,
    project: &str,
    fact: NewFact,
    now_ms: i64,
) -> Result<Written, FactError> {
    let content = fact.content.trim().to_string();
    if content.is_empty() {
        return Err(FactError::Invalid("a fact needs some text".into()));
    }
    let n = content.chars().count();
    if n > MAX_CHARS {
        return Err(FactError::Invalid(format!(
            "the fact is {n} characters; at most {MAX_CHARS} fit"
        )));
    }
    let expires_at = match (fact.tier, fact.ttl_hours) {
        (Tier::Temporary, Some(h)) if h > 0.0 && h.is_finite() => {
            Some(now_ms + (h * 3_600_000.0) as i64)
        }
        (Tier::Temporary, _) => {
            return Err(FactError::Invalid(
                "a temporary fact needs ttlHours (more than 0; fractions allowed)".into(),
            ));
        }
        (_, Some(_)) => {
            return Err(FactError::Invalid(
                "ttlHours is for temporary facts only".into(),
            ));
        }
        (_, None) => None,
    };
    let project = (fact.scope == FactScope::Project).then(|| project.to_string());
    let id = new_id();
    store.append(
        None,
        &Event::FactWritten {
            fact_id: id.clone(),
            content: content.clone(),
            tier: fact.tier,
            scope: fact.scope,
            project: project.clone(),
            sensitivity: fact.sensitivity,
            expires_at,
            source: fact.source,
            session_id: fact.session_id,
            message_id: fact.message_id,
            confidence: fact.confidence.clamp(0.0, 1.0),
        },
    )?;
    // A write of a text already there updated that fact instead.
    let holder = store.fact_with_text(fact.scope, project.as_deref(), &content)?;
    Ok(match holder {
        Some(f) if f.id != id => Written {
            id: f.id,
            created: false,
        },
        _ => Written { id, created: true },
    })
}

/// One surfaced fact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SurfacedFact {
    pub id: String,
    pub text: String,
    pub tier: Tier,
    pub score: f64,
    pub matches: Vec<String>,
}

/// What a prompt gets: its facts and their token estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Surfaced {
    pub facts: Vec<SurfacedFact>,
    pub tokens: usize,
}

/// The most tokens the surfaced facts may take together.
pub const SURFACE_TOKENS: usize = 1_200;

/// The facts a prompt `query` gets in workspace `project`: every core fact, then the others
/// that pass the gate, best first, within [`SURFACE_TOKENS`]. Local-only facts never.
pub fn surface(facts: &[Fact], query: &str) -> Surfaced {
    let shown: Vec<&Fact> = facts
        .iter()
        .filter(|f| f.sensitivity != Sensitivity::LocalOnly)
        .collect();
    let index = surface::Index::new(shown.iter().map(|f| (f.id.clone(), f.content.clone())));
    let core = shown
        .iter()
        .filter(|f| f.tier == Tier::Core)
        .map(|f| SurfacedFact {
            id: f.id.clone(),
            text: f.content.clone(),
            tier: f.tier,
            score: 0.0,
            matches: Vec::new(),
        });
    let relevant = index.search(query).into_iter().filter_map(|hit| {
        let f = shown
            .iter()
            .find(|f| f.id == hit.id && f.tier != Tier::Core)?;
        Some(SurfacedFact {
            id: f.id.clone(),
            text: f.content.clone(),
            tier: f.tier,
            score: hit.score,
            matches: hit.matches,
        })
    });
    let mut out = Surfaced {
        facts: Vec::new(),
        tokens: 0,
    };
    for f in core.chain(relevant) {
        let tokens = crate::tokens::estimate(&f.text) + 4;
        if out.tokens + tokens > SURFACE_TOKENS && f.tier != Tier::Core {
            break;
        }
        out.tokens += tokens;
        out.facts.push(f);
    }
    out
}

/// `memory_read`: the facts that share a word with `query` (forms of a word match), best
/// first, at most `limit`; no gate — the model asked. Never local-only ones.
pub fn read<'a>(facts: &'a [Fact], query: &str, limit: usize) -> Vec<&'a Fact> {
    let shown: Vec<&Fact> = facts
        .iter()
        .filter(|f| f.sensitivity != Sensitivity::LocalOnly)
        .collect();
    let index = surface::Index::new(shown.iter().map(|f| (f.id.clone(), f.content.clone())));
    index
        .rank(query)
        .into_iter()
        .filter_map(|hit| shown.iter().find(|f| f.id == hit.id).copied())
        .take(limit)
        .collect()
}

/// Fact `id` if it is live and this workspace's (or global) — another project's facts are
/// out of reach — and, unless `local_only_too`, not local-only (for what the model sees).
pub fn find(
    store: &Store,
    id: &str,
    project: &str,
    local_only_too: bool,
) -> Result<Fact, FactError> {
    let fact = store
        .fact(id)?
        .ok_or_else(|| FactError::NotFound(id.into()))?;
    if fact.scope == FactScope::Project && fact.project.as_deref() != Some(project) {
        return Err(FactError::Elsewhere(id.into()));
    }
    if !local_only_too && fact.sensitivity == Sensitivity::LocalOnly {
        return Err(FactError::NotFound(id.into()));
    }
    Ok(fact)
}

/// One matched term of a [`Why`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhyMatch {
    pub term: String,
    pub weight: f64,
    pub idf: f64,
}

/// Why a fact does or does not surface for a prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Why {
    pub id: String,
    pub tier: Tier,
    pub verdict: String,
    /// Its place among what the prompt gets.
    pub rank: Option<usize>,
    pub score: Option<f64>,
    pub coverage: Option<f64>,
    pub matches: Vec<WhyMatch>,
}

/// [`Why`] for `fact` among `facts` (the workspace's) and prompt `query`.
pub fn why(facts: &[Fact], fact: &Fact, query: &str) -> Why {
    let shown = surface(facts, query);
    let rank = shown
        .facts
        .iter()
        .position(|f| f.id == fact.id)
        .map(|r| r + 1);
    let visible: Vec<&Fact> = facts
        .iter()
        .filter(|f| f.sensitivity != Sensitivity::LocalOnly)
        .collect();
    let index = surface::Index::new(visible.iter().map(|f| (f.id.clone(), f.content.clone())));
    let e = index.explain(query, &fact.id);
    let verdict = if fact.sensitivity == Sensitivity::LocalOnly {
        "local-only: never shown to the model"
    } else if fact.tier == Tier::Core {
        "core: always shown"
    } else if e.as_ref().is_some_and(|e| e.passed) {
        "passed the gate"
    } else {
        "held back by the gate"
    };
    Why {
        id: fact.id.clone(),
        tier: fact.tier,
        verdict: verdict.into(),
        rank,
        score: e.as_ref().map(|e| e.score),
        coverage: e.as_ref().map(|e| e.coverage),
        matches: e
            .map(|e| {
                e.matches
                    .into_iter()
                    .map(|(term, weight, idf)| WhyMatch { term, weight, idf })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Replaces a fact's text, with the same checks as a write.
pub fn update(store: &mut Store, id: &str, content: &str) -> Result<(), FactError> {
    let content = content.trim();
    let n = content.chars().count();
    if n == 0 || n > MAX_CHARS {
        return Err(FactError::Invalid(format!(
            "a fact's text is 1 to {MAX_CHARS} characters"
        )));
    }
    store.append(
        None,
        &Event::FactUpdated {
            fact_id: id.into(),
            content: content.into(),
        },
    )?;
    Ok(())
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}
