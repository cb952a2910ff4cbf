-- Batch resolve of BENCH_BATCH keys (10 or 50 of an app's 50 placements, `onboarding` first)
-- over the 10 apps of the key's workspace, rotating user ids and two attribute sets.
local c = dofile(os.getenv("BENCH_DIR") .. "/lua/common.lua")
setup = c.setup
done = c.done

local size = tonumber(os.getenv("BENCH_BATCH") or "10")
local keys = { '"onboarding"' }
for p = 1, size - 1 do
  keys[#keys + 1] = '"placement.' .. p .. '"'
end
local key_list = table.concat(keys, ",")
local sets = {
  '{"country":"US","app.version":"2.4.1","locale":"en-US","plan":"free","sessions":12,"email":"someone@example.com","age":31,"tags":["new","organic"]}',
  '{"country":"DE","app.version":"2.0.0","locale":"de-DE","plan":"free","sessions":4}',
}
local n = 0

function request()
  n = n + 1
  local base = (thread_no or 1) * 1000003 + n
  local path = "/v1/apps/" .. c.apps[n % #c.apps + 1] .. "/placements/resolve-batch"
  local body = '{"placement_keys":[' .. key_list .. '],"user_id":"user-' .. (base * 7919 % 100000) ..
    '","session_id":"s-' .. base .. '","device_platform":"ios","attributes":' .. sets[n % #sets + 1] .. '}'
  return wrk.format("POST", path, c.headers, body)
end
