-- What the headless Neovim tests share: failing with a message, printing passed steps,
-- waiting on a condition, and checks. Loaded with dofile from the test scripts.

local H = {}

function H.fail(msg)
  io.stderr:write("FAIL: " .. msg .. "\n")
  io.stderr:flush()
  os.exit(1)
end

function H.step(name)
  io.stdout:write("ok - " .. name .. "\n")
  io.stdout:flush()
end

--- Waits (processing events) until `cond()` is true; on timeout fails with `what` and
--- whatever `context()` adds.
function H.wait(what, cond, ms, context)
  if not vim.wait(ms or 15000, cond, 20) then
    H.fail("timed out waiting for " .. what .. (context and context() or ""))
  end
end

function H.eq(want, got, what)
  if not vim.deep_equal(want, got) then
    H.fail(("%s: want %s, got %s"):format(what, vim.inspect(want), vim.inspect(got)))
  end
end

function H.contains(haystack, needle, what)
  if not haystack:find(needle, 1, true) then
    H.fail(("%s: %q not in:\n%s"):format(what, needle, haystack))
  end
end

--- Loads the plugin, starts the real server ($AGENT_LSP_BIN) on the test file
--- ($AGENT_LSP_TEST_FILE) and waits for the client to initialize; returns the plugin.
function H.start()
  vim.cmd("runtime plugin/agent_lsp.lua")
  local agent = require("agent_lsp")
  agent.setup({ cmd = { assert(os.getenv("AGENT_LSP_BIN")), "lsp" } })
  vim.cmd.edit(vim.fn.fnameescape(assert(os.getenv("AGENT_LSP_TEST_FILE"))))
  H.wait("the client to start", function()
    local c = agent.client()
    return c ~= nil and c.initialized
  end)
  return agent
end

--- Runs `body`, failing with its traceback if it throws.
function H.run(body)
  local ok, err = xpcall(body, debug.traceback)
  if not ok then
    H.fail(err)
  end
end

return H
