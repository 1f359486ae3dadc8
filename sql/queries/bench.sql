-- Read-only reporting queries of the benchmark runner (benchmarks/collect.py,
-- benchmarks/runner.py); loaded with the other named queries by pipeline.queries.

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
