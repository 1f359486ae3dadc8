-- The text a file was read as (issue 43): derived once, then the one text every stage
-- reads.
--
-- A file's bytes stay in the object store (migration 023); the text the document stage
-- derives from them (a PDF's text layer laid out on a grid, later OCR) is kept here the
-- first time an attempt reads it, and every later attempt, the review console and
-- corrections read this row instead of deriving again: evidence offsets always point
-- into the text they were found in, even where a later release lays a page out
-- differently, and a retried attempt does not pay for OCR twice. The first writer wins
-- (INSERT ... ON CONFLICT DO NOTHING, then read back).
CREATE TABLE document_texts (
  document_id  uuid PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
  tenant_id    uuid NOT NULL,
  content      text NOT NULL,
  sha256       text NOT NULL,
  reader       text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);
