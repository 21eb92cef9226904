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
-- the second (both empty: read the server's TIME), then the call's head,
-- one string (call.c): "ttl,record,spec,cost[,spec,cost...]" - the extra
-- TTL in ms, 1 to record (SL_RECORD: every item's cost is consumed,
-- fitting or not), then per item its limit, "algorithm L P B step flags
-- t_num t_den" (an override of a schedule adds its base's L; the
-- algorithm may be followed by "/k", below), and its
-- cost (per item, so that a call may charge each limit its own); a
-- fixed_window item's cost may be "c+S": charge c, then lease up to S
-- more units (lease.lua).  A token_bucket or gcra limit in ns whose
-- rule leases is sent as "@p spec" on every call (lease_bucket.lua: the
-- floor of its leases applies to every decision of it), and its item's
-- cost may be "c+S+M+H": lease up to S units to holder H for M ms.  A head
-- is parsed once and kept (head_of): the calls of a server mostly share a
-- few, and three arguments a call instead of 4 + 2 per item are what
-- Redis turns into Lua strings (docs/benchmarks.md, "Redis's instructions
-- per decision").
-- The reply is 5 integers per item:
-- allowed, remaining, reset_after, retry_after, delay; then, for an item
-- that asked a lease ("c+S") alone, three more: the units granted and
-- the window's start (s, n) (0 0 for a bucket), the grant 0 when the
-- call was refused; or,
-- for one token_bucket or gcra item decided by the fast path, one
-- integer, its lead (fast.lua), from which call.c computes the five.
--
-- A run whose args[1] is 'R' gives leased units back (lease.lua).
--
-- Ticks.  A limit whose period (or a bucket's B * T) would take its
-- times in ns past 2^52, where doubles stop being exact, is sent with its
-- times in ticks of 10^k ns (call.c chooses the least k that fits, the
-- same for every call of the limit): the algorithm is written "a/k" and
-- P, step, t_num and t_den are in ticks.  Its item then sees now in
-- ticks and answers durations in ticks, which call.c turns back into ns,
-- and its keys' TTLs are set from ticks (prelude.lua's ttl_ms).  Such an
-- item takes no fast path: those read now and write TTLs in ns, and
-- teaching them ticks cost every other call ~1% (docs/benchmarks.md).
--
-- A batch (src/redis/redis_batch.c): args[1] is 'B', args[2] the number
-- of calls, args[3] the number H of distinct (now_s, now_n, head)
-- triples, then the H triples, then which triple each call has: "" when
-- H is 1, else one byte per call, the triple's index from 0.  keys are
-- the calls' keys one call after the other.  The reply has one element
-- per call: its reply as above, or its error.  Each call is decided
-- exactly as if it had been sent alone, in order: a call's error is
-- raised before it writes anything (below) and ends only that call.
--
-- One item is committed (or recorded) directly.  Several are decided as
-- the memory store does (memory_check_multi): a PEEK pass that writes
-- nothing, then a RECORD pass when recording, else a COMMIT pass if all
-- fit and a REFUSE pass if not, so the call is all-or-nothing, and every
-- error is raised in the PEEK pass, before any write.
local HEAD_FIELDS = 2 -- ttl, record; then 2 per item
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
        local lease_at, own = match(spec, '^@(%d+) (.*)$')
        local a, k, L, P, B, step, flags, tn, td, base = match(own or spec,
            '^(%d+)/?(%d*) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) ?(%d*)$')
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
        if k ~= '' then
            lim.tick = 10 ^ tonumber(k)
            lim.tick_f = E9 / lim.tick
        end
        if k ~= '' then
            -- The fast paths read now and TTLs in ns.
            fast = nil
        elseif base == '' and (a == '0' or a == '1') then
            fast = sched_fast
            lim.most = lim.burst * lim.t_num
            lim.horizon = idiv(lim.most, lim.t_den) + 1
        elseif a == '3' or a == '5' then
            fast = a == '3' and fixed_fast or sliding_fast
            lim.period_s = idiv(lim.period, E9)
            lim.period_n = lim.period - lim.period_s * E9
        end
        -- A leased bucket: its leases' floor first, whatever the call (an
        -- override to L = 0 lets nothing pass, so needs none).
        if lease_at and check ~= sched_stopped then
            if (a ~= '0' and a ~= '1') or k ~= '' then
                error({err = 'EINVAL malformed limit ' .. spec})
            end
            lim.lease_at, lim.leased_check = tonumber(lease_at), check
            check, fast = bucket_lease().check, nil
        end
        l = {check = check, lim = lim, fast = fast}
        limits[spec] = l
    end
    return l
