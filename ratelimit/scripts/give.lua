-- give.lua: hands back the unused hits of a lease (Limiter.Give) to a short
-- window's counter, on the primary only, as count.lua counts them. A counter
-- that is gone (its window and the next are over) stays gone.
-- KEYS: the counter of the lease's window
-- ARGV: the hits to hand back (>= 1)
-- Reply: the count after, or -1 when the counter is gone.
redis.set_repl(redis.REPL_NONE)
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('DECRBY', KEYS[1], ARGV[1])
