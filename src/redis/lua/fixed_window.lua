-- fixed_window.lua - src/core/fixed_window.c on Redis: one counter per
-- window [k P, (k + 1) P) aligned to time 0.  The state is "s n count",
-- the window's start time (not k: with P = 1 ns, k passes 2^53) and its
-- count; a now before the stored window is counted in it.
local function fixed_window(key, lim, cost, now_s, now_n, mode)
    local period, limit = lim.period, lim.limit
    local st = get_state(key)
    local ws, wn = window_start(now_s, now_n, period)
    local count = 0
    local d = decision()

    if st ~= nil and tcmp(ws, wn, st[1], st[2]) <= 0 then
        ws, wn, count = st[1], st[2], st[3]
    end
    local es, en = tadd(ws, wn, period)
    check_sum(count, cost)
    -- A query passes even when a recording took the count past L.
    local fits = cost == 0 or cost <= limit - count
    local take = (fits and mode == COMMIT) or mode == RECORD
    d[ALLOWED] = fits and 1 or 0
    if take then
        count = count + cost
    end
    d[REMAINING] = max(0, limit - count)
    local left = count > 0 and tdiff(es, en, now_s, now_n) or 0
    d[RESET_AFTER] = left
    if not fits then
        d[RETRY_AFTER] = cost > limit and -1 or tdiff(es, en, now_s, now_n)
    end
    if mode ~= PEEK then
        put_state(key, st ~= nil, {ws, wn, count}, left, take and cost > 0)
    end
    return d
end
