-- One trace per job (issue 19, pipeline/tracing.py): the W3C traceparent of the
-- acceptance span travels in durable state, so a retry on another driver, the
-- reaper's re-queue and a delivery days later continue the same trace.
-- Nullable: rows from before this migration simply start no trace.
ALTER TABLE extraction_jobs ADD COLUMN traceparent text
  CHECK (traceparent IS NULL OR traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
-- The context of the span that wrote the event; the relay sends it as a message header.
ALTER TABLE outbox_events ADD COLUMN traceparent text;
