-- Each tenant's unsettled work as running totals (issue 21: the accept path).
--
-- The accept transaction checks the tenant's pending-jobs, -bytes and -tokens
-- quotas under the tenant's admission lock. It summed them over every READY,
-- RUNNING and RETRY_SCHEDULED job of the tenant (joined with its document), so
-- each accept cost O(pending): 0.35 ms with nothing pending, 1.2 ms with 1,000,
-- 24.5 ms with 10,000 (measured on a 2-core machine), and with the lock held that
-- capped a supplier's upload of 10,000 invoices at about 40 accepts a second.
-- The totals are now kept by statement-level triggers on extraction_jobs, in the
-- transaction of the change, so a reader under the lock sees exactly what the
-- sum would have given: every committed accept and settle, and its own accept.
--
-- Totals are split over 16 shards per tenant, each session writing to the shard
-- of its server process (pg_backend_pid() % 16), because every settle of a
-- tenant's job writes to them and holds the row until its commit: one row per
-- tenant queued the tenant's settles behind each other (measured: batched
-- claim+complete fell from 3,400-3,550 to 1,730-1,890 jobs/s with 8 shards by
-- job id, where every batch touched most of them). A quota read adds up the
-- tenant's shards. One statement writes one shard, in tenant order, so two
-- statements that touch several tenants never wait on each other in a cycle.
CREATE TABLE tenant_backlog (
  tenant_id  uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  shard      smallint NOT NULL CHECK (shard BETWEEN 0 AND 15),
  jobs       bigint NOT NULL DEFAULT 0,
  bytes      bigint NOT NULL DEFAULT 0,
  tokens     bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, shard)
) WITH (
  -- Every accept and settle updates a row in place: room on each page keeps the
  -- new versions on it (HOT, no index entry), and frequent vacuums keep the
  -- chains short, so a quota read stays a few rows whatever the backlog.
  fillfactor = 20,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 1000
);

CREATE FUNCTION tenant_backlog_shard() RETURNS smallint
  LANGUAGE sql STABLE PARALLEL SAFE AS $$ SELECT (pg_backend_pid() % 16)::smallint $$;

CREATE FUNCTION tenant_backlog_pending(state text) RETURNS integer
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
  $$ SELECT CASE WHEN state IN ('READY', 'RUNNING', 'RETRY_SCHEDULED') THEN 1 ELSE 0 END $$;

-- Adds each tenant's change to the shard of the writing session, in tenant order.
CREATE FUNCTION tenant_backlog_add(tenants uuid[], jobs bigint[], bytes bigint[],
                                   tokens bigint[]) RETURNS void LANGUAGE sql AS $$
  INSERT INTO tenant_backlog AS b (tenant_id, shard, jobs, bytes, tokens)
  SELECT d.tenant_id, tenant_backlog_shard(), d.jobs, d.bytes, d.tokens
  FROM unnest(tenants, jobs, bytes, tokens) AS d(tenant_id, jobs, bytes, tokens)
  ORDER BY d.tenant_id
  ON CONFLICT (tenant_id, shard) DO UPDATE
    SET jobs = b.jobs + EXCLUDED.jobs, bytes = b.bytes + EXCLUDED.bytes,
        tokens = b.tokens + EXCLUDED.tokens
$$;

-- Jobs accepted (or inserted by hand) in a pending state add to their tenant's totals.
CREATE FUNCTION tenant_backlog_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM tenant_backlog_add(array_agg(t.tenant_id), array_agg(t.jobs),
                             array_agg(t.bytes), array_agg(t.tokens))
  FROM (SELECT n.tenant_id, count(*) AS jobs, coalesce(sum(d.byte_size), 0)::bigint AS bytes,
               coalesce(sum(n.estimated_tokens), 0)::bigint AS tokens
        FROM new_rows n LEFT JOIN documents d ON d.id = n.document_id
        WHERE tenant_backlog_pending(n.state) = 1
        GROUP BY n.tenant_id) t
  HAVING count(*) > 0;
  RETURN NULL;
END $$;

-- A job that leaves the pending states (settled or failed) subtracts, one that
-- re-enters them (re-driven) adds; a claim, a retry or a heartbeat (pending to
-- pending, same document and estimate) writes nothing.
CREATE FUNCTION tenant_backlog_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM tenant_backlog_add(array_agg(t.tenant_id), array_agg(t.jobs),
                             array_agg(t.bytes), array_agg(t.tokens))
  FROM (SELECT m.tenant_id, sum(m.pn - m.po)::bigint AS jobs,
               sum(m.pn * coalesce(dn.byte_size, 0) - m.po * coalesce(dp.byte_size, 0))::bigint
                 AS bytes,
               sum(m.pn * m.new_tokens - m.po * m.old_tokens)::bigint AS tokens
        FROM (SELECT n.tenant_id, tenant_backlog_pending(n.state) AS pn,
                     tenant_backlog_pending(o.state) AS po, n.document_id AS new_doc,
                     o.document_id AS old_doc, coalesce(n.estimated_tokens, 0) AS new_tokens,
                     coalesce(o.estimated_tokens, 0) AS old_tokens
              FROM new_rows n JOIN old_rows o ON o.id = n.id
              WHERE tenant_backlog_pending(n.state) <> tenant_backlog_pending(o.state)
                 OR (tenant_backlog_pending(n.state) = 1
                     AND (n.document_id IS DISTINCT FROM o.document_id
                          OR n.estimated_tokens IS DISTINCT FROM o.estimated_tokens))) m
        LEFT JOIN documents dn ON dn.id = m.new_doc
        LEFT JOIN documents dp ON dp.id = m.old_doc
        GROUP BY m.tenant_id) t
  HAVING count(*) > 0;
  RETURN NULL;
END $$;

-- A pending job deleted (a purge takes settled ones; this keeps the totals right
-- whatever is deleted) subtracts.
CREATE FUNCTION tenant_backlog_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM tenant_backlog_add(array_agg(t.tenant_id), array_agg(-t.jobs),
                             array_agg(-t.bytes), array_agg(-t.tokens))
  FROM (SELECT o.tenant_id, count(*) AS jobs, coalesce(sum(d.byte_size), 0)::bigint AS bytes,
               coalesce(sum(o.estimated_tokens), 0)::bigint AS tokens
        FROM old_rows o LEFT JOIN documents d ON d.id = o.document_id
        WHERE tenant_backlog_pending(o.state) = 1
        GROUP BY o.tenant_id) t
  HAVING count(*) > 0;
  RETURN NULL;
END $$;

CREATE TRIGGER tenant_backlog_inserted AFTER INSERT ON extraction_jobs
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION tenant_backlog_inserted();

CREATE TRIGGER tenant_backlog_updated AFTER UPDATE ON extraction_jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION tenant_backlog_updated();

CREATE TRIGGER tenant_backlog_deleted AFTER DELETE ON extraction_jobs
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION tenant_backlog_deleted();

-- What is pending now.
INSERT INTO tenant_backlog (tenant_id, shard, jobs, bytes, tokens)
SELECT j.tenant_id, 0, count(*), coalesce(sum(d.byte_size), 0),
       coalesce(sum(j.estimated_tokens), 0)
FROM extraction_jobs j LEFT JOIN documents d ON d.id = j.document_id
WHERE tenant_backlog_pending(j.state) = 1
GROUP BY 1, 2;
