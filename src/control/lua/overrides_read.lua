-- The runtime limits' read (src/control/limits_redis.c): the shared
-- table's version, its overrides and its change log, at once.
-- KEYS: the table, its version, its change log.
return {redis.call('GET', KEYS[2]) or '0', redis.call('HVALS', KEYS[1]),
  redis.call('LRANGE', KEYS[3], 0, 1023)}
