// The chat view in the side bar: a webview that draws the chat state it is sent and posts
// back what the user does (prompt, revert, redo, cancel, mode, open a diff). State goes over
// at most every RENDER_MS, so a fast stream costs a few messages a second.

import * as vscode from "vscode";
import type { ChatState, Diff } from "./model";

const RENDER_MS = 50;

export interface ChatHost {
  state: ChatState;
  prompt(text: string): Promise<void>;
  revert(messageId: string): Promise<void>;
  redo(): Promise<void>;
  cancel(): Promise<void>;
  setMode(mode?: string): Promise<void>;
  showDiff(diff: Diff): Promise<void>;
}

export class ChatView implements vscode.WebviewViewProvider {
  static readonly id = "agent-lsp.chat";
  private view: vscode.WebviewView | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private draft: string | undefined;

  constructor(
    private extensionUri: vscode.Uri,
    private host: ChatHost,
  ) {}

  resolveWebviewView(view: vscode.WebviewView) {
    this.view = view;
    const dist = vscode.Uri.joinPath(this.extensionUri, "dist");
    view.webview.options = { enableScripts: true, localResourceRoots: [dist] };
    const script = view.webview.asWebviewUri(vscode.Uri.joinPath(dist, "chat.js"));
    const style = view.webview.asWebviewUri(vscode.Uri.joinPath(dist, "chat.css"));
    const nonce = Math.random().toString(36).slice(2);
    view.webview.html = `<!DOCTYPE html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${view.webview.cspSource}; script-src 'nonce-${nonce}';">
<link rel="stylesheet" href="${style}"></head>
<body><div id="bar"><select id="mode" title="Mode"><option value="">mode…</option><option>build</option><option>plan</option><option>auto</option></select>
<button id="redo" title="Bring back what was reverted">Redo</button><button id="cancel" title="Stop the turn">Cancel</button><span id="status"></span><div id="work" title="The session state file (STATE.md)"></div></div>
<div id="log"></div>
<form id="ask"><textarea id="input" rows="3" placeholder="Ask the agent (Ctrl+Enter sends)"></textarea><button id="send" type="submit">Send</button></form>
<script nonce="${nonce}" src="${script}"></script></body></html>`;
    view.webview.onDidReceiveMessage(async (m) => {
      switch (m?.type) {
        case "ready":
          this.post();
          if (this.draft !== undefined) this.setDraft(this.draft);
          break;
        case "prompt":
          await this.host.prompt(m.text);
          break;
        case "revert":
          await this.host.revert(m.messageId);
          break;
        case "redo":
          await this.host.redo();
          break;
        case "cancel":
          await this.host.cancel();
          break;
        case "mode":
          await this.host.setMode(m.mode);
          break;
        case "diff": {
          const e = this.host.state.entries[m.index];
          if (e?.kind === "tool" && e.diff) await this.host.showDiff(e.diff);
          break;
        }
      }
    });
  }

  /** Sends the state soon (one message per batch). */
  render() {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.post();
    }, RENDER_MS);
  }

  private post() {
    void this.view?.webview.postMessage({ type: "state", state: this.host.state });
  }

  /** Puts text in the input box (an undone prompt, to edit and send again). */
  setDraft(text: string) {
    this.draft = text;
    void vscode.commands.executeCommand("agent-lsp.chat.focus");
    void this.view?.webview.postMessage({ type: "draft", text });
  }
}
