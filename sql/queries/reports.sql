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

-- name: report_erp_postings
SELECT count(*) AS postings, count(*) FILTER (WHERE deliveries_seen > 1) AS duplicates_absorbed
FROM erp_postings;
