-- The PostgreSQL lock manager: the spec's algorithms (request, release,
-- abort, process the queue, snapshot, agent termination) as SQL functions,
-- each one transaction, so that row locks on a name give the atomicity the
-- native manager gets from its mutex. lib/manager-postgres.js runs this text
-- as one transaction, under the session-level advisory lock (@key@, 0), with
-- @schema@ replaced by the quoted schema name and @key@ by the schema's
-- advisory key (its own agents' life locks are (@key@, agent id)).
--
-- Layout 1. A later layout adds its own migration after this one.

CREATE SCHEMA IF NOT EXISTS @schema@;

CREATE TABLE @schema@.meta (
  key text PRIMARY KEY,
  value text NOT NULL
);

-- The state of the locks (agents, names, requests) is in UNLOGGED tables:
-- it lives no longer than the sessions of its agents, which a crash of the
-- server ends, and after a crash PostgreSQL empties these tables. So their
-- changes write no WAL, and a request's or a release's commit does not wait
-- for a WAL flush to disk (the durability defaults: fsync and
-- synchronous_commit on). What must survive a crash stays logged: the
-- layout (meta), the agent ids, and the ceiling of the tokens (fencing
-- tokens never go back).
--
-- Agent ids are the second half of an advisory key: int4, reused after 2^31.
CREATE SEQUENCE @schema@.agent_ids AS integer MINVALUE 1 CYCLE;
-- Fencing tokens, strictly increasing across every grant in the schema,
-- and queue order: a request takes a value when it is made (its id; its
-- token too if it is granted at once) and one more if it is granted later.
-- They are drawn from a counter that writes no WAL (an unlogged sequence,
-- PostgreSQL 15 and later), and handed out only below the ceiling in the
-- logged row of token_block: a draw at or above it raises it by 2^20, in a
-- logged update whose commit waits for the WAL flush. So a flush comes once
-- every 2^20 tokens, where a logged sequence, which logs 32 values ahead,
-- would have every 32nd grant's commit wait for one.
--
-- After a crash PostgreSQL resets unlogged objects: the counter starts
-- again from 1, and token_live (unlogged too) is empty. Every session then
-- joins anew, and join() moves the counter to the ceiling, above every
-- token handed out before, and writes there where it restarted: one join
-- at a time, and no session draws before its join, so no draw comes before
-- the move. The counter is moved only then, and only up, so no token is
-- handed out twice.
CREATE SEQUENCE @schema@.tokens AS bigint;
DO $$
BEGIN
  IF current_setting('server_version_num')::integer >= 150000 THEN
    EXECUTE format('ALTER SEQUENCE %s SET UNLOGGED', '@schema@.tokens'::regclass);
  END IF;
END $$;
CREATE TABLE @schema@.token_block (
  ceiling bigint NOT NULL
);
INSERT INTO @schema@.token_block (ceiling) VALUES (1);
-- The first token since the last crash, written by the move (and by the
-- schema's creation, which is no crash).
CREATE UNLOGGED TABLE @schema@.token_live (
  floor bigint NOT NULL
);
INSERT INTO @schema@.token_live (floor) VALUES (1);

-- A value drawn from the counter, made a token: the ceiling raised above
-- it if it has reached it. Returns it. Callers hold the lock of a name's row
-- already; no one locks one after token_block, so the two cannot deadlock.
CREATE FUNCTION @schema@.token_admit(p_drawn bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  c bigint;
BEGIN
  -- Read without a lock first: the ceiling only goes up.
  IF p_drawn < (SELECT ceiling FROM @schema@.token_block) THEN
    RETURN p_drawn;
  END IF;
  -- One raise at a time: the others wait here, then see what it did.
  SELECT ceiling INTO c FROM @schema@.token_block FOR UPDATE;
  IF p_drawn < c THEN
    RETURN p_drawn;
  END IF;
  UPDATE @schema@.token_block SET ceiling = p_drawn + 1048576;
  -- The new ceiling must be on disk before a token above the old one is
  -- seen: this commit waits for the flush even where commits do not, and
  -- for a synchronous standby's if there is one.
  IF current_setting('synchronous_commit') IN ('off', 'local') THEN
    PERFORM set_config('synchronous_commit', 'on', true);
  END IF;
  RETURN p_drawn;
END $$;

CREATE FUNCTION @schema@.token() RETURNS bigint
LANGUAGE sql AS $$ SELECT @schema@.token_admit(nextval('@schema@.tokens')) $$;

-- The ceiling once p_drawn is a token (raised above it if it had reached
-- it), for a manager that checks its draws against the last it saw.
CREATE FUNCTION @schema@.token_ceiling(p_drawn bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM @schema@.token_admit(p_drawn);
  RETURN (SELECT ceiling FROM @schema@.token_block);
END $$;

-- Moves the counter to the ceiling after a crash (token_live empty): see
-- tokens above. join() calls it.
CREATE FUNCTION @schema@.token_restart() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  c bigint;
BEGIN
  IF EXISTS (SELECT FROM @schema@.token_live) THEN
    RETURN;
  END IF;
  SELECT ceiling INTO c FROM @schema@.token_block FOR UPDATE;
  -- Read after the lock, and not through a snapshot (a sequence has none):
  -- after a move made meanwhile by another join, the counter is at the
  -- ceiling or past it, and is not moved again.
  IF (SELECT last_value FROM @schema@.tokens) < c THEN
    PERFORM setval('@schema@.tokens', c);
    INSERT INTO @schema@.token_live (floor) VALUES (c + 1);
  END IF;
END $$;

-- One row per agent: a thread that opened a scope. It lives while its
-- session holds the advisory lock (@key@, id): PostgreSQL releases that when
-- the session ends, however it ends.
CREATE UNLOGGED TABLE @schema@.agents (
  id integer PRIMARY KEY,
  scope text NOT NULL,
  client_id text NOT NULL,
  pid integer NOT NULL
);
CREATE INDEX ON @schema@.agents (scope, id);

-- One row per name in use: the row a transaction locks to run the spec's
-- steps for that name. Names are UTF-16 code units (little-endian), stored
-- exactly: text cannot hold a lone surrogate. Found by their digest, since a
-- name may be larger than an index entry.
--
-- The row also counts the name's requests, so that the steps decide from
-- it alone: how many locks are held (and whether the held one is
-- exclusive) and how many requests are queued. Every step that adds,
-- grants or removes a request updates them in its transaction. Looking at
-- the requests instead would step over the dead index entries that every
-- grant and release leaves until vacuum's horizon passes them: for a name
-- locked and released over and over, every one since the last vacuum.
--
-- And the row holds the lock granted at once on a free name itself
-- (holder_*, empty when holder_agent is null; its token is also its id in
-- queue order), with no row in requests: an uncontended request and its
-- release are then one update of this row each, with no index entry to
-- write (none of these columns is indexed, so the updates can be heap-only).
-- The manager's request and release statements (lib/manager-postgres.js)
-- make these updates themselves. The other held locks (the first on a new
-- name, shared ones granted beside it, grants from the queue, thieves) and
-- every queued request are rows of requests.
CREATE UNLOGGED TABLE @schema@.names (
  id bigserial PRIMARY KEY,
  scope text NOT NULL,
  digest bytea NOT NULL,
  name bytea NOT NULL,
  held integer NOT NULL DEFAULT 0,
  exclusive boolean NOT NULL DEFAULT false,
  queued integer NOT NULL DEFAULT 0,
  holder_agent integer,
  holder_local bigint,
  holder_token bigint,
  holder_shared boolean,
  UNIQUE (scope, digest)
);

-- Held locks (token set) and queued requests (token null, in id order).
-- local_id is the agent's own number for the request: notifications name it.
-- Indexed only as the spec's steps look: each index entry is one more write
-- per request.
CREATE UNLOGGED TABLE @schema@.requests (
  agent integer NOT NULL,
  local_id bigint NOT NULL,
  id bigint NOT NULL,
  name_id bigint NOT NULL,
  shared boolean NOT NULL,
  token bigint,
  PRIMARY KEY (agent, local_id)
);
-- A name's requests in id order: its held locks first, then its queue.
-- A request is granted from the queue only after every request queued
-- before it, and granted at once only when nothing is queued, so every
-- queued request has a greater id than a held lock's (a thief, granted
-- ahead of the queue, has the id 0). Each step reads the queue after a
-- bound, past the held locks and the dead entries of requests that have
-- gone, which stay until vacuum's horizon passes them (see names above, and
-- the watcher's slices in lib/manager-postgres.js). The token is in no
-- index, so that a grant from the queue is a heap-only update; and no index
-- is partial, since the planner may then scan one whole for a request
-- looked up by its primary key, believing it small.
CREATE INDEX ON @schema@.requests (name_id, id);

-- An agent's notification channel.
CREATE FUNCTION @schema@.channel(p_agent integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'web_locks.@key@.' || p_agent $$;

-- Grants what the queue of a locked name allows (spec 4.4): the first
-- requests while each is grantable, and counts them in the name's row. Each
-- grant gets the next token and is notified to its agent as
-- '<local id> g <token>'. Every queued request has an id above p_after;
-- p_held locks are held, exclusive if p_exclusive (the name's counts after
-- the caller's step). Returns how many it granted.
--
-- Each lookup reads the name's requests in id order from a bound and stops
-- at the first: held locks, which come before the queue, are stepped over
-- here, not filtered out in the statement. A filter on the token, whose
-- statistics may be from when the table was nearly empty, made the planner
-- read the whole queue and sort it.
CREATE FUNCTION @schema@.process(p_name bigint, p_after bigint, p_held integer, p_exclusive boolean)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  head bigint;
  head_agent integer;
  head_local bigint;
  head_shared boolean;
  head_held boolean;
  head_token bigint;
  after bigint := p_after;
  now_held integer := p_held;
  now_exclusive boolean := p_exclusive;
  granted integer := 0;
BEGIN
  LOOP
    SELECT id, agent, local_id, shared, token IS NOT NULL INTO head, head_agent, head_local, head_shared, head_held
      FROM @schema@.requests WHERE name_id = p_name AND id > after ORDER BY id LIMIT 1;
    EXIT WHEN NOT FOUND;
    after := head;
    CONTINUE WHEN head_held;
    EXIT WHEN now_held > 0 AND (now_exclusive OR NOT head_shared);
    UPDATE @schema@.requests SET token = @schema@.token() WHERE agent = head_agent AND local_id = head_local
      RETURNING token INTO head_token;
    PERFORM pg_notify(@schema@.channel(head_agent), head_local || ' g ' || head_token);
    now_held := now_held + 1;
    now_exclusive := NOT head_shared;
    granted := granted + 1;
    EXIT WHEN now_exclusive;
  END LOOP;
  IF granted > 0 THEN
    UPDATE @schema@.names SET held = now_held, exclusive = now_exclusive, queued = queued - granted
      WHERE id = p_name;
  END IF;
  RETURN granted;
END $$;

-- Request a lock (spec 4.1, from "queue the following steps to the lock task
-- queue"), for an agent of p_scope, as a row of requests. Returns its token
-- if it is granted now, 0 if it is queued, null if it is not available
-- (ifAvailable). Robbed holders are notified '<local id> s'. The manager
-- calls this when its request statement (lib/manager-postgres.js) found
-- the name not free in its row, or steals, or is pooled.
--
-- p_pooled: the call does not come on the agent's session, which may have
-- ended meanwhile; its row is then locked (leave() locks it to end it) and
-- an agent that has been ended gets SQLSTATE WLGON. A call on the session
-- needs no such check: the session is the agent's life.
CREATE FUNCTION @schema@.request(p_agent integer, p_local bigint, p_scope text, p_name bytea,
    p_shared boolean, p_if_available boolean, p_steal boolean, p_pooled boolean)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  d bytea := sha256(p_name);
  n bigint;
  now_held integer;
  now_exclusive boolean;
  now_queued integer;
  now_holder integer;
  now_holder_local bigint;
  granted boolean;
  v bigint;
  after bigint := -1;
  robbed_agent integer;
  robbed_local bigint;
  robbed_held boolean;
BEGIN
  IF p_pooled THEN
    PERFORM FROM @schema@.agents WHERE id = p_agent FOR KEY SHARE;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'web-locks: agent % has been ended', p_agent USING ERRCODE = 'WLGON';
    END IF;
  END IF;
  -- The name's row, locked, made on first use.
  LOOP
    SELECT id, held, exclusive, queued, holder_agent, holder_local
      INTO n, now_held, now_exclusive, now_queued, now_holder, now_holder_local
      FROM @schema@.names WHERE scope = p_scope AND digest = d FOR UPDATE;
    EXIT WHEN FOUND;
    INSERT INTO @schema@.names (scope, digest, name) VALUES (p_scope, d, p_name)
      ON CONFLICT DO NOTHING;
  END LOOP;
  IF p_steal THEN
    IF now_holder IS NOT NULL THEN
      PERFORM pg_notify(@schema@.channel(now_holder), now_holder_local || ' s');
      now_held := now_held - 1;
      now_holder := NULL;
    END IF;
    -- The other held locks, first in id order (one at a time, as process()
    -- reads the queue): the queue is not read.
    WHILE now_held > 0 LOOP
      SELECT id, agent, local_id, requests.token IS NOT NULL INTO after, robbed_agent, robbed_local, robbed_held
        FROM @schema@.requests WHERE name_id = n AND id > after ORDER BY id LIMIT 1;
      EXIT WHEN NOT FOUND OR NOT robbed_held;
      DELETE FROM @schema@.requests WHERE agent = robbed_agent AND local_id = robbed_local;
      PERFORM pg_notify(@schema@.channel(robbed_agent), robbed_local || ' s');
      now_held := now_held - 1;
    END LOOP;
    now_held := 0;
    granted := true;
  ELSE
    -- Granted if nothing is queued and nothing held, or only shared locks
    -- are held and this one is shared.
    granted := now_queued = 0 AND (now_held = 0 OR (p_shared AND NOT now_exclusive));
    IF NOT granted AND p_if_available THEN
      RETURN NULL;
    END IF;
  END IF;
  v := @schema@.token();
  IF granted THEN
    now_held := now_held + 1;
    now_exclusive := NOT p_shared;
  ELSE
    now_queued := now_queued + 1;
  END IF;
  UPDATE @schema@.names SET held = now_held, exclusive = now_exclusive, queued = now_queued,
      holder_agent = now_holder
    WHERE id = n;
  -- A thief goes first: the id 0, before every queued request.
  INSERT INTO @schema@.requests (agent, local_id, id, name_id, shared, token)
    VALUES (p_agent, p_local, CASE WHEN p_steal THEN 0 ELSE v END, n, p_shared, CASE WHEN granted THEN v END);
  RETURN CASE WHEN granted THEN v ELSE 0 END;
END $$;

-- Takes an agent's request out of its manager, if it is held (p_held) or
-- queued (not p_held), and processes its name's queue: the spec's release
-- (4.2) and abort (4.3) of a row of requests (the manager's release
-- statement releases a lock held in a name's row). False if it was not
-- there in that state (a lock stolen, or its agent ended; a request granted
-- meanwhile).
CREATE FUNCTION @schema@.remove(p_agent integer, p_local bigint, p_held boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
  now_held integer;
  now_exclusive boolean;
  now_queued integer;
  gone bigint;
BEGIN
  SELECT id, held, exclusive, queued INTO n, now_held, now_exclusive, now_queued FROM @schema@.names
    WHERE id = (SELECT name_id FROM @schema@.requests WHERE agent = p_agent AND local_id = p_local)
    FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  DELETE FROM @schema@.requests WHERE agent = p_agent AND local_id = p_local
    AND (requests.token IS NOT NULL) = p_held
    RETURNING id INTO gone;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF p_held THEN
    now_held := now_held - 1;
  ELSE
    now_queued := now_queued - 1;
  END IF;
  UPDATE @schema@.names SET held = now_held, queued = now_queued WHERE id = n;
  -- While locks are held, the head of the queue waits for them (each step
  -- that could let it go processes the queue): a release that leaves locks
  -- held grants nothing. After a held lock, the queue starts past its id.
  IF now_queued > 0 AND (now_held = 0 OR NOT p_held) THEN
    PERFORM @schema@.process(n, CASE WHEN p_held THEN gone ELSE 0 END, now_held, now_exclusive);
  END IF;
  RETURN true;
END $$;

-- Terminate an agent's remaining locks and requests (spec 2.6), and the
-- agent. Names are locked in id order, so that two of these cannot deadlock.
CREATE FUNCTION @schema@.leave(p_agent integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  name_ids bigint[];
  n bigint;
  now_held integer;
  now_exclusive boolean;
BEGIN
  PERFORM 1 FROM @schema@.agents WHERE id = p_agent FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  -- Its names: those of its requests, and those whose row holds a lock of
  -- it (not indexed: looked for among its scope's). Locking the agent's row
  -- stopped it from making more.
  SELECT coalesce(array_agg(DISTINCT name_id ORDER BY name_id), '{}') INTO name_ids FROM (
      SELECT name_id FROM @schema@.requests WHERE agent = p_agent
      UNION ALL
      SELECT id FROM @schema@.names
        WHERE scope = (SELECT scope FROM @schema@.agents WHERE id = p_agent) AND holder_agent = p_agent) ids;
  PERFORM 1 FROM @schema@.names WHERE id = ANY (name_ids) ORDER BY id FOR UPDATE;
  UPDATE @schema@.names SET held = held - 1, holder_agent = NULL
    WHERE id = ANY (name_ids) AND holder_agent = p_agent;
  WITH gone AS (
    DELETE FROM @schema@.requests WHERE agent = p_agent
      RETURNING name_id, token IS NOT NULL AS was_held),
  counts AS (
    SELECT name_id, count(*) FILTER (WHERE was_held) AS held_gone,
        count(*) FILTER (WHERE NOT was_held) AS queued_gone
      FROM gone GROUP BY name_id)
  UPDATE @schema@.names SET held = held - held_gone, queued = queued - queued_gone
    FROM counts WHERE id = counts.name_id;
  FOR n, now_held, now_exclusive IN
      SELECT id, held, exclusive FROM @schema@.names WHERE id = ANY (name_ids) AND queued > 0 ORDER BY id LOOP
    PERFORM @schema@.process(n, 0, now_held, now_exclusive);
  END LOOP;
  DELETE FROM @schema@.agents WHERE id = p_agent;
END $$;

-- Agents watch each other in a ring, each the next agent by id in its
-- scope (the one whose life lock it waits for), so that every death is seen
-- by someone at once. The agent p_self watches, or null if it is alone:
CREATE FUNCTION @schema@.neighbour(p_scope text, p_self integer) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT coalesce(
    (SELECT min(id) FROM @schema@.agents WHERE scope = p_scope AND id > p_self),
    (SELECT min(id) FROM @schema@.agents WHERE scope = p_scope AND id <> p_self))
$$;

-- and the agent that watches p_self, or null.
CREATE FUNCTION @schema@.watcher_of(p_scope text, p_self integer) RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT coalesce(
    (SELECT max(id) FROM @schema@.agents WHERE scope = p_scope AND id < p_self),
    (SELECT max(id) FROM @schema@.agents WHERE scope = p_scope AND id <> p_self))
$$;

-- A new agent of a scope, alive from the start: the session-level advisory
-- lock is taken before its row is visible to anyone.
CREATE FUNCTION @schema@.join(p_scope text, p_client_id text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  new_id integer;
BEGIN
  -- One join at a time, so that each sees the agents before it and tells
  -- its watcher: the ring has no gap. (Also waits for a migration.)
  PERFORM pg_advisory_xact_lock(@key@, 0);
  -- Before the agent draws a token, after a crash.
  PERFORM @schema@.token_restart();
  LOOP
    new_id := nextval('@schema@.agent_ids');
    -- After 2^31 agents, skip ids still in use.
    CONTINUE WHEN NOT pg_try_advisory_lock(@key@, new_id);
    BEGIN
      INSERT INTO @schema@.agents (id, scope, client_id, pid)
        VALUES (new_id, p_scope, p_client_id, pg_backend_pid());
      -- The agent that watched the new one's neighbour watches it now.
      PERFORM pg_notify(@schema@.channel(w), 'r') FROM @schema@.watcher_of(p_scope, new_id) w
        WHERE w IS NOT NULL;
      RETURN new_id;
    EXCEPTION WHEN unique_violation THEN
      PERFORM pg_advisory_unlock(@key@, new_id);
    END;
  END LOOP;
END $$;

-- Ends the scope's agents whose sessions have ended (no one holds their life
-- lock), but p_self, whose own session would see its lock as free. Returns
-- how many. Agents being ended by another sweep are skipped. The names of
-- all the agents it ends are locked at once, in id order, as leave() locks
-- one agent's: locked agent by agent, two sweeps (or a sweep and a leave())
-- could each hold a name the other waits for.
CREATE FUNCTION @schema@.sweep(p_scope text, p_self integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  a integer;
  ended integer[] := '{}';
BEGIN
  FOR a IN SELECT id FROM @schema@.agents WHERE scope = p_scope AND id <> p_self LOOP
    CONTINUE WHEN NOT pg_try_advisory_lock_shared(@key@, a);
    PERFORM pg_advisory_unlock_shared(@key@, a);
    PERFORM 1 FROM @schema@.agents WHERE id = a FOR UPDATE SKIP LOCKED;
    CONTINUE WHEN NOT FOUND;
    ended := ended || a;
  END LOOP;
  PERFORM 1 FROM @schema@.names WHERE scope = p_scope
      AND (id IN (SELECT name_id FROM @schema@.requests WHERE agent = ANY (ended)) OR holder_agent = ANY (ended))
    ORDER BY id FOR UPDATE;
  FOREACH a IN ARRAY ended LOOP
    PERFORM @schema@.leave(a);
  END LOOP;
  -- By the counts, which a name's row lock checks again in its newest
  -- version (a request made meanwhile has changed them).
  DELETE FROM @schema@.names n WHERE n.id IN (
    SELECT m.id FROM @schema@.names m WHERE m.scope = p_scope AND m.held = 0 AND m.queued = 0
    FOR UPDATE SKIP LOCKED);
  RETURN cardinality(ended);
END $$;

-- The scope's state (spec 4.5): held locks in grant order, then pending
-- requests per name in queue order, names in order of first use.
CREATE FUNCTION @schema@.snapshot(p_scope text)
RETURNS TABLE (held boolean, name bytea, shared boolean, client_id text)
LANGUAGE sql STABLE AS $$
  SELECT l.token IS NOT NULL, n.name, l.shared, a.client_id
    FROM (SELECT name_id, agent, id, shared, token FROM @schema@.requests
      UNION ALL
      SELECT id, holder_agent, holder_token, holder_shared, holder_token FROM @schema@.names
        WHERE scope = p_scope AND holder_agent IS NOT NULL) l
    JOIN @schema@.names n ON n.id = l.name_id
    JOIN @schema@.agents a ON a.id = l.agent
    WHERE n.scope = p_scope
    ORDER BY l.token IS NULL, l.token, n.id, l.id
$$;

INSERT INTO @schema@.meta (key, value) VALUES ('layout', '1');
