//! Memory facts: the memory that decides for itself what to remember and what to show.
//! Facts are events in the log with their provenance (`store::facts` holds the projection);
//! a prompt gets its core facts and the others it is about, through the lexical pipeline
//! (`surface.rs`), within a token budget. Local-only facts are the user's alone: they never
//! reach the model. So far: writing, updating, forgetting, feedback and surfacing, from the
//! CLI; the model's tools, the dream and the inspector are to come (issue 16).

pub mod dev;
pub mod dream;
pub mod rerank;
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
    /// A dreamt fact's messages, its dream, and the fact it contradicts.
    pub message_ids: Vec<String>,
    pub dream_id: Option<String>,
    pub conflicts_with: Option<String>,
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
            message_ids: fact.message_ids,
            dream_id: fact.dream_id,
            conflicts_with: fact.conflicts_with,
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

/// What an irrelevant mark for the very same prompt leaves of a fact's score; a merely
/// similar prompt's mark leaves more, in proportion.
pub const IRRELEVANT_FACTOR: f64 = 0.1;
/// How much of two prompts' words must be shared for them to be similar (Jaccard).
pub const SIMILAR_PROMPTS: f64 = 0.5;
/// The half-life of an unconfirmed archival or temporary fact's rank, and the least it
/// decays to: decay orders what passed the gate, it never hides a fact.
pub const DECAY_HALF_LIFE_DAYS: f64 = 90.0;
pub const DECAY_FLOOR: f64 = 0.5;

/// The share of its score a fact keeps for `query` after its irrelevant marks: each mark
/// for a similar prompt (similarity s) keeps 1 - s·(1 - [`IRRELEVANT_FACTOR`]).
pub fn irrelevance(fact: &Fact, query: &str) -> f64 {
    let q: std::collections::BTreeSet<String> = surface::terms(query).into_keys().collect();
    fact.irrelevant_for
        .iter()
        .map(|marked| {
            let m: std::collections::BTreeSet<String> =
                surface::terms(marked).into_keys().collect();
            let union = q.union(&m).count();
            if union == 0 {
                return 0.0;
            }
            q.intersection(&m).count() as f64 / union as f64
        })
        .filter(|&similarity| similarity >= SIMILAR_PROMPTS)
        .map(|similarity| 1.0 - similarity * (1.0 - IRRELEVANT_FACTOR))
        .product()
}

/// How much of its rank a fact keeps with age since it was written or last confirmed
/// (`memory_useful`); core and pinned facts never decay, and being shown is no confirmation.
pub fn decay(fact: &Fact, now_ms: i64) -> f64 {
    if matches!(fact.tier, Tier::Core | Tier::Pinned) {
        return 1.0;
    }
    let since = fact.confirmed_at.unwrap_or(fact.created_at);
    let days = (now_ms - since).max(0) as f64 / 86_400_000.0;
    0.5f64.powf(days / DECAY_HALF_LIFE_DAYS).max(DECAY_FLOOR)
}

/// The most tokens the surfaced facts may take together.
pub const SURFACE_TOKENS: usize = 1_200;

/// The facts a prompt `query` gets in workspace `project`: every core fact, then the others
/// that pass the gate, best first, within [`SURFACE_TOKENS`]. Local-only facts never. A
/// fact marked irrelevant for a similar prompt scores less (and may fall under the gate); an
/// old unconfirmed one ranks lower.
pub fn surface(facts: &[Fact], query: &str, now_ms: i64) -> Surfaced {
    let (core, relevant) = ranked(facts, query, now_ms);
    within_budget(core, relevant)
}

/// [`surface`] with the relevant facts reranked by `embedder` when there is one (see
/// `rerank.rs`), and what became of the rerank.
pub async fn surface_reranked(
    facts: &[Fact],
    query: &str,
    now_ms: i64,
    embedder: Option<&crate::provider::embeddings::Embedder>,
) -> (Surfaced, rerank::Rerank) {
    let (core, relevant) = ranked(facts, query, now_ms);
    let (relevant, outcome) = rerank::rerank(relevant, query, embedder).await;
    (within_budget(core, relevant), outcome)
}

/// The core facts, and the others past the gate with their rank scores, best first.
fn ranked(
    facts: &[Fact],
    query: &str,
    now_ms: i64,
) -> (Vec<SurfacedFact>, Vec<(f64, SurfacedFact)>) {
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
        })
        .collect();
    let mut relevant: Vec<(f64, SurfacedFact)> = index
        .search(query)
        .into_iter()
        .filter_map(|hit| {
            let f = shown
                .iter()
                .find(|f| f.id == hit.id && f.tier != Tier::Core)?;
            let score = hit.score * irrelevance(f, query);
            (score >= surface::GATE).then(|| {
                let fact = SurfacedFact {
                    id: f.id.clone(),
                    text: f.content.clone(),
                    tier: f.tier,
                    score,
                    matches: hit.matches,
                };
                (score * decay(f, now_ms), fact)
            })
        })
        .collect();
    relevant.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    (core, relevant)
}

