-- Retention (issue 46, item 1; sql/schema/031_retention.sql): per-tenant policies,
-- legal holds, and the two bounded removal batches. Only final jobs are touched
-- (SUCCEEDED, FAILED_TERMINAL, CANCELLED); a batch locks its jobs with
-- FOR NO KEY UPDATE SKIP LOCKED, so it never waits on (nor holds up) a job another
-- transaction is moving, and the claim path (READY / RETRY_SCHEDULED rows) never
-- meets its locks. Every statement is scoped to one tenant or, for the
-- maintenance pass, to all ($tenant NULL) with each tenant's own policy.

-- name: retention_policy_get
-- $1 tenant. The tenant's policy; no row means the defaults.
SELECT tenant_id, content_days, audit_days, legal_hold, hold_reason, updated_at
FROM tenant_retention WHERE tenant_id = $1;

-- name: retention_policy_upsert
-- $1 tenant, $2 content_days, $3 audit_days. Keeps the tenant's hold as it is.
INSERT INTO tenant_retention (tenant_id, content_days, audit_days)
VALUES ($1, $2, $3)
ON CONFLICT (tenant_id) DO UPDATE
SET content_days = excluded.content_days, audit_days = excluded.audit_days, updated_at = now()
RETURNING tenant_id, content_days, audit_days, legal_hold, hold_reason, updated_at;

-- name: retention_tenant_hold_set_if_clear
-- $1 tenant, $2 reason, $3 default content days, $4 default audit days. No row
-- when the tenant is already held.
INSERT INTO tenant_retention (tenant_id, content_days, audit_days, legal_hold, hold_reason)
VALUES ($1, $3, $4, true, $2)
ON CONFLICT (tenant_id) DO UPDATE
SET legal_hold = true, hold_reason = excluded.hold_reason, updated_at = now()
WHERE tenant_retention.legal_hold = false
RETURNING tenant_id;

-- name: retention_tenant_hold_clear_if_held
-- $1 tenant. No row when the tenant is not held.
UPDATE tenant_retention SET legal_hold = false, hold_reason = NULL, updated_at = now()
WHERE tenant_id = $1 AND legal_hold
RETURNING tenant_id;

-- name: retention_job_hold_set_if_clear
-- $1 job, $2 tenant, $3 reason, $4 by. No row when the job is held already or is
-- not this tenant's.
INSERT INTO job_legal_holds (job_id, tenant_id, reason, held_by)
SELECT j.id, j.tenant_id, $3, $4 FROM extraction_jobs j
WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
ON CONFLICT (job_id) DO NOTHING
RETURNING job_id;

-- name: retention_job_hold_clear_if_held
-- $1 job, $2 tenant.
DELETE FROM job_legal_holds WHERE job_id = $1 AND tenant_id = $2
RETURNING job_id;

