-- wrk script for bench/redis_negative_cache.sh: POST /v1/check of one
-- descriptor (api_key) on domain "bench".
--
-- MIX=hot: every request is the one key "hot" (far over its limit).
-- MIX=tbhot: likewise, of the descriptor tb_key (bench/redis_lease.sh's
-- token_bucket rule).
-- MIX=abuse: 2000 keys, of which the first 200 (10%) take half the
-- requests, each abuser 9 times as often as each of the other 1800.
-- MIX=random: 100,000 keys, each request's chosen at random.
-- Requests are formatted once in init(), so the per-request Lua cost is a
-- random number and a table lookup.
local MIX = os.getenv("MIX") or "hot"
local reqs = {}

local function check(key, descriptor)
  local body = string.format(
    '{"domain":"bench","descriptors":[{"entries":[{"key":"%s","value":"%s"}]}]}',
    descriptor or "api_key", key)
  return wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, body)
end

function init(args)
  math.randomseed(os.time())
  if MIX == "hot" then
    reqs[1] = check("hot")
  elseif MIX == "tbhot" then
    reqs[1] = check("hot", "tb_key")
  elseif MIX == "random" then
    for i = 1, 100000 do reqs[i] = check(string.format("r%06d", i - 1)) end
  else
    for i = 1, 2000 do reqs[i] = check(string.format("k%04d", i - 1)) end
  end
end

function request()
  if MIX == "hot" or MIX == "tbhot" then return reqs[1] end
  if MIX == "random" then return reqs[math.random(100000)] end
  if math.random() < 0.5 then return reqs[math.random(200)] end
  return reqs[200 + math.random(1800)]
end
