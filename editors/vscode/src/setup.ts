// The extension's settings checked before they reach the server, and "Agent: Check Setup"'s
// report over `agent-lsp doctor --json`. Pure: the extension does the I/O.

const PROVIDERS = ["openai", "ollama", "anthropic"];
const MODES = ["build", "plan", "auto"];

/** The settings the server gets (initializationOptions, config.toml's keys) and, for each one
 * left out because it is wrong, why. Empty settings are left out so config.toml decides. */
export interface CheckedSettings {
  settings: Record<string, string>;
  problems: string[];
}

/** Why `value` of `setting` is wrong, or undefined. `exists` tells whether a file exists. */
function problem(setting: string, value: string, exists: (path: string) => boolean): string | undefined {
  switch (setting) {
    case "provider":
      return PROVIDERS.includes(value) ? undefined : `must be one of ${PROVIDERS.join(", ")} (or empty)`;
    case "mode":
      return MODES.includes(value) ? undefined : `must be one of ${MODES.join(", ")} (or empty)`;
    case "baseUrl": {
      let url: URL | undefined;
      try {
        url = new URL(value);
      } catch {}
      return url && (url.protocol === "http:" || url.protocol === "https:")
        ? undefined
        : `must be an http(s) URL such as http://localhost:11434/v1, not "${value}"`;
    }
    case "apiKeyEnv":
      return /^[A-Za-z_][A-Za-z0-9_]*$/.test(value)
        ? undefined
        : "names the environment variable that holds the key (e.g. OPENAI_API_KEY), not the key itself";
    case "serverPath":
      return exists(value) ? undefined : `no file at ${value}`;
  }
  return undefined;
}

const SERVER_KEYS: [string, string][] = [
  ["provider", "provider"],
  ["model", "model"],
  ["baseUrl", "base_url"],
  ["apiKeyEnv", "api_key_env"],
  ["mode", "mode"],
];

/** The settings checked: `get` reads `agent-lsp.<key>`. */
export function checkSettings(
  get: (key: string) => string | undefined,
  exists: (path: string) => boolean,
): CheckedSettings {
  const out: CheckedSettings = { settings: {}, problems: [] };
  const why = (setting: string, value: string | undefined) => {
    const p = value ? problem(setting, value.trim(), exists) : undefined;
    if (p) out.problems.push(`agent-lsp.${setting} ${p}; it is ignored.`);
    return p;
  };
  why("serverPath", get("serverPath"));
  for (const [setting, key] of SERVER_KEYS) {
    const v = get(setting)?.trim();
    if (v && !why(setting, v)) out.settings[key] = v;
  }
  return out;
}

/** What `agent-lsp doctor --json` prints (the parts the report shows). */
export interface DoctorReport {
  version: string;
  workspace: string;
  layers: { source: string; path: string | null; error: string | null }[];
  checks: { name: string; ok: boolean; detail: string }[];
}

export interface SetupFacts {
  binary: string;
  /** Whether the language client runs. */
  running: boolean;
  problems: string[];
  /** The doctor's report, or why there is none. */
  report?: DoctorReport;
  failure?: string;
}

/** "Agent: Check Setup": a markdown document and a one-line summary. */
export function setupReport(f: SetupFacts): { markdown: string; summary: string; ok: boolean } {
  const lines = ["# agent-lsp setup", ""];
  const failed: string[] = [];
  const item = (ok: boolean, text: string, name: string) => {
    lines.push(`- ${ok ? "ok" : "FAIL"}: ${text}`);
    if (!ok) failed.push(name);
  };
  if (f.report) {
    item(true, `${f.binary} (agent-lsp ${f.report.version})`, "binary");
  } else {
    item(false, `${f.binary}: ${f.failure ?? "no report"}`, "binary");
  }
  item(f.running, f.running ? "the server runs" : "the server is not running", "server");
  lines.push("", "## Settings", "");
  if (!f.problems.length) lines.push("- ok: the agent-lsp.* settings are valid");
  for (const p of f.problems) item(false, p, "settings");
  if (f.report) {
    lines.push("", `## Configuration (workspace ${f.report.workspace})`, "");
    if (!f.report.layers.length) lines.push("- ok: no configuration layers: the defaults");
    for (const l of f.report.layers) {
      const where = l.path ?? "the extension's settings";
      item(l.error === null, `layer ${l.source} (${where})${l.error ? `: ${l.error}` : ""}`, "configuration");
    }
    lines.push("", "## Checks", "");
    // "config" sums up the layers, listed one by one above.
    for (const c of f.report.checks.filter((c) => c.name !== "config")) item(c.ok, `${c.name}: ${c.detail}`, c.name);
  }
  lines.push("");
  const unique = [...new Set(failed)];
  const summary = unique.length
    ? `agent-lsp: setup has ${failed.length} problem(s): ${unique.join(", ")}`
    : "agent-lsp: setup OK";
  return { markdown: lines.join("\n"), summary, ok: !unique.length };
}
