-- token_bucket.lua - src/core/token_bucket.c on Redis: a bucket of B tokens
-- refilled at L per P; the state is the time F the bucket is full again.
local function token_bucket(key, lim, cost, now_s, now_n, mode)
    local burst = lim.burst
    local st = get_state(key)
    local had = st ~= nil
    local converted
    st, converted = sched_adopt(lim, st, now_s, now_n)
    local deficit = sched_ahead(lim, st, now_s, now_n)
    local d = decision()
    local fits = cost <= burst and deficit <= (burst - cost) * lim.t_num

    d[ALLOWED] = fits and 1 or 0
    if fits and (mode == COMMIT or mode == RECORD) then
        st = sched_push(lim, st, now_s, now_n, cost)
        deficit = sched_ahead(lim, st, now_s, now_n)
    elseif mode == RECORD then
        st, deficit = sched_record(lim, now_s, now_n, cost, deficit)
    end
    sched_report(lim, deficit, d)
    if not fits then
        d[RETRY_AFTER] = cost > burst and -1 or
            sched_wait(lim, deficit, (burst - cost) * lim.t_num)
    end
    sched_save(key, had, st, now_s, now_n, mode, fits, converted)
    return d
end
