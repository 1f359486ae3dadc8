-- Job store queries. Every state change is conditional on state (and fence and
-- lease where a driver owns the job); callers check the row count.
--
-- A statement that names its row by primary key states its other conditions on
-- that row (tenant, expected state) with IS NOT DISTINCT FROM: no index serves it
-- and no partial index's predicate follows from it, so a plan cached while the
-- tables were empty cannot read a tenant's or a state's whole index range instead
-- of one primary-key entry (tests/integration/test_query_plans.py; the columns are
-- NOT NULL, so it means "=").

-- name: document_upsert
-- Documents are immutable and identified by content digest within a tenant; a
-- text retention removed comes back when the same bytes are accepted again.
INSERT INTO documents (id, tenant_id, sha256, object_version, content, byte_size,
                       content_type, filename)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (tenant_id, sha256) DO UPDATE SET
  -- content removed by retention (migration 031) or erased (032) comes back with the
  -- same bytes; any other row stays as it is
  content = CASE WHEN documents.erased_at IS NULL
                 THEN coalesce(documents.content, EXCLUDED.content)
                 ELSE EXCLUDED.content END,
  filename = CASE WHEN documents.erased_at IS NULL THEN documents.filename
                  ELSE EXCLUDED.filename END,
  content_removed_at = CASE WHEN EXCLUDED.content IS NULL THEN documents.content_removed_at END,
  erased_at = NULL
RETURNING id, object_version;

-- name: document_get
-- content is NULL for a file: uri and version name its bytes in the object store
-- (migration 023), which the worker's document stage reads and checks against sha256.
-- derived_text: the text a file was first read as (migration 024), NULL until then;
-- derived_words: its words with boxes and OCR confidences (migration 025), which a
-- retry proves the values OCR read against (pipeline/worker/ocr_proof.py).
-- The tenant IS NOT DISTINCT FROM: the row is read through its primary key, whatever
-- plan a pooled connection cached (tests/integration/test_query_plans.py).
SELECT d.id, d.tenant_id, d.sha256, d.object_version, d.content, d.byte_size,
       d.content_type, d.filename, d.uri, d.version, d.page_count, d.created_at, d.erased_at,
       t.content AS derived_text, t.reader AS derived_reader, t.words AS derived_words
FROM documents d
LEFT JOIN document_texts t ON t.document_id = d.id AND t.tenant_id = d.tenant_id
WHERE d.id = $1 AND d.tenant_id IS NOT DISTINCT FROM $2;

-- name: document_text_keep
-- The text a file was read as, kept by the first attempt that read it (migration 024);
-- a later writer keeps nothing and reads the first one's with document_text_get.
-- $6: its words with boxes (migration 025), NULL where none were read.
INSERT INTO document_texts (document_id, tenant_id, content, sha256, reader, words)
SELECT d.id, d.tenant_id, $3, $4, $5, $6
FROM documents d WHERE d.id = $1 AND d.tenant_id IS NOT DISTINCT FROM $2 AND d.uri IS NOT NULL
  AND d.erased_at IS NULL  -- an attempt cut short by an erasure keeps nothing (032)
ON CONFLICT (document_id) DO NOTHING;

