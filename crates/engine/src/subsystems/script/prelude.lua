-- Redis 7.0's script environment, built on Lua 5.1 patched as Redis
-- patches it (vendor/lua-src: read-only tables, no binary chunks).
-- Run once per Lua state with the Rust primitives in `P`; returns the
-- scripts' environment and the error handler runs use. Frames of this chunk are skipped
-- when an error's position is computed, as Redis skips its C functions.
local P = ...
local G = _G
local getinfo = debug.getinfo
local getmetatable_raw = debug.getmetatable
local lua_pcall, error, type, tostring, select, unpack, rawget, setmetatable =
    pcall, error, type, tostring, select, unpack, rawget, setmetatable
local tonumber, setfenv, loadstring, load = tonumber, setfenv, loadstring, load
local SOURCE = '=sluice'

-- redis.*
local redis = {}
local function push_error(s)
    -- luaPushErrorBuff: "-CODE msg" keeps its code, anything else gets ERR.
    local code, msg = 'ERR', s
    if s:sub(1, 1) == '-' then
        local sp = s:find(' ', 1, true)
        if sp then
            code, msg = s:sub(2, sp - 1), s:sub(sp + 1)
        else
            msg = s:sub(2)
        end
    end
    msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
    return { err = code .. ' ' .. msg }
