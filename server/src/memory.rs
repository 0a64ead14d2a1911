//! Memory blocks: small markdown files the agent reads at the start of every context (in the
//! baseline note) and edits with its memory tools — what it should know about the user
//! (global) and about the project (per workspace), beyond any one session.
//!
//! A block is `<label>.md` with front matter (`label`, `description`, `limit` in characters,
//! `read_only`): global ones in `$XDG_CONFIG_HOME/agent-lsp/memory/`, the project's in
//! `<workspace>/.agent-lsp/memory/` (kept out of git by a `.gitignore` of `*` inside
//! `.agent-lsp/`: neither the user's `.git` nor their own `.gitignore` is written). A project block shadows a global one of the same label.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The default size limit of a block, in characters.
pub const DEFAULT_LIMIT: usize = 5000;
/// What all blocks together may take in the baseline note, in characters.
pub const BASELINE_BUDGET: usize = 12_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Global,
    Project,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Project => "project",
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Meta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limit: Option<usize>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    read_only: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Block {
    pub label: String,
    pub description: String,
    pub limit: usize,
    pub read_only: bool,
    pub content: String,
    pub scope: Scope,
    pub path: PathBuf,
}

pub fn global_dir() -> PathBuf {
    crate::paths::config_dir().join("memory")
}

/// The project's blocks, relative to the workspace.
pub const PROJECT_DIR: &str = ".agent-lsp/memory";

pub fn project_dir(workspace: &Path) -> PathBuf {
    workspace.join(PROJECT_DIR)
}

const SEEDS: &[(Scope, &str, &str)] = &[
    (
        Scope::Global,
        "human",
        "What you know about the user across projects: name, role, preferences, how they like \
         to work and be answered. Add lasting facts when you learn them; keep it short.",
    ),
    (
        Scope::Project,
        "project",
        "What matters about this project that the code does not say: conventions, decisions \
         and their reasons, commands that build and test it, pitfalls. Keep it current.",
    ),
];

/// Creates the `human` and `project` blocks when they do not exist yet. The project's folder
/// ignores itself (`paths::ensure_workspace_dir`): nothing is written under `.git`.
pub fn seed(workspace: &Path) {
    for &(scope, label, description) in SEEDS {
        let dir = match scope {
            Scope::Global => std::fs::create_dir_all(global_dir()).map(|_| global_dir()),
            Scope::Project => crate::paths::ensure_workspace_dir(workspace, "memory"),
        };
        let Ok(dir) = dir else {
            tracing::warn!("cannot create the {} memory folder", scope.as_str());
            continue;
        };
        let path = dir.join(format!("{label}.md"));
        if path.exists() {
            continue;
        }
        let meta = Meta {
            label: Some(label.into()),
            description: description.into(),
            ..Default::default()
        };
        if std::fs::write(&path, crate::frontmatter::render(&meta, "")).is_err() {
            tracing::warn!("cannot create the memory block {}", path.display());
        }
    }
}

fn read_dir(dir: &Path, scope: Scope) -> Vec<Block> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let (meta, body) = match crate::frontmatter::parse::<Meta>(&text) {
                Ok(parsed) => parsed,
                Err(e) => {
                    tracing::warn!("memory block {}: {e}", path.display());
                    return None;
                }
            };
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            Some(Block {
                label: meta.label.unwrap_or(stem),
                description: meta.description,
                limit: meta.limit.unwrap_or(DEFAULT_LIMIT),
                read_only: meta.read_only,
                content: body.to_string(),
                scope,
                path,
            })
        })
        .collect()
}

/// Every block: global ones first, then the project's; a project block shadows a global
/// one of the same label.
pub fn load(workspace: &Path) -> Vec<Block> {
    let project = read_dir(&project_dir(workspace), Scope::Project);
    let mut out: Vec<Block> = read_dir(&global_dir(), Scope::Global)
        .into_iter()
        .filter(|g| project.iter().all(|p| p.label != g.label))
        .collect();
    out.extend(project);
    out
}

fn save(workspace: &Path, block: &Block) -> Result<(), String> {
    let meta = Meta {
        label: Some(block.label.clone()),
        description: block.description.clone(),
        limit: (block.limit != DEFAULT_LIMIT).then_some(block.limit),
        read_only: block.read_only,
    };
    let made = match block.scope {
        Scope::Project => crate::paths::ensure_workspace_dir(workspace, "memory").map(|_| ()),
        Scope::Global => block.path.parent().map_or(Ok(()), std::fs::create_dir_all),
    };
    made.map_err(|e| format!("cannot create the memory folder: {e}"))?;
    std::fs::write(
        &block.path,
        crate::frontmatter::render(&meta, &block.content),
    )
    .map_err(|e| format!("cannot write {}: {e}", block.path.display()))
}

fn writable(block: &Block, content: &str) -> Result<(), String> {
    if block.read_only {
        return Err(format!(
            "memory block {:?} is read-only (the user marked it so); leave it as it is",
            block.label
        ));
    }
    let n = content.chars().count();
    if n > block.limit {
        return Err(format!(
            "memory block {:?} holds at most {} characters; the new content has {n}: make it \
             shorter (keep what lasts, drop what is stale)",
            block.label, block.limit
        ));
    }
    Ok(())
}

