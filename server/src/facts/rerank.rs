//! The optional rerank of surfaced facts with embeddings: the lexical pipeline picks and
//! gates the candidates, then the best [`WINDOW`] of them are reordered by a blend of their
//! lexical score and their embedding's similarity to the prompt's. Reranking only reorders
//! (it never lets a fact past the gate), and it abstains when the similarities say nothing
//! (too few candidates, or all about equally near): the lexical order stands, as it does when
//! the endpoint fails or takes over 4 s.

use serde::Serialize;

use super::SurfacedFact;
use crate::provider::embeddings::{Embedder, cosine};

/// How many of the best lexical candidates are reranked.
pub const WINDOW: usize = 20;
/// The least spread of similarities (highest minus lowest) worth reordering by.
pub const ABSTAIN_SPREAD: f32 = 0.05;
/// The similarity's share of the blended score (the rest is the lexical score's).
const SIMILARITY_WEIGHT: f64 = 0.5;

/// What became of the rerank for one prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Rerank {
    /// No embeddings model is configured.
    Off,
    /// Reordered by `model`.
    Applied { model: String },
    /// The similarities said too little; the lexical order stands.
    Abstained { reason: String },
    /// The endpoint failed or was too slow; the lexical order stands.
    Failed { error: String },
}

/// Why the rerank kept the lexical order.
#[derive(Debug, Clone, PartialEq)]
pub struct Abstain(pub String);

/// Reorders `ranked` (best first, each with its lexical rank score) by the similarity of each
/// fact's vector to `query`'s: the blend of the lexical score over the best one and the
/// cosine similarity (negative ones count as none). So a near fact passes a close lexical
/// second, while a lexical lead many times over stands.
pub fn reorder(
    ranked: &[(f64, SurfacedFact)],
    query: &[f32],
    vectors: &[&[f32]],
) -> Result<Vec<(f64, SurfacedFact)>, Abstain> {
    if ranked.len() < 2 {
        return Err(Abstain("fewer than two candidates".into()));
    }
    let sims: Vec<f32> = vectors.iter().map(|v| cosine(query, v)).collect();
    let (lo, hi) = sims
        .iter()
        .fold((f32::MAX, f32::MIN), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    if hi - lo < ABSTAIN_SPREAD {
        return Err(Abstain(format!(
            "the candidates are about equally near the prompt (spread {:.3})",
            hi - lo
        )));
    }
    let best = ranked[0].0.max(f64::MIN_POSITIVE);
    let mut out: Vec<(f64, SurfacedFact)> = ranked
        .iter()
        .zip(&sims)
        .map(|((score, fact), &sim)| {
            let lexical = score / best;
            let near = f64::from(sim.max(0.0));
            let blend = (1.0 - SIMILARITY_WEIGHT) * lexical + SIMILARITY_WEIGHT * near;
            (blend, fact.clone())
        })
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    Ok(out)
}

/// Reranks the best [`WINDOW`] of `ranked` with `embedder` (the rest keep their place after
/// them), or says why not.
pub async fn rerank(
    ranked: Vec<(f64, SurfacedFact)>,
    query: &str,
    embedder: Option<&Embedder>,
) -> (Vec<(f64, SurfacedFact)>, Rerank) {
    let Some(embedder) = embedder else {
        return (ranked, Rerank::Off);
    };
    let window = ranked.len().min(WINDOW);
    if window < 2 {
        let reason = "fewer than two candidates".into();
        return (ranked, Rerank::Abstained { reason });
    }
    let mut texts: Vec<&str> = vec![query];
    texts.extend(ranked[..window].iter().map(|(_, f)| f.text.as_str()));
    let vectors = match embedder.embed(&texts).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("memory rerank: {e}; the lexical order stands");
            let error = e.to_string();
            return (ranked, Rerank::Failed { error });
        }
    };
    if vectors.iter().any(|v| v.len() != vectors[0].len()) {
        let error = "vectors of different lengths".into();
        return (ranked, Rerank::Failed { error });
    }
    let facts: Vec<&[f32]> = vectors[1..].iter().map(|v| v.as_slice()).collect();
    match reorder(&ranked[..window], &vectors[0], &facts) {
        Ok(mut top) => {
            top.extend(ranked.into_iter().skip(window));
            let model = embedder.model().to_string();
            (top, Rerank::Applied { model })
        }
        Err(Abstain(reason)) => (ranked, Rerank::Abstained { reason }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Tier;

    fn hit(id: &str, score: f64) -> (f64, SurfacedFact) {
        let fact = SurfacedFact {
            id: id.into(),
            text: id.into(),
            tier: Tier::Archival,
            score,
            matches: Vec::new(),
        };
        (score, fact)
    }

    fn ids(v: &[(f64, SurfacedFact)]) -> Vec<&str> {
        v.iter().map(|(_, f)| f.id.as_str()).collect()
    }

    #[test]
    fn near_meaning_lifts_a_close_second_but_not_a_far_one() {
        let query = [1.0, 0.0];
        let close = [hit("a", 1.0), hit("b", 0.9)];
        let got = reorder(&close, &query, &[&[0.0, 1.0], &[1.0, 0.1]]).unwrap();
        assert_eq!(ids(&got), ["b", "a"]);
        // A tenth of the best's lexical score is not made up by a little more similarity.
        let far = [hit("a", 3.0), hit("b", 0.3)];
        let got = reorder(&far, &query, &[&[0.6, 0.8], &[0.9, 0.4359]]).unwrap();
        assert_eq!(ids(&got), ["a", "b"]);
    }

    #[test]
    fn abstains_when_similarity_says_nothing() {
        let query = [1.0, 0.0];
        let ranked = [hit("a", 1.0), hit("b", 0.9)];
        assert!(reorder(&ranked, &query, &[&[1.0, 0.5], &[1.0, 0.5]]).is_err());
        assert!(reorder(&ranked[..1], &query, &[&[1.0, 0.0]]).is_err());
        assert_eq!(
            cosine(&[0.0, 0.0], &[1.0, 0.0]),
            0.0,
            "a zero vector is no match"
        );
    }
}
