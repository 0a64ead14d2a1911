-- :AgentKnowledgeExport end to end in headless Neovim, against the real server (started by
-- tests/tests/neovim.rs, which adds the entry). The exit code is the verdict.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

H.run(function()
  H.start()

  local notified = {}
  vim.notify = function(msg)
    table.insert(notified, msg)
  end
  vim.cmd("AgentKnowledgeExport")
  H.wait("AGENTS.md to open", function()
    return vim.api.nvim_buf_get_name(0):match("/AGENTS%.md$") ~= nil
  end)
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
  H.contains(text, "<!-- agent-lsp:knowledge:begin -->", "the section")
  H.contains(text, "- Deploys go out on Thursdays <!-- k:", "the entry")
  H.eq("agent-lsp: AGENTS.md: 1 entry", notified[#notified], "the summary")
  H.step(":AgentKnowledgeExport writes AGENTS.md and opens it")

  -- A line of the person's own inside the section, saved, is read back by the next export,
  -- and the open buffer shows the file as rewritten.
  local last = vim.fn.search("knowledge:end") -- the end marker's line (1-based)
  assert(last > 0, "no end marker")
  vim.api.nvim_buf_set_lines(0, last - 1, last - 1, false, { "- Staging resets at midnight" })
  vim.cmd("silent write")
  vim.cmd("AgentKnowledgeExport")
  H.wait("the second export", function()
    return #notified >= 2
  end)
  H.eq("agent-lsp: AGENTS.md: 2 entries; read back 1 new", notified[2], "the summary")
  H.wait("the buffer to reload", function()
    local now = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
    return now:find("- Staging resets at midnight <!-- k:", 1, true) ~= nil
  end)
  H.step("a line added in the section is read back and gets its id")

  io.stdout:write("all passed\n")
  vim.cmd("qa!")
end)
