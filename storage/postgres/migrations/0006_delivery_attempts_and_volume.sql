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
