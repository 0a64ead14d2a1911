import type { EditDiff, SessionHistory, SessionUpdate, Todo } from "./protocol";

// The chat as data: what `agent/update` notifications and `agent/history` make of it.
// Pure (no vscode import), so it is unit-tested in plain node and shared by the extension
// and the webview.

/** An edit's file before and after (the protocol's `EditDiff`). */
export type Diff = EditDiff;

export type Entry =
  | { kind: "user"; messageId?: string; text: string }
  | { kind: "text"; messageId?: string; text: string }
  | {
      kind: "tool";
      id: string;
      name: string;
      title: string;
      status: string;
      output?: string;
      diff?: Diff;
    }
  | { kind: "note"; text: string };

export interface ChatState {
  sessionId?: string;
  entries: Entry[];
  status: "idle" | "busy";
  /// The prompt a staged revert goes back to (its messages are shown reverted until the
  /// next prompt deletes them or a redo brings them back).
  revertedFrom?: string;
  mode?: string;
  /// The session state file's focus and phase (the workspace's, so they outlive a session).
  focus?: string;
  phase?: string;
}

export function emptyState(sessionId?: string): ChatState {
  return { sessionId, entries: [], status: "idle" };
}

/** `next` with the focus and phase of `previous` (they belong to the workspace). */
export function keepWork(next: ChatState, previous: ChatState): ChatState {
  next.focus = previous.focus;
  next.phase = previous.phase;
  return next;
}

/** The bar's line for the state file: "Focus: … · phase", or "" before a checkpoint. */
export function workText(state: ChatState): string {
  if (!state.focus) return "";
  return `Focus: ${state.focus}${state.phase ? ` · ${state.phase}` : ""}`;
}

function toolEntry(state: ChatState, id: string, name: string) {
  let e = state.entries.find((x) => x.kind === "tool" && x.id === id);
  if (!e) {
    e = { kind: "tool", id, name, title: name, status: "pending" };
    state.entries.push(e);
  }
  return e as Extract<Entry, { kind: "tool" }>;
}

/** Applies one `agent/update` payload (the `update` field); returns the same state. */
export function applyUpdate(state: ChatState, u: SessionUpdate): ChatState {
  switch (u.kind) {
    case "user_message": {
      if (state.revertedFrom) {
        // The server deleted the reverted messages when this prompt arrived.
        const at = state.entries.findIndex(
          (e) => e.kind === "user" && e.messageId === state.revertedFrom,
        );
        if (at >= 0) state.entries.splice(at);
        state.revertedFrom = undefined;
      }
      state.entries.push({ kind: "user", messageId: u.messageId, text: u.text ?? "" });
      break;
    }
    case "message_chunk": {
      const last = state.entries[state.entries.length - 1];
      if (last && last.kind === "text" && last.messageId === u.messageId) {
        last.text += u.text ?? "";
      } else {
        state.entries.push({ kind: "text", messageId: u.messageId, text: u.text ?? "" });
      }
      break;
    }
    case "tool_call": {
      const e = toolEntry(state, u.toolCallId, u.name);
      e.title = u.title || u.name;
      e.status = u.status;
      break;
    }
    case "tool_call_update": {
      const e = toolEntry(state, u.toolCallId, u.name);
      e.status = u.status;
      if (u.title) e.title = u.title.startsWith(e.name) ? u.title : `${e.name} ${u.title}`;
      e.output = u.output;
      if (u.diff && typeof u.diff === "object") e.diff = u.diff;
      break;
    }
    case "status":
      state.status = u.status === "busy" ? "busy" : "idle";
      if (u.status === "idle" && u.stopReason && u.stopReason !== "end_turn") {
        state.entries.push({ kind: "note", text: `Turn ended: ${u.stopReason}` });
      }
      break;
    case "error":
      state.entries.push({ kind: "note", text: `Error: ${u.message ?? ""}` });
      break;
    case "revert":
      state.revertedFrom = u.messageId ?? undefined;
      state.entries.push({
        kind: "note",
        text: u.messageId
          ? `Reverted ${u.files?.length ?? 0} file(s)`
          : `Restored ${u.files?.length ?? 0} file(s)`,
      });
      break;
    case "state":
      state.focus = u.focus ?? undefined;
      state.phase = u.phase ?? undefined;
      break;
    case "plan": {
      const lines = (u.todos ?? []).map(
        (t: Todo) =>
          `- [${t.status === "completed" ? "x" : " "}] ${t.content}${t.status === "in_progress" ? " (in progress)" : ""}`,
      );
      state.entries.push({ kind: "note", text: ["Plan:", ...lines].join("\n") });
      break;
    }
  }
  return state;
}

/** The chat of a stored session (`agent/history`). */
export function fromHistory(history: SessionHistory): ChatState {
  const state = emptyState(history.sessionId);
  state.status = history.running ? "busy" : "idle";
  state.mode = history.mode ?? undefined;
  state.revertedFrom = history.revert?.messageId ?? undefined;
  for (const m of history.messages) {
    for (const p of m.parts) {
      // A part's data is free-form JSON; these are the fields text and tool parts carry.
      const data = (p.data ?? {}) as {
        text?: string;
        callId?: string;
        name?: string;
        title?: unknown;
        output?: unknown;
      };
      if (p.kind === "text") {
        state.entries.push({
          kind: m.role === "user" ? "user" : "text",
          messageId: m.messageId,
          text: data.text ?? "",
        });
      } else if (p.kind === "tool") {
        const e = toolEntry(state, data.callId ?? "", data.name ?? "tool");
        e.status = p.status ?? e.status;
        if (typeof data.title === "string" && data.title) {
          e.title = data.title.startsWith(e.name) ? data.title : `${e.name} ${data.title}`;
        }
        if (typeof data.output === "string") e.output = data.output;
      }
    }
  }
  return state;
}

/** The status bar text. */
export function statusText(state: ChatState, waiting: number): string {
  if (waiting > 0) return "$(bell) Agent: approval needed";
  if (state.status === "busy") return "$(sync~spin) Agent: working";
  return "$(comment-discussion) Agent";
}

/** The reply to `agent/requestPermission` for a button of the approval dialog. */
export function permissionReply(
  choice: string | undefined,
  reason?: string,
): { outcome: "once" | "always" | "reject"; message?: string } {
  switch (choice) {
    case ALLOW_ONCE:
      return { outcome: "once" };
    case ALWAYS:
      return { outcome: "always" };
    default:
      return reason ? { outcome: "reject", message: reason } : { outcome: "reject" };
  }
}

export const ALLOW_ONCE = "Allow once";
export const ALWAYS = "Always allow";
export const DENY = "Deny…";
export const SHOW_DIFF = "Show diff";
