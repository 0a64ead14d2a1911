// Unit tests of the pure parts (node's test runner, on the esbuild bundle of this file).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ALLOW_ONCE,
  ALWAYS,
  DENY,
  applyUpdate,
  emptyState,
  fromHistory,
  keepWork,
  permissionReply,
  statusText,
  workText,
} from "../src/model";
import { checkSettings, setupReport } from "../src/setup";

test("chunks of one message merge; a new message starts a new entry", () => {
  const s = emptyState("s1");
  applyUpdate(s, { kind: "user_message", messageId: "u1", text: "hi" });
  applyUpdate(s, { kind: "message_chunk", messageId: "a1", text: "Hel" });
  applyUpdate(s, { kind: "message_chunk", messageId: "a1", text: "lo" });
  applyUpdate(s, { kind: "message_chunk", messageId: "a2", text: "Again" });
  assert.deepEqual(
    s.entries.map((e) => [e.kind, (e as any).text]),
    [
      ["user", "hi"],
      ["text", "Hello"],
      ["text", "Again"],
    ],
  );
});

test("a tool call is one entry that its updates complete, with the diff", () => {
  const s = emptyState();
  applyUpdate(s, { kind: "tool_call", toolCallId: "t1", name: "edit", title: "edit src/a.rs", toolKind: "edit", rawInput: {}, status: "pending" });
  applyUpdate(s, { kind: "tool_call", toolCallId: "t1", name: "edit", title: "edit src/a.rs", toolKind: "edit", rawInput: {}, status: "running" });
  applyUpdate(s, {
    kind: "tool_call_update",
    toolCallId: "t1",
    name: "edit",
    status: "completed",
    title: "src/a.rs",
    output: "Edited",
    diff: { uri: "file:///w/src/a.rs", oldText: "a", newText: "b" },
  });
  assert.equal(s.entries.length, 1);
  const e = s.entries[0] as any;
  assert.equal(e.status, "completed");
  assert.equal(e.title, "edit src/a.rs");
  assert.equal(e.diff.newText, "b");
});

test("status, errors and stop reasons", () => {
  const s = emptyState();
  applyUpdate(s, { kind: "status", status: "busy" });
  assert.equal(s.status, "busy");
  assert.match(statusText(s, 0), /working/);
  assert.match(statusText(s, 1), /approval/);
  applyUpdate(s, { kind: "status", status: "idle", stopReason: "max_steps" });
  applyUpdate(s, { kind: "error", message: "boom" });
  assert.equal(s.status, "idle");
  assert.deepEqual(
    s.entries.map((e) => (e as any).text),
    ["Turn ended: max_steps", "Error: boom"],
  );
});

test("a staged revert marks its point; redo clears it; the next prompt drops what it reverted", () => {
  const s = emptyState();
  applyUpdate(s, { kind: "user_message", messageId: "u1", text: "one" });
  applyUpdate(s, { kind: "message_chunk", messageId: "a1", text: "done one" });
  applyUpdate(s, { kind: "user_message", messageId: "u2", text: "two" });
  applyUpdate(s, { kind: "message_chunk", messageId: "a2", text: "done two" });
  applyUpdate(s, { kind: "revert", messageId: "u2", files: ["a"] });
  assert.equal(s.revertedFrom, "u2");
  applyUpdate(s, { kind: "revert", messageId: null, files: ["a"] });
  assert.equal(s.revertedFrom, undefined);
  applyUpdate(s, { kind: "revert", messageId: "u2", files: ["a"] });
  applyUpdate(s, { kind: "user_message", messageId: "u3", text: "three" });
  assert.deepEqual(
    s.entries.filter((e) => e.kind === "user").map((e) => (e as any).text),
    ["one", "three"],
  );
});

test("history becomes the same entries as the live stream", () => {
  const s = fromHistory({
    sessionId: "s9",
    workspace: "/w",
    title: "fix it",
    status: "idle",
    createdAt: 0,
    updatedAt: 0,
    messageCount: 2,
    inbox: [],
    todos: [],
    pendingPermissions: [],
    running: false,
    distillations: [],
    mode: "plan",
    revert: null,
    messages: [
      { messageId: "u1", role: "user", createdAt: 0, meta: null, parts: [{ partId: "p1", kind:"text", data: { text: "fix it" } }, { partId: "p2", kind:"note", data: { text: "(context)" } }] },
      {
        messageId: "a1",
        role: "assistant",
        createdAt: 0,
        meta: null,
        parts: [
          { partId: "p3", kind:"step_start", data: {} },
          { partId: "p4", kind:"text", data: { text: "On it." } },
          { partId: "p5", kind:"tool", status: "completed", data: { callId: "c1", name: "bash", title: "cargo test", output: "ok" } },
        ],
      },
    ],
  });
  assert.equal(s.sessionId, "s9");
  assert.equal(s.mode, "plan");
  assert.deepEqual(
    s.entries.map((e) => [e.kind, (e as any).text ?? (e as any).title]),
    [
      ["user", "fix it"],
      ["text", "On it."],
      ["tool", "bash cargo test"],
    ],
  );
});

