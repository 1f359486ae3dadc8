-- The Kafka ingress's inbox (migration 043, pipeline/messaging/kafka_ingress.py).

-- name: kafka_ingress_get
-- The record at a source position, if the ingress handled it already (tenant-scoped).
-- $1 tenant, $2 topic, $3 partition, $4 offset.
SELECT job_id, outcome, reason, received_at
FROM kafka_ingress_records
WHERE tenant_id = $1 AND topic = $2 AND kafka_partition = $3 AND kafka_offset = $4;

-- name: kafka_ingress_record
-- Record a source position once; no row back when it was recorded before (the
-- caller then rolls back the job it accepted in the same transaction).
-- $1 tenant, $2 topic, $3 partition, $4 offset, $5 job (NULL when refused),
-- $6 outcome, $7 reason (refused only), $8 now.
INSERT INTO kafka_ingress_records
  (tenant_id, topic, kafka_partition, kafka_offset, job_id, outcome, reason, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8::timestamptz, now()))
ON CONFLICT (tenant_id, topic, kafka_partition, kafka_offset) DO NOTHING
RETURNING outcome;
