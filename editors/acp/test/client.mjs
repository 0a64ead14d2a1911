// `agent-lsp acp` driven by the official ACP TypeScript SDK as a client, every message the
// agent sends checked against the JSON schema shipped in the SDK. Started by
// tests/tests/acp.rs, which runs the fake model and passes (env) AGENT_LSP_BIN and WORKSPACE
// and checks what reached the model. Exit code 0 is a pass; steps print.

import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import Ajv2020 from "ajv/dist/2020.js";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const BIN = env("AGENT_LSP_BIN");
const WORKSPACE = env("WORKSPACE");
const step = (name) => console.log(`ok - ${name}`);
const fail = (msg) => {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
};
setTimeout(() => fail("the whole test took over 2 minutes"), 120_000).unref();

// The schema: every message is checked against the whole protocol, and params and results
// against the type of their method.
// (The package exports no path to it; it sits in the package's folder.)
const schemaPath = new URL("../node_modules/@agentclientprotocol/sdk/schema/v1/schema.json", import.meta.url);
const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
ajv.addSchema(schema, "acp");
const check = (ref, value, what) => {
  const validate = ajv.getSchema(`acp${ref}`);
  if (!validate(value)) fail(`${what} does not match ${ref}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`);
};
const PARAMS = {
  "session/update": "SessionNotification",
  "session/request_permission": "RequestPermissionRequest",
  "fs/write_text_file": "WriteTextFileRequest",
  "fs/read_text_file": "ReadTextFileRequest",
};
const RESULTS = {
  initialize: "InitializeResponse",
  "session/new": "NewSessionResponse",
  "session/load": "LoadSessionResponse",
  "session/prompt": "PromptResponse",
  "session/set_mode": "SetSessionModeResponse",
};

/** Starts the agent; returns the SDK stream (with every message checked) and the raw log. */
function startAgent() {
  const child = spawn(BIN, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
  const sent = new Map(); // our request ids → methods
  const raw = []; // every message from the agent, parsed
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const readable = stream.readable.pipeThrough(
    new TransformStream({
      transform(msg, controller) {
        raw.push(msg);
        check("#", msg, "a message from the agent");
        if (msg.method && PARAMS[msg.method]) check(`#/$defs/${PARAMS[msg.method]}`, msg.params, msg.method);
        if ("id" in msg && !msg.method && sent.has(msg.id) && msg.result !== undefined) {
          const method = sent.get(msg.id);
          if (RESULTS[method]) check(`#/$defs/${RESULTS[method]}`, msg.result, `the answer to ${method}`);
        }
        // A parse error names no request (id null): it is for the raw write below, not the SDK.
        if (msg.id === null) return;
        controller.enqueue(msg);
      },
    }),
  );
  const writable = new WritableStream({
    async write(msg) {
      if (msg.method && "id" in msg) sent.set(msg.id, msg.method);
      const w = stream.writable.getWriter();
      await w.write(msg);
      w.releaseLock();
    },
  });
  return { child, raw, stream: { readable, writable } };
}

/** A client app that records updates, answers permission asks with `decide`, and writes
 * files asked of it through fs/write_text_file. */
function clientApp(state) {
  return acp
    .client({ name: "agent-lsp-test" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      state.updates.push(params);
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
      state.asks.push(params);
      return state.decide(params);
    })
    .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
      state.reads.push(params);
      // The editor's buffer of lib.rs holds a line not saved yet.
      const disk = readFileSync(params.path, "utf8");
      return { content: params.path === lib ? `${disk}// not saved yet\n` : disk };
    })
    .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
      state.writes.push(params);
      mkdirSync(dirname(params.path), { recursive: true });
      writeFileSync(params.path, params.content);
      return {};
    });
}

const updatesOf = (state, kind) => state.updates.map((u) => u.update).filter((u) => u.sessionUpdate === kind);
const wait = async (what, cond, ms = 20_000) => {
  for (let t = 0; t < ms; t += 50) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  fail(`timed out waiting for ${what}`);
};

const lib = join(WORKSPACE, "src/lib.rs");
let sessionId;

