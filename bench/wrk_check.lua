-- wrk script for bench/serve_vs_nginx.sh.
--
-- Default: every request is a POST /v1/check of one descriptor
-- (api_key = a random key out of NKEYS, default 100000), the same key space
-- (k000000..k099999) as the peer's wrk/keys.lua sends to nginx as X-Api-Key.
-- Requests are formatted once in init(), so the per-request Lua cost is one
-- table lookup, as in keys.lua.
--
-- INCLUDE=FILE: load that wrk script instead for init()/request() (the
-- bench passes the peer's $PEERS_DIR/wrk/keys.lua, so the paced
-- nginx runs send exactly the peer's requests) and add only the pacing.
--
-- DELAY_MS=D (optional, may be fractional): pacing for the "~50% of peak"
-- runs. wrk calls delay() after each response and sends that connection's
-- next request D ms later, so each of the C connections runs a closed loop
-- of period D + latency and the offered rate is about C / (D + latency).
-- wrk's timers have 1 ms resolution, so a fractional D is rounded up or
-- down at random with the right probability: the mean delay is exactly D.
-- wrk measures latency from the moment a request is written, so the delay
-- itself is not counted in the latency.
local include = os.getenv("INCLUDE")
local NKEYS = tonumber(os.getenv("NKEYS") or "100000")
local DELAY = tonumber(os.getenv("DELAY_MS") or "")

if include and include ~= "" then
  dofile(include)
else
  local reqs = {}

  function init(args)
    math.randomseed(os.time())
    for i = 1, NKEYS do
      local body = string.format(
        '{"domain":"bench","descriptors":[{"entries":[{"key":"api_key","value":"k%06d"}]}]}',
        i - 1)
      reqs[i] = wrk.format("POST", "/v1/check",
                           { ["Content-Type"] = "application/json" }, body)
    end
  end

  function request()
    return reqs[math.random(NKEYS)]
  end
end

if DELAY and DELAY > 0 then
  local base = math.floor(DELAY)
  local frac = DELAY - base
  function delay()
    if math.random() < frac then return base + 1 end
    return base
  end
end
