-- Acceptance in one round trip (issue 21: the intake path).
--
-- The accept transaction was seven round trips from the intake: BEGIN, the
-- tenant's admission lock, the quota and idempotency read, the accept statement,
-- the spend reservation, COMMIT, and the pool's reset. The lock is held from the
-- second to the sixth, so one tenant's upload (every request under one lock)
-- waited out each of those trips of every other request in turn.
--
-- The steps stay as they were, each in one place, now as functions:
--   tenant_admission  the quota and idempotency read (query tenant_admission_get)
--   job_accept        document, job and outbox event (query job_accept_if_new)
--   spend_reserve     the job's spend reservation (query spend_reserve_for_job)
--   intake_accept     the lock, the read, the decision and the writes, in order,
--                     as one statement: its own transaction when called alone.
-- Inside a PL/pgSQL function every statement takes a new snapshot, so the read
-- after the lock sees every accept of the tenant that committed before it, as
-- the separate statements did. The decision is made here, once: the intake
-- turns the outcome into its HTTP answer.

-- The job an idempotency key names, with its state as accepted: the insert's
-- audit event (the audit trigger writes it with every insert; the fallback to the
-- current state only keeps a replay answering if audit rows were ever archived),
-- so a replay answers with the original receipt rather than the current state.
CREATE FUNCTION job_by_key(p_tenant uuid, p_key text)
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
WHERE j.tenant_id = p_tenant AND j.idempotency_key = p_key
$$;

CREATE FUNCTION tenant_admission(p_tenant uuid, p_period text, p_now timestamptz,
                                 p_key text, p_api_key uuid)
RETURNS TABLE (max_pending_jobs integer, max_pending_bytes bigint,
               max_pending_tokens bigint, spend_budget numeric,
               jobs bigint, bytes bigint, tokens bigint, spent numeric,
               seconds_to_next_period numeric,
               job_id uuid, request_hash text, deadline_at timestamptz, document_id uuid,
               accepted_state text, accepted_state_version bigint, key_state text)
LANGUAGE sql STABLE AS $$
WITH period AS (
  SELECT date_trunc(p_period, coalesce(p_now, now())) AS start,
         coalesce(p_now, now()) AS t
)
SELECT t.max_pending_jobs, t.max_pending_bytes, t.max_pending_tokens, t.spend_budget,
       u.jobs, u.bytes, u.tokens,
       coalesce(s.reserved + s.reconciled, 0) AS spent,
       extract(epoch FROM (period.start + ('1 ' || p_period)::interval) - period.t)
         AS seconds_to_next_period,
       k.job_id, k.request_hash, k.deadline_at, k.document_id,
       k.accepted_state, k.accepted_state_version,
       CASE WHEN p_api_key IS NULL THEN NULL ELSE coalesce((
         SELECT CASE WHEN ak.revoked_at IS NOT NULL THEN 'revoked'
                     WHEN ak.expires_at IS NOT NULL AND ak.expires_at <= period.t THEN 'expired'
                     ELSE 'active' END
         FROM api_keys ak WHERE ak.id = p_api_key AND ak.tenant_id = t.id), 'revoked')
       END AS key_state
FROM tenants t
CROSS JOIN period
CROSS JOIN LATERAL (
  -- The running totals of migration 017 (one row per shard), not a sum over jobs.
  SELECT coalesce(sum(b.jobs), 0)::bigint AS jobs,
         coalesce(sum(b.bytes), 0)::bigint AS bytes,
         coalesce(sum(b.tokens), 0)::bigint AS tokens
  FROM tenant_backlog b
  WHERE b.tenant_id = t.id
) u
LEFT JOIN tenant_spend s ON s.tenant_id = t.id AND s.period_start = period.start
LEFT JOIN LATERAL job_by_key(t.id, p_key) k ON true
WHERE t.id = p_tenant
$$;

-- The document upsert, the job insert and, only when the job row is new, its
-- outbox event; job_id NULL when the key already names a job.
CREATE FUNCTION job_accept(p_document uuid, p_tenant uuid, p_sha256 text, p_version text,
                           p_content text, p_bytes integer, p_content_type text,
                           p_filename text, p_job uuid, p_key text, p_request_hash text,
                           p_schema_version integer, p_model_policy text, p_traceparent text,
                           p_priority integer, p_tokens integer, p_max_attempts integer,
                           p_deadline_seconds double precision, p_now timestamptz,
                           p_event uuid, p_payload jsonb, p_event_type text)
