-- fast.lua - the common bucket decision in one function: a token_bucket
-- or gcra limit of its own numbers (no override's tag), one item,
-- committed (not recorded), on a state of three fields or none.  The same
-- decision, field for field, and the same state string and TTL as
-- token_bucket.lua / gcra.lua through schedule.lua (and src/core/), but
-- with the arithmetic in locals: the general path's ~45 function calls,
-- 4 tables and 5 strtods per decision were ~3/4 of the Lua's
-- instructions (docs/benchmarks.md, "The Lua fast path").  Anything else
-- (a state of four fields, written under an override; a state not in the
-- canonical form) returns nil, before any write: the caller then decides
-- by the general path.
--
-- Why one function serves both: with add = cost * T (T = t_num ticks),
-- token_bucket admits iff cost <= B and deficit <= (B - cost) * T, gcra
-- iff cost <= B and ahead + add <= B * T, the same inequality in exact
-- integers below 2^53; both then report the lead plus add, and a refusal
-- waits ceil((lead + add - B * T) / t_den) ns (-1 over B).
--
-- The reply is one integer, the lead after the decision, x = lead when
-- admitted and -lead - 1 when refused (call.c's bucket_decision): the
-- remaining, the reset and the wait are the lead's functions of B, T and
-- the cost, which the caller knows, so they cost neither a table here
-- nor four integers of reply (docs/stores.md, "Fast paths").
--
-- After an admission the lead is lead + add exactly: S' = max(S, now) +
-- add / t_den, so S' - now in ticks is add when S <= now (lead 0), else
-- (S - now) + add; past the horizon (lead capped at B * T) only cost 0
-- fits, and the lead stays B * T.  So sched_ahead() need not run again.

-- The last state string written and its TTL, and what they were made
-- of: the calls of a batch run at one instant, so the keys that had no
-- state (or an expired one) and pay the same cost all write the same
-- state, whose string (a format() of its ns, ~2k instructions, and a
-- concatenation) is then made once.
local set_s, set_n, set_f, set_left, set_extra, set_state, set_ttl

local function sched_fast(key, lim, cost, now_s, now_n)
    local v = rcall('GET', key)
    local had, s, n, f = v ~= false, nil, nil, 0
    local burst, t_num, t_den, most = lim.burst, lim.t_num, lim.t_den, lim.most
    local lead, d = 0, 0
    if had then
        local a, b, c = match(v, '^(%d+) (%d+) (%d+)$')
        if a == nil then
            return nil
        end
        -- S's seconds and frac take few values (seconds near now, frac <
        -- t_den, mostly 0): memoized; the ns are read by strtod.  Only
        -- the states the stores write (n < 1e9, frac < t_den): with these
        -- the comparisons with now below are the general path's tcmp().
        s, n, f = small_nums[a] or small_num(a), tonumber(b),
            small_nums[c] or small_num(c)
        if n >= E9 or f >= t_den then
            return nil
        end
        -- tdiff_clamped() and sched_ahead(), inline.
        local ds = s - now_s
        if ds > FAR_S then
            d = TWO53
        elseif ds < -FAR_S then
            d = -TWO53
        else
            d = ds * E9 + (n - now_n)
        end
        if d > lim.horizon then
            lead = most
        elseif d >= 0 then
            lead = d * t_den + f
            if lead > most then
                lead = most
            end
        end
    end

    local fits, add = cost <= burst, 0
    if fits then
        add = cost * t_num
        fits = lead + add <= most
    end
    if fits then
        -- sched_push(): from max(S, now).  idiv() only where a quotient
        -- is not plain: mostly t_den = 1 and whole < 1 s.
        local whole, frac = add, 0
        if t_den > 1 then
            whole = idiv(add, t_den)
            frac = add - whole * t_den
        end
        if not had or d < 0 then
            s, n, f, d = now_s, now_n, 0, 0
        end
        f = f + frac
        if f >= t_den then
            f, whole = f - t_den, whole + 1
        end
        -- tadd(s, n, whole) and the difference to now, which moves by
        -- whole ns (exact unless it was clamped, cost 0).
        d = d + whole
        if whole >= E9 then
            local q = idiv(whole, E9)
            s, whole = s + q, whole - q * E9
        end
        n = n + whole
        if n >= E9 then
            s, n = s + 1, n - E9
        end
        lead = lead + add
    end

    -- sched_save(): sched_left() of the state written, or kept (none:
    -- d and f are 0).
    local left = d + (f > 0 and 1 or 0)
    if left <= 0 then
        if had then
            rcall('DEL', key)
        end
    elseif fits then
        if s ~= set_s or n ~= set_n or f ~= set_f or left ~= set_left or
            EXTRA_TTL_MS ~= set_extra then
            -- ceil_div(left, 1e6) inline: idiv()'s floor and its check,
            -- then up when a remainder is left.
            local ttl = floor(left / 1000000)
            local r = left - ttl * 1000000
            if r < 0 then
                ttl, r = ttl - 1, r + 1000000
            elseif r >= 1000000 then
                ttl, r = ttl + 1, r - 1000000
            end
            if r > 0 then
                ttl = ttl + 1
            end
            ttl = ttl + EXTRA_TTL_MS
            set_s, set_n, set_f, set_left, set_extra = s, n, f, left,
                EXTRA_TTL_MS
            set_state = (small_strs[s] or str_of(s)) .. ' ' ..
                            format('%d', n) .. ' ' ..
                            (small_strs[f] or str_of(f))
            set_ttl = small_strs[ttl] or str_of(ttl)
        end
        rcall('SET', key, set_state, 'PX', set_ttl)
    end
    -- The reply: the lead, from which call.c computes the decision's
    -- fields (it knows B, T and the cost) as schedule.lua would.
    if fits then
        return lead
    end
    return -lead - 1
end

-- fixed_window.lua's decision in the same way: one item, committed, on a
-- state "s n count" or none.  A window of whole seconds has n = 0 and a
-- count that takes few values, so the state is read and written through
-- the memos with no strtod nor format.  Where the general path would
-- raise (a count past 2^53, a window more than 2^23 s from now) this
-- returns nil, having written nothing, and the general path raises.
local function fixed_fast(key, lim, cost, now_s, now_n)
    local v = rcall('GET', key)
    local had = v ~= false
    local limit = lim.limit
    local ws, wn = window_start(now_s, now_n, lim.period)
    local count = 0
    if had then
        local a, b, c = match(v, '^(%d+) (%d+) (%d+)$')
        if a == nil then
            return nil
        end
        local ss, sn = small_nums[a] or small_num(a), small_nums[b] or
                           small_num(b)
        -- The stored window when now is not past it: tcmp(ws, st) <= 0.
        if ws < ss or (ws == ss and wn <= sn) then
            ws, wn, count = ss, sn, small_nums[c] or small_num(c)
        end
    end
    if count + cost > TWO53 then
        return nil -- check_sum()
    end
    local fits = cost == 0 or cost <= limit - count
    -- The window's end, tadd(ws, wn, period), and its distance from now.
    local es, en = ws + lim.period_s, wn + lim.period_n
    if en >= E9 then
        es, en = es + 1, en - E9
    end
    if fits then
        count = count + cost
    end
    -- The general path's tdiff() runs when the count is above 0 (a
    -- refusal not over L has one): the reset and the wait.  The end is
    -- after now (the window holds now or is ahead of it), so only the far
    -- side of its range can be left.
    local left = 0
    if count > 0 then
        local ds = es - now_s
        if ds > FAR_S then
            return nil -- tdiff()'s range
        end
        left = ds * E9 + (en - now_n)
    end
    local retry = 0
    if not fits then
        retry = cost > limit and -1 or left
    end
    if left <= 0 then
        if had then
            rcall('DEL', key)
        end
    elseif fits and cost > 0 then
        local ttl = ceil_div(left, 1000000) + EXTRA_TTL_MS
        rcall('SET', key, (small_strs[ws] or str_of(ws)) .. ' ' ..
              (small_strs[wn] or str_of(wn)) .. ' ' ..
              (small_strs[count] or str_of(count)), 'PX',
              small_strs[ttl] or str_of(ttl))
    end
    return {fits and 1 or 0, limit > count and limit - count or 0, left, retry,
            0}
end
