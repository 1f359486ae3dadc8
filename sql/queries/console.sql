-- The review console and operator dashboard (issue 18). Every query takes the
-- caller's tenant: a page never reads another tenant's rows.

-- name: review_queue_list_for_tenant
-- REVIEW_REQUIRED jobs, oldest in review first, with their stored results. $2 a
-- reason code; NULL matches all. $3 the page size; NULL: the whole queue (the
-- supplier search, which filters the opened names in Python: a result's text is
-- sealed at rest, pipeline/sealed_results.py, so SQL cannot read the name).
SELECT j.id, j.state_version, j.created_at, j.finished_at,
       coalesce(r.validation -> 'reasons', '[]'::jsonb) AS reasons, r.result
FROM extraction_jobs j
LEFT JOIN extraction_results r ON r.job_id = j.id
WHERE j.tenant_id = $1 AND j.state = 'REVIEW_REQUIRED'
  AND ($2::text IS NULL
       OR r.validation -> 'reasons' @> jsonb_build_array(jsonb_build_object('code', $2::text)))
ORDER BY j.finished_at, j.id
LIMIT $3;

-- name: review_queue_reason_codes_for_tenant
-- The reason codes present in the tenant's queue (the filter's choices).
SELECT DISTINCT reason ->> 'code' AS code
FROM extraction_jobs j
JOIN extraction_results r ON r.job_id = j.id,
     jsonb_array_elements(coalesce(r.validation -> 'reasons', '[]'::jsonb)) AS reason
WHERE j.tenant_id = $1 AND j.state = 'REVIEW_REQUIRED' AND jsonb_typeof(reason) = 'object'
ORDER BY 1;

-- name: review_page_get_for_tenant
SELECT j.id, j.state, j.state_version, j.created_at, j.finished_at, j.terminal_reason,
       j.validation_policy, coalesce(d.content, t.content) AS ocr_text, d.filename,
       d.uri IS NOT NULL AS from_file, r.result, r.validation, d.sha256 AS document_sha256
FROM extraction_jobs j
LEFT JOIN documents d ON d.id = j.document_id
LEFT JOIN document_texts t ON t.document_id = d.id AND t.tenant_id = d.tenant_id
LEFT JOIN extraction_results r ON r.job_id = j.id
WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2;

-- name: review_queue_next_for_tenant
-- The next job to review after $2 (oldest first), for the "next" shortcut.
SELECT j.id FROM extraction_jobs j
WHERE j.tenant_id = $1 AND j.state = 'REVIEW_REQUIRED' AND j.id <> $2
ORDER BY j.finished_at, j.id LIMIT 1;

-- name: dashboard_jobs_by_state_for_tenant
SELECT state, count(*) AS jobs FROM extraction_jobs WHERE tenant_id = $1
GROUP BY state ORDER BY state;

-- name: dashboard_ages_for_tenant
-- Oldest eligible job (runnable now) and the oldest job waiting for review, in seconds.
SELECT
  extract(epoch FROM coalesce($2, now()) - min(available_at)
          FILTER (WHERE state IN ('READY', 'RETRY_SCHEDULED')
                  AND available_at <= coalesce($2, now())))::float8 AS oldest_eligible_seconds,
  extract(epoch FROM coalesce($2, now()) - min(finished_at)
          FILTER (WHERE state = 'REVIEW_REQUIRED'))::float8 AS review_queue_age_seconds,
  count(*) FILTER (WHERE state = 'REVIEW_REQUIRED') AS review_queue_size
FROM extraction_jobs WHERE tenant_id = $1;

-- name: dashboard_dead_letters_for_tenant
SELECT count(*) AS total, count(*) FILTER (WHERE replay_count = 0) AS unreplayed
FROM dead_letters WHERE tenant_id = $1;

-- name: dashboard_deliveries_by_state_for_tenant
SELECT state, count(*) AS deliveries FROM deliveries WHERE tenant_id = $1
GROUP BY state ORDER BY state;

-- name: dashboard_endpoints_for_tenant
-- Endpoints and their breakers; the URL is the tenant's own configuration.
SELECT id, url, state, breaker_state, breaker_open_until, consecutive_failures,
       last_success_at, last_failure_at
FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at, id;

