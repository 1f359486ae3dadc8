-- Broker path (issue 4): how an outbox event left the database, a wake-up for the
-- relay, and the dead-letter archive with its replay audit trail.

-- 'broker': confirmed by RabbitMQ; 'local': handled without a broker (broker-less
-- mode, or an event type no broker consumer reads). NULL while unpublished.
ALTER TABLE outbox_events ADD COLUMN published_via text
  CHECK (published_via IN ('broker', 'local'));

-- One notification per inserting statement (not per row): the relay wakes at
-- commit instead of waiting for its next poll. PostgreSQL folds identical
-- notifications within a transaction, so a burst costs one.
CREATE FUNCTION outbox_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('fenceline_outbox', '');
  RETURN NULL;
END $$;

CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_notify();

-- The scheduler's inbox-backlog scan and `explain` look inbox rows up by job.
CREATE INDEX execution_inbox_job ON execution_inbox (job_id, received_at);

-- Everything that reached the DLQ, archived by the DLQ consumer before it acks:
-- the inspectable, access-controlled record an operator lists, shows and replays.
-- Dead letters carry references (event id, job id), never document text; a poison
-- body is kept only up to a few KiB.
CREATE TABLE dead_letters (
  id              uuid PRIMARY KEY,
  -- Redelivery from the DLQ (at-least-once) must not archive a message twice.
  dedupe_key      text NOT NULL UNIQUE,
  -- inbox: poison or quarantined by the ingress consumer; broker: dead-lettered by
  -- RabbitMQ (delivery limit, rejection); outbox: a terminal decision's event.
  source          text NOT NULL CHECK (source IN ('inbox', 'broker', 'outbox', 'unknown')),
  reason          text NOT NULL,
  detail          text,
  message_id      text,
  event_id        uuid,
  event_type      text,
  job_id          uuid,                      -- no FK: a poison message may name any id
  tenant_id       uuid,                      -- resolved from the job when archived
  routing_key     text,
  headers         jsonb NOT NULL DEFAULT '{}'::jsonb,
  body            bytea NOT NULL,
  body_truncated  boolean NOT NULL DEFAULT false,
  archived_at     timestamptz NOT NULL DEFAULT now(),
  replay_count    integer NOT NULL DEFAULT 0 CHECK (replay_count >= 0),
  last_replayed_at timestamptz
);
CREATE INDEX dead_letters_archived ON dead_letters (archived_at DESC, id);
CREATE INDEX dead_letters_tenant ON dead_letters (tenant_id, archived_at DESC, id);
CREATE INDEX dead_letters_pending ON dead_letters (archived_at) WHERE replay_count = 0;

-- Who replayed which dead letter, when and why, and the outbox event it created.
CREATE TABLE dead_letter_replays (
  id               uuid PRIMARY KEY,
  dead_letter_id   uuid NOT NULL REFERENCES dead_letters(id),
  outbox_event_id  uuid NOT NULL REFERENCES outbox_events(event_id),
  job_id           uuid NOT NULL REFERENCES extraction_jobs(id),
  requested_by     text NOT NULL,
  note             text NOT NULL DEFAULT '',
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_letter_replays_letter ON dead_letter_replays (dead_letter_id, created_at);
