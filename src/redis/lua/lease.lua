-- lease.lua - a node's leases of a fixed_window's units (src/decision/
-- lease.c; docs/stores.md, "Leases"): taken on the call the node sends
-- anyway, given back by a call of their own.
--
-- Taking.  An item whose cost field is "c+S" (main.lua) is decided as
-- any other; when it was committed, up to S more units are counted in
-- the same window if they fit under the limit, and the reply has three
-- more integers for it: the units granted and the window's start (s, n),
-- the window's identity for a return.  The units are counted now, in the
-- window Redis is in: whatever the node does with them, the window's
-- count never passes L, and they retire with it.
--
-- Returning.  A run whose args[1] is 'R' gives units back: per key three
-- arguments, the units and the start (s, n) of the window they were
-- charged in.  They are taken off the count only if that window is
-- still the key's: a late return never mints units into a newer window.
-- A bucket's (lease_bucket.lua) are the units, the holder and its
-- limit's numbers "B L P p[ s n]".  The reply is the units taken off per
-- key.

-- After item (key, lim) of a call was committed at now: up to ask more
-- units into its window.  Returns the units, and the window's start.
-- A bucket's ask has by = {life_ms, holder} (bucket_take).
local function lease_take(key, lim, ask, now_s, now_n, by)
    if by then
        return bucket_lease().take(key, lim, ask, by[1], by[2], now_s, now_n)
    end
    local st = get_state(key)
    local ws, wn = window_start(now_s, now_n, lim.period)
    -- The commit wrote the state (its cost was at least 1), in the
    -- window of now or, if the server's clock stepped back, in the
    -- stored later one, which is the one charged (fixed_window.lua).
    if st == nil or tcmp(ws, wn, st[1], st[2]) > 0 then
        return 0, ws, wn
    end
    ws, wn = st[1], st[2]
    local granted = min(ask, lim.limit - st[3])
    if granted > 0 then
        local es, en = tadd(ws, wn, lim.period)
        put_state(key, true, {ws, wn, st[3] + granted},
                  tdiff(es, en, now_s, now_n), true)
    else
        granted = 0
    end
    return granted, ws, wn
end

-- A return run (the header): its reply.  clock() is the server's time.
local function lease_return(run_keys, run_args, clock)
    local reply = {}
    for i = 1, #run_keys do
        local units = tonumber(run_args[3 * i - 1])
        local ws, wn = run_args[3 * i], run_args[3 * i + 1]
        local back = 0
        if units and wn and string.find(wn, ' ', 1, true) then
            back = bucket_lease().ret(run_keys[i], units, ws, wn, clock)
        else
            local st = get_state(run_keys[i])
            ws, wn = tonumber(ws), tonumber(wn)
            if units and st ~= nil and #st == 3 and st[1] == ws and
                st[2] == wn then
                back = min(units, st[3])
                if back > 0 then
                    rcall('SET', run_keys[i], encode({ws, wn, st[3] - back}),
                          'KEEPTTL')
                end
            end
        end
        reply[i] = back
    end
    return reply
end