-- name: document_text_get
-- The kept text and its words (the first writer's, migration 025).
SELECT content, words FROM document_texts WHERE document_id = $1 AND tenant_id IS NOT DISTINCT FROM $2;

-- name: job_accept_if_new
-- Acceptance in one statement (one round trip, function job_accept of migration
-- 018): the document upsert, the job insert and, only when the job row is new,
-- its extraction.requested.v1 outbox event. The event's traceparent is the job's
-- own ($14). A known key inserts no job and no event and returns job_id NULL with
-- the document id: the caller then reads the key's job (job_get_by_idempotency_key)
-- to replay or refuse it.
-- $1 document id, $2 tenant, $3 sha256, $4 object version, $5 content, $6 bytes,
-- $7 content type, $8 filename, $9 job id, $10 idempotency key, $11 request hash,
-- $12 schema version, $13 model policy, $14 traceparent, $15 priority,
-- $16 estimated tokens, $17 max attempts, $18 deadline seconds, $19 now (nullable),
-- $20 outbox event id, $21 event payload, $22 event type, $23 the object's uri,
-- $24 its store version, $25 its page count (the last three NULL for a pasted text,
-- whose $5 content is then set; a file's $5 is NULL: migration 023).
SELECT * FROM job_accept($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                         $16, $17, $18, $19, $20, $21, $22, $23, $24, $25);

-- name: job_get_by_idempotency_key
-- The job a key names, with its state as accepted (function job_by_key of
-- migration 018), so a replay answers with the original receipt.
SELECT * FROM job_by_key($1, $2);

-- name: outbox_insert
-- $5 the writing span's traceparent; without one the event carries its job's, so
-- every event of a job continues the job's trace (pipeline/tracing.py).
INSERT INTO outbox_events (event_id, job_id, event_type, payload, traceparent)
VALUES ($1, $2, $3, $4,
        coalesce($5::text, (SELECT j.traceparent FROM extraction_jobs j WHERE j.id = $2)));

-- name: job_claim_available
-- Fair claim: each tenant offers its own oldest runnable jobs (bounded, SKIP
-- LOCKED), then jobs are picked by the tenant's running count plus rank over its
-- weight, so one tenant's backlog cannot starve another's single job.
-- $1 now, $2 limit, $3 lease seconds, $4 worker id.
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t),
running AS (
  SELECT tenant_id, count(*) AS n FROM extraction_jobs WHERE state = 'RUNNING'
  GROUP BY tenant_id
),
candidate AS (
  SELECT c.id, c.priority, c.available_at, t.weight, t.max_in_flight,
         coalesce(r.n, 0) AS running,
         row_number() OVER (PARTITION BY c.tenant_id
                            ORDER BY c.priority DESC, c.available_at, c.id) AS rn
  FROM tenants t
  LEFT JOIN running r ON r.tenant_id = t.id
  CROSS JOIN LATERAL (
    SELECT j.id, j.tenant_id, j.priority, j.available_at
    FROM extraction_jobs j
    WHERE j.tenant_id = t.id
      AND j.state IN ('READY', 'RETRY_SCHEDULED')
      AND j.available_at <= (SELECT t FROM now_)
      AND j.deadline_at > (SELECT t FROM now_)
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
  ) c
  WHERE coalesce(r.n, 0) < t.max_in_flight
),
picked AS (
  SELECT id FROM candidate
  WHERE running + rn <= max_in_flight
  ORDER BY (running + rn)::float8 / weight, priority DESC, available_at, id
  LIMIT $2
),
claimed AS (
  UPDATE extraction_jobs j
  SET state = 'RUNNING', attempt = j.attempt + 1, fence = j.fence + 1,
      lease_until = now_.t + make_interval(secs => $3), lease_owner = $4
  FROM picked, now_
  WHERE j.id = picked.id AND j.state IN ('READY', 'RETRY_SCHEDULED')
  RETURNING j.id, j.tenant_id, j.attempt, j.fence, j.lease_until, j.deadline_at,
            j.document_id, j.object_version, j.schema_version, j.model_policy,
            j.priority, j.estimated_tokens, j.max_attempts, j.traceparent,
            now_.t AS started_at
),
attempt_rows AS (
  INSERT INTO job_attempts (job_id, fence, attempt, worker_id, started_at)
  SELECT id, fence, attempt, $4, started_at FROM claimed
)
SELECT * FROM claimed;

-- name: lease_extend_if_fenced
-- Heartbeat: zero rows means ownership is lost (fence moved on or lease expired).
UPDATE extraction_jobs
SET lease_until = coalesce($4::timestamptz, now()) + make_interval(secs => $3)
WHERE id = $1 AND state IS NOT DISTINCT FROM 'RUNNING' AND fence = $2
  AND lease_until > coalesce($4::timestamptz, now())
RETURNING lease_until;

-- name: job_lock_if_fenced
-- Lock the owned row for a decision inside the caller's transaction.
SELECT id, tenant_id, attempt, max_attempts, deadline_at, state_version,
       coalesce($3::timestamptz, now()) AS now
FROM extraction_jobs
WHERE id = $1 AND state IS NOT DISTINCT FROM 'RUNNING' AND fence = $2
  AND lease_until > coalesce($3::timestamptz, now())
FOR UPDATE;

-- name: job_settle_if_fenced
-- Success or review: $3 is 'SUCCEEDED' or 'REVIEW_REQUIRED'.
UPDATE extraction_jobs
SET state = $3, result_ref = $4, validation_policy = $5, lease_until = NULL,
    lease_owner = NULL, finished_at = coalesce($6::timestamptz, now()),
    last_error_class = $7, last_error = $8
WHERE id = $1 AND state IS NOT DISTINCT FROM 'RUNNING' AND fence = $2
  AND lease_until > coalesce($6::timestamptz, now())
RETURNING id, tenant_id, state, state_version, attempt, fence, created_at, finished_at;

-- name: job_settle_batch_if_fenced
-- Batched success or review in one statement: the job rows, and for each job that
-- settled its result row, its attempt's close and its outbox event. One element
-- per attempt in the arrays: $1 ids, $2 their fences, $3 'SUCCEEDED' or
-- 'REVIEW_REQUIRED', $4 result refs, $5 policy versions, $6 error classes, $8 error
-- details, $9 results, $10 validations, $11 attempt outcomes, $12 prompt tokens,
-- $13 completion tokens, $14 cached tokens, $15 engines, $16 event ids; $7 now
-- (nullable), $17 and $18 the completed and review event types.
-- Each job row is conditional on its own fence and lease, so a stale attempt
-- matches nothing and writes nothing while the others settle; the caller compares
-- the returned ids with its batch. A settled job whose attempt row was not running
-- fails the statement (attempt_not_running, SQLSTATE FL001), so the whole batch
-- rolls back even when the statement is its own transaction.
-- The event payload is settling.event_payload's (tests/integration/test_jobs_batch.py
-- compares them). The job rows join the batch's elements through
-- settle_batch_elements (migration 021), which the planner expects to return one
-- row: whatever plan is cached, each element is one primary-key probe, never a
-- scan of every live lease.
WITH b AS (
  SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[],
                       $6::text[], $8::text[], $9::jsonb[], $10::jsonb[], $11::text[],
                       $12::integer[], $13::integer[], $14::integer[], $15::text[],
                       $16::uuid[])
    AS b(id, fence, state, result_ref, policy, error_class, error_detail, result, validation,
         outcome, prompt_tokens, completion_tokens, cached_tokens, engine, event_id)
),
settled AS (
  UPDATE extraction_jobs j
  SET state = e.state, result_ref = e.result_ref, validation_policy = e.policy,
      lease_until = NULL, lease_owner = NULL, finished_at = coalesce($7::timestamptz, now()),
      last_error_class = e.error_class, last_error = e.error_detail
  FROM settle_batch_elements($1, $2, $3, $4, $5, $6, $8) AS e
  WHERE j.id = e.id AND j.state IS NOT DISTINCT FROM 'RUNNING' AND j.fence = e.fence
    AND j.lease_until > coalesce($7::timestamptz, now())
  RETURNING j.id, j.tenant_id, j.state, j.state_version, j.attempt, j.fence, j.traceparent
),
results AS (
  INSERT INTO extraction_results (job_id, fence, result, validation, decision)
  SELECT b.id, b.fence, b.result, b.validation, b.state
  FROM b JOIN settled s ON s.id = b.id
),
closed AS (
  UPDATE job_attempts a
  SET ended_at = coalesce($7::timestamptz, now()), outcome = b.outcome, error_class = NULL,
      error_detail = NULL, prompt_tokens = b.prompt_tokens,
      completion_tokens = b.completion_tokens, cached_tokens = b.cached_tokens,
      uncertain = false, engine = b.engine
  FROM b JOIN settled s ON s.id = b.id
  WHERE a.job_id = b.id AND a.fence = b.fence AND a.outcome = 'running'
  RETURNING a.job_id
),
events AS (
  INSERT INTO outbox_events (event_id, job_id, event_type, payload, traceparent)
  SELECT b.event_id, s.id, CASE WHEN s.state = 'SUCCEEDED' THEN $17 ELSE $18 END,
         jsonb_build_object('job_id', s.id::text, 'state', s.state,
                            'state_version', s.state_version, 'v', 1),
         s.traceparent
  FROM settled s JOIN b ON b.id = s.id
)
SELECT s.id, s.tenant_id, s.state, s.state_version, s.attempt, s.fence
FROM settled s LEFT JOIN closed c ON c.job_id = s.id
WHERE CASE WHEN c.job_id IS NOT NULL THEN true ELSE attempt_not_running(s.id, s.fence) END;

