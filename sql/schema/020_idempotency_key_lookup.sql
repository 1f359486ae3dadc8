-- The idempotency-key lookup reads one index entry, whatever the planner was told
-- when it cached its plan (issue 21: the accept path).
--
-- The admission read (tenant_admission, migration 018) looks the key up with
-- "tenant_id = p_tenant AND idempotency_key = p_key". PL/pgSQL caches a generic
-- plan per session after five calls. While extraction_jobs is small and has no
-- statistics yet, every index that leads with tenant_id costs about the same for
-- that condition, and the planner took the narrowest, extraction_jobs_tenant_state_page,
-- with the key as a filter: each accept then read every job of its tenant, under
-- the tenant's admission lock. The plan stays cached until the table's statistics
-- change: for the life of a pooled connection when autovacuum is off, the first
-- minute or so of a new database when it is on. Measured (one connection, 4
-- tenants, 3,000 accepts a window): 0.67, 0.86, 1.03, 1.25, 1.47 ms of PostgreSQL
-- CPU per accept in five windows, against 0.58-0.62 ms throughout with the
-- tenant-leading indexes dropped; auto_explain showed "Rows Removed by Filter: 3000".
--
-- The unique index now leads with the key, and the lookup compares the tenant with
-- IS NOT DISTINCT FROM, which no index can serve: the only index the key condition
-- can use is this one (the alternative is a sequential scan, which the planner
-- prices above one index entry on any table of more than a few pages). tenant_id
-- is NOT NULL, so the comparison means the same as "=". ON CONFLICT (tenant_id,
-- idempotency_key) infers the index by its set of columns, in any order.
-- Building the index locks writes to extraction_jobs for the time it takes.
CREATE UNIQUE INDEX extraction_jobs_key_tenant ON extraction_jobs (idempotency_key, tenant_id);
ALTER TABLE extraction_jobs DROP CONSTRAINT extraction_jobs_tenant_id_idempotency_key_key;
ALTER TABLE extraction_jobs
  ADD CONSTRAINT extraction_jobs_key_tenant UNIQUE USING INDEX extraction_jobs_key_tenant;

CREATE OR REPLACE FUNCTION job_by_key(p_tenant uuid, p_key text)
RETURNS TABLE (job_id uuid, request_hash text, state text, state_version bigint,
               created_at timestamptz, deadline_at timestamptz, document_id uuid,
               accepted_state text, accepted_state_version bigint)
LANGUAGE sql STABLE AS $$
SELECT j.id, j.request_hash, j.state, j.state_version, j.created_at, j.deadline_at,
       j.document_id,
       coalesce(a.to_state, j.state), coalesce(a.state_version, j.state_version)
FROM extraction_jobs j
LEFT JOIN LATERAL (
  SELECT e.to_state, e.state_version FROM job_events e
  WHERE e.job_id = j.id AND e.from_state IS NULL
  ORDER BY e.seq LIMIT 1
) a ON true
-- Key first, tenant not indexable (see above): the plan cannot fall back to a
-- tenant-wide index scan.
WHERE j.idempotency_key = p_key AND j.tenant_id IS NOT DISTINCT FROM p_tenant
$$;
