-- Retention's content stage also empties what a reviewer wrote about a job's invoice
-- (issue 46): a correction's values before and after, its reasons' details and its
-- note (review_corrections), and a decision's note (review_decisions), as erasure
-- does. What stays is the skeleton: which fields changed, the reasons' codes and
-- fields, approve or reject. The mark counts the rows.

ALTER TABLE job_retention_marks
  ADD COLUMN review_corrections integer NOT NULL DEFAULT 0,
  ADD COLUMN review_decisions integer NOT NULL DEFAULT 0;

-- The skeleton of a correction's changes ([{field, before, after}] -> [{field}]) and
-- of its reasons ([{code, field, detail, ...}] -> [{code, field}]): what erasure
-- (sql/queries/erasure.sql) and retention (sql/queries/retention.sql) both keep.
CREATE FUNCTION correction_fields(changes jsonb) RETURNS jsonb
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_object('field', x -> 'field')), '[]'::jsonb)
  FROM jsonb_array_elements(changes) x
$$;

CREATE FUNCTION reason_codes(reasons jsonb) RETURNS jsonb
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_object('code', x -> 'code', 'field', x -> 'field')),
                  '[]'::jsonb)
  FROM jsonb_array_elements(reasons) x
$$;
