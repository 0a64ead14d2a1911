//! `journal_write`, `journal_search`, `journal_read`: the opt-in journal (`[journal] enabled
//! = true`; otherwise the model does not have these tools). Append-only: no tool rewrites an
//! entry. The entries are the user's files (see `crate::journal`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{JournalSource, Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::journal::{self, JournalError, Meta};

fn source(ctx: &ToolContext) -> Result<JournalSource, ToolError> {
    ctx.journal
        .clone()
        .ok_or_else(|| ToolError::new("the journal is not available here"))
}

fn failed(e: JournalError) -> ToolError {
    ToolError::new(format!("journal: {e}"))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// One line that says what the entry is about.
    pub title: String,
    /// The entry, in markdown.
    pub body: String,
    /// A few words to find it by.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
}

pub struct JournalWrite;

impl TypedTool for JournalWrite {
    type Args = WriteArgs;
    const NAME: &'static str = "journal_write";

    fn description(&self, _: &ToolContext) -> String {
        "Adds an entry to the user's journal: what was learned, decided or found out, worth \
         reading again in another session or project. Entries are never rewritten: write a \
         new one to correct an old one. Returns the entry's id."
            .into()
    }

    fn prepare(&self, args: WriteArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let tags = args.tags.unwrap_or_default();
        journal::check(&args.title, &args.body, &tags).map_err(failed)?;
        let source = source(ctx)?;
        Ok(Prepared::new(Vec::new(), move |ctx| {
            let mode = format!("{:?}", ctx.policy.mode).to_lowercase();
            let session = ctx.session_id.clone();
            Box::pin(async move {
                let meta = Meta {
                    title: args.title,
                    tags,
                    mode,
                    session,
                    ..source.meta.clone()
                };
                let entry = journal::write(&source.dir, meta, &args.body).map_err(failed)?;
                // The sidecar now, when an embeddings model answers in time (else search
                // makes it later).
                if let Some(e) = &source.embedder {
                    let text = journal::text_of(&entry);
                    match e.embed(&[text.as_str()]).await {
                        Ok(v) => {
                            if let Err(err) = journal::write_sidecar(&entry.path, e.model(), &v[0])
                            {
                                tracing::warn!("journal: {err}");
                            }
                        }
                        Err(err) => tracing::warn!("journal: no embedding yet: {err}"),
                    }
                }
                Ok(ToolOutput {
                    title: format!("journal entry {}", entry.meta.title),
                    output: format!(
                        "Wrote journal entry {} ({}).",
                        entry.meta.id,
                        entry.path.display()
                    ),
                    metadata: json!({"id": entry.meta.id, "path": entry.path}),
                    ..Default::default()
                })
            })
        }))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words to look for (or a question, when the journal ranks by meaning too).
    pub query: String,
    /// How many entries (default 5, at most 20).
    #[serde(default)]
    pub limit: Option<usize>,
}

pub struct JournalSearch;

impl TypedTool for JournalSearch {
    type Args = SearchArgs;
    const NAME: &'static str = "journal_search";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Searches the user's journal (entries from every project) and returns the best \
         matches: id, title, date, project, tags and the matching words. Read one whole with \
         journal_read."
            .into()
    }

    fn prepare(&self, args: SearchArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        if args.query.trim().is_empty() {
            return Err(ToolError::new("query is empty: give the words to look for"));
        }
        let source = source(ctx)?;
        let limit = args.limit.unwrap_or(5).clamp(1, 20);
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let found = journal::search::search(
                    &source.store,
                    &source.dir,
                    &args.query,
                    limit,
                    source.embedder.as_deref(),
                )
                .await
                .map_err(failed)?;
                let output = if found.hits.is_empty() {
                    format!("No journal entry matches {:?}.", args.query)
                } else {
                    found
                        .hits
                        .iter()
                        .map(|h| {
                            format!(
                                "- {} · {} · {} · {}{}\n  {}",
                                h.id,
                                h.title,
                                h.created,
                                h.project,
                                if h.tags.is_empty() {
                                    String::new()
                                } else {
                                    format!(" · tags: {}", h.tags.join(", "))
                                },
                                crate::markdown::one_line(&h.snippet)
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                Ok(ToolOutput {
                    title: format!("journal search {}", args.query),
                    output,
                    metadata: json!({"hits": found.hits.len(), "semantic": found.semantic}),
                    ..Default::default()
                })
            })
        }))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The entry's id (as journal_search gives it; a unique prefix does).
    pub id: String,
}

pub struct JournalRead;

impl TypedTool for JournalRead {
    type Args = ReadArgs;
    const NAME: &'static str = "journal_read";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Reads one journal entry whole: its title, date, project, tags and body.".into()
    }

    fn prepare(&self, args: ReadArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let source = source(ctx)?;
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let e = journal::search::find(&source.store, &source.dir, args.id.trim())
                    .map_err(failed)?;
                let m = &e.meta;
                Ok(ToolOutput {
                    title: format!("journal entry {}", m.title),
                    output: format!(
                        "# {}\n{} · project {} · tags: {}\n\n{}",
                        m.title,
                        m.created,
                        m.project,
                        m.tags.join(", "),
                        e.body
                    ),
                    metadata: json!({"id": m.id, "path": e.path}),
                    ..Default::default()
                })
            })
        }))
    }
}
