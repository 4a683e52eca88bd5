-- Layout 2: each agent's notification channel is a name it drew at random
-- (128 bits), kept in its row, which no role without the right to read the
-- table can learn: layout 1 named channels after the schema's key and the
-- agent id, which any role could guess and send forged grants and steals
-- to. Agents that joined before this migration keep their channel (they
-- listen on it) until they leave; their old statements still work, but
-- their old join() goes, so that no new agent joins without a channel
-- (none of the dropped functions is there in a schema made from nothing).
ALTER TABLE @schema@.agents ADD COLUMN channel text;
UPDATE @schema@.agents SET channel = 'web_locks.@key@.' OPERATOR(pg_catalog.||) id;
ALTER TABLE @schema@.agents ALTER COLUMN channel SET NOT NULL;

DROP FUNCTION IF EXISTS @schema@.join(text, text);
DROP FUNCTION IF EXISTS @schema@.channel(integer);
DROP FUNCTION IF EXISTS @schema@.token();

UPDATE @schema@.meta SET value = '2' WHERE key OPERATOR(pg_catalog.=) 'layout';
