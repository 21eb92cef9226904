-- schedule.lua - the virtual schedule of token_bucket, gcra and
-- leaky_bucket (src/core/schedule.h, the same formulas): one point in time
-- S = whole ns + frac / t_den, kept as the string "s n frac" (S's seconds,
-- its ns within the second, the numerator).  Amounts of time are in ticks
-- of 1 / t_den ns, in which T = t_num.  src/redis/call.c admits only
-- limits with B * t_num <= 2^52, so every tick count below is exact.
--
-- A state written under an override's numbers (sl_limit_override) has a
-- fourth field: the L it was written under ("s n frac L"); a state of the
-- base's numbers has three.  An override's limit string carries the
-- base's L (main.lua: lim.tag is the override's own L, lim.base_l the
-- base's).  A state written under other numbers is converted when read,
-- keeping the units used, exactly as src/core/schedule.c does.

local TAG_MAX = 2147483647

local function gcd(a, b)
    while b > 0 do
        a, b = b, a - idiv(a, b) * b
    end
    return a
end

-- The state st (nil: full) as one of lim's own at now, and whether it
-- had to be converted (then it is written back, even by a refusal).
-- From L_old to L_new (P the same, g = gcd(P, L)) the lead in ticks is
-- ceil(((S - now) L_old + frac g_old) / g_new), at most B * t_num.  It is
-- formed only below that cap, where d L_old / g_new <= B t_num <= 2^52:
-- muldivmod() keeps d * L_old (up to 2^84) exact.
local function sched_adopt(lim, st, now_s, now_n)
    if st == nil or (lim.tag == nil and st[4] == nil) then
        return st, false
    end
    local most = lim.burst * lim.t_num
    local l_old = st[4] or lim.base_l
    local g_new = lim.limit / lim.t_den
    local g_old = l_old == lim.limit and g_new or gcd(lim.period, l_old)
    local frac, lead = st[3], most
    if l_old > TAG_MAX or lim.base_l > TAG_MAX or frac >= l_old / g_old then
        lead = most -- not a state of this identity: an empty bucket
    elseif tcmp(st[1], st[2], now_s, now_n) < 0 or
        (st[1] == now_s and st[2] == now_n and frac == 0) then
        lead = 0
    else
        local d = tdiff_clamped(st[1], st[2], now_s, now_n)
        if d <= muldivmod(most, g_new, l_old) then
            local q, r = muldivmod(d, l_old, g_new)
            lead = min(q + ceil_div(r + frac * g_old, g_new), most)
        end
    end
    local whole = idiv(lead, lim.t_den)
    local s, n = tadd(now_s, now_n, whole)
    return {s, n, lead - whole * lim.t_den, lim.tag}, true
end

-- (S - now)+ in ticks, at most B * t_num (a request stamped before the
-- last admission is judged as if it came then).
local function sched_ahead(lim, st, now_s, now_n)
    local most = lim.burst * lim.t_num
    if st == nil then
        return 0
    end
    local d = tdiff_clamped(st[1], st[2], now_s, now_n)
    if d < 0 then
        return 0 -- frac < t_den, so S < whole + 1 <= now
    end
    -- Past the horizon the lead is the most it can be; checking first
    -- keeps d * t_den below 2^53.
    if d > idiv(most, lim.t_den) + 1 then
        return most
    end
    local ahead = d * lim.t_den + st[3]
    return ahead < most and ahead or most
end

-- S = max(S, now) + cost * T; cost <= B, so the result is at most B * T
-- (<= 2^52 ns) ahead of now.
local function sched_push(lim, st, now_s, now_n, cost)
    local add = cost * lim.t_num
    local whole = idiv(add, lim.t_den)
    local frac = add - whole * lim.t_den
    if st == nil or tcmp(st[1], st[2], now_s, now_n) < 0 or
        (st[1] == now_s and st[2] == now_n and st[3] == 0) then
        st = {now_s, now_n, 0}
    end
    local f = st[3] + frac
    if f >= lim.t_den then
        f = f - lim.t_den
        whole = whole + 1
    end
    local s, n = tadd(st[1], st[2], whole)
    return {s, n, f, lim.tag}
end

-- ns from now until S is passed (the state is initial again): <= 0 when
-- it already is.
local function sched_left(st, now_s, now_n)
    if st == nil then
        return 0
    end
    return tdiff_clamped(st[1], st[2], now_s, now_n) + (st[3] > 0 and 1 or 0)
end

-- A recorded request that did not fit (RECORD): S moves as for an
-- admitted one but never more than B * T ahead of now, so the bucket is
-- left empty, not in debt (sl__sched_record).  Over B the lead is B * T
-- whatever `ahead` was, and cost * t_num (which could pass 2^53) is not
-- formed.  Returns the new state and lead.
local function sched_record(lim, now_s, now_n, cost, ahead)
    local most = lim.burst * lim.t_num
    local lead = most
    if cost <= lim.burst then
        lead = min(ahead + cost * lim.t_num, most)
    end
    local whole = idiv(lead, lim.t_den)
    local s, n = tadd(now_s, now_n, whole)
    return {s, n, lead - whole * lim.t_den, lim.tag}, lead
end

-- Writes a bucket's state back after a decision, unless it was a PEEK;
-- only an admission, a recording or a conversion changes it.
local function sched_save(key, had, st, now_s, now_n, mode, fits, converted)
    if mode ~= PEEK then
        put_state(key, had, st, sched_left(st, now_s, now_n),
                  converted or mode == RECORD or (fits and mode == COMMIT))
    end
end

-- A schedule overridden to L = 0 (src/core/schedule.c): nothing with a
-- cost passes, and the state is left as it is.
local function sched_stopped(key, lim, cost, now_s, now_n, mode)
    local d = decision()
    local left = sched_left(get_state(key), now_s, now_n)
    d[ALLOWED] = cost == 0 and 1 or 0
    d[RETRY_AFTER] = cost == 0 and 0 or -1
    if left > 0 then
        d[RESET_AFTER] = left
    end
    return d
end

local function sched_report(lim, ahead, d)
    d[REMAINING] = lim.burst - ceil_div(ahead, lim.t_num)
    d[RESET_AFTER] = ceil_div(ahead, lim.t_den)
end

local function sched_wait(lim, ahead, allowed)
    return ceil_div(ahead - allowed, lim.t_den)
end
