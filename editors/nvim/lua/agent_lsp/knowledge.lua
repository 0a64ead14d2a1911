-- Long-term knowledge from Neovim (`:AgentKnowledgeExport`): the project's entries written
-- into its agents file's managed section (AGENTS.md unless `[knowledge] agents_file` says
-- otherwise), which then opens — reloaded if it was open already.

local M = {}

--- The one-line summary of an export's result.
function M.summary(r)
  local name = vim.fn.fnamemodify(r.file, ":t")
  local said = ("%s: %d entr%s"):format(name, r.entries, r.entries == 1 and "y" or "ies")
  if not r.written then
    said = said .. ", unchanged"
  end
  local back = {}
  for _, k in ipairs({ { "imported", "new" }, { "updated", "changed" }, { "forgotten", "deleted" } }) do
    if (r[k[1]] or 0) > 0 then
      table.insert(back, ("%d %s"):format(r[k[1]], k[2]))
    end
  end
  if #back > 0 then
    said = said .. "; read back " .. table.concat(back, ", ")
  end
  return "agent-lsp: " .. said
end

function M.export()
  require("agent_lsp").call("agent/knowledge/export", {}, function(result)
    M.last = result
    vim.notify(M.summary(result))
    local buf = vim.fn.bufnr(result.file)
    if buf ~= -1 and vim.api.nvim_buf_is_loaded(buf) then
      vim.cmd.checktime(buf)
    end
    vim.cmd.edit(vim.fn.fnameescape(result.file))
  end)
end

return M
