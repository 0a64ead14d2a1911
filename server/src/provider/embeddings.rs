//! Embeddings from an OpenAI-compatible `/embeddings` endpoint (OpenAI, Ollama's
//! `/v1/embeddings` with e.g. `nomic-embed-text`, LM Studio, vLLM, llama.cpp), for the memory
//! facts' optional rerank. Every vector is cached by model and text, so a fact is embedded
//! once per process and a repeated prompt costs nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::Config;

/// How long the whole embedding of one prompt and its candidates may take.
pub const TIMEOUT: Duration = Duration::from_secs(4);
/// Cached vectors before the cache starts afresh.
const CACHE_CAP: usize = 4_096;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EmbedError {
    #[error("no answer within {}s", TIMEOUT.as_secs())]
    Timeout,
    #[error("the embeddings endpoint: {0}")]
    Http(String),
    #[error("the embeddings endpoint answered {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the embeddings answer is not what was asked for: {0}")]
    Malformed(String),
}

pub struct Embedder {
    client: reqwest::Client,
    url: String,
    model: String,
    key: Option<String>,
    cache: Mutex<HashMap<String, Arc<Vec<f32>>>>,
}

impl Embedder {
    /// The embedder `config` asks for: `embeddings_model` at `embeddings_base_url` (else the
    /// provider's `base_url`); `None` when no embeddings model is configured.
    pub fn from_config(config: &Config) -> Option<Self> {
        let model = config.embeddings_model.clone()?;
        let base = config
            .embeddings_base_url
            .clone()
            .or_else(|| config.base_url.clone())?;
        let key = config
            .embeddings_api_key_env
            .as_deref()
            .or(config.api_key_env.as_deref())
            .and_then(|var| std::env::var(var).ok())
            .filter(|k| !k.is_empty());
        Some(Self::new(&base, &model, key))
    }

    pub fn new(base_url: &str, model: &str, key: Option<String>) -> Self {
        Self {
            client: reqwest::Client::builder()
                .connect_timeout(TIMEOUT)
                .user_agent(concat!("agent-lsp/", env!("CARGO_PKG_VERSION")))
                .build()
                .unwrap_or_default(),
            url: format!("{}/embeddings", base_url.trim_end_matches('/')),
            model: model.into(),
            key,
            cache: Mutex::default(),
        }
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The vectors of `texts`, in order: cached ones from the cache, the rest in one request,
    /// all within [`TIMEOUT`].
    pub async fn embed(&self, texts: &[&str]) -> Result<Vec<Arc<Vec<f32>>>, EmbedError> {
        let missing: Vec<&str> = {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            let mut seen = std::collections::HashSet::new();
            texts
                .iter()
                .copied()
                .filter(|t| !cache.contains_key(*t) && seen.insert(*t))
                .collect()
        };
        if !missing.is_empty() {
            let vectors = tokio::time::timeout(TIMEOUT, self.request(&missing))
                .await
                .map_err(|_| EmbedError::Timeout)??;
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if cache.len() + vectors.len() > CACHE_CAP {
                cache.clear();
            }
            for (text, v) in missing.iter().zip(vectors) {
                cache.insert((*text).to_string(), Arc::new(v));
            }
        }
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        texts
            .iter()
            .map(|t| {
                cache
                    .get(*t)
                    .cloned()
                    .ok_or_else(|| EmbedError::Malformed("a vector went missing".into()))
            })
            .collect()
    }

    async fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut req = self
            .client
            .post(&self.url)
            .json(&json!({"model": self.model, "input": texts}));
        if let Some(key) = &self.key {
            req = req.bearer_auth(key);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| EmbedError::Http(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .text()
            .await
            .map_err(|e| EmbedError::Http(e.to_string()))?;
        if status != 200 {
            let body: String = body.chars().take(300).collect();
            return Err(EmbedError::Status { status, body });
        }
        parse(&body, texts.len())
    }
}

/// The cosine similarity of two vectors (0 when either is all zeros).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let n = norm(a) * norm(b);
    if n == 0.0 { 0.0 } else { dot / n }
}

/// Reads `{"data": [{"index": i, "embedding": [...]}, ...]}` with one vector per input, all of
/// one length.
fn parse(body: &str, inputs: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| EmbedError::Malformed(e.to_string()))?;
    let data = value["data"]
        .as_array()
        .ok_or_else(|| EmbedError::Malformed("no `data` list".into()))?;
    let mut out: Vec<Option<Vec<f32>>> = vec![None; inputs];
    for (n, item) in data.iter().enumerate() {
        let i = item["index"].as_u64().map_or(n, |i| i as usize);
        let v: Vec<f32> = item["embedding"]
            .as_array()
            .ok_or_else(|| EmbedError::Malformed(format!("item {n} has no `embedding`")))?
            .iter()
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect::<Option<_>>()
            .ok_or_else(|| EmbedError::Malformed(format!("item {n} holds a non-number")))?;
        let slot = out
            .get_mut(i)
            .ok_or_else(|| EmbedError::Malformed(format!("index {i} of {inputs} inputs")))?;
        *slot = Some(v);
    }
    let vectors: Vec<Vec<f32>> = out
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| EmbedError::Malformed(format!("fewer than {inputs} vectors")))?;
    let dim = vectors.first().map_or(0, Vec::len);
    if dim == 0 || vectors.iter().any(|v| v.len() != dim) {
        return Err(EmbedError::Malformed(
            "empty vectors, or vectors of different lengths".into(),
        ));
    }
    Ok(vectors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vectors_by_index_and_refuses_what_does_not_fit() {
        let body = r#"{"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]}"#;
        assert_eq!(
            parse(body, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        assert!(parse(body, 3).is_err(), "too few");
        assert!(
            parse(
                r#"{"data": [{"embedding": [1.0]}, {"embedding": [1.0, 2.0]}]}"#,
                2
            )
            .is_err()
        );
        assert!(parse(r#"{"data": [{"embedding": ["x"]}]}"#, 1).is_err());
        assert!(parse("<html>", 1).is_err());
        assert!(parse(r#"{"data": [{"index": 7, "embedding": [1.0]}]}"#, 1).is_err());
    }
}
