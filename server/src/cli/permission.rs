//! `agent-lsp permission`: the "always" answers saved for a workspace — list them, and
//! revoke one (or all) so that the agent asks again.

use clap::Subcommand;
use serde_json::json;

use super::memory::Place;
use super::session::report;
use crate::store::Store;

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
            let list: Vec<_> = grants
                .iter()
                .map(|(permission, pattern)| json!({"permission": permission, "pattern": pattern}))
                .collect();
            let text = if grants.is_empty() {
                format!("no saved permissions for {project}")
            } else {
                let lines: Vec<_> = grants.iter().map(|(k, p)| format!("{k}\t{p}")).collect();
                lines.join("\n")
            };
            report(place.json, list.into(), text)
        }
        PermissionCommand::Revoke {
            permission,
            pattern,
            all,
        } => {
            let chosen: Vec<_> = grants
                .into_iter()
                .filter(|(k, p)| {
                    all || (Some(k), Some(p)) == (permission.as_ref(), pattern.as_ref())
                })
                .collect();
            if chosen.is_empty() && !all {
                eprintln!(
                    "agent-lsp: no such saved permission for {project} (`agent-lsp permission list` shows them)"
                );
                return Ok(1);
            }
            store.record_grants(&project, &chosen, true)?;
            let text = format!("revoked {} saved permission(s)", chosen.len());
            report(place.json, json!({"revoked": chosen.len()}), text)
        }
    }
}
