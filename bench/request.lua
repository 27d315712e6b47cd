-- One benchmark scenario for wrk (bench/wrk.py runs it):
--   wrk -t1 -cN -dS -s bench/request.lua URL -- METHOD PATH BODY API_KEY IDS_DIR OFFSET TAG
-- PATH and BODY may hold tokens, replaced on every request:
--   {user} {event} {product} {order} {item}  a random id from IDS_DIR/<name>s.txt
--   {seq_user} {seq_event}  the next (event, user) pair: distinct for #users * #events requests
--   {n}  unique in the whole run: TAG-OFFSET+k (order numbers, nonces)
-- OFFSET is the number of requests earlier runs of this scenario sent, so that the sequence
-- goes on where they stopped. Every response that is not 2xx is counted (wrk's own
-- "Non-2xx or 3xx" line lets 3xx pass), and the first one is kept to be printed.

local method, path, body, ids_dir, tag
local offset, k = 0, 0
local lists = {}
local fixed  -- the request, when it has no tokens
threads = {}

local function load(name)
  if lists[name] == nil then
    local values = {}
    for line in io.lines(ids_dir .. "/" .. name .. ".txt") do
      if line ~= "" then values[#values + 1] = line end
    end
    assert(#values > 0, "no ids in " .. name .. ".txt")
    lists[name] = values
  end
  return lists[name]
end

local function value(name, n)
  if name == "n" then return tag .. "-" .. n end
  local users = name:sub(1, 4) == "seq_" and load("users")
  if name == "seq_user" then return users[n % #users + 1] end
  if name == "seq_event" then
    local events = load("events")
    return events[math.floor(n / #users) % #events + 1]
  end
  local values = load(name .. "s")
  return values[math.random(#values)]
end

local function expand(text, n)
  return (text:gsub("{([%w_]+)}", function(name) return value(name, n) end))
end

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  method, path, body, ids_dir, tag = args[1], args[2], args[3], args[5], args[7]
  offset = tonumber(args[6])
  math.randomseed(os.time() + offset)
  if args[4] ~= "" then wrk.headers["x-api-key"] = args[4] end
  if body ~= "" then wrk.headers["content-type"] = "application/json" end
  expand(path .. body, 0)  -- loads the id lists now, not while measuring
  if not (path .. body):find("{[%w_]+}") then
    fixed = wrk.format(method, path, nil, body ~= "" and body or nil)
  end
  non2xx, first_bad = 0, ""
end

function request()
  if fixed then return fixed end
  k = k + 1
  local text = body ~= "" and expand(body, offset + k) or nil
  return wrk.format(method, expand(path, offset + k), nil, text)
end

function response(status, headers, text)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    if first_bad == "" then first_bad = status .. " " .. (text or ""):sub(1, 300) end
  end
end

function done(summary, latency, requests)
  local non2xx_total, bad = 0, ""
  for _, thread in ipairs(threads) do
    non2xx_total = non2xx_total + thread:get("non2xx")
    if bad == "" then bad = thread:get("first_bad") end
  end
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests": %d, "duration_us": %d, "non2xx": %d, "p50_us": %d, "p99_us": %d, '
      .. '"socket_errors": %d}\n',
    summary.requests, summary.duration, non2xx_total, latency:percentile(50),
    latency:percentile(99), e.connect + e.read + e.write + e.timeout))
  if bad ~= "" then io.write("FIRST_NON2XX " .. bad:gsub("\n", " ") .. "\n") end
end
