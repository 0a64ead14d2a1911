// Long-term knowledge in VS Code: what "Agent: Export Knowledge to AGENTS.md" says when the
// server has written the project's entries into its agents file.
import type { KnowledgeExportResult } from "./protocol";

/** The one-line summary of an export: the file, its entries, and what was read back. */
export function exportSummary(r: KnowledgeExportResult): string {
  const name = r.file.split(/[\\/]/).pop() ?? r.file;
  let said = `${name}: ${r.entries} ${r.entries === 1 ? "entry" : "entries"}`;
  if (!r.written) said += ", unchanged";
  const back: string[] = [];
  if (r.imported) back.push(`${r.imported} new`);
  if (r.updated) back.push(`${r.updated} changed`);
  if (r.forgotten) back.push(`${r.forgotten} deleted`);
  if (back.length) said += `; read back ${back.join(", ")}`;
  return `agent-lsp: ${said}`;
}
