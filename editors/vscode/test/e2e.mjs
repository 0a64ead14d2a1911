// End to end in a real VS Code (see harness.mjs): ask, approve with the diff, the edit in
// the editor, the streamed chat, revert and redo, the chat after a reload, the Memory view,
// the journal and the knowledge export.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { start, step, WORKSPACE, ARTIFACTS } from "./harness.mjs";

const { page, finish, waitFor, command, editorText, open, agentReady, ask, chatFrame } = await start();

try {
  await open("lib.rs", "41");
  step("the fixture file is open");
  await agentReady();
  await ask("make the answer 42");
  step("Agent: Ask… sends the prompt");

  // The approval dialog; allow once.
  const dialog = page.locator(".monaco-dialog-box");
  await dialog.waitFor();
  if (!(await dialog.innerText()).includes("The agent wants to edit")) {
    throw new Error(`unexpected dialog: ${await dialog.innerText()}`);
  }
  // "Show diff" opens the proposed change in the diff editor, then asks again.
  await dialog.getByRole("button", { name: "Show diff" }).click();
  await page.locator(".monaco-diff-editor").first().waitFor();
  await waitFor("the proposed text in the diff editor", async () =>
    (await page.locator(".monaco-diff-editor .modified .view-lines").first().innerText()).includes("42"),
  );
  step("Show diff opens the proposed change in the diff editor");
  await dialog.waitFor();
  await dialog.getByRole("button", { name: "Allow once" }).click();
  step("the approval dialog allows the edit");
  await dialog.waitFor({ state: "hidden" });
  // Back to lib.rs (the diff editor has the focus).
  await page.locator(".explorer-folders-view .monaco-list-row", { hasText: "lib.rs" }).click();

  await waitFor("the edit in the editor", async () => {
    const t = await editorText();
    return t.includes("42") && !t.includes("41");
  });
  step("the edit arrives in the open editor");

  await command("Agent: Show Chat");
  const chat = await chatFrame();
  await chat.locator("#log", { hasText: "The answer is now 42." }).waitFor();
  const text = await chat.locator("#log").innerText();
  for (const want of ["make the answer 42", "Fixing it.", "edit"]) {
    if (!text.includes(want)) throw new Error(`chat lacks ${JSON.stringify(want)}:\n${text}`);
  }
  // The webview is drawn over the side bar: a picture of the side bar's box shows it.
  await page.locator('[id="workbench.parts.sidebar"]').screenshot({ path: join(ARTIFACTS, "chat.png") });
  step("the chat view shows the streamed answer (screenshot saved)");
  await chat.locator("#work", { hasText: "Focus: the answer function · testing" }).waitFor();
  step("the chat view shows the state file's focus and phase");

  // Revert from the chat view: the file goes back to 41.
  await chat.getByRole("button", { name: "Revert" }).first().click();
  await waitFor("the revert in the editor", async () => {
    const t = await editorText();
    return t.includes("41") && !t.includes("42");
  });
  await chat.getByRole("button", { name: "Redo" }).waitFor();
  // Neither the edit nor the revert wrote the disk: the buffer is the editor's to save.
  // (Checked here, before the reload: what VS Code does with a dirty buffer then is its own.)
  const disk = readFileSync(join(WORKSPACE, "src/lib.rs"), "utf8");
  if (!disk.includes("41") || disk.includes("42")) {
    throw new Error(`the disk holds the agent's text after the revert: ${JSON.stringify(disk)}`);
  }
  step("Revert in the chat view takes the turn back");

  // After a reload the chat comes back from agent/history.
  await page.reload();
  await page.locator(".monaco-workbench").waitFor();
  await command("Agent: Show Chat");
  const again = await chatFrame();
  await again.locator("#log", { hasText: "The answer is now 42." }).waitFor();
  await again.getByRole("button", { name: "Redo" }).waitFor();
  await again.locator("#work", { hasText: "Focus: the answer function · testing" }).waitFor();
  step("after a reload the chat is restored from the history, the focus from agent/state");

  // The memory inspector: the tree of facts the test seeded (tests/src/memory.rs).
  await command("Agent: Show Memory");
  const memoryPane = page.locator(".pane", { has: page.locator(".pane-header", { hasText: "Memory" }) });
  const row = (text) => memoryPane.locator(".monaco-list-row", { hasText: text }).first();
  await row("Core (always shown) · 1").waitFor();
  await row("Archival (shown when relevant) · 4").waitFor();
  await memoryPane.getByText("5 fact(s), 2 in conflict").waitFor();
  const pnpm = row("The project installs packages with pnpm");
  if (!(await pnpm.innerText()).includes("dream · conflicted")) {
    throw new Error(`the dreamt fact's row: ${await pnpm.innerText()}`);
  }
  await pnpm.click();
  await row("from dream, session a-dreamt").waitFor();
  await row("in conflict: contradicts").waitFor();
  await row("2 message(s)").waitFor();
  if (!(await row("hunter2").innerText()).includes("local-only")) {
    throw new Error("the local-only fact is not marked");
  }
  step("the Memory view lists facts by tier with provenance, conflicts flagged");

  // Why, on the selected fact: the verdict in a dialog.
  await row("Releases are shipped with make ship").click();
  await command("Agent: Why Would This Fact Surface?");
  await page.locator(".quick-input-widget input").fill("how do we ship a release");
  await page.keyboard.press("Enter");
  await dialog.waitFor();
  const why = await dialog.innerText();
  if (!why.includes("Verdict: passed the gate") || !why.includes("Matches:")) {
    throw new Error(`the why dialog: ${why}`);
  }
  await dialog.getByRole("button", { name: "OK" }).click();
  await dialog.waitFor({ state: "hidden" });
  step("why a fact surfaces for a prompt, in a dialog");

  // Edit: the input box offers the old text.
  await row("Releases are shipped with make ship").click();
  await command("Agent: Edit Memory Fact");
  const edit = page.locator(".quick-input-widget input");
  await waitFor("the old text in the input box", async () => (await edit.inputValue()) === "Releases are shipped with make ship");
  await edit.fill("Releases are shipped with make release");
  await page.keyboard.press("Enter");
  await row("Releases are shipped with make release").waitFor();
  step("a fact is edited from the view");

  // Forget one side of the conflict: the other is no longer flagged.
  await row("The project installs packages with npm").click();
  await command("Agent: Forget Memory Fact");
  await dialog.waitFor();
  await dialog.getByRole("button", { name: "Forget" }).click();
  await memoryPane.getByText("4 fact(s)", { exact: true }).waitFor();
  await waitFor("the other side no longer flagged", async () => !(await pnpm.innerText()).includes("conflicted"));
  step("a fact is forgotten from the view, which resolves its conflict");

  // The journal: a query, the pick list, the entry opened (tests/tests/vscode.rs wrote it).
  await command("Agent: Search Journal…");
  await page.locator(".quick-input-widget input").fill("release day");
  await page.keyboard.press("Enter");
  const entry = page.locator(".quick-input-list .monaco-list-row", { hasText: "Release day" }).first();
  await entry.waitFor();
  if (!(await entry.innerText()).includes("2026-11-20")) throw new Error(`the pick item: ${await entry.innerText()}`);
  await entry.click();
  await page.locator(".tab.active", { hasText: "release-day.md" }).waitFor();
  await page.locator(".monaco-editor .view-lines", { hasText: "Thursdays, after standup" }).first().waitFor();
  step("Agent: Search Journal… finds an entry and opens it");

  // Long-term knowledge into AGENTS.md (tests/tests/vscode.rs added the entry).
  await command("Agent: Export Knowledge to AGENTS.md");
  await page.locator(".tab.active", { hasText: "AGENTS.md" }).waitFor();
  await page.locator(".monaco-editor .view-lines", { hasText: "Deploys go out on Thursdays" }).first().waitFor();
  await page.getByText("agent-lsp: AGENTS.md: 1 entry").first().waitFor();
  step("Agent: Export Knowledge to AGENTS.md writes the section and opens the file");

  console.log("all passed");
  await finish(0);
} catch (e) {
  await finish(1, e);
}
