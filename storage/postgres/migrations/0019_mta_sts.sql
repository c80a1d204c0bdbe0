CREATE TABLE "sts_policies" (
	"domain" text PRIMARY KEY NOT NULL,
	"policy_id" text NOT NULL,
	"mode" text NOT NULL,
	"mx" text[] NOT NULL,
	"max_age" integer NOT NULL,
	"text" text NOT NULL,
	"fetched_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tls_reports" (
	"domain" text NOT NULL,
	"day" bigint NOT NULL,
	"node" text NOT NULL,
	"claimed_at" bigint NOT NULL,
	CONSTRAINT "tls_reports_domain_day_pk" PRIMARY KEY("domain","day")
);
--> statement-breakpoint
CREATE TABLE "tls_result_counts" (
	"domain" text NOT NULL,
	"day" bigint NOT NULL,
	"policy_type" text NOT NULL,
	"result_type" text NOT NULL,
	"mx_host" text NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "tls_result_counts_domain_day_policy_type_result_type_mx_host_pk" PRIMARY KEY("domain","day","policy_type","result_type","mx_host")
);
--> statement-breakpoint
ALTER TABLE "delivery_attempts" ADD COLUMN "tls_policy" text;--> statement-breakpoint
ALTER TABLE "delivery_attempts" ADD COLUMN "tls_policy_domain" text;--> statement-breakpoint
ALTER TABLE "delivery_attempts" ADD COLUMN "cert_valid" boolean;--> statement-breakpoint
CREATE INDEX "tls_reports_day" ON "tls_reports" USING btree ("day");--> statement-breakpoint
-- mailroom_record (migration 0008) with what each attempt says of its TLS policy: the MTA-STS
-- mode applied, the policy's domain, and whether the MX certificate was valid for its name. Nodes
-- of one version run at once, so the old signature goes.
DROP FUNCTION mailroom_record(bigint[], text[], smallint[], int[], text[], text[], bigint[], bigint[], text[],
  boolean[], boolean[], smallint);
--> statement-breakpoint
CREATE FUNCTION mailroom_record(p_ids bigint[], p_states text[], p_delivered smallint[], p_codes int[],
  p_responses text[], p_mx text[], p_next bigint[], p_times bigint[], p_addresses text[], p_tls boolean[],
  p_suppressed boolean[], p_slot smallint, p_policies text[], p_policy_domains text[], p_cert_valid boolean[])
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
      p_suppressed, p_policies, p_policy_domains, p_cert_valid)
      AS o(id, state, delivered, code, response, mx_hostname, next_attempt_at, time, mx_address, tls, suppressed,
        tls_policy, tls_policy_domain, cert_valid)
    WHERE d.id = o.id AND d.next_attempt_at IS NOT NULL
    RETURNING d.id AS row_id, d.message_id AS row_message, d.delay_reported AS row_delay, d.order_id AS row_order,
      d.attempts AS row_attempt, o.state AS a_state, o.code AS a_code, o.response AS a_response,
      o.mx_hostname AS a_mx, o.next_attempt_at AS a_next, o.time AS a_time, o.mx_address AS a_address,
      o.tls AS a_tls, o.suppressed AS a_suppressed, o.tls_policy AS a_policy, o.tls_policy_domain AS a_policy_domain,
      o.cert_valid AS a_cert_valid
  ), a AS (
    INSERT INTO delivery_attempts (delivery_id, attempt, time, state, code, response, mx_hostname, mx_address, tls,
      next_attempt_at, suppressed, tls_policy, tls_policy_domain, cert_valid)
    SELECT row_id, row_attempt, a_time, a_state, a_code, a_response, a_mx, a_address, a_tls, a_next, a_suppressed,
      a_policy, a_policy_domain, a_cert_valid FROM u
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
