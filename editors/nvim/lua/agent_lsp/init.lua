-- agent-lsp for Neovim: starts the server for file buffers, sends prompts, and shows what
-- the agent does (chat buffer, approvals, status). Everything goes through the LSP client;
-- the agent's edits arrive as workspace/applyEdit, so `u` undoes them like any edit.

local chat = require("agent_lsp.chat")
local approval = require("agent_lsp.approval")
local intelligence = require("agent_lsp.intelligence")

local M = {}

local defaults = {
  -- The server command.
  cmd = { "agent-lsp" },
  -- Server settings (the keys of config.toml), sent as initializationOptions.
  settings = {},
  -- Filetypes to attach to; nil means every buffer backed by a file.
  filetypes = nil,
  -- What marks a workspace root (else the current directory): the server's own markers.
  root_markers = { ".git", ".jj", ".svn", ".hg", ".helix", ".agent-lsp.toml" },
  -- Open the chat window when a prompt is sent.
  open_chat = true,
  chat = { width = 64 },
  -- Let the agent see the diagnostics of your other language servers after its edits and
  -- ask them for definitions, references, hover and symbols (its `lsp` tool).
  language_servers = true,
}

M.config = vim.deepcopy(defaults)

-- The session prompts go to, its mode, and what the agent is doing.
M.state = { session = nil, mode = nil, status = "idle", last_undo = nil }

-- The client's name: the config's, as in vim.lsp.enable("agent_lsp").
M.NAME = "agent_lsp"
local NAME = M.NAME

local function request(client, method, params, handler)
  if vim.fn.has("nvim-0.11") == 1 then
    return client:request(method, params, handler)
  end
  return client.request(method, params, handler)
end

--- The agent-lsp client for the current buffer, else any running one.
function M.client()
  local clients = vim.lsp.get_clients({ name = NAME, bufnr = 0 })
  if #clients == 0 then
    clients = vim.lsp.get_clients({ name = NAME })
  end
  return clients[1]
end

local function notify(msg, level)
  vim.notify("agent-lsp: " .. msg, level or vim.log.levels.INFO)
end

