-- The foreign keys of messages to accounts and mail_orders: each check locked the account's and
-- the order's row (FOR KEY SHARE) in the transaction of every send. Neither is ever deleted, and a
-- message is only inserted for the account and order its send was authorized with.
ALTER TABLE "messages" DROP CONSTRAINT "messages_account_id_accounts_id_fk";
--> statement-breakpoint
ALTER TABLE "messages" DROP CONSTRAINT "messages_order_id_mail_orders_id_fk";
--> statement-breakpoint
-- Drops the bytes of the messages no recipient waits for any more. The messages are locked first
-- (an advisory lock per message, in id order): of two transactions recording a message's last
-- two recipients at once, each would otherwise see the other's row still waiting, and neither
-- would drop the bytes; the one that locks second waits for the first to commit and then, its
-- DELETE taking a new snapshot (a VOLATILE function's statements each take one), sees its row
-- final. Plans are made at each call: a plan kept from when the tables were small would scan them.
CREATE FUNCTION mailroom_drop_bodies(p_messages bigint[]) RETURNS void
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_custom_plan AS $$
BEGIN
  IF p_messages IS NULL OR cardinality(p_messages) = 0 THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock((s.m >> 31)::int, (s.m & 2147483647)::int)
    FROM (SELECT DISTINCT u.m FROM unnest(p_messages) AS u(m) ORDER BY u.m) s;
  DELETE FROM message_bodies b WHERE b.message_id = ANY(p_messages)
    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message_id = b.message_id AND d.next_attempt_at IS NOT NULL);
END $$;
--> statement-breakpoint
-- Records attempt outcomes, one row each (a final row is left as it is), and drops the bytes of the
-- messages they finish: one call, one round trip, where it was five statements.
CREATE FUNCTION mailroom_record(p_ids bigint[], p_states text[], p_delivered smallint[], p_codes int[],
  p_responses text[], p_mx text[], p_next bigint[])
RETURNS TABLE (id bigint, "messageRowId" bigint, "delayReported" boolean)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  r_ids bigint[];
  r_messages bigint[];
  r_delay boolean[];
BEGIN
  WITH u AS (
    UPDATE deliveries d SET state = o.state, delivered = o.delivered, code = o.code, response = o.response,
      mx_hostname = COALESCE(o.mx_hostname, d.mx_hostname), locked = 0, attempts = d.attempts + 1,
      next_attempt_at = o.next_attempt_at
    FROM unnest(p_ids, p_states, p_delivered, p_codes, p_responses, p_mx, p_next)
      AS o(id, state, delivered, code, response, mx_hostname, next_attempt_at)
    WHERE d.id = o.id AND d.next_attempt_at IS NOT NULL
    RETURNING d.id AS row_id, d.message_id AS row_message, d.delay_reported AS row_delay
  )
  SELECT array_agg(u.row_id), array_agg(u.row_message), array_agg(u.row_delay)
    INTO r_ids, r_messages, r_delay FROM u;
  PERFORM mailroom_drop_bodies(ARRAY(SELECT DISTINCT x FROM unnest(r_messages) AS x));
  RETURN QUERY SELECT * FROM unnest(r_ids, r_messages, r_delay);
END $$;
