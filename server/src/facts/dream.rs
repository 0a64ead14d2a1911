//! The dream's side of memory facts that needs no model: what the dreamer is told, how its
//! answer is read, and what becomes of each fact it found (a duplicate, a conflict, a new
//! fact). The call itself is the agent's (`agent/dream.rs`).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{MAX_CHARS, normalize, surface};
use crate::status::{Sensitivity, Tier};
use crate::store::{DreamCandidate, Fact};

/// The system prompt of a dream: a tool-less reader of one stretch of a session.
pub const DREAMER: &str = "You read a stretch of a coding session between a user and an \
assistant, and pick out what is worth remembering in later sessions: decisions taken, the \
user's preferences and conventions, and facts learned about the project (how it is built, \
tested, deployed; where things live; what broke and why). Leave out what only mattered for \
the moment, what the code itself already says plainly, guesses, and secrets (keys, \
passwords, tokens).\n\
\n\
Each fact is one self-contained sentence that makes sense without the conversation, with \
exact names, paths, numbers and commands. You are also shown what is already remembered: do \
not repeat it. When something in the conversation contradicts a remembered fact, write the \
new fact and give the old one's id in `contradicts`.\n\
\n\
Answer with JSON only, no prose around it:\n\
{\"facts\": [{\"fact\": \"...\", \"tier\": \"archival\" | \"pinned\" | \"temporary\", \
\"ttlHours\": 24, \"confidence\": 0.0-1.0, \"messages\": [3, 4], \"contradicts\": \"id\" | null}]}\n\
`messages` are the numbers of the messages the fact comes from. `pinned` is for what should \
never fade (a standing rule of the user's); `temporary`, with `ttlHours`, for what holds only \
for a while. When nothing is worth remembering, answer {\"facts\": []}.";

/// The least confidence a dreamt fact needs to be kept.
pub const MIN_CONFIDENCE: f64 = 0.5;
/// How alike two facts' words must be (Jaccard over their stems) to be the same fact.
pub const DUPLICATE: f64 = 0.8;
/// A temporary fact without its time to live lasts a day.
const DEFAULT_TTL_HOURS: f64 = 24.0;

/// The dreamer's message: the facts already known (never a local-only one), then the
/// transcript, whose messages are numbered from 1.
pub fn prompt(known: &[&Fact], transcript: &str) -> String {
    let mut text = String::from("<remembered>\n");
    for f in known {
        text.push_str(&format!(
            "- [{}] ({}) {}\n",
            f.id,
            f.tier.as_str(),
            crate::markdown::one_line(&f.content)
        ));
    }
    text.push_str("</remembered>\n\n<conversation>\n");
    text.push_str(transcript);
    text.push_str("</conversation>\n\nAnswer with the JSON of what is worth remembering.");
    text
}

/// Why a dream found nothing to write: it ends with this error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DreamError {
    #[error("the dream's answer is not the JSON asked for: {0:?}")]
    NotJson(String),
    #[error("the dream's answer has no `facts` list")]
    NoFacts,
    #[error("its messages are gone (reverted)")]
    MessagesGone,
}

/// Reads the dreamer's answer: the JSON object asked for (or a bare list of facts), also
/// inside a code fence or with prose around it. `messages` maps the numbers it cites to
/// message ids. An answer with no such JSON is an error (the dream ends with it).
pub fn parse(answer: &str, messages: &[String]) -> Result<Vec<DreamCandidate>, DreamError> {
    let value = crate::markdown::json_in(answer)
        .ok_or_else(|| DreamError::NotJson(answer.chars().take(120).collect()))?;
    let items = match &value {
        Value::Array(items) => items.as_slice(),
        Value::Object(o) => o
            .get("facts")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .ok_or(DreamError::NoFacts)?,
        _ => return Err(DreamError::NoFacts),
    };
    Ok(items
        .iter()
        .filter_map(|item| candidate(item, messages))
        .collect())
}

fn candidate(item: &Value, messages: &[String]) -> Option<DreamCandidate> {
    let content = item
        .get("fact")
        .or_else(|| item.get("content"))
        .and_then(Value::as_str)?
        .trim()
        .to_string();
    let ttl = item.get("ttlHours").and_then(Value::as_f64);
    // A dream writes no core fact: what is always shown is the user's and the model's call.
    let (tier, ttl_hours) = match item.get("tier").and_then(Value::as_str) {
        Some("pinned") => (Tier::Pinned, None),
        Some("temporary") => (
            Tier::Temporary,
            Some(
                ttl.filter(|h| *h > 0.0 && h.is_finite())
                    .unwrap_or(DEFAULT_TTL_HOURS),
            ),
        ),
        _ => (Tier::Archival, None),
    };
    let message_ids = crate::markdown::cited_messages(item, messages);
    Some(DreamCandidate {
        content,
        tier,
        ttl_hours,
        confidence: item
            .get("confidence")
            .and_then(Value::as_f64)
            .unwrap_or(0.7)
            .clamp(0.0, 1.0),
        message_ids,
        contradicts: item
            .get("contradicts")
            .and_then(Value::as_str)
            .map(String::from),
    })
}