-- name: retention_hold_event_insert
-- $1 tenant, $2 job (NULL: the tenant's hold), $3 action, $4 reason, $5 actor.
INSERT INTO legal_hold_events (tenant_id, job_id, action, reason, actor)
VALUES ($1, $2, $3, $4, $5)
RETURNING seq;

-- name: retention_hold_event_list_for_job
-- $1 job, $2 tenant: the job's own holds and its tenant's, oldest first.
SELECT e.seq, e.job_id, e.action, e.reason, e.actor, e.created_at
FROM legal_hold_events e
WHERE e.tenant_id = $2 AND (e.job_id = $1 OR e.job_id IS NULL)
ORDER BY e.seq;

-- name: retention_job_hold_list_for_tenant
-- $1 tenant.
SELECT job_id, reason, held_by, created_at FROM job_legal_holds
WHERE tenant_id = $1 ORDER BY created_at, job_id;

-- name: retention_mark_get_for_job
-- $1 job, $2 tenant: what retention removed from the job, and when, with what became
-- of its document's stored object (migration 045).
SELECT m.content_removed_at, m.results, m.documents, m.document_texts, m.delivery_payloads,
       m.review_corrections, m.review_decisions, m.audit_removed_at, m.job_events, m.inbox_records, d.uri AS object_uri,
       d.object_pending_at, d.object_removed_at, d.object_outcome
FROM job_retention_marks m
JOIN extraction_jobs j ON j.id = m.job_id AND j.tenant_id IS NOT DISTINCT FROM m.tenant_id
LEFT JOIN documents d ON d.id = j.document_id AND d.tenant_id IS NOT DISTINCT FROM j.tenant_id
WHERE m.job_id = $1 AND m.tenant_id = $2;

-- name: retention_policy_min_days
-- The shortest horizons any tenant has, with the defaults $1 (content), $2 (audit):
-- the batches' global bounds, so an index walk stops at the newest job any policy
-- could make due.
SELECT least($1::int, min(content_days))::int AS content_days,
       least($2::int, min(audit_days))::int AS audit_days
FROM tenant_retention;

-- name: retention_content_due_count
-- Dry run of the content stage. $1 now, $2 default content days, $3 tenant (NULL:
-- all). What the content batches would remove, per table; writes nothing. objects:
-- the stored objects the pass would release now or retry (each is removed unless
-- another documents row still needs it).
WITH due AS (
  SELECT j.id, j.document_id
  FROM extraction_jobs j
  LEFT JOIN tenant_retention p ON p.tenant_id = j.tenant_id
  WHERE j.state IN ('SUCCEEDED', 'FAILED_TERMINAL', 'CANCELLED')
    AND j.finished_at < coalesce($1::timestamptz, now())
                        - make_interval(days => coalesce(p.content_days, $2::int))
    AND ($3::uuid IS NULL OR j.tenant_id = $3)
    AND NOT coalesce(p.legal_hold, false)
    AND NOT EXISTS (SELECT 1 FROM job_legal_holds h WHERE h.job_id = j.id)
    AND NOT EXISTS (SELECT 1 FROM job_retention_marks m WHERE m.job_id = j.id)
),
docs AS (
  SELECT DISTINCT d.id, d.content IS NOT NULL AS has_content,
         d.uri IS NOT NULL AND d.object_pending_at IS NULL AS object_due FROM due
  JOIN documents d ON d.id = due.document_id
  WHERE NOT EXISTS (
    SELECT 1 FROM extraction_jobs o
    WHERE o.document_id = d.id AND NOT EXISTS (SELECT 1 FROM due x WHERE x.id = o.id)
      AND NOT EXISTS (SELECT 1 FROM job_retention_marks m WHERE m.job_id = o.id))
)
SELECT (SELECT count(*) FROM due) AS jobs,
       (SELECT count(*) FROM extraction_results r JOIN due ON due.id = r.job_id) AS results,
       (SELECT count(*) FROM docs WHERE has_content) AS documents,
       (SELECT count(*) FROM document_texts t JOIN docs ON docs.id = t.document_id)
         AS document_texts,
       (SELECT count(*) FROM deliveries d JOIN due ON due.id = d.job_id
        WHERE d.state IN ('delivered', 'failed', 'abandoned') AND d.body <> ''::bytea)
         AS delivery_payloads,
       (SELECT count(*) FROM review_corrections c JOIN due ON due.id = c.job_id)
         AS review_corrections,
       (SELECT count(*) FROM review_decisions r JOIN due ON due.id = r.job_id)
         AS review_decisions,
       (SELECT count(*) FROM docs WHERE object_due)
       + (SELECT count(*) FROM documents d
          WHERE d.object_pending_at IS NOT NULL AND ($3::uuid IS NULL OR d.tenant_id = $3))
         AS objects;

-- name: retention_content_remove_batch
-- $1 now, $2 batch size, $3 default content days, $4 tenant (NULL: all), $5 the
-- shortest content horizon of any policy (no job finished since is due), $6/$7
-- the keyset cursor (finished_at, id) of the pass, NULL at its start.
-- One short transaction: locks at most $2 due jobs oldest first (SKIP LOCKED),
-- marks them (the mark is the guard: a job marked already is no row), and from
-- the marked jobs only empties the result, the finished deliveries' payload
-- copies, what reviewers wrote (corrections' values and notes, decisions' notes:
-- migration 046), and the text of documents no unmarked job still uses; such a document
-- that names a stored object gets object_pending_at (migration 045), which the pass
-- acts on after this commit. Returns the counts and the cursor to go on from.
WITH due AS (
  SELECT j.id, j.tenant_id, j.document_id, j.finished_at
  FROM extraction_jobs j
  LEFT JOIN tenant_retention p ON p.tenant_id = j.tenant_id
  WHERE j.state IN ('SUCCEEDED', 'FAILED_TERMINAL', 'CANCELLED')
    AND j.finished_at < coalesce($1::timestamptz, now()) - make_interval(days => $5::int)
    AND ($6::timestamptz IS NULL OR (j.finished_at, j.id) > ($6::timestamptz, $7::uuid))
    AND j.finished_at < coalesce($1::timestamptz, now())
                        - make_interval(days => coalesce(p.content_days, $3::int))
    AND ($4::uuid IS NULL OR j.tenant_id = $4)
    AND NOT coalesce(p.legal_hold, false)
    AND NOT EXISTS (SELECT 1 FROM job_legal_holds h WHERE h.job_id = j.id)
    AND NOT EXISTS (SELECT 1 FROM job_retention_marks m WHERE m.job_id = j.id)
  ORDER BY j.finished_at, j.id
  LIMIT $2
  FOR NO KEY UPDATE OF j SKIP LOCKED
),
docs AS (
  SELECT d.id, d.content IS NOT NULL AS had_content,
         d.uri IS NOT NULL AND d.object_pending_at IS NULL AS object_due
  FROM documents d
  WHERE d.id IN (SELECT due.document_id FROM due) AND NOT EXISTS (
    SELECT 1 FROM extraction_jobs o
    WHERE o.document_id = d.id
      AND NOT EXISTS (SELECT 1 FROM due x WHERE x.id = o.id)
      AND NOT EXISTS (SELECT 1 FROM job_retention_marks m WHERE m.job_id = o.id))
),
results AS (
  UPDATE extraction_results r SET result = '{}'::jsonb, validation = '{}'::jsonb
  FROM due WHERE r.job_id = due.id
  RETURNING r.job_id
),
payloads AS (
  UPDATE deliveries d SET body = ''::bytea
  FROM due
  WHERE d.job_id = due.id AND d.tenant_id = due.tenant_id
    AND d.state IN ('delivered', 'failed', 'abandoned') AND d.body <> ''::bytea
  RETURNING d.job_id
),
texts AS (
  DELETE FROM document_texts t USING docs WHERE t.document_id = docs.id
  RETURNING t.document_id
),
corrections AS (
  -- as review_correction_erase_for_job (migration 046's functions): which fields
  -- changed and the reasons' codes and fields stay, not the values, nor the note
  UPDATE review_corrections c
  SET changes = correction_fields(c.changes),
      reasons_before = reason_codes(c.reasons_before),
      reasons_after = reason_codes(c.reasons_after),
      note = CASE WHEN jsonb_array_length(c.overrides) > 0 THEN '(removed by retention)' END
  FROM due WHERE c.job_id = due.id AND c.tenant_id = due.tenant_id
  RETURNING c.job_id
),
decisions AS (
  UPDATE review_decisions r SET note = '(removed by retention)'
  FROM due WHERE r.job_id = due.id AND r.tenant_id = due.tenant_id
  RETURNING r.job_id
),
documents_emptied AS (
  UPDATE documents d
  SET content = NULL,
      content_removed_at = CASE WHEN docs.had_content THEN coalesce($1::timestamptz, now())
                                ELSE d.content_removed_at END,
      object_pending_at = CASE WHEN docs.object_due THEN coalesce($1::timestamptz, now())
                               ELSE d.object_pending_at END
  FROM docs WHERE d.id = docs.id AND (docs.had_content OR docs.object_due)
  RETURNING d.id, docs.had_content, docs.object_due
),
marks AS (
  INSERT INTO job_retention_marks (job_id, tenant_id, finished_at, content_removed_at,
                                   results, documents, document_texts, delivery_payloads,
                                   review_corrections, review_decisions)
  SELECT due.id, due.tenant_id, due.finished_at, coalesce($1::timestamptz, now()),
         (SELECT count(*) FROM results r WHERE r.job_id = due.id),
         (SELECT count(*) FROM documents_emptied e
          WHERE e.id = due.document_id AND e.had_content),
         (SELECT count(*) FROM texts t WHERE t.document_id = due.document_id),
         (SELECT count(*) FROM payloads p WHERE p.job_id = due.id),
         (SELECT count(*) FROM corrections c WHERE c.job_id = due.id),
         (SELECT count(*) FROM decisions d WHERE d.job_id = due.id)
  FROM due
  RETURNING job_id
),
last AS (
  SELECT finished_at, id FROM due ORDER BY finished_at DESC, id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM due) AS jobs,
       (SELECT count(*) FROM marks) AS marked,
       (SELECT count(*) FROM results) AS results,
       (SELECT count(*) FROM documents_emptied WHERE had_content) AS documents,
       (SELECT count(*) FROM documents_emptied WHERE object_due) AS objects_pending,
       (SELECT count(*) FROM texts) AS document_texts,
       (SELECT count(*) FROM payloads) AS delivery_payloads,
       (SELECT count(*) FROM corrections) AS review_corrections,
       (SELECT count(*) FROM decisions) AS review_decisions,
       (SELECT finished_at FROM last) AS cursor_finished_at,
       (SELECT id FROM last) AS cursor_id;

-- name: retention_object_pending_list
-- $1 tenant (NULL: all), $2 limit, $3/$4 the keyset cursor (object_pending_at, id) of
-- the pass, NULL at its start. Documents whose stored object awaits removal: released
-- by a content batch, or left pending by a pass whose store did not answer.
SELECT d.id, d.tenant_id, d.uri, d.version, d.object_pending_at
FROM documents d
WHERE d.object_pending_at IS NOT NULL AND ($1::uuid IS NULL OR d.tenant_id = $1)
  AND ($3::timestamptz IS NULL OR (d.object_pending_at, d.id) > ($3::timestamptz, $4::uuid))
ORDER BY d.object_pending_at, d.id
LIMIT $2;

-- name: retention_object_lock
-- $1 document, $2 tenant. The document, locked (SKIP LOCKED: no row when another
-- pass has it); the caller goes on only while object_pending_at is set.
SELECT d.id, d.uri, d.version, d.object_pending_at FROM documents d
WHERE d.id = $1 AND d.tenant_id IS NOT DISTINCT FROM $2
FOR NO KEY UPDATE SKIP LOCKED;

-- name: retention_object_record_if_pending
-- $1 document, $2 tenant, $3 outcome (removed, shared, client_object), $4 now, $5 the
-- object_pending_at read under the lock. Recorded once: no row when the document is
-- no longer pending since that read.
UPDATE documents
SET object_pending_at = NULL, object_outcome = $3,
    object_removed_at = CASE WHEN $3 = 'removed' THEN coalesce($4::timestamptz, now())
                             ELSE object_removed_at END
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2
  AND object_pending_at IS NOT DISTINCT FROM $5::timestamptz AND $5::timestamptz IS NOT NULL
RETURNING id;

-- name: retention_audit_due_count
-- Dry run of the audit stage. $1 now, $2 default audit days, $3 tenant (NULL: all).
WITH due AS (
  SELECT m.job_id
  FROM job_retention_marks m
  LEFT JOIN tenant_retention p ON p.tenant_id = m.tenant_id
  WHERE m.audit_removed_at IS NULL
    AND m.finished_at < coalesce($1::timestamptz, now())
                        - make_interval(days => coalesce(p.audit_days, $2::int))
    AND ($3::uuid IS NULL OR m.tenant_id = $3)
    AND NOT coalesce(p.legal_hold, false)
    AND NOT EXISTS (SELECT 1 FROM job_legal_holds h WHERE h.job_id = m.job_id)
)
SELECT (SELECT count(*) FROM due) AS jobs,
       (SELECT count(*) FROM job_events e JOIN due ON due.job_id = e.job_id) AS job_events,
       (SELECT count(*) FROM execution_inbox i JOIN due ON due.job_id = i.job_id)
       + (SELECT count(*) FROM kafka_ingress_records k JOIN due ON due.job_id = k.job_id)
       + (SELECT count(*) FROM kafka_ingress_records k
          LEFT JOIN tenant_retention p ON p.tenant_id = k.tenant_id
          WHERE k.outcome = 'refused'
            AND k.received_at < coalesce($1::timestamptz, now())
                                - make_interval(days => coalesce(p.audit_days, $2::int))
            AND ($3::uuid IS NULL OR k.tenant_id = $3)
            AND NOT coalesce(p.legal_hold, false))
         AS inbox_records;

-- name: retention_audit_remove_batch
-- $1 now, $2 batch size, $3 default audit days, $4 tenant (NULL: all), $5 the
-- shortest audit horizon of any policy. Jobs whose content went already and whose audit horizon has
-- passed: their job_events, execution_inbox and kafka_ingress_records rows go; the
-- mark records it (the mark's update is the guard: a job done already is no row).
-- Besides, up to $2 Kafka records refused without a job (no mark names them) go
-- once their tenant's audit horizon has passed. One short transaction, SKIP LOCKED
-- on the marks and the refused records.
WITH due AS (
  SELECT m.job_id
  FROM job_retention_marks m
  LEFT JOIN tenant_retention p ON p.tenant_id = m.tenant_id
  WHERE m.audit_removed_at IS NULL
    AND m.finished_at < coalesce($1::timestamptz, now()) - make_interval(days => $5::int)
    AND m.finished_at < coalesce($1::timestamptz, now())
                        - make_interval(days => coalesce(p.audit_days, $3::int))
    AND ($4::uuid IS NULL OR m.tenant_id = $4)
    AND NOT coalesce(p.legal_hold, false)
    AND NOT EXISTS (SELECT 1 FROM job_legal_holds h WHERE h.job_id = m.job_id)
  ORDER BY m.finished_at, m.job_id
  LIMIT $2
  FOR NO KEY UPDATE OF m SKIP LOCKED
),
events AS (
  DELETE FROM job_events e USING due WHERE e.job_id = due.job_id
  RETURNING e.job_id
),
inbox AS (
  DELETE FROM execution_inbox i USING due WHERE i.job_id = due.job_id
  RETURNING i.job_id
),
kafka AS (
  DELETE FROM kafka_ingress_records k USING due WHERE k.job_id = due.job_id
  RETURNING k.job_id
),
refused_due AS (
  SELECT k.tenant_id, k.topic, k.kafka_partition, k.kafka_offset
  FROM kafka_ingress_records k
  LEFT JOIN tenant_retention p ON p.tenant_id = k.tenant_id
  WHERE k.outcome = 'refused'
    AND k.received_at < coalesce($1::timestamptz, now()) - make_interval(days => $5::int)
    AND k.received_at < coalesce($1::timestamptz, now())
                        - make_interval(days => coalesce(p.audit_days, $3::int))
    AND ($4::uuid IS NULL OR k.tenant_id = $4)
    AND NOT coalesce(p.legal_hold, false)
  ORDER BY k.received_at
  LIMIT $2
  FOR UPDATE OF k SKIP LOCKED
),
refused AS (
  DELETE FROM kafka_ingress_records k USING refused_due r
  WHERE (k.tenant_id, k.topic, k.kafka_partition, k.kafka_offset)
      = (r.tenant_id, r.topic, r.kafka_partition, r.kafka_offset)
    AND k.outcome = 'refused'
  RETURNING k.kafka_offset
),
marked AS (
  UPDATE job_retention_marks m
  SET audit_removed_at = coalesce($1::timestamptz, now()),
      job_events = (SELECT count(*) FROM events e WHERE e.job_id = m.job_id),
      inbox_records = (SELECT count(*) FROM inbox i WHERE i.job_id = m.job_id)
                    + (SELECT count(*) FROM kafka k WHERE k.job_id = m.job_id)
  FROM due WHERE m.job_id = due.job_id AND m.audit_removed_at IS NULL
  RETURNING m.job_id
)
SELECT (SELECT count(*) FROM due) AS jobs,
       (SELECT count(*) FROM marked) AS marked,
       (SELECT count(*) FROM events) AS job_events,
       (SELECT count(*) FROM inbox) + (SELECT count(*) FROM kafka)
       + (SELECT count(*) FROM refused) AS inbox_records,
       (SELECT count(*) FROM refused) AS refused_records;

-- name: retention_object_pending_count
-- $1 tenant (NULL: all). Documents whose stored object still awaits removal.
SELECT count(*) FROM documents d
WHERE d.object_pending_at IS NOT NULL AND ($1::uuid IS NULL OR d.tenant_id = $1);
