-- eventlog.lua - a key's log of (time, cost) events, oldest first: the
-- state of sliding_log (event times) and stepped_window (step start
-- times), as src/core/eventlog.c keeps it in memory.
--
-- On Redis it is one list per key: element 0 is the meta "sum s n" (the
-- events' total and the latest time the key was judged at), then one
-- element "s n cost" per event.  A list, because events leave from the
-- head and join at the tail: LPOP and RPUSH are O(1), and a check reads
-- only the events it expires, the newest, and (when it rejects) the ones
-- up to the first that makes room.  Equal times merge, as in memory.
--
-- A check works on a view: log_open() reads the meta, log_expire() and
-- log_push() change the view, and log_save() writes the difference.

local function log_open(key)
    local log = {key = key, sum = 0, len = 0, k = 0}
    local meta = rcall('LINDEX', key, 0)
    if meta then
        local m = decode(meta)
        log.sum, log.ls, log.ln = m[1], m[2], m[3]
        log.len = rcall('LLEN', key) - 1
    end
    return log
end

-- The stored event i (1: the oldest stored), decoded.
local function log_event(log, i)
    return decode(rcall('LINDEX', log.key, i))
end

-- Drops, in the view, the events at or before (s, n).
local function log_expire(log, s, n)
    while log.k < log.len do
        local e = log_event(log, log.k + 1)
        if tcmp(e[1], e[2], s, n) > 0 then
            break
        end
        log.k = log.k + 1
        log.sum = log.sum - e[3]
    end
end

local function log_newest(log)
    if log.appended then
        return log.appended
    elseif log.merged then
        return log.merged
    elseif log.len > log.k then
        return log_event(log, log.len)
    end
    return nil
end

-- Appends (s, n, cost), (s, n) >= the newest; merges into the newest when
-- the times are equal or when max_len events are live (the merged event
-- takes the later time).  At most once per view.
local function log_push(log, s, n, cost, max_len)
    local newest = log_newest(log)
    if newest and ((newest[1] == s and newest[2] == n) or
        log.len - log.k >= max_len) then
        log.merged = {s, n, newest[3] + cost}
    else
        log.appended = {s, n, cost}
    end
    log.sum = log.sum + cost
end

-- The time of the event whose expiry first brings the sum down to target
-- or less, oldest first; nil if it already is.
local function log_fits_after(log, target)
    local sum = log.sum
    if sum <= target then
        return nil
    end
    local live = {}
    if log.len > log.k then
        live = rcall('LRANGE', log.key, log.k + 1, log.len)
    end
    for i = 1, #live do
        local e = decode(live[i])
        if i == #live and log.merged then
            e = log.merged
        end
        sum = sum - e[3]
        if sum <= target then
            return e
        end
    end
    return log.appended
end

-- Writes the view back, judged latest at (ls, ln); `left` is the time
-- until the log is empty again (the key's TTL).
local function log_save(log, ls, ln, left)
    if log.sum == 0 or left <= 0 then
        if log.len > 0 or log.ls then
            rcall('DEL', log.key)
        end
        return
    end
    if log.k == 0 and not log.merged and not log.appended and
        log.ls == ls and log.ln == ln then
        return -- unchanged, and so is its TTL
    end
    rcall('LPOP', log.key)
    if log.k > 0 then
        rcall('LPOP', log.key, log.k)
    end
    if log.merged then
        rcall('LSET', log.key, -1, encode(log.merged))
    end
    if log.appended then
        rcall('RPUSH', log.key, encode(log.appended))
    end
    rcall('LPUSH', log.key, encode({log.sum, ls, ln}))
    rcall('PEXPIRE', log.key, num(ttl_ms(left)))
end

-- What both logs report once the view is decided: remaining, and the
-- times until the log is empty (returned: the key's TTL) and until the
-- request would fit, measured from now; `horizon` is how long an event
-- counts (P).
local function log_report(log, limit, horizon, cost, fits, now_s, now_n, d)
    local left = 0
    d[ALLOWED] = fits and 1 or 0
    -- Recordings and logged rejections can take the sum past L.
    d[REMAINING] = max(0, limit - log.sum)
    if log.sum > 0 then
        local e = log_newest(log)
        local es, en = tadd(e[1], e[2], horizon)
        left = tdiff(es, en, now_s, now_n)
    end
    d[RESET_AFTER] = left
    if not fits and cost > limit then
        d[RETRY_AFTER] = -1
    elseif not fits then
        local e = log_fits_after(log, limit - cost)
        local es, en = tadd(e[1], e[2], horizon)
        d[RETRY_AFTER] = tdiff(es, en, now_s, now_n)
    end
    return left
end