/// Replaces a block's content (a new label makes a new project block).
pub fn set(workspace: &Path, label: &str, content: &str) -> Result<Block, String> {
    let label = label.trim();
    if label.is_empty()
        || !label
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "{label:?} is not a block label: use letters, digits, '-' and '_'"
        ));
    }
    let mut block = load(workspace)
        .into_iter()
        .find(|b| b.label == label)
        .unwrap_or_else(|| Block {
            label: label.into(),
            description: String::new(),
            limit: DEFAULT_LIMIT,
            read_only: false,
            content: String::new(),
            scope: Scope::Project,
            path: project_dir(workspace).join(format!("{label}.md")),
        });
    writable(&block, content)?;
    block.content = content.to_string();
    save(workspace, &block)?;
    Ok(block)
}

/// Replaces the one occurrence of `old` in a block with `new`.
pub fn replace(workspace: &Path, label: &str, old: &str, new: &str) -> Result<Block, String> {
    let mut block = load(workspace)
        .into_iter()
        .find(|b| b.label == label)
        .ok_or_else(|| format!("no memory block {label:?} (memory_list shows them)"))?;
    match block.content.matches(old).count() {
        0 => return Err(format!("{old:?} is not in memory block {label:?}")),
        1 => {}
        n => {
            return Err(format!(
                "{old:?} is in memory block {label:?} {n} times: include more text to pick one"
            ));
        }
    }
    let content = block.content.replacen(old, new, 1);
    writable(&block, &content)?;
    block.content = content;
    save(workspace, &block)?;
    Ok(block)
}

/// The blocks as the baseline note shows them, within `BASELINE_BUDGET` characters.
pub fn baseline_section(blocks: &[Block]) -> String {
    if blocks.is_empty() {
        return String::new();
    }
    let mut out = String::from("<memory>\n");
    let mut left = BASELINE_BUDGET;
    for b in blocks {
        let content = b.content.trim_end();
        let n = content.chars().count();
        let shown: String = content.chars().take(left).collect();
        left -= shown.chars().count();
        out.push_str(&format!(
            "<block label=\"{}\" scope=\"{}\" description=\"{}\"{}>\n{shown}",
            b.label,
            b.scope.as_str(),
            b.description.replace('"', "'"),
            if b.read_only {
                " read_only=\"true\""
            } else {
                ""
            },
        ));
        if shown.chars().count() < n {
            out.push_str(&format!(
                "\n[… {} more characters not shown: memory_list has the whole block]",
                n - shown.chars().count()
            ));
        }
        out.push_str("\n</block>\n");
    }
    out.push_str("</memory>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_load_set_replace_and_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(project_dir(&ws)).unwrap();
        std::fs::write(
            project_dir(&ws).join("rules.md"),
            "---\ndescription: House rules\nlimit: 20\nread_only: false\n---\nno unwrap\n",
        )
        .unwrap();
        std::fs::write(
            project_dir(&ws).join("fixed.md"),
            "---\nread_only: true\n---\ndo not touch\n",
        )
        .unwrap();
        let blocks = load(&ws);
        let rules = blocks.iter().find(|b| b.label == "rules").unwrap();
        assert_eq!((rules.limit, rules.content.as_str()), (20, "no unwrap\n"));

        let b = replace(&ws, "rules", "no unwrap", "no panics").unwrap();
        assert_eq!(b.content, "no panics\n");
        assert!(
            replace(&ws, "rules", "no panics", &"x".repeat(30))
                .unwrap_err()
                .contains("at most 20 characters")
        );
        assert!(
            set(&ws, "fixed", "changed")
                .unwrap_err()
                .contains("read-only")
        );
        assert!(
            replace(&ws, "rules", "absent", "x")
                .unwrap_err()
                .contains("not in")
        );
        assert!(
            set(&ws, "../evil", "x")
                .unwrap_err()
                .contains("not a block label")
        );
        // A new label is a new project block, kept with its front matter.
        let new = set(&ws, "decisions", "use sqlite").unwrap();
        assert_eq!(new.scope, Scope::Project);
        let again = load(&ws);
        assert!(
            again
                .iter()
                .any(|b| b.label == "decisions" && b.content == "use sqlite")
        );
        assert_eq!(
            again
                .iter()
                .find(|b| b.label == "rules")
                .unwrap()
                .description,
            "House rules"
        );
    }

    #[test]
    fn the_baseline_section_keeps_to_its_budget() {
        let block = |label: &str, n: usize| Block {
            label: label.into(),
            description: format!("about {label}"),
            limit: 100_000,
            read_only: false,
            content: "m".repeat(n),
            scope: Scope::Project,
            path: PathBuf::new(),
        };
        let small = baseline_section(&[block("a", 10)]);
        assert!(small.contains("<block label=\"a\" scope=\"project\" description=\"about a\">"));
        let big = baseline_section(&[block("a", 9_000), block("b", 9_000)]);
        assert!(
            big.chars().count() < BASELINE_BUDGET + 1_000,
            "{}",
            big.len()
        );
        assert!(big.contains("more characters not shown"));
    }
}
