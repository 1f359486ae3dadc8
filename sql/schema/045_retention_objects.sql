-- Retention removes an uploaded file's stored object (issue 46, item 1;
-- pipeline/jobs/object_removal.py, docs/retention.md).
--
-- The content batch that releases a documents row (no job left that retention has
-- not marked) and names a stored object sets object_pending_at; after the batch's
-- commit the pass removes the object unless a documents row that still needs its
-- bytes (of any tenant: the embedded store shares a file) names the uri, then records
-- the outcome here. A store that did not answer, or a crash between the removal and
-- the record, leaves object_pending_at set: the next pass finishes it (removing is
-- idempotent).
ALTER TABLE documents
  ADD COLUMN object_pending_at timestamptz,
  ADD COLUMN object_removed_at timestamptz,
  -- removed: the object is gone; shared: kept, another documents row still needs it
  -- (that row's own release removes it); client_object: not the store's upload area,
  -- the client's to delete.
  ADD COLUMN object_outcome text
    CHECK (object_outcome IN ('removed', 'shared', 'client_object'));
CREATE INDEX documents_object_pending ON documents (object_pending_at, id)
  WHERE object_pending_at IS NOT NULL;

-- Every documents write naming a stored object takes the object's advisory lock
-- shared (namespace "OBJS", the uri's hash) until its transaction ends; a remover
-- (retention or erasure) takes it exclusive around its check that no row needs the
-- object, the store's removal and its record. So an accept that names the uri either
-- commits before the remover's check (which then sees its row and keeps the object)
-- or waits until the removal is committed (and the intake, which checks the object
-- after its commit, puts the bytes again: pipeline/api/document_intake.py).
CREATE OR REPLACE FUNCTION documents_object_lock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.uri IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock_shared(1329744467, hashtext(NEW.uri));
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER documents_object_lock BEFORE INSERT ON documents
  FOR EACH ROW EXECUTE FUNCTION documents_object_lock();
