-- stepped_window.lua - src/core/stepped_window.c on Redis: the Databox
-- sliding window of step counters.  The non-empty steps are an event list
-- (eventlog.lua) whose times are the steps' start times (not step numbers:
-- with a 1 ns step they pass 2^53); the window at t is the n = P / step
-- steps ending with t's step.  A key's step never runs backwards.
local function stepped_window(key, lim, cost, now_s, now_n, mode)
    local limit, period = lim.limit, lim.period
    local log = log_open(key)
    local ss, sn = tsub(now_s, now_n, tmod(now_s, now_n, lim.step))
    local d = decision()

    if log.ls and tcmp(log.ls, log.ln, ss, sn) > 0 then
        ss, sn = log.ls, log.ln
    end
    log_expire(log, tsub(ss, sn, period))
    local fits = cost <= limit - log.sum

    d.allowed = fits and 1 or 0
    if cost > 0 and fits and mode == COMMIT then
        log_push(log, ss, sn, cost, math.huge)
    end
    d.remaining = limit - log.sum
    local left = 0
    if log.sum > 0 then
        local e = log_newest(log)
        local es, en = tadd(e[1], e[2], period)
        left = tdiff(es, en, now_s, now_n)
    end
    d.reset_after = left
    if not fits and cost > limit then
        d.retry_after = -1
    elseif not fits then
        local e = log_fits_after(log, limit - cost)
        local es, en = tadd(e[1], e[2], period)
        d.retry_after = tdiff(es, en, now_s, now_n)
    end
    if mode ~= PEEK then
        log_save(log, ss, sn, left)
    end
    return d
end
