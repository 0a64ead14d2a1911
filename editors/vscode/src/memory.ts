import type { FactItem, JournalHit, MemoryWhyResult, Tier } from "./protocol";

// The memory inspector as data: the workspace's facts grouped by tier, each with its
// provenance and conflicts; and journal hits as pick items. Pure (no vscode import), so it is unit-tested in plain node;
// memoryView.ts draws it as a tree.

export const TIERS: { tier: Tier; label: string }[] = [
  { tier: "core", label: "Core (always shown)" },
  { tier: "pinned", label: "Pinned (never fades)" },
  { tier: "archival", label: "Archival (shown when relevant)" },
  { tier: "temporary", label: "Temporary (until it expires)" },
];

export interface TierGroup {
  tier: Tier;
  label: string;
  facts: FactItem[];
}

/** The tiers that hold facts, in a fixed order, with a count in the label. */
export function groups(facts: FactItem[]): TierGroup[] {
  return TIERS.map(({ tier, label }) => ({
    tier,
    label: `${label} · ${facts.filter((f) => f.tier === tier).length}`,
    facts: facts.filter((f) => f.tier === tier),
  })).filter((g) => g.facts.length > 0);
}

export const short = (id?: string | null) => (id ? id.slice(0, 8) : "?");

const when = (ms?: number | null) =>
  ms ? `${new Date(ms).toISOString().slice(0, 16).replace("T", " ")} UTC` : undefined;

/** The lines that say where a fact came from and how it has been used. */
export function provenance(f: FactItem): string[] {
  const lines = [`from ${f.source}${f.sessionId ? `, session ${short(f.sessionId)}` : ""}`];
  if (f.messageIds.length) lines.push(`${f.messageIds.length} message(s)`);
  lines.push(`confidence ${f.confidence.toFixed(2)}`, `written ${when(f.createdAt)}`);
  if (f.scope === "global") lines.push("global: every workspace");
  if (f.sensitivity === "local-only") lines.push("local-only: never shown to the model");
  if (f.expiresAt) lines.push(`expires ${when(f.expiresAt)}`);
  lines.push(`shown ${f.surfacedCount}×, useful ${f.useful}, irrelevant ${f.irrelevant}`);
  if (f.conflicted) {
    lines.push(
      f.conflictsWith
        ? `in conflict: contradicts ${short(f.conflictsWith)} (edit or forget one to resolve)`
        : "in conflict: contradicted by another fact (edit or forget one to resolve)",
    );
  }
  return lines;
}

/** A fact's row: its text, and a short description of where it came from. */
export function factRow(f: FactItem): { label: string; description: string; conflicted: boolean } {
  const bits: string[] = [f.source];
  if (f.sensitivity === "local-only") bits.push("local-only");
  if (f.conflicted) bits.push("conflicted");
  return { label: f.content, description: bits.join(" · "), conflicted: f.conflicted };
}

/** The header of the view: how many facts, how many in conflict. */
export function summary(facts: FactItem[]): string {
  const conflicted = facts.filter((f) => f.conflicted).length;
  return `${facts.length} fact(s)${conflicted ? `, ${conflicted} in conflict` : ""}`;
}

/** What `agent/memory/why` said, as lines. */
export function explain(why: MemoryWhyResult): string[] {
  const lines = [`Verdict: ${why.verdict}`];
  if (why.rank != null) lines.push(`Rank: ${why.rank}`);
  if (why.score != null) lines.push(`Score: ${why.score.toFixed(3)}`);
  if (why.coverage != null) lines.push(`Coverage: ${why.coverage.toFixed(2)}`);
  lines.push(`Irrelevant marks leave ${why.irrelevance.toFixed(2)}, age leaves ${why.decay.toFixed(2)}`);
  if (why.matches.length) lines.push(`Matches: ${why.matches.map((m) => m.term).join(", ")}`);
  return lines;
}

/** A journal hit as a quick pick item: its title, when and where, and the matched words. */
export function journalItem(hit: JournalHit): { label: string; description: string; detail: string } {
  const bits: string[] = [];
  if (hit.created) bits.push(hit.created.slice(0, 10));
  if (hit.project) bits.push(hit.project.split("/").pop() ?? hit.project);
  if (hit.tags.length) bits.push(hit.tags.map((t) => `#${t}`).join(" "));
  return { label: hit.title, description: bits.join(" · "), detail: hit.snippet.replace(/\s+/g, " ").trim() };
}
