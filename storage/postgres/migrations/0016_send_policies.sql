CREATE TABLE "holds" (
	"txid" text PRIMARY KEY NOT NULL,
	"message_row_id" bigint NOT NULL,
	"account_id" integer NOT NULL,
	"order_id" integer NOT NULL,
	"holder" text NOT NULL,
	"holder_label" text NOT NULL,
	"reason" text NOT NULL,
	"status" text NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL,
	"decided_at" bigint,
	"decided_by" text,
	"approval_url" text NOT NULL,
	"elicitation_id" text,
	"elicitation_state" text
);
--> statement-breakpoint
CREATE TABLE "send_counts" (
	"holder" text NOT NULL,
	"period" text NOT NULL,
	"start" bigint NOT NULL,
	"count" integer NOT NULL,
	CONSTRAINT "send_counts_holder_period_start_pk" PRIMARY KEY("holder","period","start")
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "send_policy" text;--> statement-breakpoint
ALTER TABLE "mail_orders" ADD COLUMN "send_policy" text;--> statement-breakpoint
ALTER TABLE "mcp_sessions" ADD COLUMN "elicitation" text;--> statement-breakpoint
ALTER TABLE "oauth_codes" ADD COLUMN "send_policy" text;--> statement-breakpoint
ALTER TABLE "oauth_grants" ADD COLUMN "send_policy" text;--> statement-breakpoint
CREATE UNIQUE INDEX "holds_message" ON "holds" USING btree ("message_row_id");--> statement-breakpoint
CREATE UNIQUE INDEX "holds_elicitation" ON "holds" USING btree ("elicitation_id");--> statement-breakpoint
CREATE INDEX "holds_account" ON "holds" USING btree ("account_id","status","created_at");--> statement-breakpoint
CREATE INDEX "holds_expires" ON "holds" USING btree ("expires_at") WHERE status = 'held';--> statement-breakpoint
CREATE INDEX "deliveries_order_domain" ON "deliveries" USING btree ("order_id","domain");