-- name: dashboard_admission_for_tenant
-- The tenant's admission usage per scope next to the limits the scope's actor
-- recorded (admission_scopes): requests and charged tokens of the last 60 s (what
-- RPM and TPM count; open grants at their reservation), open grants (in-flight
-- permits) and the tokens they reserve (the concurrent-token budget). Limits are
-- scope-wide facts of the deployment; of the per-tenant overrides only the
-- caller's own entry is read. Scopes the tenant never used are listed with zero
-- usage; a scope with usage but no recorded limits has limits_known false.
-- $1 tenant, $2 now (nullable).
WITH tenant_use AS (
  SELECT scope,
         count(*) FILTER (WHERE request_charged
                           AND granted_at >= coalesce($2, now()) - interval '60 seconds')
           AS requests_60s,
         coalesce(sum(coalesce(charged_tokens, reserved_tokens))
                    FILTER (WHERE granted_at >= coalesce($2, now()) - interval '60 seconds'),
                  0)::bigint AS tokens_60s,
         count(*) FILTER (WHERE outcome = 'granted') AS permits_held,
         coalesce(sum(reserved_tokens) FILTER (WHERE outcome = 'granted'), 0)::bigint
           AS reserved_tokens_held
  FROM admission_grants
  WHERE tenant_id = $1
    AND (granted_at >= coalesce($2, now()) - interval '60 seconds' OR outcome = 'granted')
  GROUP BY scope
)
SELECT coalesce(s.scope, u.scope) AS scope,
       coalesce(u.requests_60s, 0) AS requests_60s,
       coalesce(u.tokens_60s, 0)::bigint AS tokens_60s,
       coalesce(u.permits_held, 0) AS permits_held,
       coalesce(u.reserved_tokens_held, 0)::bigint AS reserved_tokens_held,
       s.rpm, s.tpm, s.max_in_flight, s.max_concurrent_tokens,
       coalesce((s.tenant_in_flight ->> $1::text)::integer, s.tenant_max_in_flight)
         AS tenant_max_in_flight,
       s.recorded_at,
       s.scope IS NOT NULL AS limits_known
FROM admission_scopes s FULL JOIN tenant_use u ON u.scope = s.scope
ORDER BY 1;

-- name: console_document_get_for_tenant
-- The file behind one of the tenant's jobs, for the page view (issue 43): where its
-- bytes are and the text it was read as (derived_text NULL until an attempt read it).
-- uri NULL: a pasted text, which has no pages to show. No row for another tenant's job.
-- derived_words: that text's words with their boxes (migration 025), NULL where the
-- text was kept before them.
-- derived_text is sealed under the tenant's data key (migration 039): the caller opens it.
SELECT d.uri, d.version, d.sha256, d.content_type, d.page_count, t.content AS derived_text,
       t.words AS derived_words
FROM extraction_jobs j
JOIN documents d ON d.id = j.document_id
LEFT JOIN document_texts t ON t.document_id = d.id AND t.tenant_id = d.tenant_id
WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
  AND d.tenant_id IS NOT DISTINCT FROM $2;

-- name: console_job_list_for_tenant
-- The jobs behind a dashboard count (issue 45): the tenant's jobs in state $2 (NULL:
-- any), most recently changed first, at most $3.
SELECT id, state, state_version, attempt, max_attempts, created_at, updated_at, finished_at,
       terminal_reason, last_error_class
FROM extraction_jobs
WHERE tenant_id = $1 AND ($2::text IS NULL OR state = $2::text)
ORDER BY updated_at DESC, id
LIMIT $3;

-- name: console_dead_letter_list_for_tenant
-- The tenant's dead letters, newest first, at most $2 (the dashboard's DLQ link).
SELECT id, source, reason, detail, event_type, job_id, archived_at, replay_count,
       last_replayed_at
FROM dead_letters WHERE tenant_id = $1
ORDER BY archived_at DESC, id
LIMIT $2;

-- name: console_delivery_list_for_tenant
-- The tenant's deliveries in state $2 (NULL: any) to endpoint $3 (NULL: any) in
-- acknowledgement state $5 (NULL: any), most recently changed first, at most $4,
-- each with its endpoint's URL.
SELECT d.id, d.job_id, d.endpoint_id, e.url, d.event_type, d.state, d.attempts,
       d.last_status, d.last_error, d.final_reason, d.next_attempt_at, d.created_at,
       d.updated_at, octet_length(d.body) > 0 AS body_available, e.state AS endpoint_state,
       d.ack_state, d.ack_due_at, d.ack_reason
FROM deliveries d
JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.tenant_id = d.tenant_id
WHERE d.tenant_id = $1 AND ($2::text IS NULL OR d.state = $2::text)
  AND ($3::uuid IS NULL OR d.endpoint_id = $3::uuid)
  AND ($5::text IS NULL OR d.ack_state = $5::text)
ORDER BY d.updated_at DESC, d.id
LIMIT $4;

-- name: console_api_key_names_for_tenant
-- The label and human-readable prefix of each of the tenant's keys in $2 (who
-- reviewed, corrected or re-drove a job); another tenant's key is not named.
SELECT id, key_prefix, label FROM api_keys WHERE tenant_id = $1 AND id = ANY($2::uuid[]);
