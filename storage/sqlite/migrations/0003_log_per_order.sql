CREATE TABLE `order_counts` (
	`order_id` integer PRIMARY KEY NOT NULL,
	`messages` integer NOT NULL,
	`deliveries` integer NOT NULL
);
--> statement-breakpoint
DROP INDEX `deliveries_recipient`;--> statement-breakpoint
DROP INDEX `deliveries_mx`;--> statement-breakpoint
DROP INDEX `deliveries_delivered`;--> statement-breakpoint
ALTER TABLE `deliveries` ADD `order_id` integer NOT NULL DEFAULT 0;--> statement-breakpoint
UPDATE `deliveries` SET `order_id` = (SELECT `order_id` FROM `messages` WHERE `messages`.`id` = `deliveries`.`message_id`);--> statement-breakpoint
INSERT INTO `order_counts` (`order_id`, `messages`, `deliveries`)
  SELECT m.order_id, COUNT(DISTINCT m.id), COUNT(*) FROM `messages` m JOIN `deliveries` d ON d.message_id = m.id GROUP BY m.order_id;--> statement-breakpoint
CREATE INDEX `deliveries_order_recipient` ON `deliveries` (`order_id`,`recipient`,`message_id`);--> statement-breakpoint
CREATE INDEX `deliveries_order_mx` ON `deliveries` (`order_id`,`mx_hostname`,`message_id`);--> statement-breakpoint
CREATE INDEX `deliveries_order_delivered` ON `deliveries` (`order_id`,`delivered`,`message_id`);