-- Layout 5: the same tables. process() gains an argument with a default
-- (the queue's count, for a caller that has not written it), so the old
-- one is dropped; schema.sql re-creates the functions after this. Agents of
-- layout 4 keep working: their statements call process() with four
-- arguments, which the new one takes.

DROP FUNCTION IF EXISTS @schema@.process(bigint, bigint, integer, boolean);

UPDATE @schema@.meta SET value = '5' WHERE key OPERATOR(pg_catalog.=) 'layout';
