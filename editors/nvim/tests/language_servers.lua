-- The agent uses Neovim's other language servers: pyright ($AGENT_LSP_PYRIGHT) runs beside
-- agent-lsp on the test file; the model's edit breaks the types and its `lsp` call asks for a
-- definition. tests/tests/neovim.rs checks what reached the model.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")
local step, eq = H.step, H.eq

H.run(function()
  local agent = H.start()
  local buf = vim.api.nvim_get_current_buf()
  local published = false
  vim.api.nvim_create_autocmd("DiagnosticChanged", {
    buffer = buf,
    callback = function()
      published = true
    end,
  })
  vim.lsp.start({
    name = "pyright",
    cmd = { assert(os.getenv("AGENT_LSP_PYRIGHT")), "--stdio" },
    root_dir = vim.fn.getcwd(),
    settings = { python = { analysis = { diagnosticMode = "openFilesOnly" } } },
  }, { bufnr = buf })
  H.wait("pyright's first diagnostics", function()
    return published
  end, 60000)
  eq(0, #vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR }), "the file starts clean")
  step("pyright runs beside agent-lsp and publishes")

  vim.cmd("Agent make checkout add shipping")
  H.wait("the agent's edit in the buffer", function()
    return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n"):find('"shipping"', 1, true) ~= nil
  end, 30000)
  step("the edit arrives in the buffer")
  H.wait("the end of the turn", function()
    return agent.state.status == "idle" and require("agent_lsp.chat").text():find("All done.", 1, true) ~= nil
  end, 60000)
  eq(true, #vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR }) > 0, "pyright sees the error")
  step("the turn ends after the lsp call")
  io.stdout:write("all passed\n")
  vim.cmd("qa!")
end)
