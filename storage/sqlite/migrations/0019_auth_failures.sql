CREATE TABLE `auth_failures` (
	`client` text PRIMARY KEY NOT NULL,
	`count` integer NOT NULL,
	`since` integer NOT NULL,
	`throttled_until` integer
);
--> statement-breakpoint
CREATE INDEX `auth_failures_since` ON `auth_failures` (`since`);--> statement-breakpoint
-- A throttle that starts drops every connection's cached answer for the client (storage/sqlite/
-- settings-cache.ts); counting a failure below the limit does not, nor does a window that restarts
-- (the old throttle had ended).
CREATE TRIGGER `auth_failures_insert_settings` AFTER INSERT ON `auth_failures`
  WHEN new.throttled_until IS NOT NULL BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `auth_failures_update_settings` AFTER UPDATE OF `throttled_until` ON `auth_failures`
  WHEN new.throttled_until IS NOT NULL AND old.throttled_until IS NOT new.throttled_until BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
