-- The editor's language intelligence for the agent: `agent/diagnostics` answers with what
-- Neovim's other language servers published (once they caught up with the latest change),
-- `agent/lsp` runs a standard request against them. Positions are converted between
-- agent-lsp's encoding and each server's.

local M = {}

-- The agent-lsp client's name, given by setup().
local NAME = "agent_lsp"

-- b:changedtick of each buffer when its diagnostics last changed.
local published = {}

function M.setup(group, client_name)
  NAME = client_name
  vim.api.nvim_create_autocmd("DiagnosticChanged", {
    group = group,
    callback = function(ev)
      if vim.api.nvim_buf_is_valid(ev.buf) then
        published[ev.buf] = vim.b[ev.buf].changedtick
      end
    end,
  })
end

--- The language servers of `bufnr` other than agent-lsp.
local function others(bufnr, method)
  local found = {}
  for _, c in ipairs(vim.lsp.get_clients({ bufnr = bufnr })) do
    if c.name ~= NAME and (not method or c:supports_method(method, bufnr)) then
      table.insert(found, c)
    end
  end
  return found
end

--- Line `row` (0-based) of the file `uri`: from its buffer when loaded, else the disk.
local function line_of(uri, row)
  local bufnr = vim.uri_to_bufnr(uri)
  if vim.api.nvim_buf_is_loaded(bufnr) then
    return vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  end
  local path = vim.uri_to_fname(uri)
  local i = 0
  local ok, lines = pcall(io.lines, path)
  if not ok then
    return ""
  end
  for l in lines do
    if i == row then
      return l
    end
    i = i + 1
  end
  return ""
end

--- A column of `line` from one encoding to another ("utf-8", "utf-16", "utf-32").
local function column(line, col, from, to)
  if from == to then
    return col
  end
  local byte = from == "utf-8" and col or vim.str_byteindex(line, from, col, false)
  return to == "utf-8" and byte or vim.str_utfindex(line, to, math.min(byte, #line), false)
end

local function convert_pos(pos, uri, from, to)
  return { line = pos.line, character = column(line_of(uri, pos.line), pos.character, from, to) }
end

local RANGES = { range = true, selectionRange = true, targetRange = true, targetSelectionRange = true }

--- Every range in a result (locations, links, symbols, hover) from one encoding to another.
local function convert(value, uri, from, to)
  if type(value) ~= "table" or from == to then
    return value
  end
  uri = value.uri or value.targetUri or uri
  for k, v in pairs(value) do
    if RANGES[k] and type(v) == "table" and v.start then
      value[k] = { start = convert_pos(v.start, uri, from, to), ["end"] = convert_pos(v["end"], uri, from, to) }
    elseif type(v) == "table" then
      convert(v, uri, from, to)
    end
  end
  return value
end

local function agent_encoding()
  local c = vim.lsp.get_clients({ name = NAME })[1]
  return c and c.offset_encoding or "utf-16"
end

local SEVERITY = { [vim.diagnostic.severity.ERROR] = 1, [vim.diagnostic.severity.WARN] = 2,
  [vim.diagnostic.severity.INFO] = 3, [vim.diagnostic.severity.HINT] = 4 }

--- A vim.diagnostic entry as an LSP Diagnostic in agent-lsp's encoding.
local function to_lsp(bufnr, d, enc)
  local function pos(row, col)
    local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
    return { line = row, character = column(line, col, "utf-8", enc) }
  end
  return {
    range = { start = pos(d.lnum, d.col), ["end"] = pos(d.end_lnum or d.lnum, d.end_col or d.col) },
    severity = SEVERITY[d.severity] or 1,
    message = d.message,
    source = d.source,
    code = d.code,
  }
end

--- Whether every buffer's diagnostics are as new as its text (or it has no server to wait for).
local function caught_up(bufs)
  for _, b in ipairs(bufs) do
    if #others(b) > 0 and published[b] ~= vim.b[b].changedtick then
      return false
    end
  end
  return true
end

--- Runs `fn` in the handler's coroutine after `ms`; false when not in one.
local function sleep(ms)
  local co, is_main = coroutine.running()
  if not co or is_main then
    return false
  end
  vim.defer_fn(function()
    coroutine.resume(co)
  end, ms)
  coroutine.yield()
  return true
end

--- `agent/diagnostics {uris, waitMs}` → `{items: [{uri, diagnostics}]}`.
function M.on_diagnostics(_, params)
  local bufs = {}
  for _, uri in ipairs(params.uris or {}) do
    local b = vim.uri_to_bufnr(uri)
    if vim.api.nvim_buf_is_loaded(b) then
      table.insert(bufs, b)
    end
  end
  local deadline = vim.uv.now() + (params.waitMs or 1500)
  while not caught_up(bufs) and vim.uv.now() < deadline do
    if not sleep(25) then
      break
    end
  end
  local enc = agent_encoding()
  local items = {}
  for _, b in ipairs(bufs) do
    local list = {}
    for _, d in ipairs(vim.diagnostic.get(b)) do
      -- agent-lsp's own diagnostics are not the code's.
      local client = d.namespace and vim.diagnostic.get_namespace(d.namespace)
      if not (client and client.name and client.name:find(NAME, 1, true)) then
        table.insert(list, to_lsp(b, d, enc))
      end
    end
    table.insert(items, { uri = vim.uri_from_bufnr(b), diagnostics = list })
  end
  return { items = items }
end

--- `agent/lsp {method, params}` → the standard result, from the first server that answers.
function M.on_lsp(_, req)
  local co, is_main = coroutine.running()
  if not co or is_main then
    return nil, { code = -32603, message = "not in a request handler" }
  end
  local params = req.params or {}
  local uri = params.textDocument and params.textDocument.uri
  local bufnr
  if uri then
    bufnr = vim.uri_to_bufnr(uri)
    if not vim.api.nvim_buf_is_loaded(bufnr) then
      return nil, { code = -32603, message = "the file is not open in Neovim: " .. vim.uri_to_fname(uri) }
    end
  end
  local clients = {}
  if bufnr then
    clients = others(bufnr, req.method)
  else
    for _, c in ipairs(vim.lsp.get_clients()) do
      if c.name ~= NAME and c:supports_method(req.method) then
        table.insert(clients, c)
      end
    end
  end
  if #clients == 0 then
    return nil, { code = -32603, message = "no language server here answers " .. req.method }
  end
  local from = agent_encoding()
  for _, c in ipairs(clients) do
    local p = vim.deepcopy(params)
    if p.position then
      p.position = convert_pos(p.position, uri, from, c.offset_encoding)
    end
    c:request(req.method, p, function(err, result)
      vim.schedule(function()
        coroutine.resume(co, err, result)
      end)
    end, bufnr)
    local err, result = coroutine.yield()
    if not err and result ~= nil and not (type(result) == "table" and vim.tbl_isempty(result)) then
      return convert(result, uri, c.offset_encoding, from)
    end
  end
  return vim.NIL
end

return M