/// Core facts always, then the relevant ones in order while the token budget lasts.
fn within_budget(core: Vec<SurfacedFact>, relevant: Vec<(f64, SurfacedFact)>) -> Surfaced {
    let mut out = Surfaced {
        facts: Vec::new(),
        tokens: 0,
    };
    for f in core.into_iter().chain(relevant.into_iter().map(|(_, f)| f)) {
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
    /// The lexical score, before the marks below.
    pub score: Option<f64>,
    pub coverage: Option<f64>,
    pub matches: Vec<WhyMatch>,
    /// What irrelevant marks for similar prompts leave of the score (1: none).
    pub irrelevance: f64,
    /// What age leaves of its rank (1: none; core and pinned never decay).
    pub decay: f64,
}

/// [`Why`] for `fact` among `facts` (the workspace's) and prompt `query`.
pub fn why(facts: &[Fact], fact: &Fact, query: &str, now_ms: i64) -> Why {
    let shown = surface(facts, query, now_ms);
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
    let irrelevance = irrelevance(fact, query);
    let passed = e.as_ref().is_some_and(|e| e.passed);
    let verdict = if fact.sensitivity == Sensitivity::LocalOnly {
        "local-only: never shown to the model"
    } else if fact.tier == Tier::Core {
        "core: always shown"
    } else if passed && rank.is_some() {
        "passed the gate"
    } else if passed
        && e.as_ref()
            .is_some_and(|e| e.score * irrelevance < surface::GATE)
    {
        "held back: marked irrelevant for prompts like this"
    } else if passed {
        "passed the gate, but the token budget was full"
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
        irrelevance,
        decay: decay(fact, now_ms),
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

/// The latest prompt of session `sid` that fact `id` surfaced with.
pub fn prompt_that_surfaced(store: &Store, sid: &str, id: &str) -> Option<String> {
    let view = store.session(sid).ok()??;
    view.messages.iter().rev().find_map(|m| {
        let surfaced = m.parts.iter().any(|p| {
            p.data["facts"]
                .as_array()
                .is_some_and(|ids| ids.iter().any(|f| f == id))
        });
        if !surfaced {
            return None;
        }
        let text: String = m
            .parts
            .iter()
            .filter(|p| p.kind == crate::status::PartKind::Text)
            .filter_map(|p| p.data["text"].as_str())
            .collect();
        (!text.trim().is_empty()).then_some(text)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn fact(id: &str, content: &str, tier: Tier, at: i64) -> Fact {
        Fact {
            id: id.into(),
            content: content.into(),
            tier,
            scope: FactScope::Project,
            project: Some("/w".into()),
            sensitivity: Sensitivity::Normal,
            source: FactSource::User,
            session_id: None,
            message_id: None,
            confidence: 1.0,
            expires_at: None,
            created_at: at,
            updated_at: at,
            confirmed_at: None,
            useful: 0,
            irrelevant: 0,
            last_surfaced: None,
            surfaced_count: 0,
            message_ids: Vec::new(),
            dream_id: None,
            conflicted: false,
            conflicts_with: None,
            irrelevant_for: Vec::new(),
        }
    }

    const DAY: i64 = 86_400_000;

    #[test]
    fn an_irrelevant_mark_holds_a_fact_back_for_similar_prompts_only() {
        let mut f = fact(
            "a",
            "the billing worker retries webhooks five times",
            Tier::Archival,
            0,
        );
        let facts = vec![f.clone()];
        let prompt = "why does the billing worker retry webhooks";
        assert_eq!(surface(&facts, prompt, 0).facts.len(), 1);
        f.irrelevant_for = vec!["why does the billing worker retry the webhooks?".into()];
        let facts = vec![f.clone()];
        assert!(surface(&facts, prompt, 0).facts.is_empty());
        let w = why(&facts, &f, prompt, 0);
        assert!(w.verdict.contains("irrelevant"), "{w:?}");
        // A different prompt about the same fact is not affected.
        let other = "how many times are billing webhooks retried by the worker";
        assert!(irrelevance(&f, other) > 0.99);
        assert_eq!(surface(&facts, other, 0).facts.len(), 1);
    }

    #[test]
    fn old_unconfirmed_facts_rank_lower_but_pinned_ones_never_decay() {
        let now = 400 * DAY;
        let old = fact(
            "old",
            "deploys run from the release branch",
            Tier::Archival,
            0,
        );
        let new = fact(
            "new",
            "deploys run from the release pipeline",
            Tier::Archival,
            now,
        );
        let shown = surface(&[old.clone(), new.clone()], "how do deploys run", now);
        let ids: Vec<&str> = shown.facts.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["new", "old"]);
        assert_eq!(decay(&old, now), DECAY_FLOOR);
        // Confirmation resets it; pinned never decays.
        let confirmed = Fact {
            confirmed_at: Some(now),
            ..old.clone()
        };
        assert_eq!(decay(&confirmed, now), 1.0);
        let pinned = Fact {
            tier: Tier::Pinned,
            ..old
        };
        assert_eq!(decay(&pinned, now), 1.0);
        assert!(decay(&new, now + 90 * DAY) - 0.5 < 1e-9);
    }
}
