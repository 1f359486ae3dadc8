-- The job audit runs once per statement, not once per row (issue 21, item 4).
--
-- 001_core.sql wrote job_events and sent the two notifications from a row-level
-- AFTER trigger: a settle of 16 jobs in one statement (job_settle_batch_if_fenced)
-- or a claim of 16 ran the PL/pgSQL function 16 times, each time planning-cached
-- but still one INSERT and two pg_notify calls of its own. The same work is now
-- one INSERT ... SELECT and one notification pass over the statement's transition
-- tables. What is written is unchanged: one job_events row per row whose state or
-- fence changed (every inserted row), with the same columns, and the same
-- notifications on the same channels with the same payloads. Row-level AFTER
-- triggers also fire at the end of the statement, so nothing becomes visible at
-- another moment. The guard (BEFORE UPDATE, per row) stays as it is: it sets
-- state_version on NEW, which the audit rows carry.
--
-- PostgreSQL allows transition tables only on single-event triggers, hence two.
DROP TRIGGER extraction_jobs_audit ON extraction_jobs;
DROP FUNCTION extraction_jobs_audit();

CREATE FUNCTION extraction_jobs_audit_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO job_events (job_id, tenant_id, from_state, to_state, state_version, fence,
                          attempt, detail)
  SELECT n.id, n.tenant_id, NULL, n.state, n.state_version, n.fence, n.attempt,
         coalesce(n.terminal_reason, n.last_error_class)
  FROM new_rows n ORDER BY n.id;
  PERFORM pg_notify('fenceline_job_events',
                    json_build_object('job_id', n.id, 'tenant_id', n.tenant_id,
                                      'state', n.state,
                                      'state_version', n.state_version)::text),
          CASE WHEN n.state IN ('READY', 'RETRY_SCHEDULED')
               THEN pg_notify('fenceline_runnable', n.id::text) END
  FROM new_rows n;
  RETURN NULL;
END $$;

CREATE FUNCTION extraction_jobs_audit_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO job_events (job_id, tenant_id, from_state, to_state, state_version, fence,
                          attempt, detail)
  SELECT n.id, n.tenant_id, o.state, n.state, n.state_version, n.fence, n.attempt,
         coalesce(n.terminal_reason, n.last_error_class)
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  WHERE n.state IS DISTINCT FROM o.state OR n.fence <> o.fence
  ORDER BY n.id;
  PERFORM pg_notify('fenceline_job_events',
                    json_build_object('job_id', n.id, 'tenant_id', n.tenant_id,
                                      'state', n.state,
                                      'state_version', n.state_version)::text),
          CASE WHEN n.state IN ('READY', 'RETRY_SCHEDULED')
               THEN pg_notify('fenceline_runnable', n.id::text) END
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  WHERE n.state IS DISTINCT FROM o.state OR n.fence <> o.fence;
  RETURN NULL;
END $$;

CREATE TRIGGER extraction_jobs_audit_inserted AFTER INSERT ON extraction_jobs
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION extraction_jobs_audit_inserted();

CREATE TRIGGER extraction_jobs_audit_updated AFTER UPDATE ON extraction_jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION extraction_jobs_audit_updated();
