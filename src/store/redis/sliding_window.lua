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
    if not fits and cost > limit then
        d[RETRY_AFTER] = -1
    elseif not fits then
        local at = period
        if cost <= limit - cur then
            at = first_fit(period, prev, limit - cost - cur)
        end
        if at >= period then
            local nxt = first_fit(period, cur, limit - cost)
            at = nxt < period and period + nxt or 2 * period
        end
        d[RETRY_AFTER] = to_start + at
    end
    if mode ~= PEEK then
        -- Rolled forward even when refused (src/core/sliding_window.c).
        put_state(key, st ~= nil, {ws, wn, prev, cur}, d[RESET_AFTER], true)
    end
    return d
end
