-- Spend of uncertain attempts and separate prompt and completion prices (issue 46,
-- item 6).
--
-- An attempt whose usage is unknown while the provider may have billed it (a
-- timeout, a lost or expired lease, a drained or cancelled call) is charged at its
-- reservation, marked estimated, as admission keeps it; when its usage becomes known
-- (a late result) the reconciler replaces the charge with the reported tokens. One
-- that never reports stays charged at the reservation, still marked estimated.
--
-- The reservation of an attempt is its admission grant's: prompt estimate plus the
-- output cap. reserved_output_tokens keeps the output part, so the estimate is
-- priced like a reported call: prompt tokens at the prompt price, completion
-- tokens at the completion price. NULL on grants written before this migration
-- (their reservation is then priced as output, the dearer side of every price).
ALTER TABLE admission_grants
  ADD COLUMN reserved_output_tokens integer
    CHECK (reserved_output_tokens >= 0 AND reserved_output_tokens <= reserved_tokens);

-- What each charge counted and at which prices, so reports show both parts. The
-- columns are NULL on charges written before this migration (one price, tokens
-- as one number).
ALTER TABLE spend_charges
  ADD COLUMN prompt_tokens            integer CHECK (prompt_tokens >= 0),
  ADD COLUMN completion_tokens        integer CHECK (completion_tokens >= 0),
  ADD COLUMN model                    text,
  ADD COLUMN prompt_price_per_1k      numeric(18, 9) CHECK (prompt_price_per_1k >= 0),
  ADD COLUMN completion_price_per_1k  numeric(18, 9) CHECK (completion_price_per_1k >= 0),
  -- true: charged at the attempt's reservation because its usage is unknown.
  ADD COLUMN estimated                boolean NOT NULL DEFAULT false,
  -- when an estimated charge was replaced by the attempt's reported usage.
  ADD COLUMN reconciled_at            timestamptz,
  -- the amount the estimate had before it was replaced.
  ADD COLUMN estimated_amount         numeric(18, 6) CHECK (estimated_amount >= 0),
  ADD CONSTRAINT spend_charges_reconciled_estimate
    CHECK (NOT (estimated AND reconciled_at IS NOT NULL)),
  ADD CONSTRAINT spend_charges_reconciled_amount
    CHECK ((reconciled_at IS NULL) = (estimated_amount IS NULL));

-- The reconciler's scan for estimates whose attempt has since reported: few rows.
CREATE INDEX spend_charges_estimated ON spend_charges (created_at) WHERE estimated;
