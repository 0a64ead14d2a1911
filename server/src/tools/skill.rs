//! `skill`: loads a skill's instructions. Skills are folders holding a `SKILL.md` whose front
//! matter gives a `name` and a one-line `description`; only those are listed up front.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Need, Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::editor::PermissionRequest;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The skill's name, as listed in this tool's description.
    pub name: String,
}

pub struct Skill;

#[derive(Debug, Clone, PartialEq)]
pub struct SkillInfo {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
}

/// A skill's front matter.
#[derive(Debug, Default, Deserialize)]
struct SkillMeta {
    name: Option<String>,
    #[serde(default)]
    description: String,
}

/// Every skill under `dirs` (`<dir>/<folder>/SKILL.md`); the first of a name wins.
pub fn discover(dirs: &[PathBuf]) -> Vec<SkillInfo> {
    let mut out: Vec<SkillInfo> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path().join("SKILL.md"))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for path in paths {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let meta = crate::frontmatter::parse::<SkillMeta>(&text)
                .map(|(m, _)| m)
                .unwrap_or_else(|e| {
                    tracing::warn!("{}: {e}", path.display());
                    SkillMeta::default()
                });
            let folder = path
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let name = meta.name.unwrap_or(folder);
            if out.iter().all(|s| s.name != name) {
                out.push(SkillInfo {
                    name,
                    description: meta.description,
                    path,
                });
            }
        }
    }
    out
}

impl TypedTool for Skill {
    type Args = Args;
    const NAME: &'static str = "skill";
    const READ_ONLY: bool = true;

    fn description(&self, ctx: &ToolContext) -> String {
        let skills = discover(&ctx.skill_dirs);
        let mut d = String::from(
            "Loads a skill: instructions for a kind of task. Load one when the task matches its description.\n",
        );
        if skills.is_empty() {
            d.push_str("No skills are installed.");
        } else {
            d.push_str("Available skills:\n");
            for s in skills {
                d.push_str(&format!("- {}: {}\n", s.name, s.description));
            }
        }
        d
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let skills = discover(&ctx.skill_dirs);
        let Some(skill) = skills.iter().find(|s| s.name == args.name).cloned() else {
            let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            return Err(ToolError::new(format!(
                "no skill named {:?}; available: {}",
                args.name,
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            )));
        };
        let need = Need {
            request: PermissionRequest {
                permission: "skill".into(),
                tool: Self::NAME.into(),
                title: format!("load skill {}", skill.name),
                patterns: vec![skill.name.clone()],
                always: vec![skill.name.clone()],
                ..Default::default()
            },
        };
        Ok(Prepared::new(vec![need], move |_| {
            Box::pin(async move {
                let text = std::fs::read_to_string(&skill.path)?;
                let base = skill
                    .path
                    .parent()
                    .unwrap_or(Path::new("/"))
                    .display()
                    .to_string();
                Ok(ToolOutput {
                    title: skill.name.clone(),
                    output: format!(
                        "<skill name=\"{}\" folder=\"{base}\">\n{text}\n</skill>",
                        skill.name
                    ),
                    metadata: json!({"path": skill.path}),
                    ..Default::default()
                })
            })
        }))
    }
}
