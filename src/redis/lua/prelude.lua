-- prelude.lua - what every algorithm's script shares: exact integer
-- arithmetic on Lua numbers, times as (seconds, nanoseconds) pairs, the
-- state codec and key expiry.  src/redis/lua/*.lua are concatenated in
-- the order script.cmake gives into one chunk (one FCALL or EVALSHA
-- decides every item of a call, whatever their algorithms), so every name
-- here is local to that one chunk.
--
-- Redis 7.0 runs Lua 5.1, whose numbers are IEEE doubles: integers are
-- exact only up to 2^53, and wall-clock ns (about 1.8e18) are not.  So an
-- absolute time is never one number: it is a pair (s, n), 0 <= n < 1e9,
-- each part exact, and the algorithms do their arithmetic on differences
-- from now, which the limits' bounds (call.c, docs/stores.md) keep below
-- 2^53.  Products that could pass 2^53 go through muldivmod().
-- Library functions as locals: looking a global up on every use costs
-- more than these assignments once per run.  They are assigned by
-- bind_globals(), not here: a Redis Functions library runs its top level
-- at FUNCTION LOAD, where Redis 7.0 offers no global but
-- redis.register_function (not even math or string).
local floor, min, max, format, match, gmatch, byte, rcall

local function bind_globals()
    floor, min, max = math.floor, math.min, math.max
    format, match, gmatch = string.format, string.match, string.gmatch
    byte = string.byte
    rcall = redis.call
end

local E9 = 1000000000
local TWO53 = 9007199254740992
-- Differences of more than 2^23 s (97 days) are not computed: 2^23 * 1e9
-- + 1e9 < 2^53.  No limit's horizon is that long (period <= 2^52 ns).
local FAR_S = 8388608

-- The modes of src/internal.h's sl__mode: RECORD consumes the cost
-- whether or not it fits (SL_RECORD).
local PEEK, COMMIT, REFUSE, RECORD = 0, 1, 2, 3

-- Lua's tostring keeps 14 digits; every number written to Redis goes
-- through this instead.  '%d' formats the number as a C long, exact for
-- the integers below 2^53 written here, and costs a fifth of '%.0f'
-- (glibc's printf_fp; docs/benchmarks.md, "Redis's instructions per
-- decision").
local function num(x)
    return format('%d', x)
end

-- The number of a string that takes few values (a cost, the extra TTL,
-- the server's seconds, a state's seconds): tonumber() is strtod, about
-- 1k instructions a call, a look-up of the string a tenth of that.  And
-- the other way, the decimal of a number that takes few values (the
-- seconds, a TTL in ms): format() is about 2k.  At most MEMO_KEPT of
-- each are kept: a library's locals live as long as it is loaded.
local MEMO_KEPT = 256

-- A memo of convert: its table, for the callers that look up first (a
-- look-up is cheaper than a call), and the function that looks up and
-- converts on a miss.  Emptied in place when full, so that the table
-- the callers hold stays the memo's.
local function memo_of(convert)
    local t, n = {}, 0
    return t, function(x)
        local v = t[x]
        if v == nil then
            v = convert(x)
            if n == MEMO_KEPT then
                for k in pairs(t) do
                    t[k] = nil
                end
                n = 0
            end
            t[x], n = v, n + 1
        end
        return v
    end
end

local small_nums, small_num = memo_of(function(s)
    return tonumber(s)
end)
local small_strs, str_of = memo_of(num)

-- Raises an error the C store maps to SL_ERANGE.  Raised only before any
-- write of the call (algorithms compute first and write last; a call
-- with several items decides them all in a PEEK pass first).
local function out_of_range(what)
    error({err = 'ERANGE ' .. what})
end

-- floor(a / b) for integers 0 <= a < 2^53, b >= 1: the double quotient is
-- correctly rounded and cannot round up to the next integer below 2^53,
-- so floor() of it is exact; the check below keeps that honest.
local function idiv(a, b)
    local q = floor(a / b)
    local r = a - q * b
    if r < 0 then
        q = q - 1
    elseif r >= b then
        q = q + 1
    end
    return q
end

local function ceil_div(a, b)
    local q = idiv(a, b)
    if q * b < a then
        q = q + 1
    end
    return q
end

-- floor(a * b / m) and a * b mod m, exact for integers a, b >= 0 below
-- 2^53 and 1 <= m <= 2^52 when the quotient is below 2^53: schoolbook
-- multiplication by the bits of a, reducing mod m at each step so that no
-- intermediate passes 2m <= 2^53.
local function muldivmod(a, b, m)
    local bq = idiv(b, m)
    local br = b - bq * m
    local q, r, p, rest = 0, 0, 1, a
    while p * 2 <= a do
        p = p * 2
    end
    while p >= 1 do
        q, r = q * 2, r * 2
        if r >= m then
            q, r = q + 1, r - m
        end
        if rest >= p then
            rest = rest - p
            r = r + br
            if r >= m then
                q, r = q + 1, r - m
            end
        end
        p = p / 2
    end
    return q + a * bq, r
end

-- ---- times: (s, n) pairs ----

local function tcmp(s1, n1, s2, n2)
    if s1 ~= s2 then
        return s1 < s2 and -1 or 1
    end
    if n1 ~= n2 then
        return n1 < n2 and -1 or 1
    end
    return 0
end

-- (s1, n1) - (s2, n2) in ns.  Further apart than 2^23 s only when a
-- request is stamped months before a key's state (the memory store
-- answers that; doubles cannot): refused as out of range.
local function tdiff(s1, n1, s2, n2)
    local ds = s1 - s2
    if ds > FAR_S or ds < -FAR_S then
        out_of_range('now is more than 2^23 s away from the key state')
    end
    return ds * E9 + (n1 - n2)
end

-- The same, clamped to +-2^53 beyond 2^23 s: for callers to whom any
-- difference past their horizon means the same.
local function tdiff_clamped(s1, n1, s2, n2)
    local ds = s1 - s2
    if ds > FAR_S then
        return TWO53
    elseif ds < -FAR_S then
        return -TWO53
    end
    return ds * E9 + (n1 - n2)
end

-- (s, n) + d for an integer 0 <= d <= 2^53.
local function tadd(s, n, d)
    local q = idiv(d, E9)
    s, n = s + q, n + (d - q * E9)
    if n >= E9 then
        s, n = s + 1, n - E9
    end
    return s, n
end

-- (s, n) - d for an integer 0 <= d <= 2^53.
local function tsub(s, n, d)
    local q = idiv(d, E9)
    s, n = s - q, n - (d - q * E9)
    if n < 0 then
        s, n = s - 1, n + E9
    end
    return s, n
end

-- now mod p for 1 <= p <= 2^52: (s * 1e9 + n) mod p without forming it.
local function tmod(s, n, p)
    local sm = s - idiv(s, p) * p
    local _, r = muldivmod(sm, E9, p)
    local nm = n - idiv(n, p) * p
    r = r + nm
    if r >= p then
        r = r - p
    end
    return r
end

-- The start of the window of length p (1 <= p <= 2^52) holding now, the
-- windows aligned to time 0: now - tmod(now, p).  Most periods are whole
-- seconds or divide a second, and then need no muldivmod() (its loop,
-- one turn per bit of s mod p, was ~10k instructions a decision for a
-- minute's window): p = q * 1e9 starts at (s - s mod q, 0), p dividing
-- 1e9 at (s, n - n mod p).  p / 1e9 and 1e9 / p are exact when whole, so
-- floor() of them times the divisor gives back the dividend only then.
local function window_start(s, n, p)
    local q = floor(p / E9)
    if q * E9 == p then
        return idiv(s, q) * q, 0
    end
    q = floor(E9 / p)
    if q * p == E9 then
        return s, idiv(n, p) * p
    end
    return tsub(s, n, tmod(s, n, p))
end

-- ---- state ----

-- A string state is its integers in decimal, separated by spaces.  Most
-- states are three numbers: read and written in one step.
local function decode(v)
    if not v then
        return nil
    end
    local a, b, c = match(v, '^(%S+) (%S+) (%S+)$')
    if a then
        return {tonumber(a), tonumber(b), tonumber(c)}
    end
    local t = {}
    for w in gmatch(v, '%S+') do
        t[#t + 1] = tonumber(w)
    end
    return t
end

local function encode(t)
    if #t == 3 then
        return format('%d %d %d', t[1], t[2], t[3])
    end
    local parts = {}
    for i = 1, #t do
        parts[i] = num(t[i])
    end
    return table.concat(parts, ' ')
end

local function get_state(key)
    local v = rcall('GET', key)
    if v == false then
        return nil
    end
    return decode(v)
end

-- Keys expire by themselves: the TTL is the time until the state is back
-- to initial (ceil to ms, so never early on the caller's clock) plus the
-- store's extra_ttl_ms.  `left` <= 0: the state is initial, drop it.
local EXTRA_TTL_MS = 0

-- The item's tick in ns (main.lua, "Ticks"): 1, or a power of ten for a
-- limit whose times in ns would pass 2^52.  Set before each item's check.
local TICK = 1

local function ttl_ms(left)
    if TICK == 1 then
        return ceil_div(left, 1000000) + EXTRA_TTL_MS
    elseif TICK >= 1000000 then
        return left * (TICK / 1000000) + EXTRA_TTL_MS
    end
    return ceil_div(left, 1000000 / TICK) + EXTRA_TTL_MS
end

-- now (s, n) in ns as the same pair in ticks of q ns (q = 10^k, k <= 9,
-- f = 1e9 / q): s = a q + b, b < q, makes now / q = a 1e9 + b f +
-- floor(n / q), whose last two terms stay below 1e9.  Exact, and floored:
-- a tick is counted from its start.
local function in_ticks(s, n, q, f)
    local a = idiv(s, q)
    return a, (s - a * q) * f + idiv(n, q)
end

-- Writes a decided state: `had` says whether the key held state before,
-- `changed` whether the decision changed it (an unchanged state keeps the
-- TTL it was written with, which is still right).
local function put_state(key, had, t, left, changed)
    if left <= 0 then
        if had then
            rcall('DEL', key)
        end
    elseif changed then
        rcall('SET', key, encode(t), 'PX', num(ttl_ms(left)))
    end
end

-- A count that recordings (or logged rejections) may take past L must
-- stay exact: refused before it passes 2^53 (2^13 recordings of cost 2^40
-- inside one window).  Checked in every mode, so in the PEEK pass too.
local function check_sum(sum, cost)
    if sum + cost > TWO53 then
        out_of_range('count past 2^53')
    end
end

-- The decision as an array, in the order of the reply (main.lua): a
-- one-item call's reply is the decision itself.  An array, not a table
-- of named fields: the named table and its copy into the reply cost 4.9k
-- instructions a decision in lua5.1, the array 2.0k.  The C side fills
-- in limit.
local ALLOWED, REMAINING, RESET_AFTER, RETRY_AFTER, DELAY = 1, 2, 3, 4, 5

local function decision()
    return {0, 0, 0, 0, 0}
end
