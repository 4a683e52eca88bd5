-- Layout 5: the same tables; the functions faster, with the same
-- arguments (schema.sql re-creates them after this, keeping their grants):
-- a request that queues is one statement (queue(), new, given the grants of
-- request()), the release that grants writes its name's row once, and a
-- token is admitted without a call below the ceiling. Agents of layout 4
-- keep working until they leave.

UPDATE @schema@.meta SET value = '5' WHERE key OPERATOR(pg_catalog.=) 'layout';
