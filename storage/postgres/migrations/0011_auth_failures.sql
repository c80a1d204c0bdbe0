CREATE TABLE "auth_failures" (
	"client" text PRIMARY KEY NOT NULL,
	"count" integer NOT NULL,
	"since" bigint NOT NULL,
	"throttled_until" bigint
);
--> statement-breakpoint
CREATE INDEX "auth_failures_since" ON "auth_failures" USING btree ("since");--> statement-breakpoint
-- A throttle that starts drops every node's cached answer for the client (storage/postgres/
-- settings-cache.ts); counting a failure below the limit does not, nor does a window that restarts
-- (the old throttle had ended).
CREATE TRIGGER "auth_failures_insert_settings" AFTER INSERT ON "auth_failures"
  FOR EACH ROW WHEN (NEW."throttled_until" IS NOT NULL) EXECUTE FUNCTION "bump_settings_version"();
--> statement-breakpoint
CREATE TRIGGER "auth_failures_update_settings" AFTER UPDATE OF "throttled_until" ON "auth_failures"
  FOR EACH ROW WHEN (NEW."throttled_until" IS NOT NULL AND OLD."throttled_until" IS DISTINCT FROM NEW."throttled_until")
  EXECUTE FUNCTION "bump_settings_version"();
