-- Layout 3: an agent's life is judged by its backend too, which no other
-- role can borrow, and no longer only by its life lock, which any role can
-- hold or queue for (advisory locks are the database's, and pg_locks shows
-- every key in use): a role queued for a live agent's lock has it once the
-- agent's session ends, and the agent then looked alive for good. Each row
-- of agents gets the identity of the backend that joined (its pid was
-- there already) as pg_stat_activity shows it: its start, and its role.
-- And the advisory lock (@key@, 0), which any role could hold and so keep
-- every join and migration waiting, is no longer taken: join() locks the
-- agents table instead, and the migrations the layout's row of meta and
-- then that table, which only roles that may update them can.
--
-- join() runs on the agent's own session, so the columns' defaults are
-- that session's: every row inserted from now on gets them, also by the
-- join() of layout 2 that began before this migration and inserts after
-- it. The agents that joined before get theirs here, from their backend
-- (the one that holds their life lock, which pg_locks shows), where this
-- role may see it: pg_stat_activity shows the start of another role's
-- sessions only to members of that role and of pg_read_all_stats, and then
-- it stays unknown (null), and the pid and role alone identify the backend.

-- The start and the role of the calling session's backend.
CREATE FUNCTION @schema@.own_backend_start() RETURNS timestamptz
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT backend_start FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid())
$$;
CREATE FUNCTION @schema@.own_role() RETURNS oid
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT usesysid FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid())
$$;

ALTER TABLE @schema@.agents ADD COLUMN backend_start timestamptz, ADD COLUMN role_id oid;
UPDATE @schema@.agents a SET backend_start = s.backend_start, role_id = s.usesysid
  FROM pg_catalog.pg_stat_get_activity(NULL) s
  WHERE s.pid OPERATOR(pg_catalog.=) a.pid AND EXISTS (SELECT FROM pg_catalog.pg_locks l
    WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.classid OPERATOR(pg_catalog.=) (@key@)::pg_catalog.oid
      AND l.objid OPERATOR(pg_catalog.=) a.id::pg_catalog.oid AND l.objsubid OPERATOR(pg_catalog.=) 2
      AND l.pid OPERATOR(pg_catalog.=) a.pid AND l.mode OPERATOR(pg_catalog.=) 'ExclusiveLock' AND l.granted);
ALTER TABLE @schema@.agents ALTER COLUMN backend_start SET DEFAULT @schema@.own_backend_start(),
  ALTER COLUMN role_id SET DEFAULT @schema@.own_role();

UPDATE @schema@.meta SET value = '3' WHERE key OPERATOR(pg_catalog.=) 'layout';