/// How alike two texts' words are: the Jaccard index of their stems.
pub fn likeness(a: &str, b: &str) -> f64 {
    let a: BTreeSet<String> = surface::terms(a).into_keys().collect();
    let b: BTreeSet<String> = surface::terms(b).into_keys().collect();
    let union = a.union(&b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

/// What becomes of a candidate.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// A new fact; contradicting `conflicts_with` when given (both stay, marked).
    Create {
        conflicts_with: Option<String>,
    },
    /// Already known as this fact.
    Duplicate(String),
    Reject(String),
}

/// Decides on `candidate` against the facts of the dream's workspace (`known`: its
/// project's and the global ones, local-only ones included — they are compared here, never
/// shown to the model). A fact of another project is not in `known`, so a dream can neither
/// merge into it nor flag it.
pub fn decide(candidate: &DreamCandidate, known: &[Fact]) -> Decision {
    let n = candidate.content.chars().count();
    if n == 0 || n > MAX_CHARS {
        return Decision::Reject(format!("a fact is 1 to {MAX_CHARS} characters"));
    }
    if candidate.confidence < MIN_CONFIDENCE {
        return Decision::Reject(format!(
            "confidence {:.2} is under {MIN_CONFIDENCE}",
            candidate.confidence
        ));
    }
    let contradicted = candidate.contradicts.as_ref().and_then(|id| {
        known
            .iter()
            .find(|f| &f.id == id && f.sensitivity != Sensitivity::LocalOnly)
    });
    let norm = normalize(&candidate.content);
    let same = known.iter().find(|f| {
        normalize(&f.content) == norm
            // A contradiction often changes a word or two: alike is not the same there.
            || contradicted.is_none_or(|c| c.id != f.id)
                && likeness(&f.content, &candidate.content) >= DUPLICATE
    });
    match same {
        // Saying that a local-only fact is known would say what it is.
        Some(f) if f.sensitivity == Sensitivity::LocalOnly => {
            Decision::Reject("the user keeps this to themself".into())
        }
        Some(f) => Decision::Duplicate(f.id.clone()),
        None => Decision::Create {
            conflicts_with: contradicted.map(|f| f.id.clone()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_answer_in_a_fence_with_prose_and_maps_message_numbers() {
        let ids = vec!["m1".to_string(), "m2".to_string()];
        let answer = "Here you go:\n```json\n{\"facts\": [{\"fact\": \"CI runs on two cores\", \
                      \"tier\": \"temporary\", \"confidence\": 0.9, \"messages\": [2, 7]}, \
                      {\"fact\": \"Use tabs\", \"tier\": \"core\"}]}\n```";
        let got = parse(answer, &ids).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].tier, Tier::Temporary);
        assert_eq!(got[0].ttl_hours, Some(DEFAULT_TTL_HOURS));
        assert_eq!(got[0].message_ids, ["m2"]);
        assert_eq!(got[1].tier, Tier::Archival, "a dream writes no core fact");
        assert!(parse("I could not find anything.", &ids).is_err());
        assert!(parse("{\"facts\": []}", &ids).unwrap().is_empty());
        assert_eq!(parse("[{\"content\": \"x y\"}]", &ids).unwrap().len(), 1);
    }

    #[test]
    fn likeness_sees_rewording_of_the_same_fact_not_a_different_one() {
        assert!(
            likeness(
                "The tests run with cargo nextest",
                "tests run with cargo nextest."
            ) >= DUPLICATE
        );
        assert!(
            likeness(
                "The tests run with cargo nextest",
                "The benches run with cargo criterion"
            ) < DUPLICATE
        );
    }

    fn candidate(content: &str, contradicts: Option<&str>) -> DreamCandidate {
        DreamCandidate {
            content: content.into(),
            tier: Tier::Archival,
            ttl_hours: None,
            confidence: 0.9,
            message_ids: Vec::new(),
            contradicts: contradicts.map(String::from),
        }
    }

    #[test]
    fn a_contradiction_alike_in_wording_is_a_conflict_and_a_restatement_a_duplicate() {
        use crate::facts::tests::fact;
        let npm = fact(
            "a",
            "The project installs packages with npm",
            Tier::Archival,
            0,
        );
        let mut secret = fact("s", "The staging password is hunter2", Tier::Archival, 0);
        secret.sensitivity = Sensitivity::LocalOnly;
        let known = vec![npm, secret];
        let pnpm = "The project installs packages with pnpm, not npm";
        assert!(likeness(pnpm, &known[0].content) >= DUPLICATE);
        assert_eq!(
            decide(&candidate(pnpm, Some("a")), &known),
            Decision::Create {
                conflicts_with: Some("a".into())
            }
        );
        assert_eq!(
            decide(&candidate(pnpm, None), &known),
            Decision::Duplicate("a".into())
        );
        assert_eq!(
            decide(
                &candidate("the project installs packages with npm.", Some("a")),
                &known
            ),
            Decision::Duplicate("a".into()),
            "the same text is never a conflict with itself"
        );
        assert!(matches!(
            decide(&candidate("The staging password is hunter2!", None), &known),
            Decision::Reject(_)
        ));
        assert_eq!(
            decide(&candidate("The staging host is web-2", Some("s")), &known),
            Decision::Create {
                conflicts_with: None
            },
            "a local-only fact is never flagged"
        );
    }
}