-- name: job_retry_if_fenced
UPDATE extraction_jobs
SET state = 'RETRY_SCHEDULED', available_at = $3, lease_until = NULL, lease_owner = NULL,
    last_error_class = $4, last_error = $5
WHERE id = $1 AND state IS NOT DISTINCT FROM 'RUNNING' AND fence = $2
  AND lease_until > coalesce($6::timestamptz, now())
RETURNING id, tenant_id, state, state_version, attempt, fence, available_at;

-- name: job_release_if_fenced
-- A draining driver gives back a lease it still holds: due again now, fence+1 so
-- its own late commit can never land, and one more attempt allowed (the given-back
-- attempt did not fail). Zero rows: the lease was already settled, lost or expired.
UPDATE extraction_jobs
SET state = 'RETRY_SCHEDULED', fence = fence + 1, max_attempts = max_attempts + 1,
    available_at = coalesce($3::timestamptz, now()), lease_until = NULL, lease_owner = NULL,
    last_error_class = 'lease_released', last_error = $4
WHERE id = $1 AND state IS NOT DISTINCT FROM 'RUNNING' AND fence = $2
  AND lease_until > coalesce($3::timestamptz, now())
RETURNING id, tenant_id, state, state_version, attempt, fence, available_at;

-- name: job_fail_if_fenced
UPDATE extraction_jobs
SET state = 'FAILED_TERMINAL', lease_until = NULL, lease_owner = NULL,
    finished_at = coalesce($6::timestamptz, now()), last_error_class = $3, last_error = $4,
    terminal_reason = $5
