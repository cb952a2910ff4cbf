-- Events, 100 per request, each with a unique event_id (thread number, request number and
-- index in the request), for app 0 of the key's workspace.
local c = dofile(os.getenv("BENCH_DIR") .. "/lua/common.lua")
setup = c.setup
done = c.done

local app = c.apps[1]
local flow = os.getenv("BENCH_FLOW")
local version = os.getenv("BENCH_FLOW_VERSION")
-- BENCH_RUN_BASE keeps the ids of each events scenario (stored, buffered, jetstream) apart.
local run = tonumber(os.getenv("BENCH_RUN") or "1") + tonumber(os.getenv("BENCH_RUN_BASE") or "0")
local stamp = os.date("!%Y-%m-%dT%H:%M:%SZ")
local types = {
  ',"event_type":"flow_open"',
  ',"event_type":"screen_view","screen_id":"screen-1","screen_index":1',
  ',"event_type":"screen_view","screen_id":"screen-2","screen_index":2,"time_on_screen_ms":1800',
  ',"event_type":"flow_complete"',
}
local n = 0

function request()
  n = n + 1
  local parts = {}
  for i = 0, 99 do
    -- 8-4-4-4-12 hex: run, thread, request number, index: unique within and across runs.
    local id = string.format("%08x-%04x-4000-8000-%012x", run, thread_no or 1, n * 100 + i)
    parts[#parts + 1] = '{"event_id":"' .. id .. '","app_id":"' .. app ..
      '","flow_id":"' .. flow .. '","flow_version_id":"' .. version ..
      '","user_id":"user-' .. ((n * 100 + i) % 5000) .. '","session_id":"s-' .. n ..
      '","device_platform":"ios","timestamp":"' .. stamp .. '","sdk_version":"2.3.1"' ..
      types[i % #types + 1] .. '}'
  end
  local path = "/v1/apps/" .. app .. "/events"
  return wrk.format("POST", path, c.headers, "[" .. table.concat(parts, ",") .. "]")
end
