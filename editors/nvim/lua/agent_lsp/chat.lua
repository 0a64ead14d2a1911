-- The chat buffer: the session as markdown — your prompts, the streamed answer, and each
-- tool call as one line with its status whose output and diff fold away beneath it.
-- Updates only change the model; the buffer is redrawn at most every `BATCH_MS`, so a fast
-- stream costs a few redraws a second, not one per chunk.

local M = {}

local BATCH_MS = 40
local DETAIL = "  │ "

local cfg = { width = 64 }
local agent -- the main module (set by setup), for actions started from the buffer

-- Entries in order: { kind = "user"|"text"|"tool"|"note", ... }.
local entries = {}
local tools = {} -- tool call id -> entry
local buf
local timer
-- Buffer line -> entry, from the last render (for the buffer's keys).
local line_entry = {}

function M.setup(opts, main)
  cfg = vim.tbl_extend("force", cfg, opts or {})
  agent = main
end

function M.reset()
  entries, tools = {}, {}
  M.schedule()
end

local function last()
  return entries[#entries]
end

local function add(entry)
  table.insert(entries, entry)
  return entry
end

--- Applies one `agent/update` payload to the model.
function M.on_update(u)
  local kind = u.kind
  if kind == "user_message" then
    add({ kind = "user", text = u.text or "", message_id = u.messageId })
  elseif kind == "message_chunk" then
    local e = last()
    if not (e and e.kind == "text" and e.message_id == u.messageId) then
      e = add({ kind = "text", text = "", message_id = u.messageId })
    end
    e.text = e.text .. (u.text or "")
  elseif kind == "tool_call" then
    local e = tools[u.toolCallId]
    if not e then
      e = add({ kind = "tool", id = u.toolCallId })
      tools[u.toolCallId] = e
    end
    e.name, e.title, e.status = u.name, u.title or u.name, u.status
  elseif kind == "tool_call_update" then
    local e = tools[u.toolCallId] or add({ kind = "tool", id = u.toolCallId, name = u.name })
    tools[u.toolCallId] = e
    e.status = u.status
    e.title = (u.title and u.title ~= "") and u.title or e.title
    e.output = u.output
    if type(u.diff) == "table" then
      e.diff = u.diff
    end
  elseif kind == "status" then
    if u.status == "idle" and u.stopReason and u.stopReason ~= "end_turn" then
      add({ kind = "note", text = "(turn ended: " .. u.stopReason .. ")" })
    end
  elseif kind == "error" then
    add({ kind = "note", text = "**Error:** " .. (u.message or "") })
  elseif kind == "revert" then
    add({ kind = "note", text = ("↶ reverted %d file(s)"):format(#(u.files or {})) })
  elseif kind == "plan" then
    local lines = { "Plan:" }
    for _, t in ipairs(u.todos or {}) do
      local mark = t.status == "completed" and "x" or (t.status == "in_progress" and "~" or " ")
      table.insert(lines, ("- [%s] %s"):format(mark, t.content or ""))
    end
    add({ kind = "note", text = table.concat(lines, "\n") })
  else
    return
  end
  M.schedule()
end

--- Rebuilds the model from `agent/history`.
function M.load(history)
  entries, tools = {}, {}
  for _, m in ipairs(history.messages or {}) do
    for _, p in ipairs(m.parts or {}) do
      local data = p.data or {}
      if p.kind == "text" and m.role == "user" then
        add({ kind = "user", text = data.text or "", message_id = m.messageId })
      elseif p.kind == "text" then
        add({ kind = "text", text = data.text or "", message_id = m.messageId })
      elseif p.kind == "tool" then
        local e = tools[data.callId]
        if not e then
          e = add({ kind = "tool", id = data.callId })
          tools[data.callId] = e
        end
        e.name = data.name
        e.title = type(data.title) == "string" and data.title or nil
        e.status = p.status
        e.output = type(data.output) == "string" and data.output or nil
      end
    end
  end
  M.schedule()
end

local ICON = { pending = "…", running = "⟳", completed = "✓", failed = "✗", error = "✗" }

--- The model as buffer lines.
local function lines_of()
  local out, map = {}, {}
  local function push(text, entry)
    for _, l in ipairs(vim.split(text, "\n", { plain = true })) do
      table.insert(out, l)
      map[#out] = entry
    end
  end
  local prev
  for _, e in ipairs(entries) do
    if e.kind == "user" then
      if #out > 0 then
        push("", nil)
      end
      push("## You", e)
      push("", e)
      push(e.text, e)
    else
      if prev == "user" then
        push("", nil)
        push("## Agent", nil)
        push("", nil)
      elseif prev ~= nil and (e.kind ~= "tool" or prev ~= "tool") then
        push("", nil)
      end
      if e.kind == "tool" then
        local title = e.title or ""
        if e.name and title:sub(1, #e.name) ~= e.name then
          title = vim.trim(e.name .. " " .. title)
        end
        push(("▸ %s %s"):format(ICON[e.status] or e.status or "", title), e)
        if e.output and e.output ~= "" then
          for _, l in ipairs(vim.split(e.output, "\n", { plain = true })) do
            push(DETAIL .. l, e)
          end
        end
        if e.diff then
          local diff = vim.diff(e.diff.oldText or "", e.diff.newText or "", { result_type = "unified" })
          for _, l in ipairs(vim.split(diff or "", "\n", { trimempty = true })) do
            push(DETAIL .. l, e)
          end
        end
      else
        push(e.text, e)
      end
    end
    prev = e.kind
  end
  return out, map
end

function M.foldexpr(lnum)
  local line = vim.fn.getline(lnum)
  return line:sub(1, #DETAIL) == DETAIL and "1" or "0"
end

local function ensure_buf()
  if buf and vim.api.nvim_buf_is_valid(buf) then
    return buf
  end
  buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, "agent://chat")
  vim.bo[buf].filetype = "markdown"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].modifiable = false
  local function map(key, fn, desc)
    vim.keymap.set("n", key, fn, { buffer = buf, silent = true, desc = desc })
  end
  map("i", function()
    agent.ask(nil, nil)
  end, "Ask the agent")
  map("gd", function()
    M.show_diff(line_entry[vim.fn.line(".")])
  end, "Open this edit's diff")
  map("r", function()
    local e = line_entry[vim.fn.line(".")]
    if e and e.kind == "user" and e.message_id then
      agent.revert(e.message_id)
    end
  end, "Revert to before this prompt")
  map("q", "<cmd>close<cr>", "Close the chat")
  return buf
end

function M.buffer()
  return ensure_buf()
end

function M.render()
  local b = ensure_buf()
  local lines, map = lines_of()
  line_entry = map
  -- Follow the end in windows whose cursor is on the last line.
  local follow = {}
  for _, win in ipairs(vim.fn.win_findbuf(b)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= vim.api.nvim_buf_line_count(b) then
      table.insert(follow, win)
    end
  end
  vim.bo[b].modifiable = true
  vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].modifiable = false
  for _, win in ipairs(follow) do
    vim.api.nvim_win_set_cursor(win, { math.max(1, #lines), 0 })
  end
end

--- Redraws soon (once per batch however many updates arrive).
function M.schedule()
  if timer then
    return
  end
  timer = (vim.uv or vim.loop).new_timer()
  timer:start(BATCH_MS, 0, function()
    timer:close()
    timer = nil
    vim.schedule(M.render)
  end)
end

--- Shows the chat in a window on the right (or focuses it).
function M.open()
  local b = ensure_buf()
  local wins = vim.fn.win_findbuf(b)
  if #wins > 0 then
    return wins[1]
  end
  local previous = vim.api.nvim_get_current_win()
  vim.cmd("botright vsplit")
  local win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(win, b)
  vim.api.nvim_win_set_width(win, cfg.width)
  vim.wo[win].wrap = true
  vim.wo[win].foldmethod = "expr"
  vim.wo[win].foldexpr = "v:lua.require'agent_lsp.chat'.foldexpr(v:lnum)"
  vim.wo[win].foldlevel = 0
  vim.wo[win].foldenable = true
  M.render()
  vim.api.nvim_set_current_win(previous)
  return win
end

--- Opens an edit's before and after side by side in a new tab.
function M.show_diff(entry)
  if not (entry and entry.diff) then
    vim.notify("agent-lsp: no diff on this line", vim.log.levels.INFO)
    return
  end
  vim.cmd("tabnew")
  local function side(text, label)
    local b = vim.api.nvim_get_current_buf()
    vim.bo[b].buftype = "nofile"
    vim.bo[b].bufhidden = "wipe"
    vim.api.nvim_buf_set_lines(b, 0, -1, false, vim.split(text or "", "\n", { plain = true }))
    vim.api.nvim_buf_set_name(b, ("agent://%s/%s"):format(label, vim.uri_to_fname(entry.diff.uri)))
    vim.cmd("diffthis")
  end
  side(entry.diff.oldText, "before")
  vim.cmd("vnew")
  side(entry.diff.newText, "after")
end

--- The chat as text (for tests and `:AgentChat` users who want to copy it).
function M.text()
  return table.concat((lines_of()), "\n")
end

return M
