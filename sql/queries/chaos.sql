-- The chaos scenario (benchmarks/chaos): its timeline samples and the one fault
-- it does through SQL.

-- name: chaos_backend_terminate
-- pg_terminate_backend on this database's connections whose application_name
-- matches one of $1 (LIKE patterns): the actors' pools see their connections die.
SELECT pid, application_name, pg_terminate_backend(pid) AS terminated
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND application_name LIKE ANY ($1::text[]);

-- name: chaos_backend_terminate_ports
-- pg_terminate_backend on this database's loopback connections from the client
-- ports $1 (the Serve stack's actors share one application_name; their
-- processes' sockets tell them apart).
SELECT pid, client_port, pg_terminate_backend(pid) AS terminated
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND client_port = ANY ($1::int[]);

-- name: chaos_sample
-- One point of the timeline: jobs per state, settled, delivered, unpublished.
SELECT count(*) FILTER (WHERE state = 'READY') AS ready,
       count(*) FILTER (WHERE state = 'RETRY_SCHEDULED') AS retry_scheduled,
       count(*) FILTER (WHERE state = 'RUNNING') AS running,
       count(*) FILTER (WHERE state = 'SUCCEEDED') AS succeeded,
       count(*) FILTER (WHERE state = 'REVIEW_REQUIRED') AS review_required,
       count(*) FILTER (WHERE state = 'FAILED_TERMINAL') AS failed_terminal,
       count(*) FILTER (WHERE state = 'CANCELLED') AS cancelled,
       count(*) FILTER (WHERE finished_at IS NOT NULL) AS settled,
       (SELECT count(*) FROM deliveries WHERE state = 'delivered') AS delivered,
       (SELECT count(*) FROM deliveries
         WHERE state IN ('pending', 'in_flight', 'retry_scheduled')) AS deliveries_open,
       (SELECT count(*) FROM outbox_events WHERE published_at IS NULL) AS unpublished
FROM extraction_jobs;

-- name: chaos_job_timing_list
-- Completion latency (accepted to settled) and attempts of every settled job.
SELECT id, state, attempt,
       extract(epoch FROM finished_at - created_at)::float8 AS seconds
FROM extraction_jobs WHERE finished_at IS NOT NULL;

-- name: chaos_stalled_attempt_list
-- The attempts of a stalled driver ($1: its worker id) that the reaper closed
-- (lease expired) since $2: whether a newer fence of the job exists (another
-- owner took it) and whether the stale owner's late result was recorded.
SELECT a.job_id, a.fence, a.late_result_at IS NOT NULL AS late_result,
       EXISTS (SELECT 1 FROM job_attempts b
               WHERE b.job_id = a.job_id AND b.fence > a.fence) AS taken_over
FROM job_attempts a
WHERE a.worker_id = $1 AND a.ended_at >= $2 AND a.outcome = 'lease_expired';
