//! `agent-lsp permission`: the "always" answers saved for a workspace — list them, and
//! revoke one (or all) so that the agent asks again.

use clap::Subcommand;
use serde_json::json;

use super::memory::Place;
use crate::store::{Event, Store};

#[derive(Debug, Subcommand)]
pub enum PermissionCommand {
    /// The saved "always" answers: permission and pattern, oldest first.
    List,
    /// Forget a saved answer (or every one with --all): the agent asks again.
    Revoke {
        /// The permission key (`bash`, `edit`, `webfetch`, an MCP tool's name…).
        #[arg(required_unless_present = "all")]
        permission: Option<String>,
        /// The pattern, exactly as `list` shows it.
        #[arg(required_unless_present = "all")]
        pattern: Option<String>,
        /// Every saved answer of the workspace.
        #[arg(long, conflicts_with_all = ["permission", "pattern"])]
        all: bool,
    },
}

pub fn run(cmd: PermissionCommand, place: Place) -> anyhow::Result<i32> {
    let project = place.root()?.display().to_string();
    let mut store = Store::open_default()?;
    let grants = store.grants(&project)?;
    match cmd {
        PermissionCommand::List => {
            if place.json {
                let list: Vec<_> = grants
                    .iter()
                    .map(|(permission, pattern)| json!({"permission": permission, "pattern": pattern}))
                    .collect();
                println!("{}", serde_json::Value::Array(list));
            } else if grants.is_empty() {
                println!("no saved permissions for {project}");
            } else {
                for (permission, pattern) in &grants {
                    println!("{permission}\t{pattern}");
                }
            }
            Ok(0)
        }
        PermissionCommand::Revoke {
            permission,
            pattern,
            all,
        } => {
            let chosen: Vec<_> = match (permission, pattern) {
                _ if all => grants,
                (Some(k), Some(p)) => grants
                    .into_iter()
                    .filter(|(gk, gp)| *gk == k && *gp == p)
                    .collect(),
                _ => Vec::new(),
            };
            if chosen.is_empty() && !all {
                eprintln!(
                    "agent-lsp: no such saved permission for {project} (`agent-lsp permission list` shows them)"
                );
                return Ok(1);
            }
            let batch: Vec<(Option<&str>, Event)> = chosen
                .iter()
                .map(|(permission, pattern)| {
                    let event = Event::PermissionRevoked {
                        project: project.clone(),
                        permission: permission.clone(),
                        pattern: pattern.clone(),
                    };
                    (None, event)
                })
                .collect();
            store.append_all(&batch)?;
            println!("revoked {} saved permission(s)", chosen.len());
            Ok(0)
        }
    }
}
