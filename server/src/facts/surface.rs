//! SURFACE, the lexical part: which facts a prompt should bring up, if any. Each stage is a
//! function of its own, tested alone:
//!
//! tokenizer ([`terms`]: words, identifiers whole and split, compounds whole and in parts) →
//! keywords (stopwords out) → aliases (only substitutable terms: `db` ↔ `database`) → stems
//! (plural, -ing, -ed, both ways) → candidates (facts sharing a stem, matched on whole
//! tokens: `use` never matches `user`) → scoring (IDF, so a word half the facts hold says
//! little; a compound's parts and generic coding words count for less) → the gate (no clean
//! match, nothing surfaces).

use std::collections::{BTreeMap, HashMap};

/// Words that say nothing about which fact is meant.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "but", "by", "can", "could", "did", "do", "does", "doing", "done",
    "for", "from", "get", "got", "had", "has", "have", "having", "he", "her", "here", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "just", "let", "like", "make", "me", "more",
    "most", "my", "need", "new", "no", "not", "now", "of", "on", "one", "only", "or", "our", "out",
    "please", "put", "same", "see", "set", "she", "should", "so", "some", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "try", "up",
    "us", "use", "used", "user", "uses", "using", "very", "want", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "why", "will", "with", "would", "yes", "you", "your",
];

/// Words of every coding conversation: they match, but weakly.
const GENERIC: &[&str] = &[
    "add", "bug", "build", "change", "check", "code", "error", "file", "fix", "function", "line",
    "look", "method", "name", "run", "src", "rs", "test", "thing", "type", "update", "value",
    "work", "write", "read", "call", "case", "show", "find", "list", "remove",
];

/// Groups of terms that stand for each other in any sentence (not mere synonyms).
const ALIASES: &[&[&str]] = &[
    &["database", "db"],
    &["colour", "color"],
    &["configuration", "config", "cfg"],
    &["repository", "repo"],
    &["directory", "dir", "folder"],
    &["environment", "env"],
    &["dependency", "dependencies", "deps", "dep"],
    &["javascript", "js"],
    &["typescript", "ts"],
    &["kubernetes", "k8s"],
    &["postgresql", "postgres", "pg"],
    &["authentication", "authn"],
    &["authorization", "authz"],
    &["documentation", "docs", "doc"],
    &["maximum", "max"],
    &["minimum", "min"],
    &["millisecond", "ms"],
    &["production", "prod"],
];

/// A term of a text and how much it counts: 1 for a word or a whole identifier, less for a
/// part of a compound (`react` in `react-native`, `store` in `userStore`).
pub const PART: f64 = 0.5;

/// The terms of `text`: (stem, weight), the best weight per stem.
pub fn terms(text: &str) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    let mut add = |word: &str, weight: f64| {
        let word = word.to_lowercase();
        if word.chars().count() < 2 || STOPWORDS.contains(&word.as_str()) {
            return;
        }
        let key = canonical(&word);
        let weight = if generic(&key) { weight * 0.35 } else { weight };
        let slot = out.entry(key).or_insert(0.0);
        *slot = slot.max(weight);
    };
    for token in text.split(|c: char| !(c.is_alphanumeric() || "_-./".contains(c))) {
        let token = token.trim_matches(|c: char| "-./_".contains(c));
        if token.is_empty() {
            continue;
        }
        let parts: Vec<String> = token
            .split(|c: char| "-./_".contains(c))
            .filter(|p| !p.is_empty())
            .flat_map(crate::store::identifier_words)
            .collect();
        if parts.len() <= 1 {
            add(token, 1.0);
            continue;
        }
        // A compound: whole (separators dropped) at full weight, its parts at less.
        let whole: String = token.chars().filter(|c| c.is_alphanumeric()).collect();
        add(&whole, 1.0);
        for p in parts {
            add(&p, PART);
        }
    }
    out
}

/// Whether a stem is one of the [`GENERIC`] words'.
fn generic(stem_: &str) -> bool {
    static STEMS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    STEMS
        .get_or_init(|| GENERIC.iter().map(|g| stem(g)).collect())
        .iter()
        .any(|g| g == stem_)
}

/// The alias group's first term for `word`, stemmed.
fn canonical(word: &str) -> String {
    let stemmed = stem(word);
    for group in ALIASES {
        if group.iter().any(|a| *a == word || stem(a) == stemmed) {
            return stem(group[0]);
        }
    }
    stemmed
}