WHERE id = $1 AND state IS NOT DISTINCT FROM 'RUNNING' AND fence = $2
  AND lease_until > coalesce($6::timestamptz, now())
RETURNING id, tenant_id, state, state_version, attempt, fence, created_at, finished_at;

-- name: result_insert
INSERT INTO extraction_results (job_id, fence, result, validation, decision)
VALUES ($1, $2, $3, $4, $5);

-- name: attempt_close_if_running
UPDATE job_attempts
SET ended_at = coalesce($9::timestamptz, now()), outcome = $3, error_class = $4,
    error_detail = $5, prompt_tokens = $6, completion_tokens = $7, cached_tokens = $8,
    uncertain = $10, engine = $11
WHERE job_id = $1 AND fence = $2 AND outcome = 'running'
RETURNING job_id;

-- name: attempt_record_late_result
-- A stale owner's result arrived after it lost the job: keep its (billable) usage.
UPDATE job_attempts
SET late_result_at = coalesce($6::timestamptz, now()), prompt_tokens = $3,
    completion_tokens = $4, cached_tokens = $5
WHERE job_id = $1 AND fence = $2 AND outcome <> 'running'
RETURNING job_id;

-- name: job_select_expired_leases
SELECT id, tenant_id, fence, attempt, max_attempts, deadline_at, lease_owner, traceparent,
       coalesce($1::timestamptz, now()) AS now
FROM extraction_jobs
WHERE state = 'RUNNING' AND lease_until <= coalesce($1::timestamptz, now())
ORDER BY lease_until
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: job_reschedule_if_expired
-- Reaper: the lease expired; fence+1 so the old owner can never commit.
UPDATE extraction_jobs
SET state = 'RETRY_SCHEDULED', fence = fence + 1, available_at = $3, lease_until = NULL,
    lease_owner = NULL, last_error_class = 'lease_expired',
    last_error = 'lease expired before the owner committed an outcome'
WHERE id = $1 AND state IS NOT DISTINCT FROM 'RUNNING' AND fence = $2
  AND lease_until <= coalesce($4::timestamptz, now())
RETURNING id, tenant_id, state, state_version, attempt, fence;

