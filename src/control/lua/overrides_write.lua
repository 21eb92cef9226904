-- The runtime limits' write (src/control/limits_redis.c): sets or deletes
-- one override of the shared table, when its precondition holds, bumps
-- the table's version and logs the change, all at once.
-- KEYS: the table, its version, its change log.
-- ARGV: the field ("source|rule"); the precondition ("" none, "0"
-- absent, "*" present, "v" and the versions it may be at, comma
-- separated: If-Match's tags); the override's JSON ("" to delete); the
-- event's JSON.
-- Returns {1, version} written, or {0, the version there} when the
-- precondition failed.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local there = 0
if cur then there = cjson.decode(cur).version end
local ok
if ARGV[2] == '' or ARGV[2] == '0' then ok = there == 0
elseif ARGV[2] == '*' then ok = there ~= 0
else
  ok = false
  for v in string.gmatch(ARGV[2], '%d+') do
    if there ~= 0 and tonumber(v) == there then ok = true end
  end
end
if not ok or (ARGV[3] == '' and there == 0) then
  return {0, there}
end
local v = redis.call('INCR', KEYS[2])
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  local e = cjson.decode(ARGV[3]); e.version = v
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(e))
end
local ev = cjson.decode(ARGV[4]); ev.seq = v
if cur then local c = cjson.decode(cur)
  ev.previous = {requests_per_unit = c.requests_per_unit, burst = c.burst}
end
-- The log keeps SV_LOG_EVENTS (limits.h) events.
redis.call('LPUSH', KEYS[3], cjson.encode(ev))
redis.call('LTRIM', KEYS[3], 0, 1023)
return {1, v}
