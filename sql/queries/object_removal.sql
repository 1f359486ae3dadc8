-- Removing a stored object once no documents row needs it (migration 045;
-- pipeline/jobs/object_removal.py). These two read across tenants: the embedded store
-- keeps one file for every tenant that sent the same bytes. Neither returns anything
-- of another tenant's rows (a lock, a count).

-- name: document_uri_lock_for_removal
-- $1 uri. The uri's advisory lock, exclusive, until the transaction ends; every
-- documents insert naming the uri takes it shared (trigger documents_object_lock).
SELECT pg_advisory_xact_lock(1329744467, hashtext($1::text));

-- name: document_uri_needed
-- $1 uri. How many documents rows, of any tenant, still need the stored object: not
-- erased, and with a job neither erased nor marked by retention, or with no job.
SELECT count(*) FROM documents d
WHERE d.uri = $1 AND d.erased_at IS NULL
  AND (NOT EXISTS (SELECT 1 FROM extraction_jobs j WHERE j.document_id = d.id)
       OR EXISTS (
         SELECT 1 FROM extraction_jobs j
         WHERE j.document_id = d.id
           AND NOT EXISTS (SELECT 1 FROM job_retention_marks m WHERE m.job_id = j.id)
           AND NOT EXISTS (SELECT 1 FROM job_erasures e WHERE e.job_id = j.id)));
