-- Webhooks (Standard Webhooks) and their outbox. Which webhooks an account has is read at every
-- accepted message and every delivery outcome, from the settings cache: adding, deleting or
-- disabling one bumps the settings counter (migration 0008). A failed attempt's error does not:
-- it would empty every connection's cache at each failure of a dead endpoint.
CREATE TABLE `webhook_outbox` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`webhook_id` integer NOT NULL,
	`event_id` text NOT NULL,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`created_at` integer NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer NOT NULL,
	`locked` integer DEFAULT 0 NOT NULL,
	`lock_time` integer,
	`assigned` text,
	FOREIGN KEY (`webhook_id`) REFERENCES `webhooks`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `webhook_outbox_due` ON `webhook_outbox` (`next_attempt_at`);--> statement-breakpoint
CREATE INDEX `webhook_outbox_webhook` ON `webhook_outbox` (`webhook_id`);--> statement-breakpoint
CREATE TABLE `webhooks` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account_id` integer NOT NULL,
	`url` text NOT NULL,
	`events` text NOT NULL,
	`description` text,
	`secret_enc` text NOT NULL,
	`created_at` integer NOT NULL,
	`failing_since` integer,
	`last_error` text,
	`last_error_at` integer,
	`disabled_at` integer,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `webhooks_account` ON `webhooks` (`account_id`);
--> statement-breakpoint
CREATE TRIGGER `webhooks_insert_settings` AFTER INSERT ON `webhooks` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `webhooks_update_settings` AFTER UPDATE OF `events`, `disabled_at` ON `webhooks` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `webhooks_delete_settings` AFTER DELETE ON `webhooks` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
