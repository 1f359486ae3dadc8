-- The Kafka ingress's inbox (issue 46, item 8; docs/kafka.md).
--
-- One row per Kafka record the ingress has durably handled, keyed by its source
-- position. It is written in the transaction that accepts the record's job (or, for
-- a record refused, on its own), and the ingress commits a partition's offset only
-- past a contiguous run of such rows: a record read again after a crash between this
-- commit and the offset commit finds its row and is skipped, so it never becomes a
-- second job. The row holds no document text, only where the record came from and
-- what became of it.
CREATE TABLE kafka_ingress_records (
  tenant_id     uuid NOT NULL REFERENCES tenants(id),
  topic         text NOT NULL CHECK (topic <> ''),
  kafka_partition integer NOT NULL CHECK (kafka_partition >= 0),
  kafka_offset  bigint NOT NULL CHECK (kafka_offset >= 0),
  job_id        uuid REFERENCES extraction_jobs(id),
  -- accepted: a new job; replayed: the record's idempotency key named a job already
  -- accepted for the same request; refused: unreadable or refused, reason says why.
  outcome       text NOT NULL CHECK (outcome IN ('accepted', 'replayed', 'refused')),
  reason        text,
  received_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, topic, kafka_partition, kafka_offset),
  CONSTRAINT kafka_ingress_job_unless_refused
    CHECK ((outcome = 'refused') = (job_id IS NULL) AND (outcome = 'refused') = (reason IS NOT NULL))
);
-- `explain` and retention find a job's source record by job.
CREATE INDEX kafka_ingress_records_job ON kafka_ingress_records (job_id) WHERE job_id IS NOT NULL;
