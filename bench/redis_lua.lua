-- bench/redis_lua.lua - the Redis store's Lua (src/redis/lua/*.lua,
-- concatenated in script.cmake's order) run by plain lua5.1 with
-- redis.call stubbed by a table (GET, SET, DEL, TIME; no lists, so not
-- sliding_log or stepped_window): what the Lua itself costs, without
-- Redis, and whether two versions of it decide and write the same.
--
--   lua5.1 bench/redis_lua.lua insn DIR N B [SPEC] [noop]
--       N decisions of cost 1 on random keys of 100k (KEYS=k: of k),
--       B calls per run
--       (a batch when B > 1), on the stub's clock; SPEC is the limit's
--       string (default token_bucket 100/s burst 100).  "noop": the
--       same calls to a run() that does nothing (the driver's own cost).
--       bench/redis_lua_insn.sh counts the instructions.
--   lua5.1 bench/redis_lua.lua diff OLD_DIR NEW_DIR ITER SEED
--       the same ITER random runs (buckets with and without an
--       override on the same keys, windows of whole, sub- and odd
--       periods, batches, records, now moving back and months away) to
--       both; stops at the first run whose reply, written states or
--       TTLs differ.  For changing the Lua: OLD_DIR from git archive;
--       OLD_FORMAT=1 when OLD_DIR takes the arguments of before the
--       call's head (docs/stores.md).
local mode = arg[1]
local ORDER = assert(os.getenv('ORDER'), 'ORDER: the files, in order')

local function load_chunk(dir, clock)
    local parts = {}
    for name in ORDER:gmatch('%S+') do
        -- An older tree may lack a newer file (fast.lua).
        local f = io.open(dir .. '/' .. name .. '.lua')
        if f then
            parts[#parts + 1] = f:read('*a')
            f:close()
        end
    end
    local store, ttl = {}, {}
    local env = setmetatable({}, {__index = _G})
    env.redis = {call = function(cmd, k, v, _, ms)
        if cmd == 'GET' then
            return store[k] or false
        elseif cmd == 'SET' then
            store[k], ttl[k] = v, ms
            return 'OK'
        elseif cmd == 'DEL' then
            store[k], ttl[k] = nil, nil
            return 1
        elseif cmd == 'TIME' then
            return {clock.s, clock.us}
        end
        error('the stub has no ' .. cmd)
    end}
    local fn = assert(loadstring(table.concat(parts) .. '\nreturn run\n', dir))
    setfenv(fn, env)
    return fn(), store, ttl
end

if mode == 'insn' then
    local dir, N, B = arg[2], tonumber(arg[3]), tonumber(arg[4])
    local spec = arg[5] or '0 100 1000000000 100 0 0 10000000 1'
    -- KEYS=100: keys of 100, so that most calls find their key's state.
    local NKEYS = tonumber(os.getenv('KEYS') or '100000')
    local clock = {s = '1790000000', us = '0'}
    local run = load_chunk(dir, clock)
    if arg[6] == 'noop' then
        run = function() return {} end
    end
    local seed, t = 42, 0
    for _ = 1, math.ceil(N / B) do
        t = t + 137
        clock.s = tostring(1790000000 + math.floor(t / 1000000))
        clock.us = tostring(t % 1000000)
        -- As call.c and redis_batch.c send them: one call's now (the
        -- server's) and head; a batch's calls all of one head.
        local keys, head = {}, '0,0,' .. spec .. ',1'
        local args = {'', '', head}
        if B > 1 then
            args = {'B', tostring(B), '1', '', '', head, ''}
        end
        for i = 1, B do
            seed = (seed * 1103515245 + 12345) % 2147483648
            keys[i] = 'k' .. (seed % NKEYS)
        end
        run(keys, args)
    end
    return
end

assert(mode == 'diff', 'mode: insn or diff')
local clock = {s = '1790000000', us = '0'}
local run_old, st_old, ttl_old = load_chunk(arg[2], clock)
local run_new, st_new, ttl_new = load_chunk(arg[3], clock)
local ITER = tonumber(arg[4])
math.randomseed(tonumber(arg[5]))
local R = math.random
local function gcd(a, b)
    while b > 0 do
        a, b = b, a % b
    end
    return a
end
local limits = {}
local Ps = {1000000000, 1000, 7, 3000000001, 60000000000, 1}
for i = 1, 12 do
    local P, L, B, alg = Ps[R(#Ps)], R(1, 50), R(1, 20), R(0, 1)
    local g = gcd(P, L)
    limits[#limits + 1] = {key = 'k' .. i, spec = string.format(
        '%d %d %d %d 0 0 %d %d', alg, L, P, B, P / g, L / g)}
    -- An override of it (L2 = 0 included) on the same key.
    local L2 = R(0, 50)
    local g2 = L2 > 0 and gcd(P, L2) or P
    limits[#limits + 1] = {key = 'k' .. i, spec = string.format(
        '%d %d %d %d 0 0 %d %d %d', alg, L2, P, R(1, 20),
        L2 > 0 and P / g2 or 1, L2 > 0 and L2 / g2 or 1, L)}
end
local WPs = {1000000000, 60000000000, 1000, 7, 3000000001, 250000000,
             3600000000000, 1, 2000000000}
for i = 1, 18 do -- fixed_window and sliding_window
    local P = WPs[R(#WPs)]
    local spec = string.format('%d %d %d 0 0 0 1 1', ({3, 5})[R(2)],
                               R(1, 30), P)
    limits[#limits + 1] = {key = 'w' .. i, spec = spec}
    limits[#limits + 1] = {key = 'w' .. i, spec = spec}
end
local function ser(x)
    if type(x) ~= 'table' then
        return tostring(x)
    end
    local p = {}
    for k, v in pairs(x) do
        p[#p + 1] = tostring(k) .. '=' .. ser(v)
    end
    table.sort(p)
    return '{' .. table.concat(p, ',') .. '}'
end
-- The arguments of calls (each {now_s, now_n, ttl, record, spec, cost,
-- ...}) as call.c and redis_batch.c send them: one call's now and head
-- ("ttl,record,spec,cost,..."); a batch's distinct triples and one byte
-- per call naming its triple.  old: as they were sent before the head
-- (OLD_FORMAT=1, an OLD_DIR of before 2026-11-26's sixth session): one
-- call's fields each an argument, a batch's calls each its item count
-- and fields.
local OLD_FORMAT = os.getenv('OLD_FORMAT') == '1'
local function args_of(calls, old)
    local args = {}
    if old then
        if #calls > 1 then
            args = {'B', tostring(#calls)}
        end
        for _, c in ipairs(calls) do
            if #calls > 1 then
                args[#args + 1] = tostring((#c - 4) / 2)
            end
            for _, x in ipairs(c) do
                args[#args + 1] = x
            end
        end
        return args
    end
    local triples, index, map = {}, {}, {}
    for i, c in ipairs(calls) do
        local t = {c[1], c[2], table.concat(c, ',', 3)}
        local id = table.concat(t, '|')
        if index[id] == nil then
            triples[#triples + 1] = t
            index[id] = #triples - 1
        end
        map[i] = string.char(index[id])
    end
    if #calls == 1 then
        return triples[1]
    end
    args = {'B', tostring(#calls), tostring(#triples)}
    for _, t in ipairs(triples) do
        for _, x in ipairs(t) do
            args[#args + 1] = x
        end
    end
    args[#args + 1] = #triples == 1 and '' or table.concat(map)
    return args
end
-- A reply with fast.lua's one-integer decisions of a bucket (its lead x,
-- -x - 1 refused) made the 5 integers call.c makes of them
-- (bucket_decision), so that replies of either form compare.
local function idiv(a, b)
    local q = math.floor(a / b)
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
    return q * b < a and q + 1 or q
end
local function expand(ok, reply, calls)
    local function one(x, c)
        if type(x) ~= 'number' then
            return x
        end
        local f = {}
        for w in c[5]:gmatch('%d+') do
            f[#f + 1] = tonumber(w)
        end
        local B, tn, td, cost = f[4], f[7], f[8], tonumber(c[6])
        local lead = x >= 0 and x or -x - 1
        local retry = 0
        if x < 0 then
            retry = cost > B and -1 or ceil_div(lead + cost * tn - B * tn, td)
        end
        return {x >= 0 and 1 or 0, B - ceil_div(lead, tn), ceil_div(lead, td),
                retry, 0}
    end
    if not ok then
        return reply
    end
    if #calls == 1 then
        return one(reply, calls[1])
    end
    for i, c in ipairs(calls) do
        reply[i] = one(reply[i], c)
    end
    return reply
end
local now_s, now_n = 1790000000, 0
for it = 1, ITER do
    local r = R()
    if r < 0.3 then
        now_n = now_n + R(0, 3)
    elseif r < 0.6 then
        now_n = now_n + R(0, 100000000)
    elseif r < 0.7 then
        now_n = now_n - R(0, 50000000)
    elseif r < 0.75 then
        now_s = now_s + R(0, 100)
    elseif r < 0.76 then
        now_s = now_s + R(8388000, 8389000) -- about 2^23 s
    elseif r < 0.77 then
        now_s = now_s - R(8388000, 8389000)
    end
    while now_n >= 1e9 do
        now_s, now_n = now_s + 1, now_n - 1e9
    end
    while now_n < 0 do
        now_s, now_n = now_s - 1, now_n + 1e9
    end
    local keys = {}
    -- A call: {now_s, now_n, ttl, record, spec, cost, ...} as strings.
    local function one_call()
        local n = R() < 0.9 and 1 or R(2, 3)
        local server = R() < 0.1
        if server then
            clock.s, clock.us = tostring(now_s), tostring(math.floor(now_n / 1000))
        end
        local c = {server and '' or tostring(now_s),
                   server and '' or tostring(now_n),
                   tostring(R(0, 2) * 1000), R() < 0.1 and '1' or '0'}
        for _ = 1, n do
            local l = R() < 0.7 and limits[2 * R(#limits / 2) - 1] or
                          limits[R(#limits)]
            keys[#keys + 1] = l.key
            c[#c + 1] = l.spec
            c[#c + 1] = tostring(R() < 0.1 and R(0, 30) or R(0, 3))
        end
        return c
    end
    local calls = {}
    for i = 1, R() < 0.7 and 1 or R(2, 5) do
        calls[i] = one_call()
    end
    local args = args_of(calls)
    local a, b = {pcall(run_old, keys, args_of(calls, OLD_FORMAT))},
                 {pcall(run_new, keys, args_of(calls))}
    a[2], b[2] = expand(a[1], a[2], calls), expand(b[1], b[2], calls)
    if ser(a) ~= ser(b) or ser(st_old) ~= ser(st_new) or
        ser(ttl_old) ~= ser(ttl_new) then
        print('run ' .. it .. ' differs: args ' .. ser(args) .. ' keys ' ..
              ser(keys))
        print('  old ' .. ser(a) .. ' ' .. ser(st_old))
        print('  new ' .. ser(b) .. ' ' .. ser(st_new))
        os.exit(1)
    end
end
print('runs ' .. ITER .. ': the same replies, states and TTLs')