-- name: job_fail_if_expired
UPDATE extraction_jobs
SET state = 'FAILED_TERMINAL', fence = fence + 1, lease_until = NULL, lease_owner = NULL,
    finished_at = coalesce($4::timestamptz, now()), last_error_class = 'lease_expired',
    last_error = 'lease expired before the owner committed an outcome',
    terminal_reason = $3
WHERE id = $1 AND state IS NOT DISTINCT FROM 'RUNNING' AND fence = $2
  AND lease_until <= coalesce($4::timestamptz, now())
RETURNING id, tenant_id, state, state_version, attempt, fence, created_at, finished_at;

-- name: job_select_past_deadline
SELECT id, tenant_id, fence, state
FROM extraction_jobs
WHERE state IN ('READY', 'RETRY_SCHEDULED') AND deadline_at <= coalesce($1::timestamptz, now())
ORDER BY deadline_at
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: job_fail_if_waiting_past_deadline
UPDATE extraction_jobs
SET state = 'FAILED_TERMINAL', finished_at = coalesce($2::timestamptz, now()),
    terminal_reason = 'deadline_exceeded', last_error_class = 'deadline_exceeded',
    last_error = 'deadline passed before an attempt could start'
WHERE id = $1
  AND (state IS NOT DISTINCT FROM 'READY' OR state IS NOT DISTINCT FROM 'RETRY_SCHEDULED')
  AND deadline_at <= coalesce($2::timestamptz, now())
RETURNING id, tenant_id, state, state_version, attempt, fence, created_at, finished_at;

-- name: job_get_for_tenant
SELECT j.id, j.tenant_id, j.state, j.state_version, j.attempt, j.max_attempts, j.fence,
       j.priority, j.estimated_tokens, j.object_version, j.document_id, j.schema_version,
       j.model_policy, j.validation_policy, j.available_at, j.deadline_at, j.lease_until,
       j.lease_owner, j.result_ref, j.last_error_class, j.last_error, j.terminal_reason,
       j.created_at, j.updated_at, j.finished_at
FROM extraction_jobs j WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2;

-- name: job_get_any_tenant
-- Operator-only: the caller must have checked operator scope.
SELECT j.id, j.tenant_id, j.state, j.state_version, j.attempt, j.max_attempts, j.fence,
       j.priority, j.estimated_tokens, j.object_version, j.document_id, j.schema_version,
       j.model_policy, j.validation_policy, j.available_at, j.deadline_at, j.lease_until,
       j.lease_owner, j.result_ref, j.last_error_class, j.last_error, j.terminal_reason,
       j.created_at, j.updated_at, j.finished_at, j.traceparent
FROM extraction_jobs j WHERE j.id = $1;

-- name: attempt_list_for_job
SELECT job_id, fence, attempt, worker_id, started_at, ended_at, outcome, error_class,
       error_detail, engine, prompt_tokens, completion_tokens, cached_tokens, uncertain,
       late_result_at
FROM job_attempts WHERE job_id = $1 ORDER BY fence;

-- name: job_event_list_for_job
SELECT seq, from_state, to_state, state_version, fence, attempt, detail, created_at
FROM job_events WHERE job_id = $1 ORDER BY seq;

-- name: outbox_list_for_job
SELECT event_id, event_type, payload, created_at, published_at, publish_attempts, last_error
FROM outbox_events WHERE job_id = $1 ORDER BY created_at, event_id;

-- name: inbox_list_for_job
SELECT event_id, payload_digest, received_at FROM execution_inbox WHERE job_id = $1
ORDER BY received_at;

-- name: result_get_for_tenant
SELECT r.job_id, r.fence, r.result, r.validation, r.decision, r.created_at
FROM extraction_results r JOIN extraction_jobs j ON j.id = r.job_id
WHERE r.job_id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2;