end

-- A call's head parsed: its items' limits and costs (n of each), the
-- extra TTL, whether to record; for one item its limit and cost at hand.
-- Kept as the limits are (memo_of, prelude.lua).  Raises, keeping
-- nothing, on a head call.c does not write.
local heads, head_of = memo_of(function(head)
    local f, n = {}, 0
    for x in gmatch(head .. ',', '([^,]*),') do
        n = n + 1
        f[n] = x
    end
    local items = (n - HEAD_FIELDS) / 2
    local h = {n = items, ttl = tonumber(f[1]), record = f[2] == '1',
               ls = {}, costs = {}}
    if items < 1 or items ~= floor(items) or h.ttl == nil then
        error({err = 'EINVAL malformed call ' .. head})
    end
    for i = 1, items do
        h.ls[i] = limit_of(f[HEAD_FIELDS + 2 * i - 1])
        local cost = f[HEAD_FIELDS + 2 * i]
        h.costs[i] = tonumber(cost)
        if h.costs[i] == nil then
            -- "c+S": a lease asked, of a fixed_window in ns, committed;
            -- "c+S+M+H", of a leased bucket.
            local c, ask, life, holder = match(cost,
                                               '^(%d+)%+(%d+)%+?(%d*)%+?(%d*)$')
            local lim = h.ls[i].lim
            local bucket = lim.lease_at ~= nil
            if not c or h.record or lim.tick or
                (bucket and (life == '' or holder == '')) or
                (not bucket and
                    (h.ls[i].check ~= fixed_window or life ~= '')) then
                error({err = 'EINVAL malformed call ' .. head})
            end
            h.costs[i] = tonumber(c)
            h.asks = h.asks or {}
            h.asks[i] = tonumber(ask)
            if bucket then
                h.by = h.by or {}
                h.by[i] = {tonumber(life), holder}
            end
        end
    end
    h.l, h.cost = h.ls[1], h.costs[1]
    h.ask = h.asks and h.asks[1]
    h.by1 = h.by and h.by[1]
    -- One item committed that may take a fast path: decide_batch() calls
    -- it directly.
    if items == 1 and not h.record and not h.l.lim.tick and not h.asks then
        h.fast = h.l.fast
    end
    return h
end)

-- One item of a limit in ticks, alone in its call: decided at now in
-- its ticks, its TTLs in them.  TICK is 1 again once it is decided; a
-- raise leaves it set, which run() undoes before the next call.
local function decide_ticked(key, l, cost, now_s, now_n, record)
    local lim = l.lim
    local s, ns = in_ticks(now_s, now_n, lim.tick, lim.tick_f)
    local d
    TICK = lim.tick
    if l.fast and not record then
        d = l.fast(key, lim, cost, s, ns)
    end
    if not d then
        d = l.check(key, lim, cost, s, ns, record and RECORD or COMMIT)
    end
    TICK = 1
    return d
end

