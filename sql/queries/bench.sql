-- Queries of the benchmarks: read-only reporting (benchmarks/load/collect.py, upload_bench.py,
-- benchmarks/load/runner.py) and the broker benchmark's bulk set-up (benchmarks/load/broker_bench.py);
-- loaded with the other named queries by pipeline.queries.

-- name: bench_settled_count
SELECT count(*) FROM extraction_jobs WHERE finished_at IS NOT NULL;

-- name: bench_job_rows
SELECT j.id, j.state, j.attempt, j.finished_at, j.deadline_at, j.created_at,
       coalesce(sum(a.prompt_tokens), 0) AS prompt_tokens,
       coalesce(sum(a.completion_tokens), 0) AS completion_tokens,
       count(a.job_id) AS attempt_rows
FROM extraction_jobs j LEFT JOIN job_attempts a ON a.job_id = j.id
GROUP BY j.id;

-- name: bench_review_reasons
SELECT reason->>'code' AS code, count(*) AS n
FROM extraction_results r, jsonb_array_elements(r.validation->'reasons') AS reason
WHERE r.decision = 'REVIEW_REQUIRED'
GROUP BY 1 ORDER BY 2 DESC;

-- name: bench_delivery_rows
SELECT job_id, state, attempts, delivered_at FROM deliveries;

-- name: bench_deliveries_unfinished
SELECT count(*) FROM deliveries WHERE state NOT IN ('delivered', 'failed', 'abandoned');

-- name: bench_erp_postings
SELECT count(*) AS postings, count(*) FILTER (WHERE deliveries_seen > 1) AS duplicates_absorbed
FROM erp_postings;

-- name: bench_broker_bulk_jobs
-- Set-up of the drain measurement: $2 READY jobs of tenant $1 in one statement.
INSERT INTO extraction_jobs (id, tenant_id, idempotency_key, request_hash, object_version,
                             state, deadline_at)
SELECT gen_random_uuid(), $1, 'drain-' || g, 'h', 'v', 'READY', now() + interval '1 hour'
FROM generate_series(1, $2) g;

-- name: bench_broker_bulk_events
-- One requested event per job of tenant $1 (the drain measurement's backlog).
INSERT INTO outbox_events (event_id, job_id, event_type, payload)
SELECT gen_random_uuid(), id, 'extraction.requested.v1',
       jsonb_build_object('job_id', id, 'schema_version', 1, 'v', 1)
FROM extraction_jobs WHERE tenant_id = $1;

-- name: bench_broker_publish_window
-- Events of tenant $1 published while the intake still ran, and the catch-up after it.
WITH w AS (
  SELECT min(o.created_at) AS t0, max(o.created_at) AS t1
  FROM outbox_events o JOIN extraction_jobs j ON j.id = o.job_id WHERE j.tenant_id = $1
)
SELECT count(*) FILTER (WHERE o.published_at BETWEEN w.t0 AND w.t1) AS in_window,
       extract(epoch FROM w.t1 - w.t0) AS window_seconds,
       extract(epoch FROM max(o.published_at) - w.t1) AS catch_up_seconds
FROM outbox_events o JOIN extraction_jobs j ON j.id = o.job_id CROSS JOIN w
WHERE j.tenant_id = $1
GROUP BY w.t0, w.t1;

-- name: bench_broker_latencies
-- Relay -> inbox latency per event of tenant $1 (outbox created_at to inbox commit).
SELECT extract(epoch FROM i.received_at - o.created_at) AS seconds
FROM execution_inbox i JOIN outbox_events o ON o.event_id = i.event_id
JOIN extraction_jobs j ON j.id = i.job_id
WHERE j.tenant_id = $1;

-- name: bench_broker_inbox_count
-- Inbox rows of tenant $1.
SELECT count(*) FROM execution_inbox i JOIN extraction_jobs j ON j.id = i.job_id
WHERE j.tenant_id = $1;

-- name: bench_job_states
SELECT state, count(*) AS n FROM extraction_jobs GROUP BY state;

-- name: bench_attempt_outcomes
SELECT outcome, count(*) AS n FROM job_attempts GROUP BY outcome;

-- name: bench_age_threshold_crossed
-- When the oldest waiting burst job first reached age $1: the earliest
-- created_at + $1 of a burst job whose first attempt started later (or never).
WITH burst AS (
  SELECT j.id, j.created_at, (SELECT min(a.started_at) FROM job_attempts a
                              WHERE a.job_id = j.id) AS first_start
  FROM extraction_jobs j WHERE j.idempotency_key LIKE 'burst-%'
)
SELECT (SELECT min(created_at) FROM burst) AS burst_start,
       min(created_at + make_interval(secs => $1)) AS crossed_at
FROM burst
WHERE first_start IS NULL OR first_start > created_at + make_interval(secs => $1);

-- name: bench_job_states_of
-- The states of the jobs $1 (the planted credit notes' invoices, sent once SUCCEEDED),
-- each read by its primary key (a lookup per id the planner cannot flatten: OFFSET 0).
SELECT found.id, found.state
FROM (SELECT DISTINCT unnest($1::uuid[]) AS id) AS i CROSS JOIN LATERAL (
  SELECT j.id, j.state FROM extraction_jobs j WHERE j.id = i.id OFFSET 0
) found;

-- name: bench_job_validations
-- Every job's state and stored validation (the planted documents' oracle).
SELECT j.id, j.state, r.validation
FROM extraction_jobs j LEFT JOIN extraction_results r ON r.job_id = j.id;

-- name: bench_credit_note_links
SELECT job_id, invoice_job_id FROM credit_note_links;

-- name: bench_erp_posting_rows
-- The reference ERP's postings: a credit's invoice, and whether one was applied twice.
SELECT job_id, kind, credits_job_id, effect_count, deliveries_seen FROM erp_postings;

-- name: bench_documents_by_page_count
-- Jobs per page count counted at intake (benchmarks/load/upload_bench.py); pasted text has none.
SELECT page_count, count(*) AS n FROM documents WHERE page_count IS NOT NULL GROUP BY page_count;