-- name: job_backlog_stats
-- Read by each intake process's capacity check (once per
-- capacity_check_interval_seconds) and by the operator's backlog view. Only the
-- unsettled states are read, so a partial index (extraction_jobs_tenant_pending)
-- serves it and its cost follows the backlog, not the table's history: 0.7 ms
-- against 106 ms for a full scan with 300 pending jobs among 200,000 settled ones
-- (docs/benchmarks.md, "Eighth pass").
SELECT count(*) FILTER (WHERE state IN ('READY','RETRY_SCHEDULED')) AS waiting,
       count(*) FILTER (WHERE state IN ('READY','RETRY_SCHEDULED')
                          AND available_at <= coalesce($1::timestamptz, now())) AS runnable,
       count(*) FILTER (WHERE state = 'RUNNING') AS running,
       extract(epoch FROM coalesce($1::timestamptz, now()) - min(available_at)
               FILTER (WHERE state IN ('READY','RETRY_SCHEDULED')
                         AND available_at <= coalesce($1::timestamptz, now())))
         AS oldest_runnable_age_seconds
FROM extraction_jobs
WHERE state IN ('READY', 'RETRY_SCHEDULED', 'RUNNING');

-- name: state_transition_list
SELECT from_state, to_state FROM job_state_transitions ORDER BY 1, 2;

-- name: job_sli_stats
-- The durable SLIs per tenant (pipeline/jobs/slis.py): runnable backlog and the
-- age of its oldest eligible job (measured apart from broker lag: a job waits
-- here whether or not a message announced it), and the review queue with its
-- oldest job's age (REVIEW_REQUIRED has its own SLO). $1 now.
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t)
SELECT j.tenant_id,
       count(*) FILTER (WHERE j.state IN ('READY', 'RETRY_SCHEDULED')
                          AND j.available_at <= now_.t) AS runnable,
       coalesce(extract(epoch FROM now_.t - min(j.available_at)
                FILTER (WHERE j.state IN ('READY', 'RETRY_SCHEDULED')
                          AND j.available_at <= now_.t)), 0) AS oldest_eligible_seconds,
       count(*) FILTER (WHERE j.state = 'RUNNING') AS running,
       count(*) FILTER (WHERE j.state = 'REVIEW_REQUIRED') AS review,
       coalesce(extract(epoch FROM now_.t - min(j.finished_at)
                FILTER (WHERE j.state = 'REVIEW_REQUIRED')), 0) AS oldest_review_seconds
FROM extraction_jobs j CROSS JOIN now_
WHERE j.state IN ('READY', 'RETRY_SCHEDULED', 'RUNNING', 'REVIEW_REQUIRED')
GROUP BY j.tenant_id, now_.t;

-- name: invoice_identity_insert_if_new
-- In the result's transaction: the job that commits an invoice identity first
-- owns it. $2..$4 are keyed hashes of the parts (migration 039), never the values. No row back means another job holds it (a concurrent insert of the
-- same identity waits for the other transaction and then finds it):
-- invoice_identity_owner, a separate statement with a fresh snapshot, names it.
INSERT INTO invoice_identities (tenant_id, supplier, invoice_number, gross_total, job_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, supplier, invoice_number, gross_total) DO NOTHING
RETURNING job_id;

-- name: invoice_identity_insert_batch_if_new
-- invoice_identity_insert_if_new for a batch of results (arrays $1 tenants, $2
-- suppliers, $3 invoice numbers, $4 gross totals, $5 jobs), in array order: of two
-- rows with one identity the first is inserted and the second conflicts, as one
-- statement after the other would. Returns the jobs that now hold their identity.
INSERT INTO invoice_identities (tenant_id, supplier, invoice_number, gross_total, job_id)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::uuid[])
ON CONFLICT (tenant_id, supplier, invoice_number, gross_total) DO NOTHING
RETURNING job_id;

-- name: invoice_identity_take_over_if_rejected
-- A job whose result a reviewer rejected (FAILED_TERMINAL) holds the identity no
-- longer: its result never reaches the ERP, so the next job of that invoice takes
-- it over. Returns this job when it did.
UPDATE invoice_identities i SET job_id = $5, created_at = now()
WHERE i.tenant_id = $1 AND i.supplier = $2 AND i.invoice_number = $3 AND i.gross_total = $4
  AND (SELECT j.state FROM extraction_jobs j WHERE j.id = i.job_id) = 'FAILED_TERMINAL'
RETURNING i.job_id;

-- name: invoice_identity_owner
SELECT job_id FROM invoice_identities
WHERE tenant_id = $1 AND supplier = $2 AND invoice_number = $3 AND gross_total = $4;

