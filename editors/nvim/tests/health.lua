-- Neovim 0.11's way, in headless Neovim against the real server and fake-llm (started by
-- tests/tests/neovim.rs): vim.lsp.config + vim.lsp.enable with no setup() start the client,
-- a prompt gets its answer, and :checkhealth agent_lsp reports the binary, the settings
-- Neovim sends, the provider, and a broken configuration file. The exit code is the verdict.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h") .. "/helpers.lua")

local function buffer_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false), "\n")
end

H.run(function()
  vim.cmd("filetype on") -- vim.lsp.enable starts clients on FileType (-u NONE turns it off)
  vim.cmd("runtime plugin/agent_lsp.lua")
  vim.lsp.config("agent_lsp", {
    cmd = { assert(os.getenv("AGENT_LSP_BIN")), "lsp" },
    init_options = { max_steps = 9 },
  })
  vim.lsp.enable("agent_lsp")
  vim.cmd.edit(vim.fn.fnameescape(assert(os.getenv("AGENT_LSP_TEST_FILE"))))
  local agent = require("agent_lsp")
  H.wait("the client to start", function()
    local c = agent.client()
    return c ~= nil and c.initialized
  end)
  local client = agent.client()
  H.eq("agent_lsp", client.name, "the client's name")
  H.eq(vim.fn.getcwd(), client.root_dir, "the root (the workspace's .git)")
  H.eq(9, client.config.init_options.max_steps, "vim.lsp.config's init_options")
  H.eq(true, client.config.capabilities.experimental.agent.diagnostics, "the default flags")
  H.step("vim.lsp.enable('agent_lsp') starts the client without setup()")

  agent.prompt("say hi")
  H.wait("the answer in the chat", function()
    local chat = vim.fn.bufnr("agent://chat")
    return chat > 0 and buffer_text(chat):find("Hi from the model", 1, true) ~= nil
  end)
  assert(vim.lsp.commands["agent.ask"], "on_init set up the plugin")
  H.step("a prompt gets its answer in the chat")

  vim.cmd("checkhealth agent_lsp")
  local report = buffer_text()
  H.contains(report, "agent-lsp: the server", "the first section")
  H.contains(report, "OK " .. vim.fn.exepath(os.getenv("AGENT_LSP_BIN")) .. " (agent-lsp ", "the binary")
  H.contains(report, "OK running (client " .. client.id, "the client")
  H.contains(report, "OK layer user", "the user's config file")
  H.contains(report, "OK layer initialization_options (sent by Neovim as init_options)", "Neovim's settings")
  H.contains(report, "OK data dir: ", "the data dir")
  H.contains(report, "OK api key: $FAKE_KEY is set", "the key")
  H.contains(report, "OK provider: GET http://127.0.0.1:", "the provider")
  H.step(":checkhealth agent_lsp reports the binary, the layers and the provider")

  vim.cmd("bwipeout")
  local f = assert(io.open(vim.fn.getcwd() .. "/.agent-lsp.toml", "w"))
  f:write("max_steps = \"many\"\n")
  f:close()
  vim.cmd("checkhealth agent_lsp")
  report = buffer_text()
  H.contains(report, "ERROR layer workspace (" .. vim.fn.getcwd() .. "/.agent-lsp.toml)", "the bad layer")
  assert(not report:find("config: ", 1, true), "the layers are not repeated")
  H.step(":checkhealth agent_lsp names a broken configuration file")

  io.stdout:write("all passed\n")
  vim.cmd("qa!")
end)
