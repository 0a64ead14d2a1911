// What the end-to-end scripts share: code-server with the packaged .vsix installed, driven by
// playwright-core in Debian's Chromium, and helpers to drive VS Code. The scripts are started
// by tests/tests/vscode.rs, which runs the fake model and passes (env): CODE_SERVER (its
// entry.js), VSIX, WORKSPACE, AGENT_LSP_BIN, ARTIFACTS (where screenshots go), CHROMIUM,
// NODE_PATH (where playwright-core is). Exit code 0 is a pass; steps print.

import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync, mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";

// playwright-core lives with code-server in the test cache (NODE_PATH), not in this package.
const { chromium } = createRequire(join(process.env.NODE_PATH ?? ".", "x"))("playwright-core");

export const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
export const WORKSPACE = env("WORKSPACE");
export const ARTIFACTS = env("ARTIFACTS");
export const TIMEOUT = 60_000;

export const step = (name) => console.log(`ok - ${name}`);

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

/** Installs the .vsix, starts code-server on WORKSPACE and opens it in Chromium; returns the
 *  helpers. `settings` are added to the user settings. */
export async function start(settings = {}) {
  const CODE_SERVER = env("CODE_SERVER");
  const home = mkdtempSync(join(tmpdir(), "agent-lsp-vscode-"));
  const userData = join(home, "user-data");
  const extensions = join(home, "extensions");
  mkdirSync(join(userData, "User"), { recursive: true });
  mkdirSync(ARTIFACTS, { recursive: true });
  writeFileSync(
    join(userData, "User", "settings.json"),
    JSON.stringify({
      "agent-lsp.serverPath": env("AGENT_LSP_BIN"),
      "security.workspace.trust.enabled": false,
      "workbench.startupEditor": "none",
      "workbench.tips.enabled": false,
      "extensions.autoCheckUpdates": false,
      "extensions.autoUpdate": false,
      "telemetry.telemetryLevel": "off",
      "update.mode": "none",
      "chat.disableAIFeatures": true,
      // VS Code saves files an applied edit touched unless told not to; the tests check
      // that agent edits stay unsaved in the buffer.
      "files.refactoring.autoSave": false,
      // Desktop VS Code's default. Browser builds (code-server among them) default to
      // "afterDelay", which saves the agent's edit — and later the revert — a second after
      // it lands in the buffer, as it saves the user's typing.
      "files.autoSave": "off",
      ...settings,
    }),
  );
  const csArgs = ["--user-data-dir", userData, "--extensions-dir", extensions];
  execFileSync(process.execPath, [CODE_SERVER, ...csArgs, "--install-extension", env("VSIX")], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  step("the .vsix installs");

  const port = await freePort();
  // In its own process group, so that its extension host and agent-lsp go with it.
  const server = spawn(
    process.execPath,
    [CODE_SERVER, ...csArgs, "--auth", "none", "--bind-addr", `127.0.0.1:${port}`,
      "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", WORKSPACE],
    { stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  let serverLog = "";
  server.stdout.on("data", (d) => (serverLog += d));
  server.stderr.on("data", (d) => (serverLog += d));

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(TIMEOUT);

  async function finish(code, err) {
    if (err) {
      console.error(`FAIL: ${err?.stack ?? err}`);
      await page.screenshot({ path: join(ARTIFACTS, "failure.png") }).catch(() => {});
      console.error(`--- code-server log\n${serverLog.slice(-4000)}`);
    }
    await browser.close().catch(() => {});
    try {
      process.kill(-server.pid, "SIGTERM");
    } catch {}
    process.exit(code);
  }
  // However it goes, the script ends: a hang is a failure with a screenshot.
  setTimeout(() => finish(1, new Error("the whole test took over 4 minutes")), 240_000).unref();

  async function waitFor(what, cond) {
    for (let i = 0; i < TIMEOUT / 200; i++) {
      if (await cond().catch(() => false)) return;
      await page.waitForTimeout(200);
    }
    throw new Error(`timed out waiting for ${what}`);
  }

  /** Runs `name` from the command palette. The palette lists what is contributed when it
   *  opens: right after a (re)load the extension's commands may not be there yet, so it is
   *  reopened until the row appears. */
  async function command(name) {
    // The row with exactly this label ("View: Close Editor" is also in "…Editor Group").
    const exact = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
    const row = page
      .locator(".quick-input-list .monaco-list-row")
      .filter({ has: page.locator(".label-name", { hasText: exact }) })
      .first();
    for (let i = 0; ; i++) {
      await page.keyboard.press("F1");
      const input = page.locator(".quick-input-widget input");
      await input.waitFor({ state: "visible" });
      await input.fill(`>${name}`);
      try {
        await row.waitFor({ timeout: i < 10 ? 3000 : TIMEOUT });
        break;
      } catch (e) {
        if (i >= 10) throw e;
        await page.keyboard.press("Escape");
      }
    }
    await row.click();
  }

  const editorText = () => page.locator(".editor-instance .view-lines").first().innerText();

  /** Opens `name` with Quick Open and waits until the editor shows `contains`. */
  async function open(name, contains) {
    await page.keyboard.press("Control+P");
    await page.locator(".quick-input-widget input").fill(name);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first().waitFor();
    await page.keyboard.press("Enter");
    await waitFor(`${name} in the editor`, async () => (await editorText()).includes(contains));
  }

  /** Waits until the agent-lsp client runs (and has told the server of the open file). */
  async function agentReady() {
    await waitFor("the agent-lsp client", async () => {
      const t = await page.locator(".statusbar-item", { hasText: "Agent" }).first().innerText();
      return !t.includes("starting");
    });
  }

  /** Sends a prompt through "Agent: Ask…". */
  async function ask(text) {
    await waitFor("the extension's command", async () => {
      await command("Agent: Ask…");
      return true;
    });
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible" });
    await input.fill(text);
    await page.keyboard.press("Enter");
  }

  /** The chat webview's inner frame (webviews nest an iframe in an iframe). */
  async function chatFrame() {
    for (let i = 0; i < TIMEOUT / 250; i++) {
      for (const f of page.frames()) {
        if ((await f.locator("#log").count().catch(() => 0)) > 0) return f;
      }
      await page.waitForTimeout(250);
    }
    throw new Error("the chat view did not appear");
  }

  // code-server takes a moment to listen.
  await waitFor("code-server to listen", async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok);
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(WORKSPACE)}`);
  await page.locator(".monaco-workbench").waitFor();
  step("VS Code is up");

  return { page, finish, waitFor, command, editorText, open, agentReady, ask, chatFrame };
}