-- The call of head h whose keys follow keys[k], at now (ts, tn: empty
-- for the server's clock): its reply, or raises its error.
local function decide_call(k, h, ts, tn)
    local now_s, now_n
    if ts == '' then
        now_s, now_n = time_s, time_n
        if not now_s then
            now_s, now_n = server_time()
        end
    else
        now_s, now_n = tonumber(ts), tonumber(tn)
    end
    EXTRA_TTL_MS = h.ttl
    local record, n = h.record, h.n

    if n == 1 then
        -- One item (most calls): no passes to combine.
        local l = h.l
        if l.lim.tick then
            return decide_ticked(keys[k + 1], l, h.cost, now_s, now_n, record)
        end
        if h.ask then
            local d = l.check(keys[k + 1], l.lim, h.cost, now_s, now_n,
                              COMMIT)
            d[6], d[7], d[8] = 0, 0, 0
            if d[ALLOWED] == 1 then
                d[6], d[7], d[8] = lease_take(keys[k + 1], l.lim, h.ask,
                                              now_s, now_n, h.by1)
            end
            return d
        end
        if l.fast and not record then
            local d = l.fast(keys[k + 1], l.lim, h.cost, now_s, now_n)
            if d then
                return d
            end
        end
        return l.check(keys[k + 1], l.lim, h.cost, now_s, now_n,
                       record and RECORD or COMMIT)
    end

    local ls, costs = h.ls, h.costs
    local function decide_all(mode)
        local all, ds = true, {}
        for i = 1, n do
            local l = ls[i]
            local lim, s, ns = l.lim, now_s, now_n
            if lim.tick then
                s, ns = in_ticks(s, ns, lim.tick, lim.tick_f)
            end
            TICK = lim.tick or 1
            ds[i] = l.check(keys[k + i], lim, costs[i], s, ns, mode)
            all = all and ds[i][ALLOWED] == 1
        end
        return all, ds
    end

    local all = decide_all(PEEK)
    local _, ds = decide_all(record and RECORD or (all and COMMIT or REFUSE))
    TICK = 1
    local reply, r, asks = {}, 0, h.asks
    for i = 1, n do
        local d = ds[i]
        reply[r + 1] = d[ALLOWED]
        reply[r + 2] = d[REMAINING]
        reply[r + 3] = d[RESET_AFTER]
        reply[r + 4] = d[RETRY_AFTER]
        reply[r + 5] = d[DELAY]
        r = r + 5
        if asks and asks[i] then
            reply[r + 1], reply[r + 2], reply[r + 3] = 0, 0, 0
            if all then
                reply[r + 1], reply[r + 2], reply[r + 3] =
                    lease_take(keys[k + i], ls[i].lim, asks[i], now_s, now_n,
                               h.by and h.by[i])
            end
            r = r + 3
        end
    end
    return reply
end

-- A batch's progress, for decide_batch(): its reply, the next call, the
-- keys before it, and that call's head once known.
local out, count, at, k_at, head_at

-- Decides the batch's calls from the next one on, into out; run()'s pcall
-- of it is the batch's only one until a call raises.
local function decide_batch()
    local h1, map = 3, args[4 + 3 * tonumber(args[3])]
    while at <= count do
        head_at = nil -- stays nil if the call's head cannot be read
        local g = h1
        if map ~= '' then
            g = h1 + 3 * byte(map, at)
        end
        local head = args[g + 3]
        local h = heads[head] or head_of(head)
        head_at = h
        local fast = h.fast
        if fast and args[g + 1] == '' then
            -- decide_call()'s first steps, inline (a call costs ~0.4k
            -- instructions): the usual call of a batch.
            if not time_s then
                server_time()
            end
            EXTRA_TTL_MS = h.ttl
            local l = h.l
            out[at] = fast(keys[k_at + 1], l.lim, h.cost, time_s, time_n) or
                          l.check(keys[k_at + 1], l.lim, h.cost, time_s,
                                  time_n, COMMIT)
        else
            out[at] = decide_call(k_at, h, args[g + 1], args[g + 2])
        end
        k_at = k_at + h.n
        at = at + 1
    end
end

-- One run: a call, or a batch of them.
local function run(run_keys, run_args)
    if rcall == nil then
        bind_globals()
    end
    keys, args, time_s, TICK = run_keys, run_args, nil, 1
    if args[1] == 'R' then
        return lease_return(run_keys, run_args, server_time)
    end
    if args[1] ~= 'B' then
        local h = heads[args[3]] or head_of(args[3])
        if h.n ~= #keys then
            error({err = 'EINVAL ' .. #keys .. ' keys for ' .. h.n .. ' items'})
        end
        return decide_call(0, h, args[1], args[2])
    end
    out, count, at, k_at, head_at = {}, tonumber(args[2]), 1, 0, nil
    while at <= count do
        local ok, e = pcall(decide_batch)
        if not ok then
            -- Ours are {err = ...}; Redis's own (a key of another type) and
            -- Lua's are strings or tables with err too.
            out[at] = {err = type(e) == 'table' and e.err or tostring(e)}
            TICK = 1 -- a ticked item's raise left it set
            if head_at == nil then
                -- Its head unread, the call's keys are not known, nor
                -- where the next call's start: the rest fail alike.
                for c = at + 1, count do
                    out[c] = out[at]
                end
                break
            end
            k_at, at = k_at + head_at.n, at + 1
        end
    end
    local reply = out
    out = nil
    return reply
end