--- Sends `method` to the server; `done(result)` runs on success, errors are shown.
local function call(method, params, done)
  local client = M.client()
  if not client then
    notify(
      "the server is not running: open a file after vim.lsp.enable('agent_lsp') or setup(), "
        .. "and see :checkhealth agent_lsp",
      vim.log.levels.WARN
    )
    return
  end
  request(client, method, params, function(err, result)
    if err then
      notify(method .. ": " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      return
    end
    if done then
      done(result)
    end
  end)
end
M.call = call

--- One `agent/update` notification.
local function on_update(_, params)
  if type(params) ~= "table" or type(params.update) ~= "table" then
    return
  end
  local sid = params.sessionId
  if M.state.session == nil then
    M.state.session = sid -- e.g. a turn started by a code action
  end
  if sid ~= M.state.session then
    return
  end
  local u = params.update
  if u.kind == "status" then
    M.state.status = u.status
    vim.cmd("redrawstatus")
  elseif u.kind == "error" then
    notify(u.message or "error", vim.log.levels.ERROR)
  elseif u.kind == "state" then
    M.on_state(u)
  end
  chat.on_update(u)
end

local function value(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

--- The session state file changed: remember its focus and phase, and reload a buffer that
--- shows it (unless it holds unsaved changes of yours).
function M.on_state(s)
  M.state.focus, M.state.phase = value(s.focus), value(s.phase)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_name(buf) == s.path then
      vim.api.nvim_buf_call(buf, function()
        vim.cmd("silent! checktime")
      end)
    end
  end
  vim.cmd("redrawstatus")
end

--- `agent/requestPermission`: a float with the request; the reply waits for a key.
local function on_permission(_, params)
  local co, is_main = coroutine.running()
  if not co or is_main then
    return { outcome = "reject" }
  end
  approval.ask(params, function(result)
    vim.schedule(function()
      coroutine.resume(co, result)
    end)
  end)
  return coroutine.yield()
end

--- `agent/question`: each question through vim.ui.select.
local function on_question(_, params)
  local co, is_main = coroutine.running()
  if not co or is_main then
    return { answers = {} }
  end
  local answers = {}
  for _, q in ipairs(params.questions or {}) do
    local labels = vim.tbl_map(function(o)
      return o.label
    end, q.options or {})
    vim.ui.select(labels, { prompt = q.question }, function(choice)
      vim.schedule(function()
        coroutine.resume(co, choice)
      end)
    end)
    local choice = coroutine.yield()
    table.insert(answers, choice and { choice } or {})
  end
  return { answers = answers }
end

--- The root of `bufnr`'s workspace: the nearest of `markers` above it, else the current
--- directory.
local function root_for(bufnr, markers)
  local root = vim.fs.root and vim.fs.root(bufnr, markers)
  return root or vim.fn.getcwd()
end

local function has_file(bufnr)
  return vim.bo[bufnr].buftype == "" and vim.api.nvim_buf_get_name(bufnr) ~= ""
end

--- The client's configuration from `M.config`: what `lsp/agent_lsp.lua` gives
--- `vim.lsp.config` (Neovim 0.11), and what setup() starts on older versions.
function M.client_config()
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  local shares = M.config.language_servers
  capabilities.experimental = {
    agent = { updates = true, permissions = true, questions = true, diagnostics = shares, lsp = shares },
  }
  return {
    cmd = M.config.cmd,
    filetypes = M.config.filetypes,
    root_markers = M.config.root_markers,
    -- Buffers without a file have no workspace; vim.lsp.config's root_markers win.
    root_dir = function(bufnr, on_dir)
      if has_file(bufnr) then
        local resolved = vim.lsp.config and vim.lsp.config[M.NAME]
        on_dir(root_for(bufnr, resolved and resolved.root_markers or M.config.root_markers))
      end
    end,
    -- An empty Lua table would go out as a JSON array.
    init_options = next(M.config.settings) and M.config.settings or vim.empty_dict(),
    capabilities = capabilities,
    handlers = {
      ["agent/update"] = on_update,
      ["agent/requestPermission"] = on_permission,
      ["agent/question"] = on_question,
      ["agent/diagnostics"] = intelligence.on_diagnostics,
      ["agent/lsp"] = intelligence.on_lsp,
    },
    on_init = function()
      M.init()
    end,
  }
end

--- The resolved configuration: vim.lsp.config's (with the user's overrides) on 0.11.
local function resolved_config()
  if vim.lsp.config then
    return vim.deepcopy(vim.lsp.config[M.NAME])
  end
  local config = M.client_config()
  config.name = M.NAME
  return config
end

--- Starts (or reuses) the client for a buffer backed by a file.
function M.attach(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not has_file(bufnr) then
    return
  end
  local config = resolved_config()
  if config.filetypes and not vim.tbl_contains(config.filetypes, vim.bo[bufnr].filetype) then
    return
  end
  config.root_dir = root_for(bufnr, config.root_markers)
  return vim.lsp.start(config, { bufnr = bufnr })
end

local initialized = false

--- What the plugin sets up once, whether started by setup() or by vim.lsp.enable: the chat,
--- the diagnostics tracking and the "Agent: ask…" command of the code actions.
function M.init()
  if initialized then
    return
  end
  initialized = true
  chat.setup(M.config.chat, M)
  intelligence.setup(vim.api.nvim_create_augroup("agent_lsp_intelligence", { clear = true }), M.NAME)
  -- "Agent: ask…": our own input box, with the selection.
  vim.lsp.commands["agent.ask"] = function(command)
    local target = (command.arguments or {})[1] or {}
    vim.ui.input({ prompt = "Ask the agent: " }, function(text)
      if text and text ~= "" then
        M.prompt(text, target.uri and { uri = target.uri, range = target.range } or nil)
      end
    end)
  end
end

--- Optional: the plugin's options (see `defaults`), and the client for every buffer backed
--- by a file. Without it, `vim.lsp.enable("agent_lsp")` starts the client with the defaults.
function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  initialized = false
  M.init()
  if vim.lsp.config then
    vim.lsp.config(M.NAME, {}) -- drops a configuration resolved before these options
  end
  local group = vim.api.nvim_create_augroup("agent_lsp", { clear = true })
  vim.api.nvim_create_autocmd({ "BufReadPost", "BufNewFile" }, {
    group = group,
    callback = function(ev)
      M.attach(ev.buf)
    end,
  })
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) then
      M.attach(buf)
    end
  end
end

--- Sends a prompt (with an optional {uri, range} context) to the current session.
function M.prompt(text, context)
  local params = { text = text, sessionId = M.state.session, context = context, mode = M.state.mode }
  if M.config.open_chat then
    chat.open()
  end
  call("agent/prompt", params, function(result)
    if result and result.sessionId and result.sessionId ~= M.state.session then
      M.state.session = result.sessionId
      chat.reset()
    end
  end)
end

--- `:Agent {text}`; `lines` = {first, last} adds that part of the current buffer.
function M.ask(text, lines)
  local bufnr = vim.api.nvim_get_current_buf()
  local context
  if vim.bo[bufnr].buftype == "" and vim.api.nvim_buf_get_name(bufnr) ~= "" then
    context = { uri = vim.uri_from_bufnr(bufnr) }
    if lines then
      context.range = {
        start = { line = lines[1] - 1, character = 0 },
        ["end"] = { line = lines[2], character = 0 },
      }
    end
  end
  if text == nil or text == "" then
    vim.ui.input({ prompt = "Ask the agent: " }, function(input)
      if input and input ~= "" then
        M.prompt(input, context)
      end
    end)
    return
  end
  M.prompt(text, context)
end

function M.chat()
  chat.open()
end

local function need_session()
  if not M.state.session then
    notify("no session yet: ask something first, or pick one with :AgentSessions", vim.log.levels.WARN)
    return false
  end
  return true
end

function M.cancel()
  if need_session() then
    call("agent/cancel", { sessionId = M.state.session })
  end
end

--- Warns about the paths a revert left as they were (changed since the turn, not in the
--- snapshots), so nothing is passed over in silence.
local function warn_not_restored(result)
  local left = result.notRestored or {}
  if #left == 0 then
    return
  end
  local lines = { "left as they are:" }
  for _, u in ipairs(left) do
    table.insert(lines, ("  %s: %s"):format(u.path, u.reason))
  end
  notify(table.concat(lines, "\n"), vim.log.levels.WARN)
end

--- Reverts the last turn as a whole; its prompt comes back in the input box.
function M.undo()
  if not need_session() then
    return
  end
  call("agent/undo", { sessionId = M.state.session }, function(result)
    M.state.last_undo = result
    notify(("undid the last turn (%d file(s))"):format(#(result.files or {})))
    warn_not_restored(result)
    vim.ui.input({ prompt = "Ask the agent: ", default = result.text or "" }, function(input)
      if input and input ~= "" then
        M.prompt(input, nil)
      end
    end)
  end)
end

function M.redo()
  if need_session() then
    call("agent/redo", { sessionId = M.state.session }, function(result)
      notify(("redid %d file(s)"):format(#(result.files or {})))
    end)
  end
end

--- Reverts the session to before `message_id` (from the chat buffer).
function M.revert(message_id)
  if need_session() then
    call("agent/revert", { sessionId = M.state.session, messageId = message_id }, function(result)
      notify(("reverted %d file(s); :AgentRedo brings them back"):format(#(result.files or {})))
      warn_not_restored(result)
    end)
  end
end

--- Picks a session and shows its history in the chat.
function M.sessions()
  call("agent/sessions", vim.empty_dict(), function(list)
    if not list or #list == 0 then
      notify("no sessions yet")
      return
    end
    vim.ui.select(list, {
      prompt = "Resume a session",
      format_item = function(s)
        return ("%s  [%s]"):format(s.title ~= vim.NIL and s.title or s.sessionId, s.status)
      end,
    }, function(choice)
      if choice then
        M.resume(choice.sessionId)
      end
    end)
  end)
end

function M.resume(sid)
  M.state.session = sid
  call("agent/history", { sessionId = sid }, function(history)
    M.state.status = history.running and "busy" or "idle"
    chat.load(history)
    chat.open()
  end)
end

function M.set_mode(mode)
  if not vim.tbl_contains({ "build", "plan", "auto" }, mode) then
    notify("modes are build, plan and auto", vim.log.levels.ERROR)
    return
  end
  M.state.mode = mode
  if M.state.session then
    call("agent/setMode", { sessionId = M.state.session, mode = mode })
  end
  vim.cmd("redrawstatus")
end

--- Opens the session state file (`:AgentState`); it reloads when the agent changes it.
function M.open_state()
  call("agent/state", vim.empty_dict(), function(result)
    M.state.focus, M.state.phase = value(result.focus), value(result.phase)
    vim.cmd.edit(vim.fn.fnameescape(result.path))
    vim.bo.autoread = true
    if not result.exists then
      notify("no session state yet: the agent writes it with its first checkpoint")
    end
  end)
end

--- For the status line: "" when idle, else what the agent is doing.
function M.status()
  if approval.pending() > 0 then
    return "agent: waiting for you"
  end
  if M.state.status == "busy" then
    return "agent: working"
  end
  return ""
end

return M