test("approval buttons map to the protocol's outcomes", () => {
  assert.deepEqual(permissionReply(ALLOW_ONCE), { outcome: "once" });
  assert.deepEqual(permissionReply(ALWAYS), { outcome: "always" });
  assert.deepEqual(permissionReply(DENY, "not now"), { outcome: "reject", message: "not now" });
  assert.deepEqual(permissionReply(DENY, ""), { outcome: "reject" });
  assert.deepEqual(permissionReply(undefined), { outcome: "reject" }, "a dismissed dialog refuses");
});

test("settings become initializationOptions with config.toml's keys; empty ones are left out", () => {
  const settings: Record<string, string> = { provider: "openai", model: "", baseUrl: "http://127.0.0.1:1/v1", apiKeyEnv: "KEY" };
  assert.deepEqual(checkSettings((k) => settings[k], () => true), {
    settings: { provider: "openai", base_url: "http://127.0.0.1:1/v1", api_key_env: "KEY" },
    problems: [],
  });
});

test("a wrong setting is left out with a message that says what it should be", () => {
  const settings: Record<string, string> = {
    serverPath: "/nowhere/agent-lsp",
    provider: "gpt",
    model: "qwen3",
    baseUrl: "localhost:11434",
    apiKeyEnv: "sk-proj-abc123",
    mode: "yolo",
  };
  const checked = checkSettings((k) => settings[k], (p) => p !== "/nowhere/agent-lsp");
  assert.deepEqual(checked.settings, { model: "qwen3" });
  assert.deepEqual(checked.problems, [
    "agent-lsp.serverPath no file at /nowhere/agent-lsp; it is ignored.",
    "agent-lsp.provider must be one of openai, ollama, anthropic (or empty); it is ignored.",
    'agent-lsp.baseUrl must be an http(s) URL such as http://localhost:11434/v1, not "localhost:11434"; it is ignored.',
    "agent-lsp.apiKeyEnv names the environment variable that holds the key (e.g. OPENAI_API_KEY), not the key itself; it is ignored.",
    "agent-lsp.mode must be one of build, plan, auto (or empty); it is ignored.",
  ]);
  assert.deepEqual(checkSettings((k) => ({ baseUrl: "https://api.example.com/v1" })[k], () => false).problems, []);
});

test("the setup report lists the doctor's layers and checks and sums up what failed", () => {
  const report = {
    version: "0.1.0",
    workspace: "/w",
    layers: [
      { source: "user", path: "/home/u/.config/agent-lsp/config.toml", error: null },
      { source: "workspace", path: "/w/.agent-lsp.toml", error: "bad configuration: line 2" },
      { source: "initialization_options", path: null, error: null },
    ],
    checks: [
      { name: "config", ok: false, detail: "bad configuration: line 2" },
      { name: "data dir", ok: true, detail: "/d is writable" },
      { name: "provider", ok: false, detail: "GET http://127.0.0.1:1/v1/models: not reachable" },
    ],
  };
  const r = setupReport({ binary: "/bin/agent-lsp", running: true, problems: [], report });
  assert.equal(r.ok, false);
  assert.equal(r.summary, "agent-lsp: setup has 2 problem(s): configuration, provider");
  for (const line of [
    "- ok: /bin/agent-lsp (agent-lsp 0.1.0)",
    "- ok: the server runs",
    "- ok: the agent-lsp.* settings are valid",
    "## Configuration (workspace /w)",
    "- ok: layer user (/home/u/.config/agent-lsp/config.toml)",
    "- FAIL: layer workspace (/w/.agent-lsp.toml): bad configuration: line 2",
    "- ok: layer initialization_options (the extension's settings)",
    "- ok: data dir: /d is writable",
    "- FAIL: provider: GET http://127.0.0.1:1/v1/models: not reachable",
  ]) {
    assert.ok(r.markdown.includes(line), `${line}\n--- in\n${r.markdown}`);
  }
  assert.ok(!r.markdown.includes("config: "), "the layers are not repeated");

  const missing = setupReport({ binary: "agent-lsp", running: false, problems: [], failure: "agent-lsp not found" });
  assert.equal(missing.summary, "agent-lsp: setup has 2 problem(s): binary, server");
  assert.ok(missing.markdown.includes("- FAIL: agent-lsp: agent-lsp not found"));
});

