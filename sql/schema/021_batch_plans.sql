-- Batched statements read the batch's rows, whatever plan a connection cached
-- (issue 21: batched completion; tests/integration/test_batch_plans.py).
--
-- A pooled connection plans a prepared statement generically from its sixth
-- execution and keeps that plan until the table's statistics change: for the life
-- of the connection when autovacuum is off, the first minute or so of a new
-- database when it is on. job_settle_batch_if_fenced joined unnest($1) with
-- extraction_jobs on "j.state = 'RUNNING' AND j.lease_until > now": planned while
-- the table was empty, that was a scan of extraction_jobs_running_lease, every live
-- lease of every driver, with the batch's ids as a join filter (a settle of 16
-- beside 3,000 other leases read 9,180 job rows).
--
-- Migration 020's rule for per-row statements (state the other conditions with IS
-- NOT DISTINCT FROM so only the primary key serves them) is not enough for a join:
-- on an empty table a sequential scan and a hash join cost less than 10 probes of
-- the primary key, and that plan, cached, reads the whole table later. An UPDATE
-- cannot take its rows from a LATERAL lookup either (by ctid, a concurrent
-- heartbeat would move the row and make a valid settle look stale).
--
-- So the job rows of a batch are updated by this function, whose statement is
-- planned on every call: a SQL function is planned once per execution of the
-- statement that calls it, with the table's current size (without statistics the
-- planner reads the number of pages from the file), and plan_cache_mode keeps that
-- so on servers that cache SQL functions' plans (PostgreSQL 18). Planning the one
-- UPDATE costs a fraction of a millisecond per batch. Each row is still conditional
-- on its own fence and lease, exactly as before.
CREATE FUNCTION job_settle_fenced_rows(
  p_ids uuid[], p_fences bigint[], p_states text[], p_result_refs text[], p_policies text[],
  p_error_classes text[], p_error_details text[], p_now timestamptz)
RETURNS TABLE (id uuid, tenant_id uuid, state text, state_version bigint, attempt integer,
               fence bigint, traceparent text)
LANGUAGE sql VOLATILE
SET plan_cache_mode = force_custom_plan
AS $$
  UPDATE extraction_jobs j
  SET state = b.state, result_ref = b.result_ref, validation_policy = b.policy,
      lease_until = NULL, lease_owner = NULL, finished_at = coalesce(p_now, now()),
      last_error_class = b.error_class, last_error = b.error_detail
  FROM unnest(p_ids, p_fences, p_states, p_result_refs, p_policies, p_error_classes,
              p_error_details)
    AS b(id, fence, state, result_ref, policy, error_class, error_detail)
  WHERE j.id = b.id AND j.state IS NOT DISTINCT FROM 'RUNNING' AND j.fence = b.fence
    AND j.lease_until > coalesce(p_now, now())
  RETURNING j.id, j.tenant_id, j.state, j.state_version, j.attempt, j.fence, j.traceparent
$$;
