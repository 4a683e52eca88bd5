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
-- layout (meta) and the sequences, tokens above all (fencing tokens never
-- go back); a nextval writes WAL once every 32 values.
--
-- Agent ids are the second half of an advisory key: int4, reused after 2^31.
CREATE SEQUENCE @schema@.agent_ids AS integer MINVALUE 1 CYCLE;
-- Queue order.
CREATE SEQUENCE @schema@.request_ids AS bigint;
-- Fencing tokens: strictly increasing across every grant in the schema.
CREATE SEQUENCE @schema@.tokens AS bigint;

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
CREATE UNLOGGED TABLE @schema@.names (
  id bigserial PRIMARY KEY,
  scope text NOT NULL,
  digest bytea NOT NULL,
  name bytea NOT NULL,
  UNIQUE (scope, digest)
);

-- Held locks (token set) and queued requests (token null, in id order).
-- local_id is the agent's own number for the request: notifications name it.
CREATE UNLOGGED TABLE @schema@.requests (
  id bigint PRIMARY KEY,
  name_id bigint NOT NULL,
  agent integer NOT NULL,
  local_id bigint NOT NULL,
  shared boolean NOT NULL,
  token bigint,
  UNIQUE (agent, local_id)
);
CREATE INDEX ON @schema@.requests (name_id, id);
-- A name's held locks, and its queue in order, each found without reading
-- the other: process() looks for both at every release, however long the
-- queue.
CREATE INDEX ON @schema@.requests (name_id) WHERE token IS NOT NULL;
CREATE INDEX ON @schema@.requests (name_id, id) WHERE token IS NULL;

