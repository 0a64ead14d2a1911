// agent-lsp for VS Code: starts the server through vscode-languageclient, shows the chat
// in a side-bar webview, asks for approvals with a modal dialog (with the proposed change
// in the diff editor on request), and keeps the status bar up to date. The agent's edits
// to open documents arrive as workspace/applyEdit, so they sit in VS Code's undo stack.

import * as vscode from "vscode";
import {
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  type StaticFeature,
  type ClientCapabilities,
} from "vscode-languageclient/node";
import {
  ALLOW_ONCE,
  ALWAYS,
  DENY,
  SHOW_DIFF,
  applyUpdate,
  emptyState,
  fromHistory,
  keepWork,
  permissionReply,
  statusText,
  type ChatState,
  type Diff,
} from "./model";
import { ChatView } from "./chatView";
import { MemoryView } from "./memoryView";
import { exportSummary } from "./knowledge";
import { journalItem } from "./memory";
import { LanguageIntelligence } from "./intelligence";
import { checkSettings, setupReport, type CheckedSettings, type DoctorReport } from "./setup";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import type {
  Method,
  Params,
  PermissionParams,
  PermissionResult,
  PromptContext,
  QuestionParams,
  QuestionResult,
  Result,
  RevertResult,
  UpdateParams,
} from "./protocol";

const SESSION_KEY = "agent-lsp.session";

/** Declares the `experimental.agent` capabilities: streaming, approvals, questions and,
 *  unless `agent-lsp.languageServers` is off, the other language servers' diagnostics and
 *  requests. */
class AgentFeature implements StaticFeature {
  constructor(private shareLanguageServers: boolean) {}
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    const share = this.shareLanguageServers;
    capabilities.experimental = {
      ...(capabilities.experimental as object),
      agent: { updates: true, permissions: true, questions: true, diagnostics: share, lsp: share },
    };
  }
  getState() {
    return { kind: "static" as const };
  }
  initialize(): void {}
  clear(): void {}
}

/** Before/after texts for the diff editor, by URI (`agent-lsp-diff:` documents). */
class DiffTexts implements vscode.TextDocumentContentProvider {
  private texts = new Map<string, string>();
  private n = 0;
  put(label: string, path: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({
      scheme: "agent-lsp-diff",
      path,
      query: `${label}-${++this.n}`,
    });
    this.texts.set(uri.toString(), text);
    return uri;
  }
  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }
}

export class Agent {
  client: LanguageClient | undefined;
  state: ChatState = emptyState();
  waiting = 0;
  private status: vscode.StatusBarItem;
  private diffs = new DiffTexts();
  view: ChatView;
  memory: MemoryView;
  private log: vscode.OutputChannel;

