-- Invoice versions (migration 036, pipeline/jobs/versions.py). Every change is
-- conditional on the row it read; callers check the row count.

-- name: invoice_version_insert_if_none
-- In the result's transaction: the first job to commit an invoice identity holds
-- its version 1 (or, after the whole history was erased, the next number). No row
-- back: another job holds the current version (a concurrent insert of the same
-- identity waits for the other transaction and then conflicts).
-- $1 tenant, $2 document type, $3 key, $4 job, $5 issue date.
INSERT INTO invoice_versions (tenant_id, document_type, key_hash, version, job_id, issue_date)
SELECT $1, $2, $3,
       coalesce((SELECT max(v.version) FROM invoice_versions v
                 WHERE v.tenant_id = $1 AND v.document_type = $2 AND v.key_hash = $3), 0) + 1,
       $4, $5::date
ON CONFLICT DO NOTHING
RETURNING version;

-- name: invoice_version_insert_batch_if_none
-- invoice_version_insert_if_none for a batch (arrays $1 tenants, $2 document types,
-- $3 keys, $4 jobs, $5 issue dates), inserted in key order (then job order), so two
-- batches never wait on each other's identities in opposite orders; of two jobs of
-- the batch with one identity the first in job order holds it. Returns the jobs now
-- holding a version; each of the others takes invoice_version_current's way.
INSERT INTO invoice_versions (tenant_id, document_type, key_hash, version, job_id, issue_date)
SELECT u.t, u.d, u.k,
       coalesce((SELECT max(v.version) FROM invoice_versions v
                 WHERE v.tenant_id = u.t AND v.document_type = u.d AND v.key_hash = u.k), 0) + 1,
       u.j, u.i
FROM unnest($1::uuid[], $2::text[], $3::bytea[], $4::uuid[], $5::date[]) AS u(t, d, k, j, i)
ORDER BY u.t, u.d, u.k, u.j
ON CONFLICT DO NOTHING
RETURNING job_id;

-- name: invoice_version_current
-- The current version of an identity, its job's state and the tenant's policy.
SELECT v.version, v.job_id, v.issue_date,
       (SELECT j.state FROM extraction_jobs j WHERE j.id = v.job_id) AS job_state,
       (SELECT t.invoice_version_policy FROM tenants t WHERE t.id = v.tenant_id) AS policy
FROM invoice_versions v
WHERE v.tenant_id = $1 AND v.document_type = $2 AND v.key_hash = $3
  AND v.superseded_by IS NULL;

-- name: invoice_version_take_over_if_rejected
-- A current version whose job a reviewer rejected (FAILED_TERMINAL) never reached
-- the ERP: the next job of the identity takes its place, under the same number.
-- Conditional on the version and job read ($4, $5). $6 the new job, $7 its date.
UPDATE invoice_versions v SET job_id = $6, issue_date = $7::date, created_at = now()
WHERE v.tenant_id = $1 AND v.document_type = $2 AND v.key_hash = $3 AND v.version = $4
  AND v.job_id = $5 AND v.superseded_by IS NULL
  AND (SELECT j.state FROM extraction_jobs j WHERE j.id = v.job_id) = 'FAILED_TERMINAL'
RETURNING v.version;

-- name: invoice_version_supersede_if_current
-- The supersede, one statement: the current version ($4, held by job $5) is marked
-- superseded by $6 and $6 becomes version $4 + 1. Zero rows: another version was
-- decided first (its transaction committed while this one waited on the row), and
-- the caller decides again against it. $7 the new job's issue date.
WITH old AS (
  UPDATE invoice_versions SET superseded_by = $6, superseded_at = now()
  WHERE tenant_id = $1 AND document_type = $2 AND key_hash = $3 AND version = $4
    AND job_id = $5 AND superseded_by IS NULL
  RETURNING tenant_id, document_type, key_hash, version, job_id
)
INSERT INTO invoice_versions (tenant_id, document_type, key_hash, version, job_id, issue_date,
                              supersedes)
SELECT old.tenant_id, old.document_type, old.key_hash, old.version + 1, $6, $7::date, old.job_id
FROM old
RETURNING version;

-- name: invoice_version_hand_over_keys
-- After a supersede: the superseded job ($2) holds its exact identity no more (the
-- new version claims its own) and hands its near keys to the new job ($3), so a
-- copy of either version is still found. Returns the near keys handed over.
WITH gone AS (
  DELETE FROM invoice_identities WHERE job_id = $2 AND tenant_id = $1
)
UPDATE invoice_near_keys SET job_id = $3
WHERE job_id = $2 AND tenant_id = $1
RETURNING kind;

-- name: tenant_invoice_version_policy_set
UPDATE tenants SET invoice_version_policy = $2 WHERE id = $1
RETURNING invoice_version_policy;

-- name: result_for_review_supersede
-- A REVIEW_REQUIRED job's stored result and validation (the reviewer's approval of a
-- possible amendment supersedes the version it names), the job it superseded
-- already when it committed (auto_supersede, held for review for another reason),
-- and the job that superseded it while it waited (its approval is refused). The job is read by its
-- primary key (with "j.tenant_id = $2" the planner reads the tenant's state-page
-- index instead).
SELECT r.result, r.validation, v.supersedes, v.superseded_by
FROM extraction_results r
JOIN extraction_jobs j ON j.id = r.job_id
LEFT JOIN invoice_versions v ON v.job_id = r.job_id
WHERE r.job_id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2;
