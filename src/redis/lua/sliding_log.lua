-- sliding_log.lua - src/core/sliding_log.c on Redis: the times and costs
-- of accepted requests (and, with SL_LOG_REJECTED, of rejected ones) in
-- the window (t - P, t], kept in an event list (eventlog.lua).  A key's
-- time never runs backwards: a request stamped before the latest one it
-- was judged at is judged at that latest time.
local LOG_REJECTED = 1

local function sliding_log(key, lim, cost, now_s, now_n, mode)
    local limit, period = lim.limit, lim.period
    local log_rejected = lim.flags % 2 == LOG_REJECTED
    local max_len = min(2 * limit + 16, 4294967295)
    local log = log_open(key)
    local ts, tn = now_s, now_n
    local d = decision()

    if log.ls and tcmp(log.ls, log.ln, ts, tn) > 0 then
        ts, tn = log.ls, log.ln
    end
    log_expire(log, tsub(ts, tn, period))
    check_sum(log.sum, cost)
    local fits = cost == 0 or cost <= limit - log.sum
    -- A rejected attempt is logged under SL_LOG_REJECTED, whether this
    -- limit or another of the same call rejected it, and always when
    -- recorded.
    local keep_rejected = log_rejected or mode == RECORD
    local record = cost > 0 and mode ~= PEEK and
        ((fits and mode ~= REFUSE) or
         (keep_rejected and (not fits or mode == REFUSE)))

    if record then
        log_push(log, ts, tn, cost, max_len)
    end
    local left = log_report(log, limit, period, cost, fits, now_s, now_n, d)
    if mode ~= PEEK then
        log_save(log, ts, tn, left)
    end
    return d
end
