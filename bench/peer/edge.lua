-- wrk script of bench-peer's Unleash Edge side: GETs the lines of EDGE_PATHS (written by
-- bench/peer/edge_requests.py: equivalent.paths or edge5.paths) with `Authorization: EDGE_TOKEN`
-- (the frontend token Edge was started with, sent as is: no "Bearer").
-- Thread k walks the list from its own offset, one line per request, so 100,000 lines give the
-- users and attribute sets of bench/lua/resolve.lua in the same proportions.
-- Environment: BENCH_DIR (bench/, for lua/common.lua's setup, done and delay), EDGE_PATHS,
-- EDGE_TOKEN, BENCH_ACCEPT_ENCODING (when set, sent as Accept-Encoding).
local c = dofile(os.getenv("BENCH_DIR") .. "/lua/common.lua")
setup = c.setup
done = c.done
delay = c.delay

local file = os.getenv("EDGE_PATHS")
assert(file, "EDGE_PATHS is not set")
local paths = {}
for line in io.lines(file) do
  paths[#paths + 1] = line
end
assert(#paths > 0, "EDGE_PATHS is empty")

local token = os.getenv("EDGE_TOKEN")
assert(token, "EDGE_TOKEN is not set")
local headers = { ["Authorization"] = token }
if os.getenv("BENCH_ACCEPT_ENCODING") then
  headers["Accept-Encoding"] = os.getenv("BENCH_ACCEPT_ENCODING")
end

local n = 0
function request()
  n = n + 1
  local i = (((thread_no or 1) - 1) * 7919 + n - 1) % #paths + 1
  return wrk.format("GET", paths[i], headers)
end
