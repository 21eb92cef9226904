-- lease_bucket.lua - leases of a token_bucket's or gcra's units
-- (src/decision/lease.c; docs/stores.md, "Leases", proves the bound).
-- A bucket has no window whose end retires a lease's units, so Redis
-- keeps the leases live on the key: a hash beside it, one field per
-- holder (a node's thread, by its random id), "units expiry" with the
-- expiry in ms on Redis's clock.  With out the units of the live fields,
-- every decision of such a limit first applies the floor
--
--     F <- max(F, now + out * T)
--
-- (the bucket's level is at most B - out), so that units a node holds
-- unused are never refilled under it.  A field that expired stops
-- counting at its expiry, not when it is read: the floor it held up to
-- then, max(F, e + out(e) * T), is applied before it is dropped, as it
-- would have been by a decision at e.  The hash lives B * T past its
-- last expiry, after which those floors are all below now.
--
-- A limit so marked ("@p" before its spec, main.lua) never takes a fast
-- path: every call of it goes through leased_bucket().  p is the index
-- of the ':' after the limit's identity in its key's name; the hash's
-- name has '+' there, which no key of a limit has.
--
-- The functions are made by make_bucket_lease() when a run first needs
-- them: an EVALSHA runs the chunk's top level on every call, and each
-- function defined there costs every call, leased or not.

local function make_bucket_lease()
    local function lease_hash(key, lim)
        local p = lim.lease_at
        return string.sub(key, 1, p - 1) .. '+' .. string.sub(key, p + 1)
    end

    -- now in ms on Redis's clock, rounded down and up.
    local function ms_floor(now_s, now_n)
        return now_s * 1000 + idiv(now_n, 1000000)
    end

    local function ms_ceil(now_s, now_n)
        return now_s * 1000 + ceil_div(now_n, 1000000)
    end

    -- st raised to at least (ts, tn) + units * T, capped at B * T ahead:
    -- the new state, and whether it changed.
    local function lease_raise(lim, st, ts, tn, units)
        local lead = min(units, lim.burst) * lim.t_num
        local whole = idiv(lead, lim.t_den)
        local s, n = tadd(ts, tn, whole)
        local f = lead - whole * lim.t_den
        if st ~= nil then
            local c = tcmp(st[1], st[2], s, n)
            if c > 0 or (c == 0 and st[3] >= f) then
                return st, false
            end
        end
        return {s, n, f, lim.tag}, true
    end

    -- Applies the floor of key's leases at now, dropping the expired ones
    -- (their floors applied at their expiries first), and writes the state
    -- back if it rose.  Returns the hash's name and the live fields
    -- (holder -> {units, expiry}).
    local function lease_floor(key, lim, now_s, now_n)
        local hk = lease_hash(key, lim)
        local flat = rcall('HGETALL', hk)
        local live = {}
        if #flat == 0 then
            return hk, live
        end
        local st = get_state(key)
        local had = st ~= nil
        local changed, raised
        st, changed = sched_adopt(lim, st, now_s, now_n)
        local now_ms, out, expired = ms_floor(now_s, now_n), 0, {}
        for i = 1, #flat, 2 do
            local u, e = match(flat[i + 1], '^(%d+) (%d+)$')
            u, e = tonumber(u), tonumber(e)
            out = out + u
            if e <= now_ms then
                expired[#expired + 1] = {e, u, flat[i]}
            else
                live[flat[i]] = {u, e}
            end
        end
        table.sort(expired, function(a, b)
            return a[1] < b[1]
        end)
        for _, x in ipairs(expired) do
            local es = idiv(x[1], 1000)
            st, raised = lease_raise(lim, st, es, (x[1] - es * 1000) * 1000000,
                                     out)
            changed = changed or raised
            out = out - x[2]
            rcall('HDEL', hk, x[3])
        end
        if out > 0 then
            st, raised = lease_raise(lim, st, now_s, now_n, out)
            changed = changed or raised
        end
        if changed then
            put_state(key, had, st, sched_left(st, now_s, now_n), true)
        end
        return hk, live
    end

    -- The check of a leased bucket limit, in every mode: the floor, then
    -- the algorithm (lim.leased_check) as for any limit.
    local function leased_bucket(key, lim, cost, now_s, now_n, mode)
        lease_floor(key, lim, now_s, now_n)
        return lim.leased_check(key, lim, cost, now_s, now_n, mode)
    end

    -- After item (key, lim) was committed at now: up to ask more units for
    -- holder, living life_ms.  Returns the units and two zeros (a bucket's
    -- lease has no window).
    local function bucket_take(key, lim, ask, life_ms, holder, now_s, now_n)
        local st = get_state(key)
        local ahead = sched_ahead(lim, st, now_s, now_n)
        local g = min(ask, idiv(lim.burst * lim.t_num - ahead, lim.t_num))
        if g <= 0 then
            return 0, 0, 0
        end
        st = sched_push(lim, st, now_s, now_n, g)
        put_state(key, true, st, sched_left(st, now_s, now_n), true)
        -- The commit ran leased_bucket(), which dropped the expired fields:
        -- a field found is live, and its units add up.
        local hk = lease_hash(key, lim)
        local units, expiry = g, ms_ceil(now_s, now_n) + life_ms
        local old = rcall('HGET', hk, holder)
        if old then
            local u, e = match(old, '^(%d+) (%d+)$')
            units, expiry = units + tonumber(u), max(expiry, tonumber(e))
        end
        rcall('HSET', hk, holder, num(units) .. ' ' .. num(expiry))
        -- Past its last expiry by B * T, every floor it held is below now.
        local ttl = expiry - ms_floor(now_s, now_n) +
                        ceil_div(lim.burst * lim.t_num, lim.t_den * 1000000) + 1
        if rcall('PTTL', hk) < ttl then
            rcall('PEXPIRE', hk, num(ttl))
        end
        return g, 0, 0
    end

    -- A return of units by holder to key, whose limit is "B L P p" (and now
    -- "s n" when the caller's clock decides; else clock(), the server's):
    -- the units taken back, at most
    -- the holder's live field's, which goes.  A holder with no live field
    -- (expired, or returned already) gets nothing back: its units stay
    -- consumed, never minted.
    local function bucket_return(key, units, holder, spec, clock)
        local b, l, p, at, ts, tn = match(spec,
            '^(%d+) (%d+) (%d+) (%d+) ?(%d*) ?(%d*)$')
        if not b then
            return 0
        end
        l, p = tonumber(l), tonumber(p)
        local now_s, now_n = tonumber(ts), tonumber(tn)
        if not now_s then
            now_s, now_n = clock()
        end
        local g = l
        local x = p
        while x > 0 do
            g, x = x, g - idiv(g, x) * x
        end
        local lim = {burst = tonumber(b), limit = l, base_l = l, period = p,
                     t_num = p / g, t_den = l / g, lease_at = tonumber(at)}
        local hk, live = lease_floor(key, lim, now_s, now_n)
        local field = live[holder]
        if field == nil then
            return 0
        end
        local back = min(units, field[1])
        local st = get_state(key)
        local ahead = sched_ahead(lim, st, now_s, now_n) - back * lim.t_num
        if ahead < 0 then
            ahead = 0
        end
        local whole = idiv(ahead, lim.t_den)
        local s, n = tadd(now_s, now_n, whole)
        st = {s, n, ahead - whole * lim.t_den}
        put_state(key, true, st, sched_left(st, now_s, now_n), true)
        rcall('HDEL', hk, holder)
        return back
    end

    return {check = leased_bucket, take = bucket_take, ret = bucket_return}
end

-- The functions above, made once per run (a library's: once).
local bucket_lease_fns
local function bucket_lease()
    if not bucket_lease_fns then
        bucket_lease_fns = make_bucket_lease()
    end
    return bucket_lease_fns
end