test("the state file's focus and phase come with state updates and outlive a session", () => {
  const s = emptyState("a");
  assert.equal(workText(s), "");
  applyUpdate(s, { kind: "state", path: "/w/.agent-lsp/STATE.md", focus: "the parser", phase: "testing" });
  assert.equal(workText(s), "Focus: the parser · testing");
  applyUpdate(s, { kind: "state", path: "/w/.agent-lsp/STATE.md", focus: "the lexer", phase: null });
  assert.equal(workText(s), "Focus: the lexer");
  assert.equal(workText(keepWork(emptyState("b"), s)), "Focus: the lexer");
  assert.equal(s.entries.length, 0, "no chat entry");
});

import { exportSummary } from "../src/knowledge";
import { explain, factRow, groups, journalItem, provenance, summary } from "../src/memory";
import type { FactItem } from "../src/protocol";

const fact = (over: Partial<FactItem>): FactItem => ({
  id: "0123456789abcdef",
  content: "Releases are shipped with make ship",
  tier: "archival",
  scope: "project",
  sensitivity: "normal",
  source: "user",
  confidence: 1,
  createdAt: Date.UTC(2026, 11, 4, 9, 30),
  updatedAt: Date.UTC(2026, 11, 4, 9, 30),
  useful: 0,
  irrelevant: 0,
  surfacedCount: 2,
  messageIds: [],
  conflicted: false,
  ...over,
});

test("the memory inspector groups facts by tier in a fixed order, empty tiers left out", () => {
  const facts = [
    fact({ id: "a", tier: "archival" }),
    fact({ id: "c", tier: "core" }),
    fact({ id: "b", tier: "archival" }),
  ];
  assert.deepEqual(
    groups(facts).map((g) => [g.label, g.facts.map((f) => f.id)]),
    [
      ["Core (always shown) · 1", ["c"]],
      ["Archival (shown when relevant) · 2", ["a", "b"]],
    ],
  );
});

test("a dreamt fact's provenance, a conflict flagged, a local-only fact marked", () => {
  const dreamt = fact({
    source: "dream",
    sessionId: "sess-1234567890",
    messageIds: ["m1", "m2"],
    confidence: 0.8,
    conflicted: true,
    conflictsWith: "fedcba9876543210",
  });
  assert.deepEqual(provenance(dreamt), [
    "from dream, session sess-123",
    "2 message(s)",
    "confidence 0.80",
    "written 2026-12-04 09:30 UTC",
    "shown 2×, useful 0, irrelevant 0",
    "in conflict: contradicts fedcba98 (edit or forget one to resolve)",
  ]);
  assert.deepEqual(factRow(dreamt).description, "dream · conflicted");
  const secret = fact({ sensitivity: "local-only" });
  assert.ok(provenance(secret).includes("local-only: never shown to the model"));
  assert.equal(factRow(secret).description, "user · local-only");
  assert.equal(summary([dreamt, secret]), "2 fact(s), 1 in conflict");
  assert.equal(summary([secret]), "1 fact(s)");
});

test("why is told as a verdict and its figures", () => {
  assert.deepEqual(
    explain({
      id: "a",
      tier: "archival",
      verdict: "passed the gate",
      rank: 1,
      score: 2.5,
      coverage: 0.75,
      irrelevance: 1,
      decay: 0.9,
      matches: [{ term: "ship", weight: 1, idf: 2 }],
    }),
    [
      "Verdict: passed the gate",
      "Rank: 1",
      "Score: 2.500",
      "Coverage: 0.75",
      "Irrelevant marks leave 1.00, age leaves 0.90",
      "Matches: ship",
    ],
  );
});

test("a journal hit reads as a quick pick item", () => {
  assert.deepEqual(
    journalItem({
      id: "a",
      title: "Release day",
      path: "/j/release-day.md",
      created: "2026-11-20T09:00:00Z",
      project: "/home/me/shop",
      tags: ["ops", "release"],
      snippet: "«Thursdays»,\n after standup",
      score: 1,
      matched: "text",
    }),
    { label: "Release day", description: "2026-11-20 · shop · #ops #release", detail: "«Thursdays», after standup" },
  );
});

test("an export reads as one line: the file, its entries, what was read back", () => {
  const r = { file: "/w/AGENTS.md", written: true, entries: 1, imported: 0, updated: 0, forgotten: 0 };
  assert.equal(exportSummary(r), "agent-lsp: AGENTS.md: 1 entry");
  assert.equal(
    exportSummary({ ...r, file: "C:\\w\\CLAUDE.md", written: false, entries: 3, imported: 1, forgotten: 2 }),
    "agent-lsp: CLAUDE.md: 3 entries, unchanged; read back 1 new, 2 deleted",
  );
});
