-- stepped_window.lua - src/core/stepped_window.c on Redis: the Databox
-- sliding window of step counters.  The non-empty steps are an event list
-- (eventlog.lua) whose times are the steps' start times (not step numbers:
-- with a 1 ns step they pass 2^53); the window at t is the n = P / step
-- steps ending with t's step.  A key's step never runs backwards.
local function stepped_window(key, lim, cost, now_s, now_n, mode)
    local limit, period = lim.limit, lim.period
    local log = log_open(key)
    local ss, sn = window_start(now_s, now_n, lim.step)
    local d = decision()

    if log.ls and tcmp(log.ls, log.ln, ss, sn) > 0 then
        ss, sn = log.ls, log.ln
    end
    log_expire(log, tsub(ss, sn, period))
    check_sum(log.sum, cost)
    -- A query passes even when a recording took the sum past L.
    local fits = cost == 0 or cost <= limit - log.sum

    if cost > 0 and ((fits and mode == COMMIT) or mode == RECORD) then
        log_push(log, ss, sn, cost, math.huge)
    end
    local left = log_report(log, limit, period, cost, fits, now_s, now_n, d)
    if mode ~= PEEK then
        log_save(log, ss, sn, left)
    end
    return d
end