  constructor(private context: vscode.ExtensionContext) {
    this.log = vscode.window.createOutputChannel("agent-lsp");
    this.status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 100);
    this.status.command = "agent-lsp.showChat";
    this.status.name = "agent-lsp";
    this.view = new ChatView(context.extensionUri, this);
    this.memory = new MemoryView(context, this);
    context.subscriptions.push(
      this.log,
      this.status,
      vscode.workspace.registerTextDocumentContentProvider("agent-lsp-diff", this.diffs),
      vscode.window.registerWebviewViewProvider(ChatView.id, this.view, {
        webviewOptions: { retainContextWhenHidden: true },
      }),
    );
    this.status.text = "$(sync~spin) Agent: starting";
    this.status.show();
  }

  async start() {
    const config = vscode.workspace.getConfiguration("agent-lsp");
    const checked = checkedSettings();
    warnAbout(checked);
    const serverOptions: ServerOptions = { command: serverBinary(checked), args: ["lsp"] };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file" }],
      initializationOptions: checked.settings,
      outputChannel: this.log,
    };
    const client = new LanguageClient("agent-lsp", "agent-lsp", serverOptions, clientOptions);
    client.registerFeature(new AgentFeature(config.get<boolean>("languageServers") ?? true));
    const intelligence = new LanguageIntelligence(client);
    this.context.subscriptions.push(intelligence);
    client.onRequest("agent/diagnostics", (params: Params<"agent/diagnostics">) => intelligence.diagnostics(params));
    client.onRequest("agent/lsp", (params: Params<"agent/lsp">) => intelligence.request(params));
    client.onNotification("agent/update", (params: Params<"agent/update">) => this.onUpdate(params));
    client.onRequest("agent/requestPermission", (params: Params<"agent/requestPermission">) =>
      this.approve(params),
    );
    client.onRequest("agent/question", (params: Params<"agent/question">) => this.questions(params));
    this.client = client;
    await client.start();
    await this.loadWork();
    this.refresh();
    void this.memory.refresh();
    const saved = this.context.workspaceState.get<string>(SESSION_KEY);
    if (saved) await this.resume(saved).catch(() => undefined);
  }

  /** The state file's focus and phase, for the chat view's bar. */
  async loadWork() {
    const work = await this.request("agent/state", {}).catch(() => undefined);
    this.state.focus = work?.focus ?? undefined;
    this.state.phase = work?.phase ?? undefined;
  }

  notRunning() {
    this.status.text = "$(error) Agent: not running";
    this.status.tooltip = "agent-lsp could not start: see the agent-lsp output";
  }

  /** Redraws the status bar and the chat view. */
  refresh() {
    this.status.text = statusText(this.state, this.waiting);
    this.status.tooltip = "agent-lsp: show the chat";
    this.view.render();
  }

  private onUpdate(params: UpdateParams) {
    if (!params?.update) return;
    if (!this.state.sessionId) this.setSession(params.sessionId);
    if (params.sessionId !== this.state.sessionId) return;
    applyUpdate(this.state, params.update);
    if (params.update.kind === "error") {
      vscode.window.showErrorMessage(`agent-lsp: ${params.update.message}`);
    }
    this.refresh();
  }

  private setSession(id: string) {
    this.state.sessionId = id;
    void this.context.workspaceState.update(SESSION_KEY, id);
  }

  async request<M extends Method>(method: M, params: Params<M>): Promise<Result<M>> {
    if (!this.client) throw new Error("agent-lsp is not running");
    return this.client.sendRequest(method, params);
  }

  /** Sends a prompt; `context` is the document and selection it is about. */
  async prompt(text: string, context?: PromptContext) {
    try {
      const reply = await this.request("agent/prompt", {
        text,
        sessionId: this.state.sessionId,
        context,
        mode: this.state.mode,
      });
      if (reply?.sessionId && reply.sessionId !== this.state.sessionId) {
        this.state = keepWork(emptyState(reply.sessionId), this.state);
        this.setSession(reply.sessionId);
        this.refresh();
      }
    } catch (e: any) {
      vscode.window.showErrorMessage(`agent-lsp: ${e?.message ?? e}`);
    }
  }

  /** "Agent: Ask…": an input box, with the editor's selection as context. */
  async ask(target?: PromptContext) {
    const editor = vscode.window.activeTextEditor;
    if (!target && editor && editor.document.uri.scheme === "file") {
      const sel = editor.selection;
      target = {
        uri: editor.document.uri.toString(),
        range: sel.isEmpty
          ? undefined
          : {
              start: { line: sel.start.line, character: sel.start.character },
              end: { line: sel.end.line, character: sel.end.character },
            },
      };
    }
    const text = await vscode.window.showInputBox({
      title: "Ask the agent",
      prompt: target?.range ? "About the selection" : undefined,
      ignoreFocusOut: true,
    });
    if (text) await this.prompt(text, target);
  }

  private async approve(req: PermissionParams): Promise<PermissionResult> {
    this.waiting++;
    this.refresh();
    try {
      const detail = [
        req.diff ?? (req.command ? `$ ${req.command}` : (req.url ?? "")),
      ].join("\n");
      for (;;) {
        const buttons = req.changes?.length ? [ALLOW_ONCE, ALWAYS, DENY, SHOW_DIFF] : [ALLOW_ONCE, ALWAYS, DENY];
        const choice = await vscode.window.showWarningMessage(
          `The agent wants to ${req.title}`,
          { modal: true, detail: detail.length > 4000 ? detail.slice(0, 4000) + "\n…" : detail },
          ...buttons,
        );
        if (choice === SHOW_DIFF) {
          for (const c of req.changes ?? []) {
            await this.showDiff({ uri: vscode.Uri.file(c.path).toString(), oldText: c.oldText, newText: c.newText }, "proposed");
          }
          continue;
        }
        if (choice === DENY) {
          const reason = await vscode.window.showInputBox({
            title: "Why not? (the agent reads this; empty stops the turn)",
            ignoreFocusOut: true,
          });
          return permissionReply(choice, reason);
        }
        return permissionReply(choice);
      }
    } finally {
      this.waiting--;
      this.refresh();
    }
  }

  private async questions(params: QuestionParams): Promise<QuestionResult> {
    const answers: string[][] = [];
    for (const q of params?.questions ?? []) {
      const picked = await vscode.window.showQuickPick(
        (q.options ?? []).map((o) => ({ label: o.label, description: o.description })),
        { title: q.question, canPickMany: !!q.multiple, ignoreFocusOut: true },
      );
      const list = Array.isArray(picked) ? picked : picked ? [picked] : [];
      answers.push(list.map((p) => p.label));
    }
    return { answers };
  }

  /** Opens an edit's before and after in the diff editor. */
  async showDiff(diff: Diff, label = "edit") {
    const path = vscode.Uri.parse(diff.uri).path;
    const left = this.diffs.put("before", path, diff.oldText ?? "");
    const right = this.diffs.put("after", path, diff.newText ?? "");
    const name = path.split("/").pop();
    // Not a preview editor: that would take the place of the user's preview tab.
    await vscode.commands.executeCommand("vscode.diff", left, right, `${name} (${label})`, {
      preview: false,
    });
  }

  async resume(sessionId: string) {
    const history = await this.request("agent/history", { sessionId });
    this.state = keepWork(fromHistory(history), this.state);
    this.setSession(sessionId);
    this.refresh();
  }

  private need(): string | undefined {
    if (!this.state.sessionId) {
      vscode.window.showWarningMessage("agent-lsp: no session yet — ask something first");
    }
    return this.state.sessionId;
  }

  async cancel() {
    const sid = this.need();
    if (sid) await this.request("agent/cancel", { sessionId: sid });
  }

  async revert(messageId: string) {
    const sid = this.need();
    if (!sid) return;
    try {
      const r = await this.request("agent/revert", { sessionId: sid, messageId });
      vscode.window.setStatusBarMessage(`agent-lsp: reverted ${r.files?.length ?? 0} file(s)`, 4000);
      warnNotRestored(r);
    } catch (e: any) {
      vscode.window.showErrorMessage(`agent-lsp: ${e?.message ?? e}`);
    }
  }

  async undo() {
    const sid = this.need();
    if (!sid) return;
    try {
      const r = await this.request("agent/undo", { sessionId: sid });
      this.view.setDraft(r.text ?? "");
      warnNotRestored(r);
    } catch (e: any) {
      vscode.window.showErrorMessage(`agent-lsp: ${e?.message ?? e}`);
    }
  }

  async redo() {
    const sid = this.need();
    if (!sid) return;
    try {
      await this.request("agent/redo", { sessionId: sid });
    } catch (e: any) {
      vscode.window.showErrorMessage(`agent-lsp: ${e?.message ?? e}`);
    }
  }

  async setMode(mode?: string) {
    mode ??= await vscode.window.showQuickPick(["build", "plan", "auto"], { title: "Agent mode" });
    if (!mode) return;
    this.state.mode = mode;
    if (this.state.sessionId) await this.request("agent/setMode", { sessionId: this.state.sessionId, mode });
    this.refresh();
  }

  /** "Agent: Search Journal…": a query, the entries that match, the one picked opened. */
  async searchJournal() {
    const query = await vscode.window.showInputBox({ title: "Search the journal", ignoreFocusOut: true });
    if (!query) return;
    try {
      const found = await this.request("agent/journal/search", { query });
      if (!found.hits.length) {
        vscode.window.showInformationMessage(`agent-lsp: no journal entry matches "${query}"`);
        return;
      }
      const pick = await vscode.window.showQuickPick(
        found.hits.map((hit) => ({ ...journalItem(hit), hit })),
        { title: `Journal: ${query}`, matchOnDescription: true, matchOnDetail: true },
      );
      if (pick) await vscode.window.showTextDocument(vscode.Uri.file(pick.hit.path));
    } catch (e: any) {
      vscode.window.showErrorMessage(`agent-lsp: ${e?.message ?? e}`);
    }
  }

  /** "Agent: Export Knowledge to AGENTS.md": the project's entries into its agents file,
   * which then opens (VS Code reloads an open, unmodified editor of it by itself). */
  async exportKnowledge() {
    try {
      const r = await this.request("agent/knowledge/export", {});
      vscode.window.showInformationMessage(exportSummary(r));
      await vscode.window.showTextDocument(vscode.Uri.file(r.file));
    } catch (e: any) {
      vscode.window.showErrorMessage(`agent-lsp: ${e?.message ?? e}`);
    }
  }

  /** "Agent: Check Setup": the settings checked and `agent-lsp doctor` with them, as a
   * markdown document, and a summary. */
  async checkSetup() {
    const checked = checkedSettings();
    const binary = serverBinary(checked);
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? homedir();
    const args = ["doctor", "--json", "--cwd", folder, "--settings", JSON.stringify(checked.settings)];
    let report: DoctorReport | undefined;
    let failure: string | undefined;
    try {
      report = JSON.parse(await runDoctor(binary, args));
    } catch (e: any) {
      failure = e?.message ?? String(e);
    }
    const running = this.client?.isRunning() ?? false;
    const r = setupReport({ binary, running, problems: checked.problems, report, failure });
    const doc = await vscode.workspace.openTextDocument({ language: "markdown", content: r.markdown });
    await vscode.window.showTextDocument(doc);
    if (r.ok) vscode.window.showInformationMessage(r.summary);
    else vscode.window.showWarningMessage(r.summary);
  }

  async pickSession() {
    const list = await this.request("agent/sessions", {});
    const pick = await vscode.window.showQuickPick(
      list.map((s) => ({ label: s.title || s.sessionId, description: s.status, id: s.sessionId })),
      { title: "Resume a session" },
    );
    if (pick) await this.resume(pick.id);
  }
}