/// Minimal morphology: plurals, -ing, -ed and a final -e go, so `caches`, `caching`,
/// `cached` and `cache` meet; `user` and `use`, `testing` and `pytest` do not.
pub fn stem(word: &str) -> String {
    let w = word.to_lowercase();
    if w.chars().any(|c| !c.is_ascii_alphabetic()) || w.len() <= 3 {
        return w;
    }
    let undouble = |s: &str| -> String {
        let b = s.as_bytes();
        let n = b.len();
        if n >= 2 && b[n - 1] == b[n - 2] && !b"aeiouls".contains(&b[n - 1]) {
            s[..n - 1].to_string()
        } else {
            s.to_string()
        }
    };
    let mut s = if let Some(base) = w.strip_suffix("ies").filter(|b| b.len() >= 2) {
        format!("{base}y")
    } else if let Some(base) = w.strip_suffix("ing").filter(|b| b.len() >= 3) {
        undouble(base)
    } else if let Some(base) = w.strip_suffix("ed").filter(|b| b.len() >= 3) {
        undouble(base)
    } else if let Some(base) = ["ses", "xes", "zes", "ches", "shes"]
        .iter()
        .find_map(|suffix| w.strip_suffix(suffix).map(|b| (b, suffix)))
        .map(|(b, suffix)| format!("{b}{}", &suffix[..suffix.len() - 2]))
    {
        base
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w[..w.len() - 1].to_string()
    } else {
        w.clone()
    };
    if s.len() > 3 && s.ends_with('e') {
        s.pop();
    }
    s
}

/// One fact's match for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub id: String,
    pub score: f64,
    /// The stems that matched.
    pub matches: Vec<String>,
}

/// Why a fact did or did not surface for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// Each matched stem: (stem, weight, idf).
    pub matches: Vec<(String, f64, f64)>,
    pub score: f64,
    /// The share of the prompt's weight the matches cover.
    pub coverage: f64,
    /// Its place among the facts that passed the gate.
    pub rank: Option<usize>,
    pub passed: bool,
}

/// The least score that surfaces a fact: one specific word that few facts hold, or two
/// that more do.
pub const GATE: f64 = 2.0;
/// The least share of the prompt's own weight the match must cover: a rare word in common
/// is not enough when the rest of the prompt is about something else (a word no fact
/// holds counts as rare).
pub const COVERAGE: f64 = 0.4;

/// The least corpus size IDF assumes.
pub const MIN_CORPUS: f64 = 20.0;

/// The facts to search, indexed by their terms.
pub struct Index {
    facts: Vec<(String, BTreeMap<String, f64>)>,
    df: HashMap<String, usize>,
}

impl Index {
    pub fn new<I, S, T>(facts: I) -> Self
    where
        I: IntoIterator<Item = (S, T)>,
        S: Into<String>,
        T: AsRef<str>,
    {
        let facts: Vec<(String, BTreeMap<String, f64>)> = facts
            .into_iter()
            .map(|(id, text)| (id.into(), terms(text.as_ref())))
            .collect();
        let mut df: HashMap<String, usize> = HashMap::new();
        for (_, t) in &facts {
            for stem in t.keys() {
                *df.entry(stem.clone()).or_default() += 1;
            }
        }
        Self { facts, df }
    }

    /// A word's weight from how many facts hold it: ln(1 + N / df); and none for a word
    /// that more than half of several facts hold.
    fn idf(&self, stem: &str) -> f64 {
        let n = self.facts.len() as f64;
        let df = *self.df.get(stem).unwrap_or(&0) as f64;
        if df == 0.0 || (n >= 4.0 && df > n / 2.0) {
            return 0.0;
        }
        (1.0 + self.corpus() / df).ln()
    }

    /// The corpus size IDF assumes: a small memory is scored as a part of a bigger one (with
    /// three facts every word would look common, and nothing would pass the gate).
    fn corpus(&self) -> f64 {
        (self.facts.len() as f64).max(MIN_CORPUS)
    }

    /// What a prompt's word weighs in the coverage: its idf, or the most a word can weigh
    /// when no fact holds it.
    fn query_idf(&self, stem: &str) -> f64 {
        if self.df.contains_key(stem) {
            self.idf(stem)
        } else {
            (1.0 + self.corpus()).ln()
        }
    }

