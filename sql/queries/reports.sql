-- Read-only summaries for progress displays, the demo and benchmarks.

-- name: report_state_counts
SELECT state, count(*) AS n FROM extraction_jobs GROUP BY state;

-- name: report_delivery_counts
SELECT state, count(*) AS n FROM deliveries GROUP BY state;

-- name: report_deliveries_unfinished
SELECT count(*) FROM deliveries WHERE state NOT IN ('delivered', 'failed', 'abandoned');

-- name: report_job_outcomes
SELECT j.id, j.state, j.attempt, j.created_at, j.finished_at, t.name AS tenant
FROM extraction_jobs j JOIN tenants t ON t.id = j.tenant_id;

-- name: report_attempt_usage
SELECT coalesce(sum(prompt_tokens), 0) AS prompt, coalesce(sum(completion_tokens), 0) AS completion,
       count(*) AS attempts, count(*) FILTER (WHERE uncertain) AS uncertain
FROM job_attempts;

-- name: report_job_states
SELECT id, state FROM extraction_jobs;

-- name: report_invoice_rows
-- One row per job for the demo's per-invoice table: the stored result and its
-- validation, the failure if any, the deliveries' states and the tokens the job's
-- attempts wrote. What the reference ERP posted is in the ERP's own database
-- (erp_posting_applications_by_job), joined by job id in benchmarks/demo/erp.py.
-- The result's text is sealed at rest (the caller opens it under tenant_id:
-- pipeline/sealed_results.py).
SELECT j.id, j.tenant_id, j.state, j.attempt, j.last_error_class, j.last_error, j.terminal_reason,
       t.name AS tenant, r.result, r.validation,
       d.states AS delivery_states,
       coalesce(a.completion_tokens, 0) AS completion_tokens
FROM extraction_jobs j
JOIN tenants t ON t.id = j.tenant_id
LEFT JOIN extraction_results r ON r.job_id = j.id
LEFT JOIN (SELECT job_id, string_agg(state, ',' ORDER BY created_at) AS states
           FROM deliveries GROUP BY job_id) d ON d.job_id = j.id
LEFT JOIN (SELECT job_id, sum(completion_tokens)::int AS completion_tokens
           FROM job_attempts GROUP BY job_id) a ON a.job_id = j.id;