let agent: Agent | undefined;

/** Names what a revert left as it was (changed since the turn, not in the snapshots). */
function warnNotRestored(r: RevertResult) {
  const left = r.notRestored ?? [];
  if (left.length === 0) return;
  const lines = left.map((u) => `${u.path}: ${u.reason}`);
  vscode.window.showWarningMessage(`agent-lsp: left as they are: ${lines.join("; ")}`);
}

function checkedSettings(): CheckedSettings {
  const config = vscode.workspace.getConfiguration("agent-lsp");
  return checkSettings((k) => config.get<string>(k), existsSync);
}

/** The server binary: agent-lsp.serverPath when it is valid, else `agent-lsp` from PATH. */
function serverBinary(checked: CheckedSettings): string {
  const path = vscode.workspace.getConfiguration("agent-lsp").get<string>("serverPath")?.trim();
  return path && !checked.problems.some((p) => p.startsWith("agent-lsp.serverPath")) ? path : "agent-lsp";
}

/** Says which settings are wrong (they are left out), with a way to them. */
function warnAbout(checked: CheckedSettings) {
  if (!checked.problems.length) return;
  void vscode.window
    .showWarningMessage(`agent-lsp: ${checked.problems.join(" ")}`, "Open Settings")
    .then((pick) => pick && vscode.commands.executeCommand("workbench.action.openSettings", "agent-lsp"));
}

