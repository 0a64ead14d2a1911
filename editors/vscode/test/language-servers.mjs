// The agent uses VS Code's own TypeScript support (the built-in extension): the fixture
// src/calc.ts has one type error already; the model's edit adds another, then its `lsp`
// call asks for a definition. tests/tests/vscode.rs checks what reached the model. Then
// "Agent: Check Setup": a wrong setting (a key where the variable's name belongs) is named
// and left out, and the doctor's layers and checks are shown.

import { start, step } from "./harness.mjs";

const { page, finish, waitFor, open, agentReady, ask, chatFrame, command } = await start({
  "agent-lsp.apiKeyEnv": "sk-proj-0123456789",
});

/** The error count in the status bar's problems item. */
async function errors() {
  const label = (await page.locator('[id="status.problems"]').first().getAttribute("aria-label")) ?? "";
  const m = /Errors?: (\d+)/i.exec(label);
  return m ? Number(m[1]) : -1;
}

try {
  await page.getByText("agent-lsp.apiKeyEnv names the environment variable").first().waitFor();
  step("a wrong setting is named on activation");
  await open("calc.ts", "checkout");
  await waitFor("TypeScript's diagnostics of the fixture", async () => (await errors()) === 1);
  step("TypeScript reports the fixture's one error");
  await agentReady();

  await ask("make checkout add shipping");
  await waitFor("the agent's edit in the editor", async () =>
    (await page.locator(".editor-instance .view-lines").first().innerText()).includes('"shipping"'),
  );
  step("the edit arrives in the open editor");
  await waitFor("TypeScript's new error", async () => (await errors()) === 2);
  await command("Agent: Show Chat");
  const chat = await chatFrame();
  await chat.locator("#log", { hasText: "All done." }).waitFor();
  step("the turn ends after the lsp call (the wrong setting was left out)");

  await command("Agent: Check Setup");
  await page.locator(".tab.active", { hasText: "Untitled" }).waitFor();
  const report = page.locator(".monaco-editor .view-lines", { hasText: "agent-lsp setup" }).first();
  // Monaco renders spaces as no-break spaces.
  const reportText = async () => (await report.innerText()).replace(/\u00a0/g, " ");
  for (const text of [
    "# agent-lsp setup",
    "- ok: the server runs",
    "- FAIL: agent-lsp.apiKeyEnv names",
    "- ok: layer user (",
    "- ok: layer initialization_options",
    "- ok: api key: $FAKE_KEY is set",
    "- ok: provider: GET http://127.0.0.1:",
  ]) {
    await waitFor(`"${text}" in the setup report`, async () => (await reportText()).includes(text));
  }
  await page.getByText("agent-lsp: setup has 1 problem(s): settings").first().waitFor();
  step("Agent: Check Setup shows the doctor's report and sums up the problem");

  console.log("all passed");
  await finish(0);
} catch (e) {
  await finish(1, e);
}
