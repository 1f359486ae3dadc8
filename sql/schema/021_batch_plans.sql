-- A batched settle reads the batch's job rows, whatever plan a connection cached
-- (issue 21: batched completion; tests/integration/test_batch_plans.py).
--
-- A pooled connection plans a prepared statement generically from its sixth
-- execution and keeps that plan until the table's statistics change: for the life
-- of the connection when autovacuum is off, the first minute or so of a new
-- database when it is on. job_settle_batch_if_fenced joined unnest($1) with
-- extraction_jobs on "j.state = 'RUNNING' AND j.lease_until > now". Planned while
-- the table was empty, that was a scan of extraction_jobs_running_lease, every
-- live lease of every driver, each joined with the whole batch: one batch of 16
-- beside 3,000 other leases read 3,064 job rows and took 11.4-12.7 ms; through
-- this function, 64 rows and 1.9 ms (docs/benchmarks.md, tenth pass).
--
-- Migration 020's rule for per-row statements (state the other conditions with IS
-- NOT DISTINCT FROM, so only the primary key serves them) is not enough for a join:
-- on an empty table a sequential scan costs less than the ten primary-key probes
-- the planner expects for unnest($1), and that plan, cached, reads the whole table
-- once the table has grown. An UPDATE cannot take its rows from a LATERAL lookup
-- (by ctid, a concurrent heartbeat would move the row and make a valid settle look
-- stale), and planning the statement on every call cost 10-15 % of the batched
-- settle's throughput in benchmarks.store_bench.
--
-- So the batch's elements come from this function, declared to return one row.
-- With one outer row the cheapest plan at any table size, empty included, is one
-- probe of extraction_jobs_pkey per element; it is also the right plan for a real
-- batch, since each element names one job. The function only unnests its
-- arguments (PL/pgSQL, so the planner cannot inline it and forget the estimate).
CREATE FUNCTION settle_batch_elements(
  p_ids uuid[], p_fences bigint[], p_states text[], p_result_refs text[], p_policies text[],
  p_error_classes text[], p_error_details text[])
RETURNS TABLE (id uuid, fence bigint, state text, result_ref text, policy text,
               error_class text, error_detail text)
LANGUAGE plpgsql STABLE ROWS 1 AS $$
BEGIN
  RETURN QUERY SELECT * FROM unnest(p_ids, p_fences, p_states, p_result_refs, p_policies,
                                    p_error_classes, p_error_details);
END
$$;
