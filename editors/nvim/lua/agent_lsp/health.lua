-- :checkhealth agent_lsp — the binary and its version, then the server's own checks
-- (`agent-lsp doctor`) with the settings this Neovim sends it: configuration layers, data
-- dir, database, API key variable, provider reachable, context window.

local M = {}

local health = vim.health

local function trim(s)
  return (s or ""):gsub("%s+$", "")
end

--- The client configuration in effect: vim.lsp.config's on 0.11, else the plugin's.
local function client_config(agent)
  local ok, config = pcall(function()
    return vim.lsp.config and vim.lsp.config[agent.NAME]
  end)
  if ok and config then
    return config
  end
  return agent.client_config()
end

--- The binary of `cmd`, or nil after reporting why there is none.
local function binary(cmd)
  if type(cmd) ~= "table" or type(cmd[1]) ~= "string" then
    health.error("`cmd` is not a command list", { 'e.g. cmd = { "agent-lsp" }' })
    return nil
  end
  local exe = vim.fn.exepath(cmd[1])
  if exe == "" then
    health.error(cmd[1] .. " is not an executable on $PATH", {
      "install it: cargo install --path server (in the agent-lsp repository)",
      'or give its path: vim.lsp.config("agent_lsp", { cmd = { "/path/to/agent-lsp" } })',
    })
    return nil
  end
  local out = vim.system({ exe, "--version" }, { text = true }):wait(5000)
  if out.code ~= 0 then
    health.error(("%s --version failed (exit %s): %s"):format(exe, out.code, trim(out.stderr)))
    return nil
  end
  health.ok(("%s (%s)"):format(exe, trim(out.stdout)))
  return exe
end

local function report_layers(layers)
  if #layers == 0 then
    health.info("no configuration layers: the defaults (the offline demo uses the scripted model)")
  end
  for _, l in ipairs(layers) do
    local where = l.path ~= vim.NIL and l.path or "sent by Neovim as init_options"
    if l.error ~= vim.NIL then
      health.error(("layer %s (%s): %s"):format(l.source, where, l.error))
    else
      health.ok(("layer %s (%s)"):format(l.source, where))
    end
  end
end

local function report_checks(checks)
  for _, c in ipairs(checks) do
    -- "config" sums up the layers, reported one by one above.
    if c.name == "config" then
      goto continue
    end
    local line = ("%s: %s"):format(c.name, c.detail)
    if c.ok then
      health.ok(line)
    elseif c.name == "api key" or c.name == "window" then
      health.warn(line)
    else
      health.error(line)
    end
    ::continue::
  end
end

function M.check()
  local agent = require("agent_lsp")
  local config = client_config(agent)

  health.start("agent-lsp: the server")
  local exe = binary(config.cmd)
  if not exe then
    return
  end
  local client = agent.client()
  if client then
    health.ok(("running (client %d) for %s"):format(client.id, client.root_dir or "no workspace"))
  else
    health.info("not running here: vim.lsp.enable('agent_lsp') or setup() starts it for file buffers")
  end

  health.start("agent-lsp: configuration and provider")
  local root = (client and client.root_dir) or vim.fn.getcwd()
  local settings = (client and client.config.init_options) or config.init_options or vim.empty_dict()
  local cmd = { exe, "doctor", "--json", "--cwd", root, "--settings", vim.json.encode(settings) }
  local out = vim.system(cmd, { text = true }):wait(20000)
  local ok, report = pcall(vim.json.decode, out.stdout or "")
  -- Exit 1 means a check failed; the report says which.
  if out.code > 1 or not ok or type(report) ~= "table" then
    health.error(("agent-lsp doctor failed (exit %s): %s"):format(out.code, trim(out.stderr)))
    return
  end
  health.info("workspace " .. report.workspace)
  report_layers(report.layers or {})
  report_checks(report.checks or {})
end

return M
