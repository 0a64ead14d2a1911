-- agent-lsp for Neovim: the commands. The client starts with vim.lsp.enable("agent_lsp")
-- (Neovim 0.11) or require("agent_lsp").setup().
if vim.g.loaded_agent_lsp then
  return
end
vim.g.loaded_agent_lsp = true

local function agent()
  return require("agent_lsp")
end

local command = vim.api.nvim_create_user_command

command("Agent", function(opts)
  agent().ask(opts.args, opts.range > 0 and { opts.line1, opts.line2 } or nil)
end, { nargs = "*", range = true, desc = "Ask the agent (a range adds the selection)" })

command("AgentChat", function()
  agent().chat()
end, { desc = "Open the agent's chat" })

command("AgentCancel", function()
  agent().cancel()
end, { desc = "Stop the agent's turn" })

command("AgentUndo", function()
  agent().undo()
end, { desc = "Revert the agent's last turn; its prompt comes back in the input" })

command("AgentRedo", function()
  agent().redo()
end, { desc = "Bring back what :AgentUndo reverted" })

command("AgentState", function()
  agent().open_state()
end, { desc = "Open the session state file (STATE.md)" })

command("AgentMemory", function()
  require("agent_lsp.memory").open()
end, { desc = "Inspect the workspace's memory facts (edit, forget, why)" })

command("AgentJournal", function(opts)
  require("agent_lsp.journal").search(opts.args)
end, { nargs = "*", desc = "Search the journal and open an entry" })

command("AgentKnowledgeExport", function()
  require("agent_lsp.knowledge").export()
end, { desc = "Write the project's long-term knowledge into AGENTS.md and open it" })

command("AgentSessions", function()
  agent().sessions()
end, { desc = "Pick a session to resume" })

command("AgentMode", function(opts)
  agent().set_mode(opts.args)
end, {
  nargs = 1,
  complete = function()
    return { "build", "plan", "auto" }
  end,
  desc = "Set the agent's mode",
})
