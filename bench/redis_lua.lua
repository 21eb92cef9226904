-- bench/redis_lua.lua - the Redis store's Lua (src/store/redis/*.lua,
-- concatenated in script.cmake's order) run by plain lua5.1 with
-- redis.call stubbed by a table (GET, SET, DEL, TIME; no lists, so not
-- sliding_log or stepped_window): what the Lua itself costs, without
-- Redis, and whether two versions of it decide and write the same.
--
--   lua5.1 bench/redis_lua.lua insn DIR N B [SPEC] [noop]
--       N decisions of cost 1 on random keys of 100k, B calls per run
--       (a batch when B > 1), on the stub's clock; SPEC is the limit's
--       string (default token_bucket 100/s burst 100).  "noop": the
--       same calls to a run() that does nothing (the driver's own cost).
--       bench/redis_lua_insn.sh counts the instructions.
--   lua5.1 bench/redis_lua.lua diff OLD_DIR NEW_DIR ITER SEED
--       the same ITER random runs (buckets with and without an
--       override on the same keys, windows of whole, sub- and odd
--       periods, batches, records, now moving back and months away) to
--       both; stops at the first run whose reply, written states or
--       TTLs differ.  For changing the Lua: OLD_DIR from git archive.
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
        local keys, args = {}, {}
        if B == 1 then
            seed = (seed * 1103515245 + 12345) % 2147483648
            keys[1] = 'k' .. (seed % 100000)
            args = {'', '', '0', '0', spec, '1'}
        else
            args = {'B', tostring(B)}
            for i = 1, B do
                seed = (seed * 1103515245 + 12345) % 2147483648
                keys[i] = 'k' .. (seed % 100000)
                for _, a in ipairs({'1', '', '', '0', '0', spec, '1'}) do
                    args[#args + 1] = a
                end
            end
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
    local function one_call(a)
        local n = R() < 0.9 and 1 or R(2, 3)
        local server = R() < 0.1
        if server then
            clock.s, clock.us = tostring(now_s), tostring(math.floor(now_n / 1000))
        end
        a[#a + 1] = server and '' or tostring(now_s)
        a[#a + 1] = server and '' or tostring(now_n)
        a[#a + 1] = tostring(R(0, 2) * 1000)
        a[#a + 1] = R() < 0.1 and '1' or '0'
        for _ = 1, n do
            local l = R() < 0.7 and limits[2 * R(#limits / 2) - 1] or
                          limits[R(#limits)]
            keys[#keys + 1] = l.key
            a[#a + 1] = l.spec
            a[#a + 1] = tostring(R() < 0.1 and R(0, 30) or R(0, 3))
        end
        return n
    end
    local args = {}
    local ncalls = R() < 0.7 and 1 or R(2, 5)
    if ncalls == 1 then
        one_call(args)
    else
        args = {'B', tostring(ncalls)}
        for _ = 1, ncalls do
            local sub = {}
            args[#args + 1] = tostring(one_call(sub))
            for _, x in ipairs(sub) do
                args[#args + 1] = x
            end
        end
    end
    local a, b = {pcall(run_old, keys, args)}, {pcall(run_new, keys, args)}
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
