// The chat webview: draws the state the extension sends; posts back the user's actions.
import MarkdownIt from "markdown-it";
import { type ChatState, type Entry, workText } from "../src/model";

declare function acquireVsCodeApi(): { postMessage(m: unknown): void };
const vscode = acquireVsCodeApi();
const md = new MarkdownIt({ html: false, linkify: true });
const $ = (id: string) => document.getElementById(id)!;
const ICON: Record<string, string> = { pending: "…", running: "⟳", completed: "✓", failed: "✗" };

function entry(e: Entry, index: number, state: ChatState): HTMLElement {
  const div = document.createElement("div");
  div.className = `entry ${e.kind}`;
  if (e.kind === "user") {
    div.innerHTML = `<div class="who">You</div>${md.render(e.text)}`;
    if (e.messageId && state.status === "idle") {
      const b = document.createElement("button");
      b.textContent = "Revert";
      b.className = "revert";
      b.title = "Revert the files to before this prompt";
      b.onclick = () => vscode.postMessage({ type: "revert", messageId: e.messageId });
      div.prepend(b);
    }
  } else if (e.kind === "text") {
    div.innerHTML = md.render(e.text);
  } else if (e.kind === "tool") {
    const head = document.createElement("div");
    head.className = `tool-head ${e.status}`;
    head.textContent = `${ICON[e.status] ?? e.status} ${e.title}`;
    div.append(head);
    if (e.diff) {
      const b = document.createElement("button");
      b.textContent = "Diff";
      b.onclick = () => vscode.postMessage({ type: "diff", index });
      head.append(" ", b);
    }
    if (e.output) {
      const d = document.createElement("details");
      const s = document.createElement("summary");
      s.textContent = "output";
      const pre = document.createElement("pre");
      pre.textContent = e.output;
      d.append(s, pre);
      div.append(d);
    }
  } else {
    div.innerHTML = md.render(e.text);
  }
  return div;
}

function draw(state: ChatState) {
  const log = $("log");
  const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 20;
  let reverted = false;
  const nodes = state.entries.map((e, i) => {
    if (e.kind === "user" && e.messageId === state.revertedFrom) reverted = true;
    const n = entry(e, i, state);
    if (reverted && e.kind !== "note") n.classList.add("reverted");
    return n;
  });
  log.replaceChildren(...nodes);
  if (atEnd) log.scrollTop = log.scrollHeight;
  $("status").textContent = state.status === "busy" ? "working…" : "";
  ($("cancel") as HTMLButtonElement).hidden = state.status !== "busy";
  ($("redo") as HTMLButtonElement).hidden = !state.revertedFrom;
  ($("mode") as HTMLSelectElement).value = state.mode ?? "";
  $("work").textContent = workText(state);
}

window.addEventListener("message", (ev) => {
  const m = ev.data;
  if (m?.type === "state") draw(m.state);
  if (m?.type === "draft") {
    const input = $("input") as HTMLTextAreaElement;
    input.value = m.text;
    input.focus();
  }
});

function send() {
  const input = $("input") as HTMLTextAreaElement;
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  vscode.postMessage({ type: "prompt", text });
}
$("ask").addEventListener("submit", (ev) => {
  ev.preventDefault();
  send();
});
$("input").addEventListener("keydown", (ev) => {
  const k = ev as KeyboardEvent;
  if (k.key === "Enter" && (k.ctrlKey || k.metaKey)) {
    ev.preventDefault();
    send();
  }
});
$("redo").addEventListener("click", () => vscode.postMessage({ type: "redo" }));
$("cancel").addEventListener("click", () => vscode.postMessage({ type: "cancel" }));
$("mode").addEventListener("change", (ev) => {
  const mode = (ev.target as HTMLSelectElement).value;
  if (mode) vscode.postMessage({ type: "mode", mode });
});
vscode.postMessage({ type: "ready" });
