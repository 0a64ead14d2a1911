-- End to end in headless Neovim: the plugin against the real server and fake-llm (started
-- by tests/tests/neovim.rs, which passes AGENT_LSP_BIN and AGENT_LSP_TEST_FILE). The exit
-- code is the verdict; the steps print as they pass.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")
local fail, step, eq, contains = H.fail, H.step, H.eq, H.contains

--- Waits (processing events) until `cond()` is true; a timeout shows the chat.
local function wait(what, cond, ms)
  H.wait(what, cond, ms, function()
    local chat = package.loaded["agent_lsp.chat"]
    return chat and ("\n--- chat\n" .. chat.text()) or ""
  end)
end

local function approval_win()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local buf = vim.api.nvim_win_get_buf(win)
    if vim.b[buf].agent_lsp_approval then
      return win, buf
    end
  end
end

local function run()
  local file = assert(os.getenv("AGENT_LSP_TEST_FILE"))
  vim.cmd("runtime plugin/agent_lsp.lua")
  local agent = require("agent_lsp")
  local chat = require("agent_lsp.chat")
  agent.setup({ cmd = { assert(os.getenv("AGENT_LSP_BIN")), "lsp" } })
  vim.cmd.edit(vim.fn.fnameescape(file))
  local src = vim.api.nvim_get_current_buf()
  local src_win = vim.api.nvim_get_current_win()
  local line2 = function()
    return vim.api.nvim_buf_get_lines(src, 1, 2, false)[1]
  end
  wait("the client to start", function()
    local c = agent.client()
    return c ~= nil and c.initialized
  end)
  step("the server starts for a file buffer")

  -- A prompt; the edit needs approval, given with the float's key.
  vim.cmd("Agent make the answer 42")
  wait("the approval window", function()
    return approval_win() ~= nil
  end)
  local win, buf = approval_win()
  eq(win, vim.api.nvim_get_current_win(), "the approval window has the focus")
  contains(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n"), "+    42", "the float shows the diff")
  eq("agent: waiting for you", agent.status(), "status line while an approval waits")
  step("the approval float shows the diff")
  vim.api.nvim_feedkeys("o", "x", false)
  wait("the edit in the buffer", function()
    return line2() == "    42"
  end)
  eq(src_win, vim.api.nvim_get_current_win(), "focus back in the source window")
  step("allow once: the edit arrives in the buffer")
  wait("the end of the turn", function()
    return agent.state.status == "idle" and chat.text():find("The answer is now 42.", 1, true) ~= nil
  end)
  eq("", agent.status(), "status line when idle")
  local text = chat.text()
  contains(text, "## You", "chat")
  contains(text, "make the answer 42", "chat")
  contains(text, "Fixing it.", "chat shows the streamed text")
  contains(text, "▸ ✓ edit", "chat shows the tool call with its status")
  -- The tool's details are folded under its line.
  local chat_win = vim.fn.win_findbuf(chat.buffer())[1]
  assert(chat_win, "the chat window is open")
  local function rendered()
    return table.concat(vim.api.nvim_buf_get_lines(chat.buffer(), 0, -1, false), "\n")
  end
  wait("the chat buffer to show the turn", function()
    return rendered():find("The answer is now 42.", 1, true) ~= nil
  end)
  vim.api.nvim_win_call(chat_win, function()
    local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
    for i, l in ipairs(lines) do
      if l:sub(1, 6) == "  │ " then
        eq(true, vim.fn.foldclosed(i) ~= -1, "tool details are folded")
        return
      end
    end
    fail("no tool detail lines in the chat:\n" .. table.concat(lines, "\n"))
  end)
  step("the chat shows the streamed answer and a folded tool call")

  -- Neovim's own undo takes the agent's edit back, and redo brings it again.
  vim.api.nvim_set_current_win(src_win)
  vim.cmd("normal! u")
  eq("    41", line2(), "after u")
  vim.cmd("exe \"normal! \\<C-r>\"")
  eq("    42", line2(), "after <C-r>")
  step("u and <C-r> undo and redo the edit in Neovim's undo")

  -- :AgentUndo reverts the whole turn and puts the prompt back in the input.
  local offered
  vim.ui.input = function(opts, on_confirm)
    offered = opts.default
    on_confirm(nil)
  end
  vim.cmd("AgentUndo")
  wait("the turn reverted", function()
    return line2() == "    41" and offered ~= nil
  end)
  eq("make the answer 42", offered, "the undone prompt is offered again")
  step(":AgentUndo reverts the turn and offers its prompt")
  vim.cmd("AgentRedo")
  wait("the turn back", function()
    return line2() == "    42"
  end)
  step(":AgentRedo brings it back")

  -- A selection as context; a command denied with a reason the model reads.
  vim.ui.input = function(_, on_confirm)
    on_confirm("not now, the build is slow")
  end
  vim.cmd("1,3Agent run the tests")
  wait("the bash approval", function()
    return approval_win() ~= nil
  end)
  local _, bash_buf = approval_win()
  contains(table.concat(vim.api.nvim_buf_get_lines(bash_buf, 0, -1, false), "\n"), "$ cargo test", "the float shows the command")
  vim.api.nvim_feedkeys("d", "x", false)
  wait("the answer to the refusal", function()
    return agent.state.status == "idle" and chat.text():find("Understood", 1, true) ~= nil
  end)
  step("deny with a reason: the model reads it")

  -- :AgentState opens the state file the agent keeps; it reloads when the agent changes it.
  vim.cmd("Agent record where we are")
  wait("the first checkpoint", function()
    return agent.state.status == "idle" and agent.state.phase == "testing"
  end)
  vim.cmd("AgentState")
  local state_buf
  wait("the state file in a buffer", function()
    state_buf = vim.api.nvim_get_current_buf()
    return vim.api.nvim_buf_get_name(state_buf):find("STATE.md", 1, true) ~= nil
  end)
  local function state_text()
    return table.concat(vim.api.nvim_buf_get_lines(state_buf, 0, -1, false), "\n")
  end
  contains(state_text(), "- Focus: the answer function", "STATE.md")
  contains(state_text(), "- Phase: testing", "STATE.md")
  step(":AgentState opens the session state")
  vim.cmd("Agent we are done")
  wait("the state buffer to reload", function()
    return state_text():find("- Phase: done", 1, true) ~= nil
  end)
  eq("done", agent.state.phase, "the phase from the state update")
  step("the state buffer reloads when the agent checkpoints")
  vim.cmd.buffer(src)

  -- :AgentSessions resumes a session from its history.
  vim.ui.select = function(items, _, on_choice)
    on_choice(items[1])
  end
  chat.reset()
  vim.cmd("AgentSessions")
  wait("the history in the chat", function()
    return chat.text():find("make the answer 42", 1, true) ~= nil
  end)
  contains(chat.text(), "run the tests", "history")
  step(":AgentSessions loads the history")

  -- The server's code actions come through vim.lsp as usual; "Agent: ask…" runs the
  -- plugin's own command (an input box, the selection as context).
  vim.api.nvim_set_current_win(src_win)
  local client = agent.client()
  local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.range = { start = { line = 0, character = 0 }, ["end"] = { line = 2, character = 0 } }
  params.context = { diagnostics = {} }
  local replies = vim.lsp.buf_request_sync(src, "textDocument/codeAction", params, 5000) or {}
  local titles, ask = {}, nil
  for _, r in pairs(replies) do
    for _, a in ipairs(r.result or {}) do
      table.insert(titles, a.title)
      if a.command and a.command.command == "agent.ask" then
        ask = a.command
      end
    end
  end
  contains(table.concat(titles, "\n"), "Agent: explain this", "code actions")
  assert(ask, "an Agent: ask… action:\n" .. table.concat(titles, "\n"))
  local asked
  vim.ui.input = function(_, on_confirm)
    asked = true
    on_confirm(nil)
  end
  vim.lsp.commands["agent.ask"](ask, { client_id = client.id, bufnr = src })
  eq(true, asked, "agent.ask opens the input box")
  step("the server's code actions, and Agent: ask… through the plugin")

  vim.cmd("AgentMode plan")
  eq("plan", agent.state.mode, "mode")
  step(":AgentMode sets the mode")
end

H.run(run)
io.stdout:write("all passed\n")
io.stdout:flush()
os.exit(0)