// The first process: initialize, a session, a prompt with an edit that asks permission and
// is written through the client, set_mode, a cancel while a permission ask waits, /undo,
// and a malformed line.
{
  const state = { updates: [], asks: [], reads: [], writes: [], decide: () => ({ outcome: { outcome: "selected", optionId: "allow_once" } }) };
  const agent = startAgent();
  await clientApp(state).connectWith(agent.stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
      clientInfo: { name: "agent-lsp-test", version: "1" },
    });
    if (init.protocolVersion !== 1 || !init.agentCapabilities?.loadSession) fail(`initialize: ${JSON.stringify(init)}`);
    if (!init.agentCapabilities.promptCapabilities?.embeddedContext) fail("embedded context not advertised");
    if (!init.agentCapabilities.mcpCapabilities?.http) fail("MCP over HTTP not advertised");
    if (!init.agentCapabilities.mcpCapabilities?.sse) fail("MCP over HTTP+SSE not advertised");
    step("initialize: protocol 1, loadSession and embedded context advertised");

    const created = await ctx.request(acp.methods.agent.session.new, { cwd: WORKSPACE, mcpServers: [] });
    sessionId = created.sessionId;
    const modes = created.modes?.availableModes?.map((m) => m.id).join(",");
    if (modes !== "build,plan,auto" || created.modes.currentModeId !== "build") fail(`modes: ${JSON.stringify(created.modes)}`);
    await wait("the slash commands", () => updatesOf(state, "available_commands_update").length > 0);
    const commands = updatesOf(state, "available_commands_update")[0].availableCommands.map((c) => c.name).join(",");
    if (commands !== "undo,redo") fail(`commands: ${commands}`);
    step("session/new: our modes as session modes, /undo and /redo as commands");

    const answer = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [
        { type: "text", text: "change the answer to 42" },
        { type: "resource_link", name: "lib.rs", uri: `file://${lib}` },
      ],
    });
    if (answer.stopReason !== "end_turn") fail(`stop reason: ${answer.stopReason}`);
    if (state.asks.length !== 1 || !state.asks[0].options.some((o) => o.kind === "allow_always")) {
      fail(`one permission ask with the four options: ${JSON.stringify(state.asks)}`);
    }
    if (!state.reads.some((r) => r.path === lib)) fail(`lib.rs was read through fs/read_text_file: ${JSON.stringify(state.reads)}`);
    const written = state.writes[0];
    if (state.writes.length !== 1 || written.path !== lib || !written.content.includes("    42\n}\n// not saved yet")) {
      fail(`the edit, made on the unsaved buffer, went through fs/write_text_file: ${JSON.stringify(state.writes)}`);
    }
    const call = updatesOf(state, "tool_call").find((u) => u.kind === "edit");
    if (!call || call.title !== "edit src/lib.rs" || call.locations?.[0]?.path !== lib) fail(`tool_call: ${JSON.stringify(call)}`);
    const done = updatesOf(state, "tool_call_update").find((u) => u.toolCallId === call.toolCallId && u.status === "completed");
    if (!done?.content?.some((c) => c.type === "diff" && c.newText.includes("42") && c.oldText.includes("41"))) {
      fail(`the completed edit with its diff: ${JSON.stringify(done)}`);
    }
    const text = updatesOf(state, "agent_message_chunk").map((u) => u.content.text).join("");
    if (!text.includes("The answer is now 42.")) fail(`streamed text: ${text}`);
    const thought = updatesOf(state, "agent_thought_chunk").map((u) => u.content.text).join("");
    if (!thought.includes("The edit went through; say so.")) fail(`reasoning: ${thought}`);
    const plan = updatesOf(state, "plan").at(-1);
    const entries = plan?.entries?.map((e) => `${e.content}|${e.status}|${e.priority}`).join(",");
    if (entries !== "Change the answer|in_progress|high,Run the tests|pending|medium") fail(`plan: ${entries}`);
    step("session/prompt: a tool call with a permission ask, the edit made on the client's unsaved buffer and written through its fs, the diff, the plan, the reasoning, the streamed answer, end_turn");

    await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "auto" });
    await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "yolo" }).then(
      () => fail("an unknown mode was accepted"),
      (e) => {
        if (!String(e?.message).includes("unknown mode")) fail(`the unknown mode's error: ${e?.message}`);
      },
    );
    await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "build" });
    step("session/set_mode: a known mode is set, an unknown one is a clear error");

    // A file the agent creates goes through the client's fs too, like any write.
    await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "auto" });
    const made = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "make a notes file" }],
    });
    if (made.stopReason !== "end_turn") fail(`stop reason: ${made.stopReason}`);
    const newFile = join(WORKSPACE, "notes/new.txt");
    const createdWrite = state.writes.find((w) => w.path === newFile);
    if (createdWrite?.content !== "made by the agent\n") {
      fail(`the new file went through fs/write_text_file: ${JSON.stringify(state.writes)}`);
    }
    await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "build" });
    step("a new file is created through fs/write_text_file too");

    // A cancel while the permission ask waits: the client answers the ask `cancelled`, as
    // ACP says it must, and the prompt answers `cancelled`.
    let askSeen;
    const asked = new Promise((r) => (askSeen = r));
    state.decide = async () => {
      askSeen();
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      return { outcome: { outcome: "cancelled" } };
    };
    const slow = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "run the slow tests" }],
    });
    await asked;
    if (slow.stopReason !== "cancelled") fail(`stop reason after cancel: ${slow.stopReason}`);
    step("session/cancel while a permission ask waits: the prompt answers cancelled");

    // A malformed line: a clear JSON-RPC error, and the agent keeps serving.
    agent.child.stdin.write("this is not json\n");
    await wait("the parse error", () => agent.raw.some((m) => m.id === null && m.error?.code === -32700));
    const undo = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "/undo" }] });
    if (undo.stopReason !== "end_turn") fail(`/undo: ${undo.stopReason}`);
    step("a malformed line gets a parse error and the agent keeps serving");

    const said = updatesOf(state, "agent_message_chunk").map((u) => u.content.text).join("");
    if (!said.includes("Undid the last turn")) fail(`/undo's answer: ${said}`);
    step("/undo reverts the last turn and says so");

    // A session with the client's own MCP server (a real one from npm): its tool reaches
    // the model and runs.
    state.decide = () => ({ outcome: { outcome: "selected", optionId: "allow_once" } });
    const withMcp = await ctx.request(acp.methods.agent.session.new, {
      cwd: WORKSPACE,
      mcpServers: [{ name: "everything", command: process.execPath, args: [env("MCP_EVERYTHING"), "stdio"], env: [] }],
    });
    const echoed = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: withMcp.sessionId,
      prompt: [{ type: "text", text: "echo through the client's server" }],
    });
    if (echoed.stopReason !== "end_turn") fail(`the MCP prompt: ${echoed.stopReason}`);
    const mcpCall = updatesOf(state, "tool_call").find((u) => u.rawInput?.message === "via acp");
    const mcpDone = updatesOf(state, "tool_call_update").find((u) => u.toolCallId === mcpCall?.toolCallId && u.status === "completed");
    if (!mcpDone?.content?.some((c) => c.content?.text === "Echo: via acp")) fail(`the MCP tool's result: ${JSON.stringify(mcpDone)}`);
    if (!state.asks.at(-1)?.toolCall?.title?.includes("MCP server everything")) fail(`the ask names the server: ${JSON.stringify(state.asks.at(-1))}`);
    step("session/new with the client's MCP server: its tool is asked for, runs and answers");

    // A rejection with the user's reason (`_meta.reason`): the model reads it, the turn goes on.
    state.decide = () => ({ outcome: { outcome: "selected", optionId: "reject_once", _meta: { reason: "not on a Friday" } } });
    const rejected = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: withMcp.sessionId,
      prompt: [{ type: "text", text: "deploy it" }],
    });
    if (rejected.stopReason !== "end_turn") fail(`the rejected prompt: ${rejected.stopReason}`);
    const deploy = updatesOf(state, "tool_call").find((u) => u.rawInput?.command === "./deploy.sh");
    const deployDone = updatesOf(state, "tool_call_update").find((u) => u.toolCallId === deploy?.toolCallId && u.status === "failed");
    if (!JSON.stringify(deployDone?.content ?? []).includes("not on a Friday")) fail(`the rejected call: ${JSON.stringify(deployDone)}`);
    step("session/request_permission: reject_once with a reason, the model reads it and the turn goes on");

    // The provider refuses (OpenAI's content_filter): the prompt ends as `refusal`.
    const refused = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: withMcp.sessionId,
      prompt: [{ type: "text", text: "something the filter stops" }],
    });
    if (refused.stopReason !== "refusal") fail(`the refused prompt: ${refused.stopReason}`);
    step("session/prompt: a provider's refusal ends the prompt as refusal");
  });
  agent.child.kill();
}

