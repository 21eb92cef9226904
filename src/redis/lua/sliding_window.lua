-- sliding_window.lua - src/core/sliding_window.c on Redis: fixed windows
-- plus the previous window's count weighted by how much of it the rolling
-- window still covers.  The state is "s n prev cur", the current window's
-- start time and the two counts.  floor(prev * (P - e) / P) and the first
-- fitting offset are products of up to 2^32 * 2^52: muldivmod().

-- The smallest offset e in [0, P] into a window whose previous window
-- held `prev` at which floor(prev * (P - e) / P) <= room.
local function first_fit(period, prev, room)
    if prev == 0 then
        return 0
    end
    local a = room + 1
    -- e = P - floor((a P - 1) / prev), at most 0 once a > prev.
    if a > prev then
        return 0
    end
    local q, r = muldivmod(a, period, prev)
    if r == 0 then
        q = q - 1
    end
    local e = period - q
    return e < 0 and 0 or e
end

-- The wait of a refused request, its window starting to_start from now.
local function sliding_wait(period, limit, cost, prev, cur, to_start)
    if cost > limit then
        return -1
    end
    local at = period
    if cost <= limit - cur then
        at = first_fit(period, prev, limit - cost - cur)
    end
    if at >= period then
        local nxt = first_fit(period, cur, limit - cost)
        at = nxt < period and period + nxt or 2 * period
    end
    return to_start + at
end

local function sliding_window(key, lim, cost, now_s, now_n, mode)
    local period, limit = lim.period, lim.limit
    local st = get_state(key)
    local ws, wn = window_start(now_s, now_n, period)
    local prev, cur = 0, 0
    local d = decision()

    if st ~= nil then
        local c = tcmp(ws, wn, st[1], st[2])
        if c <= 0 then
            ws, wn, prev, cur = st[1], st[2], st[3], st[4]
        else
            local ns, nn = tadd(st[1], st[2], period)
            if tcmp(ws, wn, ns, nn) == 0 then
                prev = st[4]
            end
        end
    end
    -- A now before the window's start (read out of order) is judged at
    -- the start.
    local offset = tdiff(now_s, now_n, ws, wn)
    if offset < 0 then
        offset = 0
    end
    local estimate = muldivmod(prev, period - offset, period) + cur
    local fits = cost == 0 or cost <= limit - estimate

    d[ALLOWED] = fits and 1 or 0
    if (fits and mode == COMMIT) or mode == RECORD then
        -- Recording past L: the count saturates at 2^32 - 1, as the
        -- memory store's packed word does.
        local add = min(cost, 4294967295 - cur)
        cur = cur + add
        estimate = estimate + add
    end
    d[REMAINING] = limit - estimate
    if d[REMAINING] < 0 then
        d[REMAINING] = 0
    end
    -- start - now, exact: the window start is within 2^23 s of now.
    local to_start = tdiff(ws, wn, now_s, now_n)
    if cur > 0 then
        d[RESET_AFTER] = to_start + 2 * period
    elseif prev > 0 then
        d[RESET_AFTER] = to_start + period
    end
    if not fits then
        d[RETRY_AFTER] = sliding_wait(period, limit, cost, prev, cur, to_start)
    end
    if mode ~= PEEK then
        -- Rolled forward even when refused (src/core/sliding_window.c).
        put_state(key, st ~= nil, {ws, wn, prev, cur}, d[RESET_AFTER], true)
    end
    return d
end

-- sliding_window's decision as fast.lua's: one item, committed, on a
-- state "s n prev cur" or none, the numbers in locals, the state through
-- the memos, and the weighted previous count floor(prev (P - e) / P)
-- by one division when prev (P - e) is below 2^53 (a double then holds
-- it exactly, and one at or past 2^53 is no less), by muldivmod() only
-- above.  Where the general path raises (now more than 2^23 s from the
-- window) it returns nil, having written nothing.
local function sliding_fast(key, lim, cost, now_s, now_n)
    local v = rcall('GET', key)
    local had = v ~= false
    local period, limit = lim.period, lim.limit
    local ws, wn = window_start(now_s, now_n, period)
    local prev, cur = 0, 0
    if had then
        local a, b, c, e = match(v, '^(%d+) (%d+) (%d+) (%d+)$')
        if a == nil then
            return nil
        end
        local ss, sn = small_nums[a] or small_num(a), small_nums[b] or
                           small_num(b)
        if ws < ss or (ws == ss and wn <= sn) then -- tcmp(ws, st) <= 0
            ws, wn = ss, sn
            prev, cur = small_nums[c] or small_num(c), small_nums[e] or
                            small_num(e)
        else
            -- The stored window is the one before now's: prev.
            local es, en = ss + lim.period_s, sn + lim.period_n
            if en >= E9 then
                es, en = es + 1, en - E9
            end
            if es == ws and en == wn then
                prev = small_nums[e] or small_num(e)
            end
        end
    end
    -- tdiff(now, ws) and tdiff(ws, now), one the other negated.
    local ds = now_s - ws
    if ds > FAR_S or ds < -FAR_S then
        return nil
    end
    local offset = ds * E9 + (now_n - wn)
    local to_start = -offset
    if offset < 0 then
        offset = 0
    end
    local estimate = cur
    if prev > 0 then
        local x = prev * (period - offset)
        if x < TWO53 then
            estimate = idiv(x, period) + cur
        else
            estimate = muldivmod(prev, period - offset, period) + cur
        end
    end
    local fits = cost == 0 or cost <= limit - estimate
    if fits then
        local add = min(cost, 4294967295 - cur)
        cur, estimate = cur + add, estimate + add
    end
    local reset, retry = 0, 0
    if cur > 0 then
        reset = to_start + 2 * period
    elseif prev > 0 then
        reset = to_start + period
    end
    if not fits then
        retry = sliding_wait(period, limit, cost, prev, cur, to_start)
    end
    -- Rolled forward even when refused, as the general path writes it.
    if reset <= 0 then
        if had then
            rcall('DEL', key)
        end
    else
        local ttl = ceil_div(reset, 1000000) + EXTRA_TTL_MS
        rcall('SET', key, (small_strs[ws] or str_of(ws)) .. ' ' ..
              (small_strs[wn] or str_of(wn)) .. ' ' ..
              (small_strs[prev] or str_of(prev)) .. ' ' ..
              (small_strs[cur] or str_of(cur)), 'PX',
              small_strs[ttl] or str_of(ttl))
    end
    return {fits and 1 or 0, limit > estimate and limit - estimate or 0,
            reset, retry, 0}
end
