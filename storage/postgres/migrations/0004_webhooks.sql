-- Webhooks (Standard Webhooks) and their outbox. Which webhooks an account has is read at every
-- accepted message and every delivery outcome, from each node's settings cache: adding, deleting
-- or disabling one bumps the settings counter (migration 0001). A failed attempt's error does not.
CREATE TABLE "webhook_outbox" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"webhook_id" integer NOT NULL,
	"event_id" text NOT NULL,
	"type" text NOT NULL,
	"payload" text NOT NULL,
	"created_at" bigint NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" bigint NOT NULL,
	"locked" smallint DEFAULT 0 NOT NULL,
	"lock_time" bigint,
	"assigned" text
);
--> statement-breakpoint
CREATE TABLE "webhooks" (
	"id" serial PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"url" text NOT NULL,
	"events" text NOT NULL,
	"description" text,
	"secret_enc" text NOT NULL,
	"created_at" bigint NOT NULL,
	"failing_since" bigint,
	"last_error" text,
	"last_error_at" bigint,
	"disabled_at" bigint
);
--> statement-breakpoint
ALTER TABLE "webhook_outbox" ADD CONSTRAINT "webhook_outbox_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhooks" ADD CONSTRAINT "webhooks_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "webhook_outbox_due" ON "webhook_outbox" USING btree ("next_attempt_at");--> statement-breakpoint
CREATE INDEX "webhook_outbox_webhook" ON "webhook_outbox" USING btree ("webhook_id");--> statement-breakpoint
CREATE INDEX "webhooks_account" ON "webhooks" USING btree ("account_id");
--> statement-breakpoint
CREATE TRIGGER "webhooks_settings" AFTER INSERT OR DELETE OR TRUNCATE ON "webhooks"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
--> statement-breakpoint
CREATE TRIGGER "webhooks_update_settings" AFTER UPDATE OF "events", "disabled_at" ON "webhooks"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
