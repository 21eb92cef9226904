-- main.lua - the dispatcher, last in the script: decides every item of one
-- call atomically (a script runs alone on the server).
--
-- KEYS[i] is item i's key.  ARGV: now's seconds and ns within the second
-- (both empty: read the server's TIME), the extra TTL in ms, 1 to record
-- (SL_RECORD: every item's cost is consumed, fitting or not), then
-- ITEM_ARGS values per item: algorithm, cost, L, P, B, step, flags,
-- t_num, t_den (redis.c; per-item costs, so that a call may charge each
-- limit its own).  The reply is 5 integers per item: allowed, remaining,
-- reset_after, retry_after, delay.
--
-- One item is committed (or recorded) directly.  Several are decided as
-- the memory store does (memory_check_multi): a PEEK pass that writes
-- nothing, then a RECORD pass when recording, else a COMMIT pass if all
-- fit and a REFUSE pass if not, so the call is all-or-nothing, and every
-- error is raised in the PEEK pass, before any write.
local CALL_ARGS, ITEM_ARGS = 4, 9
local ALGORITHMS = {
    [0] = token_bucket, gcra, leaky_bucket, fixed_window, sliding_log,
    sliding_window, stepped_window,
}

local now_s, now_n
if ARGV[1] == '' then
    local t = redis.call('TIME') -- seconds, microseconds
    now_s, now_n = tonumber(t[1]), tonumber(t[2]) * 1000
else
    now_s, now_n = tonumber(ARGV[1]), tonumber(ARGV[2])
end
EXTRA_TTL_MS = tonumber(ARGV[3])
local record = ARGV[4] == '1'

local items = {}
for i = 1, #KEYS do
    local b = CALL_ARGS + (i - 1) * ITEM_ARGS
    local a = function(j) return tonumber(ARGV[b + j]) end
    items[i] = {
        check = ALGORITHMS[a(1)],
        cost = a(2),
        lim = {limit = a(3), period = a(4), burst = a(5), step = a(6),
               flags = a(7), t_num = a(8), t_den = a(9)},
    }
    if items[i].check == nil then
        return redis.error_reply('EINVAL unknown algorithm ' .. ARGV[b + 1])
    end
end

local function decide_all(mode)
    local all, ds = true, {}
    for i = 1, #items do
        local it = items[i]
        ds[i] = it.check(KEYS[i], it.lim, it.cost, now_s, now_n, mode)
        all = all and ds[i].allowed == 1
    end
    return all, ds
end

local all, ds
if #items == 1 then
    all, ds = decide_all(record and RECORD or COMMIT)
else
    all = decide_all(PEEK)
    all, ds = decide_all(record and RECORD or (all and COMMIT or REFUSE))
end

local reply = {}
for i = 1, #ds do
    local d = ds[i]
    local b = (i - 1) * 5
    reply[b + 1] = d.allowed
    reply[b + 2] = d.remaining
    reply[b + 3] = d.reset_after
    reply[b + 4] = d.retry_after
    reply[b + 5] = d.delay
end
return reply
