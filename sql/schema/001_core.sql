-- Fenceline core schema: tenants, documents, jobs, attempts, results, outbox, inbox.
-- Every state change of a job is checked against job_state_transitions by a
-- trigger, bumps state_version, and is written to job_events (the audit trail
-- and the SSE cursor) with a NOTIFY for runnable work.

CREATE TABLE tenants (
  id                  uuid PRIMARY KEY,
  name                text NOT NULL UNIQUE,
  weight              integer NOT NULL DEFAULT 1 CHECK (weight > 0),
  max_in_flight       integer NOT NULL DEFAULT 1000 CHECK (max_in_flight > 0),
  max_pending_jobs    integer NOT NULL DEFAULT 100000 CHECK (max_pending_jobs >= 0),
  max_pending_bytes   bigint  NOT NULL DEFAULT 1073741824 CHECK (max_pending_bytes >= 0),
  max_pending_tokens  bigint  NOT NULL DEFAULT 1000000000 CHECK (max_pending_tokens >= 0),
  spend_budget        numeric(18, 6) NOT NULL DEFAULT 1000 CHECK (spend_budget >= 0),
  allowed_currencies  text[] NOT NULL DEFAULT ARRAY['EUR','USD','GBP','CHF'],
  created_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id          uuid PRIMARY KEY,
  tenant_id   uuid NOT NULL REFERENCES tenants(id),
  key_hash    text NOT NULL UNIQUE,          -- sha256 hex of the secret; the secret is never stored
  key_prefix  text NOT NULL,                 -- first characters, for humans
  scopes      text[] NOT NULL DEFAULT ARRAY['jobs'],
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);

CREATE TABLE documents (
  id             uuid PRIMARY KEY,
  tenant_id      uuid NOT NULL REFERENCES tenants(id),
  sha256         text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  object_version text NOT NULL,              -- immutable: a new content is a new version
  content        text NOT NULL,
  byte_size      integer NOT NULL CHECK (byte_size >= 0),
  content_type   text NOT NULL DEFAULT 'text/plain',
  filename       text,                        -- informational only: never identity
  created_at     timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, sha256)
);

CREATE TABLE job_state_transitions (
  from_state text NOT NULL,
  to_state   text NOT NULL,
  PRIMARY KEY (from_state, to_state)
);
INSERT INTO job_state_transitions VALUES
  ('READY', 'RUNNING'), ('READY', 'FAILED_TERMINAL'),
  ('RETRY_SCHEDULED', 'RUNNING'), ('RETRY_SCHEDULED', 'FAILED_TERMINAL'),
  ('RUNNING', 'SUCCEEDED'), ('RUNNING', 'REVIEW_REQUIRED'),
  ('RUNNING', 'RETRY_SCHEDULED'), ('RUNNING', 'FAILED_TERMINAL'),
  ('REVIEW_REQUIRED', 'SUCCEEDED'), ('REVIEW_REQUIRED', 'FAILED_TERMINAL');

CREATE TABLE extraction_jobs (
  id                 uuid PRIMARY KEY,
  tenant_id          uuid NOT NULL REFERENCES tenants(id),
  idempotency_key    text NOT NULL,
  request_hash       text NOT NULL,
  document_id        uuid REFERENCES documents(id),
  object_version     text NOT NULL,
  schema_version     integer NOT NULL DEFAULT 1,
  model_policy       text NOT NULL DEFAULT 'default',
  validation_policy  text,                   -- version recorded when the result is validated
  priority           integer NOT NULL DEFAULT 0,   -- higher first within a tenant
  estimated_tokens   integer NOT NULL DEFAULT 0 CHECK (estimated_tokens >= 0),
  state              text NOT NULL CHECK (state IN
                       ('READY','RUNNING','RETRY_SCHEDULED','SUCCEEDED',
                        'REVIEW_REQUIRED','FAILED_TERMINAL')),
  state_version      bigint NOT NULL DEFAULT 1,
  attempt            integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  max_attempts       integer NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
  fence              bigint NOT NULL DEFAULT 0,
  lease_until        timestamptz,
  lease_owner        text,
  available_at       timestamptz NOT NULL DEFAULT now(),
  deadline_at        timestamptz NOT NULL,
  result_ref         text,
  last_error_class   text,
  last_error         text,
  terminal_reason    text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  finished_at        timestamptz,
  UNIQUE (tenant_id, idempotency_key),
  CONSTRAINT finished_exactly_when_settled CHECK (
    (finished_at IS NOT NULL) = (state IN ('SUCCEEDED','REVIEW_REQUIRED','FAILED_TERMINAL'))),
  CONSTRAINT lease_exactly_when_running CHECK (
    (lease_until IS NOT NULL) = (state = 'RUNNING')),
  CONSTRAINT result_when_succeeded CHECK (
    state NOT IN ('SUCCEEDED') OR result_ref IS NOT NULL),
  CONSTRAINT reason_when_failed CHECK (
    state <> 'FAILED_TERMINAL' OR terminal_reason IS NOT NULL)
);
CREATE INDEX extraction_jobs_runnable ON extraction_jobs (tenant_id, priority DESC, available_at, id)
  WHERE state IN ('READY', 'RETRY_SCHEDULED');
