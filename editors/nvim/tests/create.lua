-- A file the agent creates lands in Neovim as a change of its own (a new buffer holding the
-- text, unsaved), so `u` takes the text back; :AgentUndo removes the file and its buffer.
-- Run by tests/tests/neovim.rs against the real server; the exit code is the verdict.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

H.run(function()
  local agent = H.start()
  local root = vim.fn.fnamemodify(assert(os.getenv("AGENT_LSP_TEST_FILE")), ":h:h")
  local path = root .. "/notes/new.txt"
  local function buffer()
    local b = vim.fn.bufnr(path)
    return b > 0 and vim.api.nvim_buf_is_loaded(b) and b or nil
  end

  vim.cmd("Agent make a notes file")
  H.wait("the new file's buffer", function()
    local b = buffer()
    return b ~= nil and vim.api.nvim_buf_get_lines(b, 0, -1, false)[1] == "made by the agent"
  end)
  local b = buffer()
  H.eq(true, vim.bo[b].modified, "the buffer holds unsaved text")
  H.eq(true, vim.fn.filereadable(path) == 1, "the editor created the file")
  H.eq("", table.concat(vim.fn.readfile(path), "\n"), "the text is the buffer's, not yet saved")
  H.wait("the turn to end", function()
    return agent.state.status == "idle"
  end)
  H.step("a new file arrives as a buffer of its own with the agent's text")

  -- The creation's text is an undo step of that buffer.
  vim.api.nvim_buf_call(b, function()
    vim.cmd("silent undo")
  end)
  H.eq({ "" }, vim.api.nvim_buf_get_lines(b, 0, -1, false), "u takes the text back")
  vim.api.nvim_buf_call(b, function()
    vim.cmd("silent redo")
  end)
  H.step("u undoes the agent's text in that buffer")

  vim.ui.input = function(_, done)
    done(nil)
  end
  vim.cmd("AgentUndo")
  H.wait("the file and its buffer to go", function()
    return vim.fn.filereadable(path) == 0 and buffer() == nil
  end)
  H.step(":AgentUndo removes the created file and its buffer")

  io.stdout:write("all passed\n")
  vim.cmd("qa!")
end)
