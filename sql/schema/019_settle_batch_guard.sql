-- A batched settle that aborts itself (issue 21: batched completion).
--
-- job_settle_batch_if_fenced settles a batch in one statement; a job row that
-- moved under its fence whose attempt row was not 'running' must roll the whole
-- batch back. The caller used to check a returned flag inside an explicit
-- transaction (BEGIN, the statement, COMMIT: three round trips). With this guard
-- the statement itself fails, so a batch with no settle hooks and no invoice to
-- claim runs as one statement, its own transaction: one round trip.

-- Raise SQLSTATE FL001 naming the job and fence; declared to return boolean so a
-- query can call it in a WHERE clause. pipeline.jobs.batch_settling maps FL001 to
-- LeaseLost.
CREATE FUNCTION attempt_not_running(p_job uuid, p_fence bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION 'job % fence %: attempt already closed; batch rolled back', p_job, p_fence
    USING ERRCODE = 'FL001';
END;
$$;
