-- The outbox relay's writes read the batch's events, whatever plan a connection
-- cached (issue 21; tests/integration/test_batch_plans.py).
--
-- The relay marks a batch published, or releases it with an error, by event id.
-- Written as one statement, "event_id = ANY($1) AND published_at IS NULL", and
-- planned generically while outbox_events was small and had no statistics
-- (autovacuum off, or a new database's first minute), the cached plan read the
-- whole unpublished backlog on every batch: through outbox_events_unpublished,
-- whose predicate the statement states, or by a sequential scan, which the planner
-- prices below the ten primary-key probes it expects for an array of unknown
-- length. 3,018 rows for a batch of 16 beside a backlog of 3,000, so draining the
-- backlog of a broker outage was quadratic. A join with a function declared to
-- return one row (migration 021's remedy) still chose the sequential scan here:
-- this table's rows are wide, so ten empty pages price below one probe in a loop.
--
-- These functions write one event at a time by its primary key, one call (one
-- round trip) per batch. "event_id = $1" alone estimates one row, and
-- "(published_at IS NULL) IS TRUE" is the same truth value as "published_at IS
-- NULL" (IS NULL is never null) from which the partial index's predicate does not
-- follow: the only plan is one probe of outbox_events_pkey per event, at any size.
-- Each write stays conditional: an event another relay marked, or (release) whose
-- lease ran out and that another relay claimed since, is left alone and not
-- returned; callers compare the count.
CREATE FUNCTION outbox_mark_published(p_ids uuid[], p_via text, p_now timestamptz)
RETURNS SETOF uuid LANGUAGE plpgsql AS $$
DECLARE v_id uuid;
BEGIN
  FOREACH v_id IN ARRAY p_ids LOOP
    RETURN QUERY
      UPDATE outbox_events
      SET published_at = coalesce(p_now, now()), published_via = p_via,
          claimed_until = NULL, last_error = NULL
      WHERE event_id = v_id AND (published_at IS NULL) IS TRUE
      RETURNING event_id;
  END LOOP;
END
$$;

CREATE FUNCTION outbox_release_with_error(
  p_ids uuid[], p_error text, p_delay_seconds double precision, p_now timestamptz,
  p_claimed_until timestamptz)
RETURNS SETOF uuid LANGUAGE plpgsql AS $$
DECLARE v_id uuid;
BEGIN
  FOREACH v_id IN ARRAY p_ids LOOP
    RETURN QUERY
      UPDATE outbox_events
      SET claimed_until = coalesce(p_now, now()) + make_interval(secs => p_delay_seconds),
          last_error = p_error
      WHERE event_id = v_id AND (published_at IS NULL) IS TRUE
        AND claimed_until = p_claimed_until
      RETURNING event_id;
  END LOOP;
END
$$;
