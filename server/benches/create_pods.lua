-- wrk script: POST a uniquely named pod per request (the reference pod's requests).
-- wrk -t2 -c64 -d10s --latency -s server/benches/create_pods.lua http://127.0.0.1:PORT
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
counter = 0
request = function()
  counter = counter + 1
  local body = '{"kind":"Pod","metadata":{"name":"w' .. tid .. '-' .. counter .. '","labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"minimal","resources":{"memory":67108864,"cpu":250}}]}}'
  return wrk.format("POST", "/api/v1/pods", {["Content-Type"]="application/json"}, body)
end
