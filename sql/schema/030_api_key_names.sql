-- An API key's human-readable name (issue 45, item 7): the console's timeline and
-- review history named a reviewer by the key's printed prefix ("key flk_AbCd…"),
-- since a key had nothing else a person could recognise. ``label`` is optional
-- (NULL: the prefix is shown, as before); set by ``fenceline keys create --label``.
-- Its form (NFC, trimmed, no invisible or bidi characters, no white space other than
-- the plain space) is checked where keys are created (pipeline/tenants/key_labels.py);
-- the database keeps the bounds.
ALTER TABLE api_keys
  ADD COLUMN label text
  CHECK (label IS NULL OR (char_length(label) BETWEEN 1 AND 100 AND label = btrim(label)));
