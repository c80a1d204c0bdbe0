CREATE TABLE `dkim_keys` (
	`domain` text NOT NULL,
	`selector` text NOT NULL,
	`algorithm` text NOT NULL,
	`private_key_enc` text NOT NULL,
	`public_key` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`domain`, `selector`),
	FOREIGN KEY (`domain`) REFERENCES `sending_domains`(`domain`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `sending_domains` (
	`domain` text PRIMARY KEY NOT NULL,
	`account_id` integer NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `sending_domains_account` ON `sending_domains` (`account_id`);--> statement-breakpoint
-- Signing reads the sending domains and their keys on every send from the settings cache
-- (migration 0008): their changes count as settings changes, so that a `domain add` from the
-- command line applies to a running server from its next message.
CREATE TRIGGER `sending_domains_insert_settings` AFTER INSERT ON `sending_domains` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `sending_domains_update_settings` AFTER UPDATE ON `sending_domains` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `sending_domains_delete_settings` AFTER DELETE ON `sending_domains` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `dkim_keys_insert_settings` AFTER INSERT ON `dkim_keys` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `dkim_keys_update_settings` AFTER UPDATE ON `dkim_keys` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `dkim_keys_delete_settings` AFTER DELETE ON `dkim_keys` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
