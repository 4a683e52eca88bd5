-- Layout 4: what the watch for deadlocks and a look inside a scope read
-- (details() in ../schema.sql). Each request keeps its parent (the agent's
-- own number of the lock inside whose callback it was made, or 0) and since
-- when it is pending or held, on the server's clock; so does a lock held in
-- its name's row (holder_parent, holder_since: written by the request
-- statement's update, lib/postgres/statements.js). And each agent the pid
-- and host of its client process, which its join() gives.
--
-- What was there before has none of it: requests made before get the parent
-- 0 and no time (null), agents that joined before no client (null). Their
-- managers, of an older version, go on after the migration with their own
-- request statement, whose update of a name's row leaves holder_parent and
-- holder_since as the row's last holder of this layout wrote them: details()
-- reads them only for agents with a client, which every agent that joined
-- at this layout has. The functions whose arguments grow are dropped, so
-- that their new versions, whose new arguments have defaults, are the only
-- ones that older managers' calls match.
ALTER TABLE @schema@.agents ADD COLUMN client_pid integer, ADD COLUMN client_host text;
ALTER TABLE @schema@.names ADD COLUMN holder_parent bigint, ADD COLUMN holder_since timestamptz;
ALTER TABLE @schema@.requests ADD COLUMN parent bigint NOT NULL DEFAULT 0, ADD COLUMN since timestamptz;

DROP FUNCTION IF EXISTS @schema@.request(integer, bigint, text, bytea, boolean, boolean, boolean, boolean);
DROP FUNCTION IF EXISTS @schema@.join(text, text, text);

UPDATE @schema@.meta SET value = '4' WHERE key OPERATOR(pg_catalog.=) 'layout';
