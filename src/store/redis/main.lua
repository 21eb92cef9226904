-- main.lua - the dispatcher, last in the chunk: run() decides every item
-- of a call atomically (a script runs alone on the server), or, in a
-- batch, several calls one after the other.  embed.cmake ends the chunk in
-- two ways: the script EVALSHA runs ends with `return run(KEYS, ARGV)`,
-- and the Redis Functions library registers run() as its one function,
-- whose FCALL passes the same keys and arguments.  A library's locals
-- live as long as it is loaded, so run() starts each call afresh (the
-- server's time) and bounds what it keeps (the limits read).
--
-- One call: keys[i] is item i's key.  args: now's seconds and ns within
-- the second (both empty: read the server's TIME), the extra TTL in ms, 1
-- to record (SL_RECORD: every item's cost is consumed, fitting or not),
-- then ITEM_ARGS values per item: its limit, "algorithm L P B step flags
-- t_num t_den" in one string (call.c; an override of a schedule adds its
-- base's L), and its cost (per item, so that a call may charge each limit
-- its own).  The reply is 5 integers per item:
-- allowed, remaining, reset_after, retry_after, delay.
--
-- A batch (src/redis/redis_batch.c): args[1] is 'B', args[2] the number
-- of calls, then per call its number of items and its own args as above;
-- keys are the calls' keys one call after the other.  The reply has one
-- element per call: its reply as above, or its error.  Each call is
-- decided exactly as if it had been sent alone, in order: a call's error
-- is raised before it writes anything (below) and ends only that call.
--
-- One item is committed (or recorded) directly.  Several are decided as
-- the memory store does (memory_check_multi): a PEEK pass that writes
-- nothing, then a RECORD pass when recording, else a COMMIT pass if all
-- fit and a REFUSE pass if not, so the call is all-or-nothing, and every
-- error is raised in the PEEK pass, before any write.
local CALL_ARGS, ITEM_ARGS = 4, 2
local ALGORITHMS = {
    [0] = token_bucket, gcra, leaky_bucket, fixed_window, sliding_log,
    sliding_window, stepped_window,
}

-- The run's keys and arguments (EVAL's KEYS and ARGV, FCALL's).
local keys, args

-- The server's clock, read once per script run: the calls of a batch are
-- decided at one instant, as they run at one.  nil: not read yet.
local time_s, time_n
local function server_time()
    if not time_s then
        local t = rcall('TIME') -- seconds, microseconds
        time_s, time_n = small_num(t[1]), tonumber(t[2]) * 1000
    end
    return time_s, time_n
end

-- A limit's string, read once per script run, and in a library once
-- while it stays loaded: the calls of a batch, and of a server, mostly
-- share a few limits.  The algorithm and the limit's table, which the
-- algorithms only read.  At most LIMITS_KEPT are kept: limits changed at
-- run time (an adaptive controller's) would otherwise pile up.
local LIMITS_KEPT = 256
local limits, n_limits = {}, 0
local function limit_of(spec)
    local l = limits[spec]
    if l == nil then
        if n_limits == LIMITS_KEPT then
            limits, n_limits = {}, 0
        end
        n_limits = n_limits + 1
        local a, L, P, B, step, flags, tn, td, base = match(spec,
            '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) ?(%d*)$')
        local check = ALGORITHMS[tonumber(a)]
        if check == nil then
            error({err = 'EINVAL unknown algorithm or malformed limit ' .. spec})
        end
        L = tonumber(L)
        -- An override of a schedule ends with its base's L (schedule.lua);
        -- at L = 0 it only answers.
        if base ~= '' and tonumber(a) <= 2 and L == 0 then
            check = sched_stopped
        end
        local lim = {limit = L, period = tonumber(P),
                     burst = tonumber(B), step = tonumber(step),
                     flags = tonumber(flags), t_num = tonumber(tn),
                     t_den = tonumber(td),
                     tag = base ~= '' and L or nil,
                     base_l = base ~= '' and tonumber(base) or L}
        -- A token_bucket or gcra of its own numbers, a fixed_window and
        -- a sliding_window may take a fast path (fast.lua,
        -- sliding_window.lua), which wants some numbers at hand: B * T
        -- and its horizon, the period as (s, ns).
        local fast
        if base == '' and (a == '0' or a == '1') then
            fast = sched_fast
            lim.most = lim.burst * lim.t_num
            lim.horizon = idiv(lim.most, lim.t_den) + 1
        elseif a == '3' or a == '5' then
            fast = a == '3' and fixed_fast or sliding_fast
            lim.period_s = idiv(lim.period, E9)
            lim.period_n = lim.period - lim.period_s * E9
        end
        l = {check = check, lim = lim, fast = fast}
        limits[spec] = l
    end
    return l
end

-- The call of n items whose keys follow keys[k] and whose arguments
-- follow args[g]: its reply, or raises its error.
local function decide_call(k, g, n)
    local now_s, now_n
    if args[g + 1] == '' then
        now_s, now_n = time_s, time_n
        if not now_s then
            now_s, now_n = server_time()
        end
    else
        now_s, now_n = tonumber(args[g + 1]), tonumber(args[g + 2])
    end
    -- The memos looked up here, called only when they miss: a call costs
    -- more than the look-up.
    EXTRA_TTL_MS = small_nums[args[g + 3]] or small_num(args[g + 3])
    local record = args[g + 4] == '1'

    local b = g + CALL_ARGS
    if n == 1 then
        -- One item (most calls): no passes to combine.
        local l = limits[args[b + 1]] or limit_of(args[b + 1])
        local cost = small_nums[args[b + 2]] or small_num(args[b + 2])
        if l.fast and not record then
            local d = l.fast(keys[k + 1], l.lim, cost, now_s, now_n)
            if d then
                return d
            end
        end
        return l.check(keys[k + 1], l.lim, cost, now_s, now_n,
                       record and RECORD or COMMIT)
    end

    local ls, costs = {}, {}
    for i = 1, n do
        ls[i] = limit_of(args[b + 1])
        costs[i] = small_num(args[b + 2])
        b = b + ITEM_ARGS
    end

    local function decide_all(mode)
        local all, ds = true, {}
        for i = 1, n do
            local l = ls[i]
            ds[i] = l.check(keys[k + i], l.lim, costs[i], now_s, now_n, mode)
            all = all and ds[i][ALLOWED] == 1
        end
        return all, ds
    end

    local all = decide_all(PEEK)
    local _, ds = decide_all(record and RECORD or (all and COMMIT or REFUSE))
    local reply = {}
    for i = 1, n do
        local d = ds[i]
        local r = (i - 1) * 5
        reply[r + 1] = d[ALLOWED]
        reply[r + 2] = d[REMAINING]
        reply[r + 3] = d[RESET_AFTER]
        reply[r + 4] = d[RETRY_AFTER]
        reply[r + 5] = d[DELAY]
    end
    return reply
end

-- One run: a call, or a batch of them.
local function run(run_keys, run_args)
    if rcall == nil then
        bind_globals()
    end
    keys, args, time_s = run_keys, run_args, nil
    if args[1] ~= 'B' then
        return decide_call(0, 0, #keys)
    end
    local out, k, g = {}, 0, 2
    for c = 1, tonumber(args[2]) do
        local n = small_nums[args[g + 1]] or small_num(args[g + 1])
        local ok, reply = pcall(decide_call, k, g + 1, n)
        if not ok then
            -- Ours are {err = ...}; Redis's own (a key of another type) and
            -- Lua's are strings or tables with err too.
            reply = {err = type(reply) == 'table' and reply.err or
                           tostring(reply)}
        end
        out[c] = reply
        k = k + n
        g = g + 1 + CALL_ARGS + n * ITEM_ARGS
    end
    return out
end