CREATE INDEX extraction_jobs_running_lease ON extraction_jobs (lease_until) WHERE state = 'RUNNING';
CREATE INDEX extraction_jobs_tenant_created ON extraction_jobs (tenant_id, created_at DESC, id);

-- One row per attempt (= per fence under which a driver held the job).
CREATE TABLE job_attempts (
  job_id             uuid NOT NULL REFERENCES extraction_jobs(id),
  fence              bigint NOT NULL,
  attempt            integer NOT NULL,
  worker_id          text NOT NULL,
  started_at         timestamptz NOT NULL,
  ended_at           timestamptz,
  outcome            text NOT NULL DEFAULT 'running' CHECK (outcome IN
                       ('running','succeeded','review_required','retry_scheduled',
                        'failed_terminal','lease_expired')),
  error_class        text,
  error_detail       text,
  engine             text,
  prompt_tokens      integer,
  completion_tokens  integer,
  cached_tokens      integer,
  uncertain          boolean NOT NULL DEFAULT false, -- provider may have billed work we never saw
  late_result_at     timestamptz,            -- a stale owner's result arrived after reaping and was discarded
  PRIMARY KEY (job_id, fence)
);

CREATE TABLE extraction_results (
  job_id             uuid PRIMARY KEY REFERENCES extraction_jobs(id),
  fence              bigint NOT NULL,
  result             jsonb NOT NULL,
  validation         jsonb NOT NULL DEFAULT '{}'::jsonb,
  decision           text NOT NULL CHECK (decision IN ('SUCCEEDED','REVIEW_REQUIRED')),
  created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE outbox_events (
  event_id       uuid PRIMARY KEY,
  job_id         uuid REFERENCES extraction_jobs(id),
  event_type     text NOT NULL,
  payload        jsonb NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  published_at   timestamptz,
  claimed_until  timestamptz,                -- relay lease: a crashed relay's claim expires
  publish_attempts integer NOT NULL DEFAULT 0,
  last_error     text
);
CREATE INDEX outbox_events_unpublished ON outbox_events (created_at) WHERE published_at IS NULL;

CREATE TABLE execution_inbox (
  event_id        uuid PRIMARY KEY,
  job_id          uuid NOT NULL REFERENCES extraction_jobs(id),
  payload_digest  text NOT NULL,
  received_at     timestamptz NOT NULL DEFAULT now()
);

-- Audit trail of every job state change; also the cursor for status streams.
CREATE TABLE job_events (
  seq            bigserial PRIMARY KEY,
  job_id         uuid NOT NULL REFERENCES extraction_jobs(id),
  tenant_id      uuid NOT NULL,
  from_state     text,
  to_state       text NOT NULL,
  state_version  bigint NOT NULL,
  fence          bigint NOT NULL,
  attempt        integer NOT NULL,
  detail         text,
  created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX job_events_job ON job_events (job_id, seq);
CREATE INDEX job_events_tenant ON job_events (tenant_id, seq);

CREATE FUNCTION extraction_jobs_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    IF NEW.state IS DISTINCT FROM OLD.state THEN
      IF NOT EXISTS (SELECT 1 FROM job_state_transitions
                     WHERE from_state = OLD.state AND to_state = NEW.state) THEN
        RAISE EXCEPTION 'illegal job transition % -> % for %', OLD.state, NEW.state, OLD.id
          USING ERRCODE = 'check_violation';
      END IF;
    END IF;
    IF NEW.attempt < OLD.attempt THEN
      RAISE EXCEPTION 'attempt of % would decrease', OLD.id USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.fence < OLD.fence THEN
      RAISE EXCEPTION 'fence of % would decrease', OLD.id USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state OR NEW.fence <> OLD.fence THEN
      NEW.state_version := OLD.state_version + 1;
    END IF;
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER extraction_jobs_guard BEFORE UPDATE ON extraction_jobs
  FOR EACH ROW EXECUTE FUNCTION extraction_jobs_guard();

CREATE FUNCTION extraction_jobs_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state OR NEW.fence <> OLD.fence THEN
    INSERT INTO job_events (job_id, tenant_id, from_state, to_state, state_version, fence,
                            attempt, detail)
    VALUES (NEW.id, NEW.tenant_id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state,
            NEW.state_version, NEW.fence, NEW.attempt,
            coalesce(NEW.terminal_reason, NEW.last_error_class));
    PERFORM pg_notify('fenceline_job_events',
                      json_build_object('job_id', NEW.id, 'tenant_id', NEW.tenant_id,
                                        'state', NEW.state,
                                        'state_version', NEW.state_version)::text);
    IF NEW.state IN ('READY', 'RETRY_SCHEDULED') THEN
      PERFORM pg_notify('fenceline_runnable', NEW.id::text);
    END IF;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER extraction_jobs_audit AFTER INSERT OR UPDATE ON extraction_jobs
  FOR EACH ROW EXECUTE FUNCTION extraction_jobs_audit();
