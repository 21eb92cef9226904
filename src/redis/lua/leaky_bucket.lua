-- leaky_bucket.lua - src/core/leaky_bucket.c on Redis: a queue of at most
-- B units drained at L per P; the state is the time E the queue is empty,
-- and an admitted request waits for the work queued ahead of it.
local function leaky_bucket(key, lim, cost, now_s, now_n, mode)
    local burst = lim.burst
    local st = get_state(key)
    local had = st ~= nil
    local converted
    st, converted = sched_adopt(lim, st, now_s, now_n)
    local queued = sched_ahead(lim, st, now_s, now_n)
    local d = decision()
    local room = cost <= burst and (burst - cost) * lim.t_num or -1
    local fits = cost <= burst and queued <= room

    d[ALLOWED] = fits and 1 or 0
    if fits then
        d[DELAY] = ceil_div(queued, lim.t_den)
        if mode == COMMIT or mode == RECORD then
            st = sched_push(lim, st, now_s, now_n, cost)
            queued = sched_ahead(lim, st, now_s, now_n)
        end
    elseif mode == RECORD then
        -- Sent without queueing: no delay, and the queue is full.
        st, queued = sched_record(lim, now_s, now_n, cost, queued)
    end
    sched_report(lim, queued, d)
    if not fits then
        d[RETRY_AFTER] = cost > burst and -1 or sched_wait(lim, queued, room)
    end
    sched_save(key, had, st, now_s, now_n, mode, fits, converted)
    return d
end