-- name: job_options_insert
-- In the accepting transaction, for a new job accepted with options: $1 job,
-- $2 tenant, $3 the options object. The job must be the tenant's (read by its
-- primary key: with "tenant_id = $2" the planner reads both columns from the
-- tenant's state-page index instead).
INSERT INTO job_options (job_id, tenant_id, options)
SELECT j.id, j.tenant_id, $3::jsonb
FROM extraction_jobs j WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
RETURNING job_id;

-- name: job_options_get_for_tenant
-- $1 job, $2 tenant: the options the job was accepted with (no row: none).
SELECT options FROM job_options WHERE job_id = $1 AND tenant_id IS NOT DISTINCT FROM $2;

-- name: invoice_near_key_insert_batch_if_new
-- In the result's transaction: the job that commits a near key first owns it
-- (arrays $1 tenants, $2 kinds, $3 keyed hashes, $4 jobs). Inserted in key order,
-- so two transactions never wait on each other's keys in opposite orders. Returns
-- the keys now held by the job that offered them; a key not returned is held by
-- another job (or was offered twice in the batch: the first in key order has it).
INSERT INTO invoice_near_keys (tenant_id, kind, key_hash, job_id)
SELECT t, k, h, j FROM unnest($1::uuid[], $2::text[], $3::bytea[], $4::uuid[]) AS u(t, k, h, j)
ORDER BY t, k, h, j
ON CONFLICT (tenant_id, kind, key_hash) DO NOTHING
RETURNING tenant_id, kind, key_hash, job_id;

-- name: invoice_near_key_take_over_if_rejected
-- A job whose result a reviewer rejected (FAILED_TERMINAL) holds its near keys no
-- longer, as invoice_identity_take_over_if_rejected. Returns this job when it did.
UPDATE invoice_near_keys n SET job_id = $4, created_at = now()
WHERE n.tenant_id = $1 AND n.kind = $2 AND n.key_hash = $3
  AND (SELECT j.state FROM extraction_jobs j WHERE j.id = n.job_id) = 'FAILED_TERMINAL'
RETURNING n.job_id;

-- name: invoice_near_key_owner
SELECT job_id FROM invoice_near_keys WHERE tenant_id = $1 AND kind = $2 AND key_hash = $3;

-- name: server_secret_get
SELECT secret FROM server_secrets WHERE name = $1;

-- name: credit_note_invoice_find
-- The tenant's delivered invoices a credit note's preceding invoice reference names:
-- the same supplier and invoice number ($2, $3: pipeline.identity's normal forms) in
-- invoice_identities (its primary key's prefix), a SUCCEEDED job of the tenant whose
-- result is an invoice (no document_type, or 'invoice'), never the credit note
-- itself ($4). Two rows back are enough to tell one from several. The job is read
-- through its primary key (the other conditions as IS NOT DISTINCT FROM: see
-- tests/integration/test_query_plans.py).
SELECT i.job_id
FROM invoice_identities i
JOIN extraction_jobs j ON j.id = i.job_id
JOIN extraction_results r ON r.job_id = i.job_id
WHERE i.tenant_id = $1 AND i.supplier = $2 AND i.invoice_number = $3
  AND i.job_id <> $4
  AND j.tenant_id IS NOT DISTINCT FROM $1 AND j.state IS NOT DISTINCT FROM 'SUCCEEDED'
  AND coalesce(r.result->>'document_type', 'invoice') = 'invoice'
ORDER BY i.job_id
LIMIT 2;

-- name: credit_note_link_upsert
-- In the credit note's result transaction: the invoice it credits. A job settled
-- again (a redrive) links anew. Returns the job (one row: written).
INSERT INTO credit_note_links (job_id, tenant_id, invoice_job_id)
VALUES ($1, $2, $3)
ON CONFLICT (job_id) DO UPDATE SET invoice_job_id = EXCLUDED.invoice_job_id, created_at = now()
WHERE credit_note_links.tenant_id = EXCLUDED.tenant_id
RETURNING job_id;

-- name: credit_note_link_delete_for_job
-- A credit note settled again whose reference no longer finds its invoice.
DELETE FROM credit_note_links WHERE job_id = $1 AND tenant_id = $2;
