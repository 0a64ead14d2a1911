-- :AgentJournal end to end in headless Neovim, against the real server (started by
-- tests/tests/neovim.rs, which writes the journal entries). The exit code is the verdict.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

H.run(function()
  H.start()

  local offered
  vim.ui.select = function(items, opts, on_choice)
    offered = vim.tbl_map(opts.format_item, items)
    on_choice(items[1])
  end
  vim.cmd("AgentJournal release day")
  H.wait("the entry to open", function()
    return vim.api.nvim_buf_get_name(0):match("release%-day%.md$") ~= nil
  end)
  H.eq({ "Release day · 2026-11-20 · #ops" }, offered, "the pick list")
  H.contains(table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n"), "Thursdays, after standup", "the entry")
  H.step(":AgentJournal finds an entry and opens its file")

  local notified
  vim.notify = function(msg)
    notified = msg
  end
  vim.cmd("AgentJournal zeppelin")
  H.wait("the answer", function()
    return notified ~= nil
  end)
  H.contains(notified, "no journal entry matches", "nothing found is said")
  H.step(":AgentJournal says when nothing matches")

  io.stdout:write("all passed\n")
  vim.cmd("qa!")
end)
