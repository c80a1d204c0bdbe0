-- The settings that every send reads (API keys, mail orders and their senders, deny rules, the
-- block list, traps) are cached in memory by each connection (storage/sqlite.ts). This counter,
-- bumped by every change to those tables from any connection or process, tells a cache when
-- what it holds may be out of date.
CREATE TABLE `settings_version` (
  `id` integer PRIMARY KEY NOT NULL CHECK (`id` = 1),
  `n` integer NOT NULL
);
--> statement-breakpoint
INSERT INTO `settings_version` (`id`, `n`) VALUES (1, 0);
--> statement-breakpoint
CREATE TRIGGER `api_keys_insert_settings` AFTER INSERT ON `api_keys` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `api_keys_update_settings` AFTER UPDATE ON `api_keys` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `api_keys_delete_settings` AFTER DELETE ON `api_keys` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `mail_orders_insert_settings` AFTER INSERT ON `mail_orders` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `mail_orders_update_settings` AFTER UPDATE ON `mail_orders` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `mail_orders_delete_settings` AFTER DELETE ON `mail_orders` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `order_senders_insert_settings` AFTER INSERT ON `order_senders` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `order_senders_update_settings` AFTER UPDATE ON `order_senders` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `order_senders_delete_settings` AFTER DELETE ON `order_senders` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `deny_rules_insert_settings` AFTER INSERT ON `deny_rules` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `deny_rules_update_settings` AFTER UPDATE ON `deny_rules` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `deny_rules_delete_settings` AFTER DELETE ON `deny_rules` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `block_list_insert_settings` AFTER INSERT ON `block_list` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `block_list_update_settings` AFTER UPDATE ON `block_list` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `block_list_delete_settings` AFTER DELETE ON `block_list` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `traps_insert_settings` AFTER INSERT ON `traps` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `traps_update_settings` AFTER UPDATE ON `traps` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `traps_delete_settings` AFTER DELETE ON `traps` BEGIN
  UPDATE `settings_version` SET `n` = `n` + 1;
END;
