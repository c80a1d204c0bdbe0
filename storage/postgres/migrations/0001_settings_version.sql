-- The settings every send reads (API keys, mail orders and their senders, deny rules, the block
-- list, traps, sending domains and their DKIM keys) are cached in memory by each node
-- (storage/postgres/settings-cache.ts). This counter, bumped in the transaction of every change
-- to those tables, from any node or connection, tells a cache when what it holds may be out of
-- date. A row rather than a sequence: a sequence moves before the change commits, and a cache
-- that reloaded then would keep the old value.
INSERT INTO "settings_version" ("id", "n") VALUES (1, 0);
--> statement-breakpoint
CREATE FUNCTION "bump_settings_version"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "settings_version" SET "n" = "n" + 1 WHERE "id" = 1;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "api_keys_settings" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "api_keys"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
--> statement-breakpoint
CREATE TRIGGER "mail_orders_settings" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "mail_orders"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
--> statement-breakpoint
CREATE TRIGGER "order_senders_settings" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "order_senders"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
--> statement-breakpoint
CREATE TRIGGER "deny_rules_settings" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "deny_rules"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
--> statement-breakpoint
CREATE TRIGGER "block_list_settings" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "block_list"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
--> statement-breakpoint
CREATE TRIGGER "traps_settings" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "traps"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
--> statement-breakpoint
CREATE TRIGGER "sending_domains_settings" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "sending_domains"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
--> statement-breakpoint
CREATE TRIGGER "dkim_keys_settings" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "dkim_keys"
  FOR EACH STATEMENT EXECUTE FUNCTION "bump_settings_version"();
