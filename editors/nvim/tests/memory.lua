-- The memory inspector end to end in headless Neovim, against the real server (started by
-- tests/tests/neovim.rs, which seeds the facts and checks the store afterwards). The exit
-- code is the verdict; the steps print as they pass.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")
local fail, step, contains = H.fail, H.step, H.contains

local function text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
end

local function wait(what, cond)
  H.wait(what, cond, nil, function()
    return "\n--- buffer\n" .. text(0)
  end)
end

--- Puts the cursor on the line that holds `needle`.
local function cursor_on(buf, needle)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if l:find(needle, 1, true) then
      vim.api.nvim_win_set_cursor(0, { i, 0 })
      return
    end
  end
  fail(("no line with %q:\n%s"):format(needle, text(buf)))
end

local function run()
  vim.cmd("runtime plugin/agent_lsp.lua")
  local agent = require("agent_lsp")
  local memory = require("agent_lsp.memory")
  agent.setup({ cmd = { assert(os.getenv("AGENT_LSP_BIN")), "lsp" } })
  vim.cmd.edit(vim.fn.fnameescape(assert(os.getenv("AGENT_LSP_TEST_FILE"))))
  wait("the client to start", function()
    local c = agent.client()
    return c ~= nil and c.initialized
  end)

  vim.cmd("AgentMemory")
  local buf = vim.api.nvim_get_current_buf()
  wait("the facts", function()
    return text(buf):find("## Core", 1, true) ~= nil
  end)
  local shown = text(buf)
  contains(shown, "Memory: 5 fact(s), 2 in conflict", "the header counts the conflicts")
  contains(shown, "## Core (always shown)", "facts by tier")
  contains(shown, "## Archival (shown when relevant)", "facts by tier")
  contains(shown, "] Answer in British English", "the core fact")
  contains(shown, "local-only: never shown to the model", "the user sees a local-only fact")
  contains(shown, "! [", "a conflicted fact is flagged")
  contains(shown, "dream · session ", "a dreamt fact's provenance")
  contains(shown, "2 message(s) · confidence 0.80", "its messages and confidence")
  contains(shown, "in conflict: contradicts [", "what it contradicts")
  if vim.bo[buf].modifiable then
    fail("the inspector is read-only")
  end
  step(":AgentMemory lists the facts by tier with provenance, conflicts flagged")

  -- Why: the prompt comes from vim.ui.input.
  vim.ui.input = function(_, on_confirm)
    on_confirm("how do we ship a release")
  end
  cursor_on(buf, "Releases are shipped with make ship")
  vim.api.nvim_feedkeys("w", "x", false)
  wait("the why float", function()
    return vim.b[vim.api.nvim_get_current_buf()].agent_lsp_why == true
  end)
  contains(text(0), "Verdict: passed the gate", "the gate's verdict")
  contains(text(0), "Matches: ", "the matches")
  vim.cmd("close")
  step("w shows why a fact surfaces for a prompt")

  -- Edit: the new text comes from vim.ui.input, with the old one offered.
  local offered
  vim.ui.input = function(opts, on_confirm)
    offered = opts.default
    on_confirm("Releases are shipped with make release")
  end
  vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  cursor_on(buf, "Releases are shipped with make ship")
  vim.api.nvim_feedkeys("e", "x", false)
  wait("the edited fact", function()
    return text(buf):find("make release", 1, true) ~= nil
  end)
  if offered ~= "Releases are shipped with make ship" then
    fail("the edit offers the old text, got " .. vim.inspect(offered))
  end
  step("e edits a fact")

  -- Forget one side of the conflict: the other is no longer flagged.
  vim.ui.select = function(items, _, on_choice)
    on_choice(items[1])
  end
  cursor_on(buf, "installs packages with npm")
  vim.api.nvim_feedkeys("x", "x", false)
  wait("the forgotten fact to go", function()
    local t = text(buf)
    return t:find("] The project installs packages with npm", 1, true) == nil
  end)
  local after = text(buf)
  contains(after, "Memory: 4 fact(s)\n", "no conflict is left")
  if after:find("! [", 1, true) then
    fail("a fact is still flagged:\n" .. after)
  end
  step("x forgets a fact, which resolves its conflict")

  io.stdout:write("all passed\n")
  vim.cmd("qa!")
end

H.run(run)