RETURNS TABLE (document_id uuid, job_id uuid, accepted_state text,
               accepted_state_version bigint, created_at timestamptz, deadline_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH doc AS (
    INSERT INTO documents (id, tenant_id, sha256, object_version, content, byte_size,
                           content_type, filename)
    VALUES (p_document, p_tenant, p_sha256, p_version, p_content, p_bytes, p_content_type,
            p_filename)
    ON CONFLICT (tenant_id, sha256) DO UPDATE SET sha256 = EXCLUDED.sha256
    RETURNING id, object_version
  ),
  job AS (
    INSERT INTO extraction_jobs
      (id, tenant_id, idempotency_key, request_hash, document_id, object_version,
       schema_version, model_policy, priority, estimated_tokens, max_attempts, state,
       deadline_at, available_at, created_at, traceparent)
    SELECT p_job, p_tenant, p_key, p_request_hash, doc.id, doc.object_version,
           p_schema_version, p_model_policy, p_priority, p_tokens, p_max_attempts, 'READY',
           coalesce(p_now, now()) + make_interval(secs => p_deadline_seconds),
           coalesce(p_now, now()), coalesce(p_now, now()), p_traceparent
    FROM doc
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING id, state, state_version, created_at, deadline_at, traceparent
  ),
  event AS (
    INSERT INTO outbox_events (event_id, job_id, event_type, payload, traceparent)
    SELECT p_event, job.id, p_event_type, p_payload, job.traceparent FROM job
  )
  SELECT doc.id, job.id, job.state, job.state_version, job.created_at, job.deadline_at
  FROM doc LEFT JOIN job ON true;
END
$$;

-- Charge the period's reserved total and record the job's reservation.
CREATE FUNCTION spend_reserve(p_id uuid, p_job uuid, p_tenant uuid, p_period text,
                              p_now timestamptz, p_amount numeric)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
  reservation uuid;
BEGIN
  WITH charged AS (
    INSERT INTO tenant_spend (tenant_id, period_start, reserved, jobs)
    VALUES (p_tenant, date_trunc(p_period, coalesce(p_now, now())), p_amount, 1)
    ON CONFLICT (tenant_id, period_start) DO UPDATE
    SET reserved = tenant_spend.reserved + EXCLUDED.reserved,
        jobs = tenant_spend.jobs + 1,
        updated_at = now()
    RETURNING period_start
  )
  INSERT INTO spend_reservations (id, job_id, tenant_id, period_start, amount, created_at)
  SELECT p_id, p_job, p_tenant, charged.period_start, p_amount, coalesce(p_now, now())
  FROM charged
  RETURNING id INTO reservation;
  RETURN reservation;
END
$$;

-- The whole acceptance: lock, read, decide, write. outcome is one of
--   accepted            the job, its event and its reservation are written
--   known_key           the key names a job already (row: that job, to replay or refuse)
--   key_inactive        the caller's API key is no longer active (key_state says why)
--   capacity            p_capacity_refused and the key is new
--   quota_pending_jobs | quota_pending_bytes | quota_pending_tokens | quota_spend_budget
-- Nothing is written unless the outcome is accepted. The admission columns are
-- the tenant_admission row the decision was made on (for the refusal's message);
-- an accepted row carries the new job in job_id .. accepted_state_version.
CREATE FUNCTION intake_accept(p_lock_namespace integer, p_period text,
                              p_api_key uuid, p_capacity_refused boolean,
                              p_cost numeric, p_reservation uuid,
                              p_document uuid, p_tenant uuid, p_sha256 text, p_version text,
                              p_content text, p_bytes integer, p_content_type text,
                              p_filename text, p_job uuid, p_key text, p_request_hash text,
                              p_schema_version integer, p_model_policy text,
                              p_traceparent text, p_priority integer, p_tokens integer,
                              p_max_attempts integer, p_deadline_seconds double precision,
                              p_now timestamptz, p_event uuid, p_payload jsonb,
                              p_event_type text)
RETURNS TABLE (outcome text, max_pending_jobs integer, max_pending_bytes bigint,
               max_pending_tokens bigint, spend_budget numeric,
               jobs bigint, bytes bigint, tokens bigint, spent numeric,
               seconds_to_next_period numeric,
               job_id uuid, request_hash text, deadline_at timestamptz, document_id uuid,
               accepted_state text, accepted_state_version bigint, key_state text)
LANGUAGE plpgsql AS $$
DECLARE
  a record;
  j record;
  decided text;
BEGIN
  PERFORM pg_advisory_xact_lock(p_lock_namespace, hashtext(p_tenant::text));
  SELECT * INTO a FROM tenant_admission(p_tenant, p_period, p_now, p_key, p_api_key);
  IF NOT FOUND THEN
    RAISE EXCEPTION 'tenant % does not exist', p_tenant USING ERRCODE = 'foreign_key_violation';
  END IF;
  decided := CASE
    WHEN a.key_state IS NOT NULL AND a.key_state <> 'active' THEN 'key_inactive'
    WHEN a.job_id IS NOT NULL THEN 'known_key'
    WHEN p_capacity_refused THEN 'capacity'
    WHEN a.jobs + 1 > a.max_pending_jobs THEN 'quota_pending_jobs'
    WHEN a.bytes + p_bytes > a.max_pending_bytes THEN 'quota_pending_bytes'
    WHEN a.tokens + p_tokens > a.max_pending_tokens THEN 'quota_pending_tokens'
    WHEN a.spent + p_cost > a.spend_budget THEN 'quota_spend_budget'
    ELSE 'accepted' END;
  IF decided = 'accepted' THEN
    SELECT * INTO j FROM job_accept(p_document, p_tenant, p_sha256, p_version, p_content,
                                    p_bytes, p_content_type, p_filename, p_job, p_key,
                                    p_request_hash, p_schema_version, p_model_policy,
                                    p_traceparent, p_priority, p_tokens, p_max_attempts,
                                    p_deadline_seconds, p_now, p_event, p_payload,
                                    p_event_type);
    IF j.job_id IS NULL THEN
      -- A writer that does not take the admission lock (the job store's own
      -- accept) used the key in between: answer from its job.
      decided := 'known_key';
      SELECT * INTO a FROM tenant_admission(p_tenant, p_period, p_now, p_key, p_api_key);
    ELSE
      PERFORM spend_reserve(p_reservation, j.job_id, p_tenant, p_period, p_now, p_cost);
      a.job_id := j.job_id;
      a.request_hash := p_request_hash;
      a.deadline_at := j.deadline_at;
      a.document_id := j.document_id;
      a.accepted_state := j.accepted_state;
      a.accepted_state_version := j.accepted_state_version;
    END IF;
  END IF;
  RETURN QUERY SELECT decided, a.max_pending_jobs, a.max_pending_bytes, a.max_pending_tokens,
    a.spend_budget, a.jobs, a.bytes, a.tokens, a.spent, a.seconds_to_next_period, a.job_id,
    a.request_hash, a.deadline_at, a.document_id, a.accepted_state, a.accepted_state_version,
    a.key_state;
END
$$;