    fn score(&self, query: &BTreeMap<String, f64>, fact: &BTreeMap<String, f64>) -> Explanation {
        let mut matches = Vec::new();
        let mut score = 0.0;
        for (stem, qw) in query {
            if let Some(fw) = fact.get(stem) {
                let (weight, idf) = (qw.min(*fw), self.idf(stem));
                score += weight * idf;
                matches.push((stem.clone(), weight, idf));
            }
        }
        let whole: f64 = query.iter().map(|(stem, w)| w * self.query_idf(stem)).sum();
        let coverage = if whole > 0.0 { score / whole } else { 0.0 };
        Explanation {
            passed: score >= GATE && coverage >= COVERAGE,
            matches,
            score,
            coverage,
            rank: None,
        }
    }

    /// The facts that pass the gate for `query`, best first.
    pub fn search(&self, query: &str) -> Vec<Scored> {
        self.ranked(query, true)
    }

    /// Every fact that shares a term with `query`, best first (no gate).
    pub fn rank(&self, query: &str) -> Vec<Scored> {
        self.ranked(query, false)
    }

    fn ranked(&self, query: &str, gated: bool) -> Vec<Scored> {
        let q = terms(query);
        let mut out: Vec<Scored> = self
            .facts
            .iter()
            .filter_map(|(id, t)| {
                let e = self.score(&q, t);
                let keep = if gated {
                    e.passed
                } else {
                    !e.matches.is_empty()
                };
                keep.then(|| Scored {
                    id: id.clone(),
                    score: e.score,
                    matches: e.matches.into_iter().map(|m| m.0).collect(),
                })
            })
            .collect();
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        out
    }

    /// How fact `id` fares for `query`; `None` when there is no such fact.
    pub fn explain(&self, query: &str, id: &str) -> Option<Explanation> {
        let (_, t) = self.facts.iter().find(|(f, _)| f == id)?;
        let mut e = self.score(&terms(query), t);
        e.rank = self
            .search(query)
            .iter()
            .position(|s| s.id == id)
            .map(|r| r + 1);
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_meet_across_forms_and_not_across_words() {
        for (a, b) in [
            ("caches", "cache"),
            ("caching", "cached"),
            ("migrations", "migration"),
            ("running", "run"),
            ("dependencies", "dependency"),
            ("indexes", "index"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} ~ {b}");
        }
        for (a, b) in [
            ("user", "use"),
            ("pytest", "test"),
            ("redesign", "red"),
            ("status", "stat"),
        ] {
            assert_ne!(stem(a), stem(b), "{a} !~ {b}");
        }
    }

    #[test]
    fn terms_split_identifiers_and_compounds_and_drop_stopwords() {
        let t = terms("The userStore uses react-native and src/cache/thumbnails.rs");
        assert_eq!(t.get("userstor"), Some(&1.0), "{t:?}");
        assert_eq!(t.get("stor"), Some(&PART));
        assert!(!t.contains_key("user") && !t.contains_key("the") && !t.contains_key("us"));
        assert_eq!(t.get("reactnativ"), Some(&1.0));
        assert_eq!(t.get("react"), Some(&PART));
        assert_eq!(t.get("thumbnail"), Some(&PART));
        assert!(
            t.get("src").is_some_and(|w| *w < PART),
            "generic and a part"
        );
    }

    #[test]
    fn aliases_substitute_and_nothing_else_does() {
        assert_eq!(terms("the db"), terms("the database"));
        assert_eq!(terms("colour"), terms("color"));
        assert_ne!(terms("fast"), terms("quick"));
    }

    #[test]
    fn a_prompt_surfaces_the_fact_it_is_about_and_nothing_for_a_loose_match() {
        let index = Index::new([
            ("f1", "The staging database password rotates every 45 days"),
            (
                "f2",
                "The flaky test is test_reconnect_backoff in tests/net.rs",
            ),
            ("f3", "We use pytest for the Python bindings"),
            ("f4", "The Redis connection pool size is 64"),
        ]);
        assert_eq!(
            index.search("when does the db password rotate?")[0].id,
            "f1"
        );
        assert_eq!(index.search("which test is flaky")[0].id, "f2");
        assert!(
            index.search("write a test for the parser").is_empty(),
            "a generic word alone"
        );
        assert!(index.search("what does the user want to use").is_empty());
        let why = index.explain("redis pool", "f4").unwrap();
        assert!(why.passed && why.rank == Some(1), "{why:?}");
        let why = index.explain("the parser test", "f2").unwrap();
        assert!(!why.passed && why.score < GATE, "{why:?}");
    }
}
