-- Retention's content stage also empties what a reviewer wrote about a job's invoice
-- (issue 46): a correction's values before and after, its reasons' details and its
-- note (review_corrections), and a decision's note (review_decisions), as erasure
-- does (sql/queries/erasure.sql). What stays is the skeleton: which fields changed,
-- the reasons' codes and fields, approve or reject. The mark counts the rows.

ALTER TABLE job_retention_marks
  ADD COLUMN review_corrections integer NOT NULL DEFAULT 0,
  ADD COLUMN review_decisions integer NOT NULL DEFAULT 0;
