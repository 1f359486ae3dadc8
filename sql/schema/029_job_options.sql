-- Request options that are kept (issue 46, item 5): the ``options`` of a request
-- were validated and hashed into the idempotency check but stored nowhere, so
-- nothing could honour them or show them. A job accepted with options has one
-- row here, written in the transaction that accepts it (pipeline/jobs/acceptance.py;
-- a job without options writes none, so the one-statement intake stays one
-- statement for it). Read tenant-scoped; ``explain`` shows them.
CREATE TABLE job_options (
  job_id     uuid PRIMARY KEY REFERENCES extraction_jobs(id),
  tenant_id  uuid NOT NULL REFERENCES tenants(id),
  options    jsonb NOT NULL CHECK (jsonb_typeof(options) = 'object' AND options <> '{}'::jsonb),
  created_at timestamptz NOT NULL DEFAULT now()
);