// A fresh process: session/load replays the whole history, then answers.
{
  const state = { updates: [], asks: [], reads: [], writes: [], decide: () => ({ outcome: { outcome: "cancelled" } }) };
  const agent = startAgent();
  await clientApp(state).connectWith(agent.stream, async (ctx) => {
    await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
    const loaded = await ctx.request(acp.methods.agent.session.load, { sessionId, cwd: WORKSPACE, mcpServers: [] });
    if (loaded.modes?.currentModeId !== "build") fail(`load's modes: ${JSON.stringify(loaded.modes)}`);
    const user = updatesOf(state, "user_message_chunk").map((u) => u.content.text).join("\n");
    if (!user.includes("change the answer to 42") || !user.includes("run the slow tests")) fail(`replayed prompts: ${user}`);
    const call = updatesOf(state, "tool_call").find((u) => u.kind === "edit");
    const result = updatesOf(state, "tool_call_update").find((u) => u.toolCallId === call?.toolCallId);
    if (call?.status !== "completed" || result?.status !== "completed") fail(`replayed edit: ${JSON.stringify([call, result])}`);
    const text = updatesOf(state, "agent_message_chunk").map((u) => u.content.text).join("");
    if (!text.includes("The answer is now 42.")) fail(`replayed answer: ${text}`);
    step("session/load in a fresh process replays prompts, tool calls with their final state, and answers");

    await ctx.request(acp.methods.agent.session.load, { sessionId: "no-such-session", cwd: WORKSPACE, mcpServers: [] }).then(
      () => fail("a missing session loaded"),
      (e) => {
        if (!String(e?.message).includes("no session")) fail(`the missing session's error: ${e?.message}`);
      },
    );
    step("session/load of a missing session is a clear error");
  });
  agent.child.kill();
}

console.log("all passed");
process.exit(0);
