-- The journal from Neovim (`:AgentJournal {query}`): the entries that match, picked with
-- vim.ui.select, open as the markdown files they are. Works whether or not the model has
-- the journal tools (`[journal] enabled`).

local M = {}

local function present(v)
  return v ~= nil and v ~= vim.NIL and v ~= ""
end

--- One pick list line for a hit.
function M.label(hit)
  local bits = { hit.title }
  if present(hit.created) then
    table.insert(bits, hit.created:sub(1, 10))
  end
  if present(hit.project) then
    table.insert(bits, vim.fn.fnamemodify(hit.project, ":t"))
  end
  if hit.tags and #hit.tags > 0 then
    table.insert(bits, "#" .. table.concat(hit.tags, " #"))
  end
  return table.concat(bits, " · ")
end

--- Searches for `query` (asked for when empty) and opens the entry picked.
function M.search(query)
  local agent = require("agent_lsp")
  if not query or query == "" then
    vim.ui.input({ prompt = "Search the journal: " }, function(q)
      if q and q ~= "" then
        M.search(q)
      end
    end)
    return
  end
  agent.call("agent/journal/search", { query = query }, function(result)
    M.last = result
    local hits = result.hits or {}
    if #hits == 0 then
      vim.notify(("agent-lsp: no journal entry matches %q"):format(query))
      return
    end
    vim.ui.select(hits, { prompt = "Journal: " .. query, format_item = M.label }, function(hit)
      if hit then
        vim.cmd.edit(vim.fn.fnameescape(hit.path))
      end
    end)
  end)
end

return M
