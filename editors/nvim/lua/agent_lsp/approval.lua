-- Tool-call approvals in a floating window: the request, its diff or command, and one key
-- each for allow once / always / deny. Requests that arrive while one is shown wait their
-- turn.

local M = {}

M.keys = { once = "o", always = "a", deny = "d", stop = "q" }

local queue = {}
local showing = false

function M.pending()
  return #queue + (showing and 1 or 0)
end

local function body(req)
  local lines = { req.title or (req.tool or "tool") }
  if req.patterns and #req.patterns > 0 then
    table.insert(lines, ("%s: %s"):format(req.permission or "", table.concat(req.patterns, ", ")))
  end
  table.insert(lines, "")
  if req.diff and req.diff ~= vim.NIL then
    vim.list_extend(lines, vim.split(req.diff, "\n", { trimempty = true }))
  elseif req.command and req.command ~= vim.NIL then
    table.insert(lines, "$ " .. req.command)
  elseif req.url and req.url ~= vim.NIL then
    table.insert(lines, req.url)
  end
  table.insert(lines, "")
  local k = M.keys
  table.insert(
    lines,
    ("[%s] allow once   [%s] always allow   [%s] deny (with a reason)   [%s] deny and stop"):format(
      k.once,
      k.always,
      k.deny,
      k.stop
    )
  )
  return lines
end

local show

local function next_in_queue()
  showing = false
  vim.cmd("redrawstatus")
  local item = table.remove(queue, 1)
  if item then
    show(item.req, item.done)
  end
end

show = function(req, done)
  showing = true
  vim.cmd("redrawstatus")
  local previous = vim.api.nvim_get_current_win()
  local lines = body(req)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  if req.diff and req.diff ~= vim.NIL then
    vim.bo[buf].filetype = "diff"
  end
  vim.b[buf].agent_lsp_approval = req
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  width = math.min(width + 2, math.max(20, vim.o.columns - 4))
  local height = math.min(#lines, math.max(3, vim.o.lines - 6))
  local win = vim.api.nvim_open_win(buf, true, {
    relative = "editor",
    row = math.floor((vim.o.lines - height) / 2),
    col = math.floor((vim.o.columns - width) / 2),
    width = width,
    height = height,
    style = "minimal",
    border = "rounded",
    title = " agent-lsp wants to " .. (req.permission or "act") .. " ",
  })
  local answered = false
  local function answer(result)
    if answered then
      return
    end
    answered = true
    if vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_close(win, true)
    end
    if vim.api.nvim_win_is_valid(previous) then
      vim.api.nvim_set_current_win(previous)
    end
    done(result)
    next_in_queue()
  end
  local function map(key, fn)
    vim.keymap.set("n", key, fn, { buffer = buf, nowait = true, silent = true })
  end
  map(M.keys.once, function()
    answer({ outcome = "once" })
  end)
  map(M.keys.always, function()
    answer({ outcome = "always" })
  end)
  map(M.keys.stop, function()
    answer({ outcome = "reject" })
  end)
  map(M.keys.deny, function()
    vim.ui.input({ prompt = "Why not? (the agent reads this; empty stops the turn) " }, function(reason)
      answer({ outcome = "reject", message = (reason and reason ~= "") and reason or nil })
    end)
  end)
  -- Closing the window some other way (`:q`) is a refusal that stops the turn.
  vim.api.nvim_create_autocmd("WinClosed", {
    pattern = tostring(win),
    once = true,
    callback = function()
      vim.schedule(function()
        answer({ outcome = "reject" })
      end)
    end,
  })
end

--- Shows `req` (an agent/requestPermission payload); `done(result)` gets the reply.
function M.ask(req, done)
  if showing then
    table.insert(queue, { req = req, done = done })
    vim.cmd("redrawstatus")
    return
  end
  show(req, done)
end

return M
