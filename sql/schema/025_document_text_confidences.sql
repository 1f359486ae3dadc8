-- The confidence of each word OCR read, kept beside the text it was read as (issue 43).
--
-- A value whose text came from OCR is accepted only where every OCR word under its
-- evidence was read with enough confidence (pipeline/worker/ocr_proof.py); a retried
-- attempt reads the kept text, so it needs the confidences that go with it. JSON:
-- {"pages": [OCR'd page numbers], "words": [[page, start, end, confidence], ...]},
-- offsets into the page's text as evidence's. NULL for a text no OCR read, and for a
-- text kept before this migration (its values cannot be proven: the whole document
-- goes to review, as it did then).
ALTER TABLE document_texts ADD COLUMN ocr_confidences text;
