-- The memory inspector (`:AgentMemory`): the workspace's facts by tier, each with where it
-- came from, conflicts flagged. In the buffer: `e` edits the fact under the cursor, `x`
-- forgets it, `w` asks why it would (or would not) surface for a prompt, `R` reloads, `q`
-- closes. Everything goes through agent/memory/*; the server's log is the truth.

local M = {}

local TIERS = { "core", "pinned", "archival", "temporary" }
local TITLES = {
  core = "Core (always shown)",
  pinned = "Pinned (never fades)",
  archival = "Archival (shown when relevant)",
  temporary = "Temporary (until it expires)",
}
local NAME = "agent-lsp://memory"

-- The buffer's facts by line, and the last list.
local by_line = {}
M.facts = {}

local function agent()
  return require("agent_lsp")
end

local function short(id)
  return id and id:sub(1, 8) or "?"
end

local function when(ms)
  return ms and ms ~= vim.NIL and os.date("%Y-%m-%d %H:%M", math.floor(ms / 1000)) or nil
end

local function present(v)
  return v ~= nil and v ~= vim.NIL
end

--- The provenance line of a fact.
local function provenance(f)
  local bits = { f.source }
  if present(f.sessionId) then
    table.insert(bits, "session " .. short(f.sessionId))
  end
  local messages = present(f.messageIds) and #f.messageIds or 0
  if messages > 0 then
    table.insert(bits, ("%d message(s)"):format(messages))
  end
  table.insert(bits, ("confidence %.2f"):format(f.confidence))
  table.insert(bits, "written " .. when(f.createdAt))
  if f.scope == "global" then
    table.insert(bits, "global")
  end
  if f.sensitivity == "local-only" then
    table.insert(bits, "local-only: never shown to the model")
  end
  if present(f.expiresAt) then
    table.insert(bits, "expires " .. when(f.expiresAt))
  end
  table.insert(bits, ("shown %d×, useful %d, irrelevant %d"):format(f.surfacedCount, f.useful, f.irrelevant))
  return table.concat(bits, " · ")
end

--- The buffer's lines for `facts`, and which fact each line is about.
function M.render(facts)
  local lines, owners = {}, {}
  local conflicted = 0
  for _, f in ipairs(facts) do
    if f.conflicted then
      conflicted = conflicted + 1
    end
  end
  table.insert(lines, ("Memory: %d fact(s)%s"):format(
    #facts,
    conflicted > 0 and (", %d in conflict (resolve with e or x)"):format(conflicted) or ""
  ))
  table.insert(lines, "e edit · x forget · w why · R reload · q close")
  for _, tier in ipairs(TIERS) do
    local these = vim.tbl_filter(function(f)
      return f.tier == tier
    end, facts)
    if #these > 0 then
      table.insert(lines, "")
      table.insert(lines, "## " .. TITLES[tier])
      for _, f in ipairs(these) do
        local mark = f.conflicted and "! " or "- "
        table.insert(lines, ("%s[%s] %s"):format(mark, short(f.id), f.content:gsub("\n", " ")))
        owners[#lines] = f
        table.insert(lines, "    " .. provenance(f))
        owners[#lines] = f
        if f.conflicted then
          local other = present(f.conflictsWith) and ("contradicts [%s]"):format(short(f.conflictsWith))
            or "contradicted by another fact"
          table.insert(lines, "    in conflict: " .. other)
          owners[#lines] = f
        end
      end
    end
  end
  return lines, owners
end

local function buffer()
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_name(b) == NAME then
      return b
    end
  end
end

--- The fact under the cursor in the inspector.
function M.current()
  return by_line[vim.api.nvim_win_get_cursor(0)[1]]
end

--- Reloads the facts into the inspector buffer (if open); `done` runs after.
function M.refresh(done)
  agent().call("agent/memory/list", vim.empty_dict(), function(result)
    M.facts = result.facts or {}
    local buf = buffer()
    if buf then
      local lines
      lines, by_line = M.render(M.facts)
      vim.bo[buf].modifiable = true
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
      vim.bo[buf].modifiable = false
      vim.bo[buf].modified = false
    end
    if done then
      done(M.facts)
    end
  end)
end

function M.edit()
  local f = M.current()
  if not f then
    return
  end
  vim.ui.input({ prompt = "Fact: ", default = f.content }, function(text)
    if text and text ~= "" and text ~= f.content then
      agent().call("agent/memory/update", { id = f.id, content = text }, function()
        M.refresh()
      end)
    end
  end)
end

function M.forget()
  local f = M.current()
  if not f then
    return
  end
  vim.ui.select({ "Forget", "Keep" }, { prompt = "Forget “" .. f.content .. "”?" }, function(choice)
    if choice == "Forget" then
      agent().call("agent/memory/forget", { id = f.id }, function()
        M.refresh()
      end)
    end
  end)
end

--- The why of a fact for a prompt, as lines.
function M.explain(why)
  local lines = { "Verdict: " .. why.verdict }
  local function add(label, v, fmt)
    if present(v) then
      table.insert(lines, ("%s: " .. (fmt or "%s")):format(label, v))
    end
  end
  add("Rank", why.rank)
  add("Score", why.score, "%.3f")
  add("Coverage", why.coverage, "%.2f")
  add("Irrelevant marks leave", why.irrelevance, "%.2f")
  add("Age leaves", why.decay, "%.2f")
  if present(why.matches) and #why.matches > 0 then
    local words = vim.tbl_map(function(m)
      return type(m) == "table" and (m.term or vim.inspect(m)) or tostring(m)
    end, why.matches)
    table.insert(lines, "Matches: " .. table.concat(words, ", "))
  end
  return lines
end

function M.why()
  local f = M.current()
  if not f then
    return
  end
  vim.ui.input({ prompt = "Why for the prompt: " }, function(query)
    if not query or query == "" then
      return
    end
    agent().call("agent/memory/why", { id = f.id, query = query }, function(why)
      M.last_why = why
      local lines = M.explain(why)
      local buf = vim.api.nvim_create_buf(false, true)
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
      vim.b[buf].agent_lsp_why = true
      local width = 20
      for _, l in ipairs(lines) do
        width = math.max(width, vim.fn.strdisplaywidth(l))
      end
      vim.api.nvim_open_win(buf, true, {
        relative = "cursor",
        row = 1,
        col = 0,
        width = math.min(width, 100),
        height = #lines,
        style = "minimal",
        border = "rounded",
        title = " why [" .. short(f.id) .. "] ",
      })
      vim.keymap.set("n", "q", "<cmd>close<cr>", { buffer = buf, nowait = true })
    end)
  end)
end

--- `:AgentMemory`: opens (or refreshes) the inspector in a split.
function M.open()
  local buf = buffer()
  if not buf then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, NAME)
    vim.bo[buf].buftype = "nofile"
    vim.bo[buf].bufhidden = "hide"
    vim.bo[buf].swapfile = false
    vim.bo[buf].filetype = "agentmemory"
    local map = function(lhs, fn, desc)
      vim.keymap.set("n", lhs, fn, { buffer = buf, nowait = true, desc = desc })
    end
    map("e", M.edit, "Edit the fact")
    map("x", M.forget, "Forget the fact")
    map("w", M.why, "Why would it surface for a prompt")
    map("R", M.refresh, "Reload")
    map("q", "<cmd>close<cr>", "Close")
  end
  if vim.fn.bufwinid(buf) == -1 then
    vim.cmd("botright split")
    vim.api.nvim_win_set_buf(0, buf)
  else
    vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  end
  M.refresh()
end

return M