/** `agent-lsp doctor` output: it exits 1 when a check failed, and still prints its report. */
function runDoctor(binary: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(binary, args, { timeout: 30_000, maxBuffer: 4 << 20 }, (err: any, stdout, stderr) => {
      if (stdout.trimStart().startsWith("{")) resolve(stdout);
      else if (err?.code === "ENOENT") reject(new Error("not found: set agent-lsp.serverPath or put agent-lsp on PATH"));
      else reject(new Error(stderr.trim() || String(err?.message ?? err)));
    }),
  );
}

export async function activate(context: vscode.ExtensionContext) {
  agent = new Agent(context);
  const a = agent;
  const command = (name: string, fn: (...args: any[]) => unknown) =>
    context.subscriptions.push(vscode.commands.registerCommand(name, fn));
  command("agent-lsp.ask", () => a.ask());
  // The server's "Agent: ask…" code action runs this with {uri, range}.
  command("agent.ask", (target?: PromptContext) => a.ask(target));
  command("agent-lsp.cancel", () => a.cancel());
  command("agent-lsp.undo", () => a.undo());
  command("agent-lsp.redo", () => a.redo());
  command("agent-lsp.setMode", (mode?: string) => a.setMode(mode));
  command("agent-lsp.sessions", () => a.pickSession());
  command("agent-lsp.journal", () => a.searchJournal());
  command("agent-lsp.exportKnowledge", () => a.exportKnowledge());
  command("agent-lsp.checkSetup", () => a.checkSetup());
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("agent-lsp")) warnAbout(checkedSettings());
    }),
  );
  command("agent-lsp.showChat", () => vscode.commands.executeCommand("agent-lsp.chat.focus"));
  command("agent-lsp.showMemory", async () => {
    await vscode.commands.executeCommand("agent-lsp.memory.focus");
    await a.memory.refresh();
  });
  await a.start().catch((e) => {
    a.notRunning();
    vscode.window.showErrorMessage(
      `agent-lsp could not start (${e?.message ?? e}); set agent-lsp.serverPath or put agent-lsp on PATH, and see Agent: Check Setup`,
    );
  });
}

export async function deactivate() {
  await agent?.client?.stop();
}
