-- agent-lsp for Neovim 0.11's vim.lsp.config / vim.lsp.enable:
--
--   vim.lsp.config("agent_lsp", { init_options = { provider = "ollama", model = "qwen3" } })
--   vim.lsp.enable("agent_lsp")
--
-- The defaults (and setup()'s options, when called) come from the plugin.
return require("agent_lsp").client_config()
