-- Marks the hooks of deaths done: they are no longer pending; the record and reason of a death that is
-- no longer listed (requeued or purged meanwhile) go too. Deaths that are not pending are ignored.
-- ARGV: deaths.
call_many('ZREM', K_DEAD_PENDING, ARGV, 1)
P().bury_unless_in(K_DEAD, ARGV)
return #ARGV
