-- gcra.lua - src/core/gcra.c on Redis: one theoretical arrival time TAT,
-- emission interval T, tolerance B * T.
local function gcra(key, lim, cost, now_s, now_n, mode)
    local tolerance = lim.burst * lim.t_num
    local st = get_state(key)
    local had = st ~= nil
    local converted
    st, converted = sched_adopt(lim, st, now_s, now_n)
    local tat_ahead = sched_ahead(lim, st, now_s, now_n)
    local d = decision()
    -- cost > B never fits; only then could cost * T pass 2^53 ticks.
    local fits = cost <= lim.burst
    local new_ahead = 0

    if fits then
        new_ahead = tat_ahead + cost * lim.t_num
        fits = new_ahead <= tolerance
    end
    d[ALLOWED] = fits and 1 or 0
    if fits and (mode == COMMIT or mode == RECORD) then
        st = sched_push(lim, st, now_s, now_n, cost)
        tat_ahead = new_ahead
    elseif mode == RECORD then
        st, tat_ahead = sched_record(lim, now_s, now_n, cost, tat_ahead)
        if cost <= lim.burst then
            new_ahead = tat_ahead + cost * lim.t_num
        end
    end
    sched_report(lim, tat_ahead, d)
    if not fits then
        d[RETRY_AFTER] = cost > lim.burst and -1 or
            sched_wait(lim, new_ahead, tolerance)
    end
    sched_save(key, had, st, now_s, now_n, mode, fits, converted)
    return d
end