-- An agent's notification channel.
CREATE FUNCTION @schema@.channel(p_agent integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'web_locks.@key@.' || p_agent $$;

-- Grants what the queue of a locked name allows (spec 4.4): the first
-- requests while each is grantable. Each grant gets the next token and is
-- notified to its agent as '<local id> g <token>'.
CREATE FUNCTION @schema@.process(p_name bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  any_held boolean;
  exclusive_held boolean;
  r record;
  t bigint;
BEGIN
  -- A name's held locks are one exclusive or any number of shared: any one
  -- of them tells which (LIMIT 1: an index scan that stops at the first; a
  -- count would read, by a bitmap scan, every entry the name's churn left in
  -- the index since the last vacuum).
  SELECT NOT shared INTO exclusive_held FROM @schema@.requests
    WHERE name_id = p_name AND token IS NOT NULL LIMIT 1;
  any_held := FOUND;
  exclusive_held := coalesce(exclusive_held, false);
  LOOP
    -- The first request of the queue, one at a time: with LIMIT 1 the plan
    -- walks the queue's index in order and stops at once, where a query for
    -- the whole queue may be planned (on statistics of when the table was
    -- small, or none) as a scan and sort of every request of the name.
    SELECT id, agent, local_id, shared INTO r FROM @schema@.requests
      WHERE name_id = p_name AND token IS NULL ORDER BY id LIMIT 1;
    EXIT WHEN NOT FOUND;
    IF exclusive_held OR (any_held AND NOT r.shared) THEN
      RETURN;
    END IF;
    t := nextval('@schema@.tokens');
    UPDATE @schema@.requests SET token = t WHERE id = r.id;
    PERFORM pg_notify(@schema@.channel(r.agent), r.local_id || ' g ' || t);
    any_held := true;
    exclusive_held := NOT r.shared;
  END LOOP;
END $$;

-- The row of a name, locked; made on first use.
CREATE FUNCTION @schema@.lock_name(p_scope text, p_name bytea) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  d bytea := sha256(p_name);
  n bigint;
BEGIN
  LOOP
    SELECT id INTO n FROM @schema@.names WHERE scope = p_scope AND digest = d FOR UPDATE;
    IF FOUND THEN
      RETURN n;
    END IF;
    INSERT INTO @schema@.names (scope, digest, name) VALUES (p_scope, d, p_name)
      ON CONFLICT DO NOTHING;
  END LOOP;
END $$;

-- Request a lock (spec 4.1, from "queue the following steps to the lock task
-- queue"). state: 0 queued, 1 granted now (with its token), 2 not available
-- (ifAvailable). Robbed holders are notified '<local id> s'. An agent that
-- has been ended (its session was lost) gets SQLSTATE WLGON.
CREATE FUNCTION @schema@.request(p_agent integer, p_local bigint, p_name bytea,
    p_shared boolean, p_if_available boolean, p_steal boolean,
    OUT state integer, OUT token bigint)
LANGUAGE plpgsql AS $$
DECLARE
  a_scope text;
  n bigint;
  r record;
  blocked boolean;
BEGIN
  SELECT scope INTO a_scope FROM @schema@.agents WHERE id = p_agent FOR KEY SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'web-locks: agent % has been ended', p_agent USING ERRCODE = 'WLGON';
  END IF;
  n := @schema@.lock_name(a_scope, p_name);
  IF p_steal THEN
    FOR r IN DELETE FROM @schema@.requests WHERE name_id = n AND requests.token IS NOT NULL
        RETURNING agent, local_id LOOP
      PERFORM pg_notify(@schema@.channel(r.agent), r.local_id || ' s');
    END LOOP;
    blocked := false;
  ELSE
    SELECT EXISTS (SELECT 1 FROM @schema@.requests q WHERE q.name_id = n
        AND (q.token IS NULL OR NOT p_shared OR NOT q.shared))
      INTO blocked;
  END IF;
  IF NOT blocked THEN
    state := 1;
    token := nextval('@schema@.tokens');
  ELSIF p_if_available THEN
    state := 2;
    RETURN;
  ELSE
    state := 0;
  END IF;
  INSERT INTO @schema@.requests (id, name_id, agent, local_id, shared, token)
    VALUES (nextval('@schema@.request_ids'), n, p_agent, p_local, p_shared, request.token);
END $$;

-- Takes an agent's request out of its manager, if it is held (p_held) or
-- queued (not p_held), and processes its name's queue: the spec's release
-- (4.2) and abort (4.3). False if it was not there in that state (a lock
-- stolen, or its agent ended; a request granted meanwhile).
CREATE FUNCTION @schema@.remove(p_agent integer, p_local bigint, p_held boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  SELECT name_id INTO n FROM @schema@.requests WHERE agent = p_agent AND local_id = p_local;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM 1 FROM @schema@.names WHERE id = n FOR UPDATE;
  DELETE FROM @schema@.requests WHERE agent = p_agent AND local_id = p_local
    AND (token IS NOT NULL) = p_held;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM @schema@.process(n);
  RETURN true;
END $$;

-- Terminate an agent's remaining locks and requests (spec 2.6), and the
-- agent. Names are locked in id order, so that two of these cannot deadlock.
CREATE FUNCTION @schema@.leave(p_agent integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  name_ids bigint[];
  n bigint;
BEGIN
  PERFORM 1 FROM @schema@.agents WHERE id = p_agent FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT coalesce(array_agg(DISTINCT name_id ORDER BY name_id), '{}') INTO name_ids
    FROM @schema@.requests WHERE agent = p_agent;
  PERFORM 1 FROM @schema@.names WHERE id = ANY (name_ids) ORDER BY id FOR UPDATE;
  DELETE FROM @schema@.requests WHERE agent = p_agent;
  FOREACH n IN ARRAY name_ids LOOP
    PERFORM @schema@.process(n);
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
  PERFORM 1 FROM @schema@.names WHERE id IN (SELECT name_id FROM @schema@.requests WHERE agent = ANY (ended))
    ORDER BY id FOR UPDATE;
  FOREACH a IN ARRAY ended LOOP
    PERFORM @schema@.leave(a);
  END LOOP;
  DELETE FROM @schema@.names n WHERE n.id IN (
    SELECT m.id FROM @schema@.names m WHERE m.scope = p_scope
      AND NOT EXISTS (SELECT 1 FROM @schema@.requests r WHERE r.name_id = m.id)
    FOR UPDATE SKIP LOCKED);
  RETURN cardinality(ended);
END $$;

-- The scope's state (spec 4.5): held locks in grant order, then pending
-- requests per name in queue order, names in order of first use.
CREATE FUNCTION @schema@.snapshot(p_scope text)
RETURNS TABLE (held boolean, name bytea, shared boolean, client_id text)
LANGUAGE sql STABLE AS $$
  SELECT r.token IS NOT NULL, n.name, r.shared, a.client_id
    FROM @schema@.requests r
    JOIN @schema@.names n ON n.id = r.name_id
    JOIN @schema@.agents a ON a.id = r.agent
    WHERE n.scope = p_scope
    ORDER BY r.token IS NULL, r.token, n.id, r.id
$$;

INSERT INTO @schema@.meta (key, value) VALUES ('layout', '1');