end
-- Functions that may raise are registered through `raising`: Rust wraps
-- them in a C function (which a `return f()` cannot tail-call away, so the
-- error keeps the script's line), and raises what they return after a
-- flag: 0 returns the rest, 1 raises the value, 2 raises it as a string
-- with the caller's position (luaL_error).
local raising = {}
local function raise(msg)
    P.ldb_error(msg)
    return 1, { err = 'ERR ' .. msg }
end
-- redis.call and redis.pcall are C functions (call raises the error
-- table itself, from a C frame as the trampoline would).
redis.call = P.call
redis.pcall = P.pcall
redis.error_reply = function(...)
    local s = ...
    if select('#', ...) ~= 1 or type(s) ~= 'string' then
        P.ldb_error('wrong number or type of arguments')
        return { err = 'ERR wrong number or type of arguments' }
    end
    if s:sub(1, 1) ~= '-' then
        s = '-' .. s
    end
    P.ldb_error(s)
    return push_error(s)
end
redis.status_reply = function(...)
    local s = ...
    if select('#', ...) ~= 1 or type(s) ~= 'string' then
        P.ldb_error('wrong number or type of arguments')
        return { err = 'ERR wrong number or type of arguments' }
    end
    return { ok = s }
end
raising[#raising + 1] = { redis, 'sha1hex', function(...)
    if select('#', ...) ~= 1 then
        return raise('wrong number of arguments')
    end
    return 0, P.sha1hex((...))
end }
raising[#raising + 1] = { redis, 'log', function(...)
    local n = select('#', ...)
    local level = ...
    if n < 2 then
        return raise('redis.log() requires two arguments or more.')
    elseif type(level) ~= 'number' and not (type(level) == 'string' and tonumber(level)) then
        return raise('First argument must be a number (log level).')
    end
    level = tonumber(level)
    level = level - level % 1
    if level < 0 or level > 3 then
        return raise('Invalid debug level.')
    end
    local parts = {}
    for i = 2, n do
        local v = select(i, ...)
        if type(v) == 'string' or type(v) == 'number' then
            parts[#parts + 1] = tostring(v)
        end
    end
    P.log(level, table.concat(parts, ' '))
    return 0
end }
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
raising[#raising + 1] = { redis, 'setresp', function(...)
    if select('#', ...) ~= 1 then
        return raise('redis.setresp() requires one argument.')
    end
    local v = tonumber((...)) or 0
    v = v - v % 1
    if v ~= 2 and v ~= 3 then
        return raise('RESP version must be 2 or 3.')
    end
    P.setresp(v)
    return 0
end }
raising[#raising + 1] = { redis, 'set_repl', function(...)
    if select('#', ...) ~= 1 then
        return raise('redis.set_repl() requires two arguments.')
    end
    local v = tonumber((...)) or 0
    v = v - v % 1
    if v < 0 or v > 3 then
        return raise('Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
    end
    P.set_repl(v)
    return 0
end }
raising[#raising + 1] = { redis, 'acl_check_cmd', P.acl_check_cmd }
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.replicate_commands = function()
    return true
end
redis.breakpoint = P.ldb_breakpoint
redis.debug = P.ldb_debug
redis.REDIS_VERSION = P.version
redis.REDIS_VERSION_NUM = P.version_num
G.redis = redis

-- math.random and math.randomseed: Redis's own PRNG (rand48), the same
-- sequence on every platform.
raising[#raising + 1] = { math, 'random', function(...)
    local n = select('#', ...)
    local r = P.rand()
    if n == 0 then
        return 0, r
    end
    local l, u = 1, nil
    if n == 1 then
        u = ...
    elseif n == 2 then
        l, u = ...
    else
        return 2, 'wrong number of arguments'
    end
    local tl, tu = type(l), type(u)
    l, u = tonumber(l), tonumber(u)
    if l == nil then
        return 2, "bad argument #1 to 'random' (number expected, got " .. tl .. ")"
    elseif u == nil then
        return 2, "bad argument #" .. n .. " to 'random' (number expected, got " .. tu .. ")"
    end
    l, u = l - l % 1, u - u % 1
    if l > u then
        return 2, "bad argument #" .. n .. " to 'random' (interval is empty)"
    end
    return 0, math.floor(r * (u - l + 1)) + l
end }
raising[#raising + 1] = { math, 'randomseed', function(s)
    local v = tonumber(s)
    if v == nil then
        return 2, "bad argument #1 to 'randomseed' (number expected, got " .. type(s) .. ")"
    end
    P.srand(v)
    return 0
end }

-- LuaBitOp's `bit`, implemented in Rust.
local bit = {}
for _, name in ipairs({ 'tobit', 'tohex', 'bnot', 'band', 'bor', 'bxor', 'lshift', 'rshift', 'arshift', 'rol', 'ror', 'bswap' }) do
    raising[#raising + 1] = { bit, name, P.bit[name] }
end
G.bit = bit

-- lua-cjson, implemented in Rust: a module (the global one, or one
-- `cjson.new()` makes) is the Rust functions wrapped to raise, each
-- module with settings of its own.
local function cjson_module(raw)
    local m = { null = raw.null, _NAME = raw._NAME, _VERSION = raw._VERSION }
    for _, name in ipairs(P.cjson_functions) do
        m[name] = P.wrap(raw[name])
    end
    local new = raw.new
    m.new = function()
        return cjson_module(new())
    end
    return m
end
G.cjson = cjson_module(P.cjson)

-- lua-cmsgpack's pack/unpack, implemented in Rust.
local cmsgpack = {}
for _, k in ipairs({ '_NAME', '_VERSION', '_COPYRIGHT', '_DESCRIPTION' }) do
    cmsgpack[k] = P.cmsgpack[k]
end
for _, f in ipairs({ 'pack', 'unpack', 'unpack_one', 'unpack_limit' }) do
    raising[#raising + 1] = { cmsgpack, f, P.cmsgpack[f] }
end
G.cmsgpack = cmsgpack

-- The struct library's pack/unpack/size, implemented in Rust.
local struct = {}
for _, f in ipairs({ 'pack', 'unpack', 'size' }) do
    raising[#raising + 1] = { struct, f, P.struct[f] }
end
G.struct = struct

-- Redis's pcall: an error table raised by redis.call comes back as its
-- message.
local function pack(...)
    return select('#', ...), { ... }
end
G.pcall = function(...)
    local n, r = pack(lua_pcall(...))
    if not r[1] then
        local e = r[2]
        if P.killed() then
            -- SCRIPT KILL is not caught.
            error(e, 0)
        end
        if type(e) == 'table' then
            local m = rawget(e, 'err')
            if type(m) == 'string' or type(m) == 'number' then
                return false, m
            end
        end
        return false, e
    end
    return unpack(r, 1, n)
end

-- The scripts' globals are this state's own global table, as in Redis:
-- the builtins Redis keeps, the libraries, KEYS and ARGV (set before each
-- run), read-only once `freeze` ran (the patched Lua's read-only tables,
-- vendor/lua-src), with a metatable whose __index refuses names that are
-- not there.
G.print, G.dofile, G.loadfile, G.module, G.require, G.package, G.io, G.os, G.debug = nil
G.getfenv, G.setfenv, G.newproxy = nil
local env = G
local function nonexistent(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
setmetatable(env, { __index = nonexistent })

-- Redis's error handler: the error as a table with the position of the
-- script line that raised it.
local function handler(err)
    local level = 2
    local i = getinfo(level, 'Sl')
    while i and (i.what == 'C' or i.source == SOURCE) do
        level = level + 1
        i = getinfo(level, 'Sl')
    end
    if type(err) ~= 'table' then
        err = { err = 'ERR ' .. tostring(err) }
    end
    if i then
        err.source = i.source
        err.line = i.currentline
    end
    return err
end

G.__redis__err__handler = handler


-- Libraries (FUNCTION LOAD): their code runs once with only
-- `redis.register_function`, `redis.log` and the version fields in
-- reach; the functions it registers later run with the scripts' globals.
local loading, pending = false, nil
local load_redis = {}
local FLAGS = { ['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
    ['no-cluster'] = true, ['allow-cross-slot-keys'] = true }
raising[#raising + 1] = { load_redis, 'register_function', function(...)
    if not loading then
        return raise('redis.register_function can only be called on FUNCTION LOAD command')
    end
    local n = select('#', ...)
    if n < 1 or n > 2 then
        return raise('wrong number of arguments to redis.register_function')
    end
    local name, cb, flags, desc
    local function isstr(v)
        return type(v) == 'string' or type(v) == 'number'
    end
    if n == 1 then
        local t = ...
        if type(t) ~= 'table' then
            return raise('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
        end
        for k, v in pairs(t) do
            if not isstr(k) then
                return raise('named argument key given to redis.register_function is not a string')
            end
            local lk = string.lower(tostring(k))
            if lk == 'function_name' then
                if not isstr(v) then
                    return raise('function_name argument given to redis.register_function must be a string')
                end
                name = tostring(v)
            elseif lk == 'description' then
                if not isstr(v) then
                    return raise('description argument given to redis.register_function must be a string')
                end
                desc = tostring(v)
            elseif lk == 'callback' then
                if type(v) ~= 'function' then
                    return raise('callback argument given to redis.register_function must be a function')
                end
                cb = v
            elseif lk == 'flags' then
                if type(v) ~= 'table' then
                    return raise('flags argument to redis.register_function must be a table representing function flags')
                end
                flags = {}
                local i = 1
                while v[i] ~= nil do
                    local f = v[i]
                    if not isstr(f) or not FLAGS[string.lower(tostring(f))] then
                        return raise('unknown flag given')
                    end
                    flags[#flags + 1] = string.lower(tostring(f))
                    i = i + 1
                end
            else
                return raise('unknown argument given to redis.register_function')
            end
        end
        if not name then
            return raise('redis.register_function must get a function name argument')
        end
        if not cb then
            return raise('redis.register_function must get a callback argument')
        end
    else
        name, cb = ...
        if not isstr(name) then
            return raise('first argument to redis.register_function must be a string')
        end
        name = tostring(name)
        if type(cb) ~= 'function' then
            return raise('second argument to redis.register_function must be a function')
        end
    end
    if not string.find(name, '^[%w_]+$') then
        -- Redis 7.0 says "Library" here too.
        return raise('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
    end
    for _, f in ipairs(pending) do
        if f.name == name then
            return raise('Function already exists in the library')
        end
    end
    pending[#pending + 1] = { name = name, callback = cb, flags = flags or {}, description = desc }
    return 0
end }
for _, e in ipairs(raising) do
    if e[1] == redis and e[2] == 'log' then
        raising[#raising + 1] = { load_redis, 'log', e[3] }
        break
    end
end
load_redis.LOG_DEBUG, load_redis.LOG_VERBOSE, load_redis.LOG_NOTICE, load_redis.LOG_WARNING = 0, 1, 2, 3
load_redis.REDIS_VERSION, load_redis.REDIS_VERSION_NUM = P.version, P.version_num
setmetatable(load_redis, { __index = nonexistent })
-- What library code sees while it loads: `redis` (the loading API) and
-- nothing else.
local load_globals = setmetatable({ redis = load_redis }, { __index = nonexistent })
-- What functions see when they run: the scripts' globals without KEYS
-- and ARGV (Redis runs functions in a Lua state of their own, where
-- those were never set), `_G` naming this table.
local fn_globals = {}
for k, v in pairs(G) do
    fn_globals[k] = v
end
fn_globals._G = fn_globals
setmetatable(fn_globals, { __index = nonexistent })
-- Library code and functions run with an empty read-only table as their
-- globals whose metatable's __index is switched between the two above,
-- as Redis switches its functions' globals.
local libmeta = { __index = fn_globals }
local libenv = setmetatable({}, libmeta)
-- Code a function loads runs with the functions' globals (in Redis the
-- functions' Lua state has those as its globals), not with the scripts'
-- (whose KEYS and ARGV are another client's).
fn_globals.loadstring = function(...)
    local f, e = loadstring(...)
    if f then
        setfenv(f, libenv)
    end
    return f, e
end
fn_globals.load = function(...)
    local f, e = load(...)
    if f then
        setfenv(f, libenv)
    end
    return f, e
end
local function switch(to)
    P.readonly(libmeta, false)
    libmeta.__index = to
    P.readonly(libmeta, true)
end

-- Runs a library's code: true and the functions it registered, or false
-- and Redis's error text.
local function load_library(f)
    pending, loading = {}, true
    switch(load_globals)
    local ok, err = lua_pcall(f)
    switch(fn_globals)
    loading = false
    local p = pending
    pending = nil
    if not ok then
        if type(err) == 'table' then
            err = rawget(err, 'err')
        else
            err = 'ERR ' .. tostring(err)
        end
        return false, err
    end
    return true, p
end

-- Marks the globals, everything reachable from them and the other roots
-- read-only (the metatables too), as Redis's
-- luaSetTableProtectionRecursively does; called once the Rust side has
-- put its functions in the libraries.
local function protect(t, seen)
    if seen[t] then
        return
    end
    seen[t] = true
    for _, v in pairs(t) do
        if type(v) == 'table' then
            protect(v, seen)
        end
    end
    local mt = getmetatable_raw(t)
    if mt then
        protect(mt, seen)
    end
    P.readonly(t, true)
end
local function freeze()
    -- Functions' `redis` lacks what only EVAL has (Redis registers those in
    -- eval.c alone); copied now that the Rust side filled `redis`.
    local fn_redis = {}
    for k, v in pairs(redis) do
        if k ~= 'breakpoint' and k ~= 'debug' and k ~= 'replicate_commands' then
            fn_redis[k] = v
        end
    end
    fn_globals.redis = fn_redis
    local seen = {}
    for _, root in ipairs({ env, fn_globals, libenv, load_globals, getmetatable_raw('') }) do
        protect(root, seen)
    end
end

return env, handler, raising, libenv, load_library, freeze
