-- Layout 1: the tables of the PostgreSQL lock manager (the functions are in
-- ../schema.sql, re-created after every migration). A migration
-- runs once per schema, in the transaction that lib/postgres/schema.js runs
-- the SQL in, with search_path pg_catalog, pg_temp, under the advisory lock
-- (@key@, 0); it takes the schema from the layout before its number to its
-- number, which it writes in meta.

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
  IF pg_catalog.current_setting('server_version_num')::integer >= 150000 THEN
    EXECUTE pg_catalog.format('ALTER SEQUENCE %s SET UNLOGGED', '@schema@.tokens'::pg_catalog.regclass);
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
-- The manager's request and release statements (lib/postgres/statements.js)
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
-- the watcher's slices in lib/postgres/watch.js). The token is in no
-- index, so that a grant from the queue is a heap-only update; and no index
-- is partial, since the planner may then scan one whole for a request
-- looked up by its primary key, believing it small.
CREATE INDEX ON @schema@.requests (name_id, id);

INSERT INTO @schema@.meta (key, value) VALUES ('layout', '1');
