-- Single resolve of the typical placement (`onboarding`: 10 rules, an experiment, 20 KB
-- flows) over the 10 apps of the key's workspace, 100,000 user ids and 12 attribute sets: most
-- match no rule (every audience evaluated, the experiment decides), others stop at rules 1-10.
local c = dofile(os.getenv("BENCH_DIR") .. "/lua/common.lua")
setup = c.setup
done = c.done
delay = c.delay

local sets = {
  '{"country":"US","app.version":"2.4.1","locale":"en-US","plan":"free","sessions":12,"email":"someone@example.com","age":31,"tags":["new","organic"]}',
  '{"country":"CA","app.version":"2.9.0","locale":"en-CA","plan":"free","sessions":3,"email":"a@b.ca","age":24,"tags":["organic"]}',
  '{"country":"GB","app.version":"3.2.0","locale":"en-GB","plan":"trial","sessions":40,"age":45,"tags":[]}',
  '{"country":"FR","app.version":"2.0.5","locale":"fr-FR","plan":"free","sessions":7,"age":29}',
  '{"country":"US","app.version":"3.0.1","locale":"es-US","plan":"free","sessions":1,"tags":["paid"]}',
  '{"country":"IN","app.version":"2.2.0","locale":"hi-IN","plan":"free","sessions":15,"age":19}',
  '{"country":"DE","app.version":"3.1.0","locale":"de-DE","plan":"free","sessions":20}',
  '{"country":"BR","app.version":"2.7.0","locale":"pt-BR","plan":"free","sessions":9}',
  '{"country":"US","app.version":"2.4.1","plan":"pro","sessions":120}',
  '{"country":"FR","app.version":"2.4.1","plan":"free","sessions":80}',
  '{"country":"JP","app.version":"2.8.0","plan":"free","sessions":5,"age":70,"email":"x@example.org"}',
  '{"app.version":"2.4.1","plan":"free","sessions":2}',
}
local platforms = { "ios", "android", "web", "ios" }
-- BENCH_PLACEMENT: another placement of the same rules (bench/sticky.py: onboarding_sticky).
local placement = os.getenv("BENCH_PLACEMENT") or "onboarding"
local n = 0

function request()
  n = n + 1
  local base = (thread_no or 1) * 1000003 + n
  local app = c.apps[n % #c.apps + 1]
  local path = "/v1/apps/" .. app .. "/placements/" .. placement .. "/resolve"
  local body = '{"user_id":"user-' .. (base * 7919 % 100000) ..
    '","session_id":"s-' .. base ..
    '","device_platform":"' .. platforms[n % #platforms + 1] ..
    '","attributes":' .. sets[n % #sets + 1] .. '}'
  return wrk.format("POST", path, c.headers, body)
end
