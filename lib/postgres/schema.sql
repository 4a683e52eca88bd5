-- The PostgreSQL lock manager: the spec's algorithms (request, release,
-- abort, process the queue, snapshot, agent termination) as SQL functions,
-- each one transaction, so that row locks on a name give the atomicity the
-- native manager gets from its mutex. Their tables are made and changed by
-- the numbered migrations in migrations/; this text re-creates the
-- functions after them, in the same transaction. lib/postgres/schema.js
-- runs it with @schema@ replaced by the quoted schema name and @key@ by the
-- schema's advisory key (its own agents' life locks are (@key@, agent id)):
-- when it migrates a schema, with the layout's row of meta and the agents
-- table locked.
--
-- Another role may have made functions and operators in a schema of the
-- caller's search_path (public, where any role may create on PostgreSQL
-- 14) that match a call better than the built-in: each function here runs
-- with search_path pg_catalog, pg_temp, and names the built-ins it calls
-- with their schema. (A LANGUAGE sql function with a SET is not inlined:
-- the ones here are not on the hot paths.)

-- A value drawn from the counter, made a token: the ceiling raised above
-- it if it has reached it. Returns it. Callers hold the lock of a name's row
-- already; no one locks one after token_block, so the two cannot deadlock.
CREATE OR REPLACE FUNCTION @schema@.token_admit(p_drawn bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
  IF pg_catalog.current_setting('synchronous_commit') IN ('off', 'local') THEN
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
  END IF;
  RETURN p_drawn;
END $$;

-- The ceiling once p_drawn is a token (raised above it if it had reached
-- it), for a manager that checks its draws against the last it saw.
CREATE OR REPLACE FUNCTION @schema@.token_ceiling(p_drawn bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM @schema@.token_admit(p_drawn);
  RETURN (SELECT ceiling FROM @schema@.token_block);
END $$;

-- Moves the counter to the ceiling after a crash (token_live empty): see
-- the tokens sequence (migrations/001-layout-1.sql). join() calls
-- it.
CREATE OR REPLACE FUNCTION @schema@.token_restart() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
    PERFORM pg_catalog.setval('@schema@.tokens', c);
    INSERT INTO @schema@.token_live (floor) VALUES (c + 1);
  END IF;
END $$;

-- Grants what the queue of a locked name allows (spec 4.4): the first
-- requests while each is grantable, and counts them in the name's row. Each
-- grant gets the next token and is notified on its agent's channel as
-- '<local id> g <token>'. Every queued request has an id above p_after;
-- p_held locks are held, exclusive if p_exclusive (the name's counts after
-- the caller's step; the number queued is the row's). The row is written
-- only if something is granted. Returns how many it granted.
--
-- Each lookup reads the name's requests in id order from a bound and stops
-- at the first: held locks, which come before the queue, are stepped over
-- here, not filtered out in the statement. A filter on the token, whose
-- statistics may be from when the table was nearly empty, made the planner
-- read the whole queue and sort it.
CREATE OR REPLACE FUNCTION @schema@.process(p_name bigint, p_after bigint, p_held integer, p_exclusive boolean)
RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
    -- token_admit() is called only where it has work: a call costs more
    -- than the read of the ceiling that it would begin with.
    head_token := pg_catalog.nextval('@schema@.tokens');
    IF head_token >= (SELECT ceiling FROM @schema@.token_block) THEN
      PERFORM @schema@.token_admit(head_token);
    END IF;
    UPDATE @schema@.requests SET token = head_token, since = pg_catalog.now()
      WHERE agent = head_agent AND local_id = head_local;
    PERFORM pg_catalog.pg_notify(channel, head_local || ' g ' || head_token) FROM @schema@.agents WHERE id = head_agent;
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

-- Queues a request behind what is held or queued on its name, if the
-- name's row says it must wait: the row counts it, and its row of requests
-- takes the next number as its place in the queue (a number, not a token:
-- never admitted, never given as a token; its row does not outlive a
-- crash). Returns 0, or null if it was not queued (the name is not used
-- yet, or would grant it: request() then decides). One statement, which
-- the request statement calls only when its update found the name not
-- free: in the statement itself, its update and insert would start their
-- executors on every request, the uncontended ones too (7% more of their
-- time, measured).
CREATE OR REPLACE FUNCTION @schema@.queue(p_agent integer, p_local bigint, p_scope text, p_name bytea,
    p_shared boolean, p_parent bigint)
RETURNS bigint
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
  WITH behind AS (
    UPDATE @schema@.names SET queued = queued + 1
      WHERE scope = p_scope AND digest = pg_catalog.sha256(p_name)
        AND (queued > 0 OR (held > 0 AND (exclusive OR NOT p_shared)))
      RETURNING id)
  INSERT INTO @schema@.requests (agent, local_id, id, name_id, shared, token, parent, since)
    SELECT p_agent, p_local, pg_catalog.nextval('@schema@.tokens'), id, p_shared, NULL, p_parent, pg_catalog.now()
      FROM behind
    RETURNING 0::bigint
$$;

-- Request a lock (spec 4.1, from "queue the following steps to the lock task
-- queue"), for an agent of p_scope, as a row of requests. Returns its token
-- if it is granted now, 0 if it is queued, null if it is not available
-- (ifAvailable). Robbed holders are notified '<local id> s'. The manager
-- calls this when its request statement (lib/postgres/statements.js) found
-- the name not free in its row, or steals, or is pooled.
--
-- p_pooled: the call does not come on the agent's session, which may have
-- ended meanwhile; its row is then locked (leave() locks it to end it) and
-- an agent that has been ended gets SQLSTATE WLGON. A call on the session
-- needs no such check: the session is the agent's life.
--
-- p_parent: the local id of the agent's lock inside whose callback it was
-- made, or 0 (none; and the calls of managers of layout 3, which have no
-- such argument).
CREATE OR REPLACE FUNCTION @schema@.request(p_agent integer, p_local bigint, p_scope text, p_name bytea,
    p_shared boolean, p_if_available boolean, p_steal boolean, p_pooled boolean, p_parent bigint DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  d bytea := pg_catalog.sha256(p_name);
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
      PERFORM pg_catalog.pg_notify(channel, now_holder_local || ' s') FROM @schema@.agents WHERE id = now_holder;
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
      PERFORM pg_catalog.pg_notify(channel, robbed_local || ' s') FROM @schema@.agents WHERE id = robbed_agent;
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
  v := @schema@.token_admit(pg_catalog.nextval('@schema@.tokens'));
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
  INSERT INTO @schema@.requests (agent, local_id, id, name_id, shared, token, parent, since)
    VALUES (p_agent, p_local, CASE WHEN p_steal THEN 0 ELSE v END, n, p_shared, CASE WHEN granted THEN v END,
      p_parent, pg_catalog.now());
  RETURN CASE WHEN granted THEN v ELSE 0 END;
END $$;

-- Takes an agent's request out of its manager, if it is held (p_held) or
-- queued (not p_held), and processes its name's queue: the spec's release
-- (4.2) and abort (4.3) of a row of requests (the manager's release
-- statement releases a lock held in a name's row). False if it was not
-- there in that state (a lock stolen, or its agent ended; a request granted
-- meanwhile).
CREATE OR REPLACE FUNCTION @schema@.remove(p_agent integer, p_local bigint, p_held boolean)
RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n bigint;
  now_held integer;
  now_exclusive boolean;
  now_queued integer;
  gone bigint;
  granted integer := 0;
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
  -- A release writes the name's row once: process() writes it if it
  -- grants (the held count given, the queued one its own), else this does.
  -- An abort is rare, and counts itself out first.
  IF p_held THEN
    now_held := now_held - 1;
  ELSE
    now_queued := now_queued - 1;
    UPDATE @schema@.names SET queued = now_queued WHERE id = n;
  END IF;
  -- While locks are held, the head of the queue waits for them (each step
  -- that could let it go processes the queue): a release that leaves locks
  -- held grants nothing. After a held lock, the queue starts past its id.
  IF now_queued > 0 AND (now_held = 0 OR NOT p_held) THEN
    granted := @schema@.process(n, CASE WHEN p_held THEN gone ELSE 0 END, now_held, now_exclusive);
  END IF;
  IF p_held AND granted = 0 THEN
    UPDATE @schema@.names SET held = now_held WHERE id = n;
  END IF;
  RETURN true;
END $$;

-- Terminate an agent's remaining locks and requests (spec 2.6), and the
-- agent. Names are locked in id order, so that two of these cannot deadlock.
CREATE OR REPLACE FUNCTION @schema@.leave(p_agent integer) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
  SELECT coalesce(pg_catalog.array_agg(DISTINCT name_id ORDER BY name_id), '{}') INTO name_ids FROM (
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
    SELECT name_id, pg_catalog.count(*) FILTER (WHERE was_held) AS held_gone,
        pg_catalog.count(*) FILTER (WHERE NOT was_held) AS queued_gone
      FROM gone GROUP BY name_id)
  UPDATE @schema@.names SET held = held - held_gone, queued = queued - queued_gone
    FROM counts WHERE id = counts.name_id;
  FOR n, now_held, now_exclusive IN
      SELECT id, held, exclusive FROM @schema@.names WHERE id = ANY (name_ids) AND queued > 0 ORDER BY id LOOP
    PERFORM @schema@.process(n, 0, now_held, now_exclusive);
  END LOOP;
  DELETE FROM @schema@.agents WHERE id = p_agent;
END $$;

-- Whether agent p_agent's backend is still there, as pg_stat_activity
-- shows it: the pid, the role and the start recorded when it joined
-- (migrations/003-backend-identity.sql). Another role's backends
-- have another role, and a later backend of the same pid another start.
-- The start of another role's session is shown only to members of that
-- role and of pg_read_all_stats: unknown (null), the pid and the role
-- decide.
CREATE OR REPLACE FUNCTION @schema@.backend_there(p_agent integer) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (SELECT FROM @schema@.agents a, pg_catalog.pg_stat_get_activity(a.pid) s
    WHERE a.id = p_agent AND s.pid = a.pid AND s.usesysid = a.role_id
      AND (s.backend_start = a.backend_start OR s.backend_start IS NULL OR a.backend_start IS NULL))
$$;

-- Whether agent p_agent's session is still there: its backend is, and
-- holds its life lock, as pg_locks shows it. A pooler in session mode
-- keeps the backend of a client that died and resets it (DISCARD ALL),
-- which frees the lock: the backend is still there, but holds it no longer.
CREATE OR REPLACE FUNCTION @schema@.alive(p_agent integer) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT @schema@.backend_there(p_agent) AND EXISTS (SELECT FROM @schema@.agents a, pg_catalog.pg_lock_status() l
    WHERE a.id = p_agent AND l.locktype = 'advisory' AND l.classid = (@key@)::oid
      AND l.objid = a.id::oid AND l.objsubid = 2 AND l.pid = a.pid AND l.mode = 'ExclusiveLock' AND l.granted)
$$;

-- The watcher's wait (lib/postgres/watch.js): true once agent p_agent's
-- session has ended. At once if p_backend and its backend is gone; else
-- once its life lock is free, taken and dropped in shared mode, a wait
-- that the caller's lock_timeout bounds. Any role may hold or queue for
-- that lock, and then it is not freed when the session ends: the backend,
-- looked at first, is gone or holds it no longer.
CREATE OR REPLACE FUNCTION @schema@.ended(p_agent integer, p_backend boolean) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT p_backend OR @schema@.alive(p_agent) THEN
    PERFORM pg_catalog.pg_advisory_lock_shared(@key@, p_agent);
    PERFORM pg_catalog.pg_advisory_unlock_shared(@key@, p_agent);
  END IF;
  RETURN true;
END $$;

-- Agents watch each other in a ring, each the next agent by id in its
-- scope (the one whose life lock it waits for), so that every death is seen
-- by someone at once. The agent p_self watches, or null if it is alone:
CREATE OR REPLACE FUNCTION @schema@.neighbour(p_scope text, p_self integer) RETURNS integer
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(
    (SELECT pg_catalog.min(id) FROM @schema@.agents WHERE scope = p_scope AND id > p_self),
    (SELECT pg_catalog.min(id) FROM @schema@.agents WHERE scope = p_scope AND id <> p_self))
$$;

-- and the agent that watches p_self, or null.
CREATE OR REPLACE FUNCTION @schema@.watcher_of(p_scope text, p_self integer) RETURNS integer
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(
    (SELECT pg_catalog.max(id) FROM @schema@.agents WHERE scope = p_scope AND id < p_self),
    (SELECT pg_catalog.max(id) FROM @schema@.agents WHERE scope = p_scope AND id <> p_self))
$$;

-- A new agent of a scope, alive from the start: the session-level advisory
-- lock is taken before its row is visible to anyone, and the row records
-- its backend (its columns' defaults: join() runs on the agent's session).
-- p_channel is the channel it listens on, a name it drew at random: only
-- roles that may read agents can send it a notification. p_client_pid and
-- p_client_host: its client process's pid and host, for details() (null
-- from a manager of layout 3 that began to join before the migration).
CREATE OR REPLACE FUNCTION @schema@.join(p_scope text, p_client_id text, p_channel text,
    p_client_pid integer DEFAULT NULL, p_client_host text DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  new_id integer;
BEGIN
  -- One join at a time, so that each sees the agents before it and tells
  -- its watcher: the ring has no gap. A lock of the agents table, which
  -- only roles that may update it can take (a migration takes it too: joins
  -- wait for one). A mode that leave() and the requests do not conflict
  -- with, and a table lock: a row lock would be written to the log, and
  -- the commit would wait for its flush.
  LOCK TABLE @schema@.agents IN SHARE UPDATE EXCLUSIVE MODE;
  -- Before the agent draws a token, after a crash.
  PERFORM @schema@.token_restart();
  LOOP
    new_id := pg_catalog.nextval('@schema@.agent_ids');
    -- After 2^31 agents, skip ids still in use; and keys that another role
    -- holds (any role may take any advisory lock).
    CONTINUE WHEN NOT pg_catalog.pg_try_advisory_lock(@key@, new_id);
    BEGIN
      INSERT INTO @schema@.agents (id, scope, client_id, pid, channel, client_pid, client_host)
        VALUES (new_id, p_scope, p_client_id, pg_catalog.pg_backend_pid(), p_channel, p_client_pid, p_client_host);
      -- The agent that watched the new one's neighbour watches it now.
      PERFORM pg_catalog.pg_notify(a.channel, 'r') FROM @schema@.agents a
        WHERE a.id = @schema@.watcher_of(p_scope, new_id);
      RETURN new_id;
    EXCEPTION WHEN unique_violation THEN
      PERFORM pg_catalog.pg_advisory_unlock(@key@, new_id);
    END;
  END LOOP;
END $$;

-- Ends the scope's agents whose sessions have ended (no one holds their life
-- lock, or another role does: their backend is gone), but p_self, whose own
-- session would see its lock as free. Returns how many. Agents being ended
-- by another sweep are skipped. The names of all the agents it ends are
-- locked at once, in id order, as leave() locks one agent's: locked agent by
-- agent, two sweeps (or a sweep and a leave()) could each hold a name the
-- other waits for.
CREATE OR REPLACE FUNCTION @schema@.sweep(p_scope text, p_self integer) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  a integer;
  holds boolean;
  ended integer[] := '{}';
BEGIN
  -- Whether each agent's backend holds its life lock (as alive() looks), from
  -- one read of the server's lock table, made after the statement's snapshot:
  -- every agent it sees had taken its lock by then.
  FOR a, holds IN
      WITH l AS MATERIALIZED (SELECT pid, objid FROM pg_catalog.pg_lock_status()
        WHERE locktype = 'advisory' AND classid = (@key@)::oid AND objsubid = 2 AND mode = 'ExclusiveLock' AND granted)
      SELECT g.id, EXISTS (SELECT FROM l WHERE l.pid = g.pid AND l.objid = g.id::oid)
        FROM @schema@.agents g WHERE g.scope = p_scope AND g.id <> p_self LOOP
    IF pg_catalog.pg_try_advisory_lock_shared(@key@, a) THEN
      PERFORM pg_catalog.pg_advisory_unlock_shared(@key@, a);
    ELSIF holds AND @schema@.backend_there(a) THEN
      CONTINUE;
    END IF;
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
  RETURN pg_catalog.cardinality(ended);
END $$;

-- The scope's state (spec 4.5): held locks in grant order, then pending
-- requests per name in queue order, names in order of first use.
CREATE OR REPLACE FUNCTION @schema@.snapshot(p_scope text)
RETURNS TABLE (held boolean, name bytea, shared boolean, client_id text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
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

-- The snapshot with what the watch for deadlocks and a look inside the
-- scope need (migrations/004-details.sql): each entry's agent, its
-- request's local id (serial) and parent's, its agent's client process,
-- and for how long (ms) it has been held or pending, on the server's clock
-- (null where that is not known: requests older than layout 4). A lock held
-- in its name's row has its parent and time only if its agent joined at
-- layout 4 (it has a client): older managers' request statements do not
-- write them.
CREATE OR REPLACE FUNCTION @schema@.details(p_scope text)
RETURNS TABLE (held boolean, name bytea, shared boolean, client_id text, agent integer, serial bigint,
  parent bigint, client_pid integer, client_host text, elapsed double precision)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT l.token IS NOT NULL, n.name, l.shared, a.client_id, a.id, l.local_id,
      CASE WHEN l.in_row AND a.client_pid IS NULL THEN 0 ELSE coalesce(l.parent, 0) END,
      a.client_pid, a.client_host,
      CASE WHEN l.in_row AND a.client_pid IS NULL THEN NULL
        WHEN l.since > pg_catalog.statement_timestamp() THEN 0
        ELSE (extract(epoch FROM pg_catalog.statement_timestamp() - l.since) * 1000)::double precision END
    FROM (SELECT name_id, agent, id, shared, token, local_id, parent, since, false AS in_row FROM @schema@.requests
      UNION ALL
      SELECT id, holder_agent, holder_token, holder_shared, holder_token, holder_local, holder_parent, holder_since, true
        FROM @schema@.names WHERE scope = p_scope AND holder_agent IS NOT NULL) l
    JOIN @schema@.names n ON n.id = l.name_id
    JOIN @schema@.agents a ON a.id = l.agent
    WHERE n.scope = p_scope
    ORDER BY l.token IS NULL, l.token, n.id, l.id
$$;

-- Whoever may call request() may call queue(), which layout 5 added and
-- every request statement names: where PUBLIC may not execute new
-- functions, a database's roles were granted the old ones (or had them by
-- default), and PostgreSQL checks a statement's every function before it
-- runs. Only the new function: the others keep the grants they have.
DO $$
DECLARE
  request pg_catalog.regprocedure := pg_catalog.format('%s(integer, bigint, text, bytea, boolean, boolean, boolean, boolean, bigint)',
    '@schema@.request')::pg_catalog.regprocedure;
  queue pg_catalog.regprocedure := pg_catalog.format('%s(integer, bigint, text, bytea, boolean, bigint)',
    '@schema@.queue')::pg_catalog.regprocedure;
  grantee oid;
BEGIN
  -- request()'s grants as they stand: with no ACL of its own, the
  -- defaults (PUBLIC's included, grantee 0).
  FOR grantee IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_proc p,
        pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
      WHERE p.oid = request AND a.privilege_type = 'EXECUTE' LOOP
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', queue,
      CASE WHEN grantee = 0 THEN 'PUBLIC' ELSE grantee::pg_catalog.regrole::pg_catalog.text END);
  END LOOP;
END $$;
