-- Shared by the wrk scripts of bench/run.sh: the key, the apps and a machine-readable report.
-- Environment: BENCH_KEY (an SDK key), BENCH_APPS (app ids, comma-separated),
-- BENCH_ACCEPT_ENCODING (when set, sent as Accept-Encoding, e.g. "gzip, deflate, br").
-- The baseline gets the very same requests as flowgate (paths, headers, bodies): it ignores
-- them, but parsing them and building them in Lua cost the same on both sides.

local M = {}

M.key = os.getenv("BENCH_KEY") or "none"
M.apps = {}
for id in string.gmatch(os.getenv("BENCH_APPS") or "", "[^,]+") do
  M.apps[#M.apps + 1] = id
end
M.headers = {
  ["Authorization"] = "Bearer " .. M.key,
  ["Content-Type"] = "application/json",
}
if os.getenv("BENCH_ACCEPT_ENCODING") then
  M.headers["Accept-Encoding"] = os.getenv("BENCH_ACCEPT_ENCODING")
end

-- BENCH_WRK_PACE_MS (set by bench.py for its paced rows only): each connection waits this many
-- whole milliseconds before each request (wrk's `delay`, an integer; the first request too), so
-- the offered load stays below saturation. Latency is still timed from the actual send.
local pace = math.floor(tonumber(os.getenv("BENCH_WRK_PACE_MS") or "") or 0)
if pace > 0 then
  function M.delay()
    return pace
  end
end

-- One line the harness parses: totals, percentiles in microseconds, errors.
function M.done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"status_errors":%d,"socket_errors":%d,' ..
    '"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.status,
    e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end

-- Distinct thread numbers, for user ids and event ids that differ across threads.
local threads = 0
function M.setup(thread)
  threads = threads + 1
  thread:set("thread_no", threads)
end

return M
