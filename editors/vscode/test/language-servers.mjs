// The agent uses VS Code's own TypeScript support (the built-in extension): the fixture
// src/calc.ts has one type error already; the model's edit adds another, then its `lsp`
// call asks for a definition. tests/tests/vscode.rs checks what reached the model.

import { start, step } from "./harness.mjs";

const { page, finish, waitFor, open, agentReady, ask, chatFrame, command } = await start();

/** The error count in the status bar's problems item. */
async function errors() {
  const label = (await page.locator('[id="status.problems"]').first().getAttribute("aria-label")) ?? "";
  const m = /Errors?: (\d+)/i.exec(label);
  return m ? Number(m[1]) : -1;
}

try {
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
  step("the turn ends after the lsp call");

  console.log("all passed");
  await finish(0);
} catch (e) {
  await finish(1, e);
}
