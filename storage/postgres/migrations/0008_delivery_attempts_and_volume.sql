-- Every delivery attempt (the delivery row keeps the last), and the volume index: counts per mail
-- order and UTC hour, in slots (storage/postgres/history.ts).
CREATE TABLE "delivery_attempts" (
	"delivery_id" bigint NOT NULL,
	"attempt" integer NOT NULL,
	"time" bigint NOT NULL,
	"state" text NOT NULL,
	"code" integer,
	"response" text,
	"mx_hostname" text,
	"mx_address" text,
	"tls" boolean,
	"next_attempt_at" bigint,
	"suppressed" boolean DEFAULT false NOT NULL,
	CONSTRAINT "delivery_attempts_delivery_id_attempt_pk" PRIMARY KEY("delivery_id","attempt")
);
--> statement-breakpoint
CREATE TABLE "volume_hours" (
	"order_id" integer NOT NULL,
	"hour_start" bigint NOT NULL,
	"slot" smallint NOT NULL,
	"accepted" integer DEFAULT 0 NOT NULL,
	"delivered" integer DEFAULT 0 NOT NULL,
	"deferred" integer DEFAULT 0 NOT NULL,
	"failed" integer DEFAULT 0 NOT NULL,
	"refused" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "volume_hours_order_id_hour_start_slot_pk" PRIMARY KEY("order_id","hour_start","slot")
);
--> statement-breakpoint
-- The volume of the log as it stands, in slot 0, so that an upgraded relay's charts start full:
-- recipients accepted in their message's hour; each recipient's outcome so far, and the deferrals
-- its count of attempts implies (every attempt before a final one was deferred), in the same hour,
-- since when they happened was not kept. Refusals were not kept either.
INSERT INTO "volume_hours" ("order_id", "hour_start", "slot", "accepted", "delivered", "deferred", "failed")
SELECT "order_id", "hour_start", 0, SUM("accepted"), SUM("delivered"), SUM("deferred"), SUM("failed") FROM (
  SELECT "order_id", ("time" / 3600) * 3600000 AS "hour_start", SUM("rcpt_count") AS "accepted",
    0 AS "delivered", 0 AS "deferred", 0 AS "failed"
  FROM "messages" GROUP BY 1, 2
  UNION ALL
  SELECT d."order_id", (m."time" / 3600) * 3600000, 0, COUNT(*) FILTER (WHERE d."state" = 'delivered'),
    SUM(CASE WHEN d."state" IN ('delivered', 'failed') THEN GREATEST(d."attempts" - 1, 0) ELSE d."attempts" END),
    COUNT(*) FILTER (WHERE d."state" = 'failed')
  FROM "deliveries" d JOIN "messages" m ON m."id" = d."message_id" WHERE d."attempts" > 0 OR d."state" = 'failed'
  GROUP BY 1, 2
) AS v GROUP BY 1, 2;

--> statement-breakpoint
-- mailroom_record (migration 0006) with what a recipient's history and the volume index need: each
-- outcome recorded is also a row of delivery_attempts, numbered by the attempt, and counted in the
-- volume index in one slot (p_slot), its rows taken in key order. Nodes of one version run at once,
-- so the old signature goes.
DROP FUNCTION mailroom_record(bigint[], text[], smallint[], int[], text[], text[], bigint[]);
--> statement-breakpoint
CREATE FUNCTION mailroom_record(p_ids bigint[], p_states text[], p_delivered smallint[], p_codes int[],
  p_responses text[], p_mx text[], p_next bigint[], p_times bigint[], p_addresses text[], p_tls boolean[],
  p_suppressed boolean[], p_slot smallint)
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
    FROM unnest(p_ids, p_states, p_delivered, p_codes, p_responses, p_mx, p_next, p_times, p_addresses, p_tls,
      p_suppressed)
      AS o(id, state, delivered, code, response, mx_hostname, next_attempt_at, time, mx_address, tls, suppressed)
    WHERE d.id = o.id AND d.next_attempt_at IS NOT NULL
    RETURNING d.id AS row_id, d.message_id AS row_message, d.delay_reported AS row_delay, d.order_id AS row_order,
      d.attempts AS row_attempt, o.state AS a_state, o.code AS a_code, o.response AS a_response,
      o.mx_hostname AS a_mx, o.next_attempt_at AS a_next, o.time AS a_time, o.mx_address AS a_address,
      o.tls AS a_tls, o.suppressed AS a_suppressed
  ), a AS (
    INSERT INTO delivery_attempts (delivery_id, attempt, time, state, code, response, mx_hostname, mx_address, tls,
      next_attempt_at, suppressed)
    SELECT row_id, row_attempt, a_time, a_state, a_code, a_response, a_mx, a_address, a_tls, a_next, a_suppressed FROM u
  ), v AS (
    INSERT INTO volume_hours (order_id, hour_start, slot, delivered, deferred, failed)
    SELECT row_order, (a_time / 3600000) * 3600000, p_slot, COUNT(*) FILTER (WHERE a_state = 'delivered'),
      COUNT(*) FILTER (WHERE a_state = 'deferred'), COUNT(*) FILTER (WHERE a_state = 'failed')
    FROM u GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (order_id, hour_start, slot) DO UPDATE SET delivered = volume_hours.delivered + excluded.delivered,
      deferred = volume_hours.deferred + excluded.deferred, failed = volume_hours.failed + excluded.failed
  )
  SELECT array_agg(u.row_id), array_agg(u.row_message), array_agg(u.row_delay)
    INTO r_ids, r_messages, r_delay FROM u;
  PERFORM mailroom_drop_bodies(ARRAY(SELECT DISTINCT x FROM unnest(r_messages) AS x));
  RETURN QUERY SELECT * FROM unnest(r_ids, r_messages, r_delay);
END $$;
