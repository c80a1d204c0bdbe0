DROP INDEX `messages_order_time`;--> statement-breakpoint
DROP INDEX `messages_order_from`;--> statement-breakpoint
DROP INDEX `messages_order_origin`;--> statement-breakpoint
DROP INDEX `messages_order_subject`;--> statement-breakpoint
DROP INDEX `messages_order_header_from`;--> statement-breakpoint
DROP INDEX `messages_order_reply_to`;--> statement-breakpoint
ALTER TABLE `messages` ADD `rcpt_count` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
UPDATE `messages` SET `rcpt_count` = (SELECT COUNT(*) FROM `deliveries` WHERE `deliveries`.`message_id` = `messages`.`id`);--> statement-breakpoint
CREATE INDEX `messages_order_time` ON `messages` (`order_id`,`time`,`id`,`rcpt_count`);--> statement-breakpoint
CREATE INDEX `messages_order_from` ON `messages` (`order_id`,`env_from`,`id`,`rcpt_count`);--> statement-breakpoint
CREATE INDEX `messages_order_origin` ON `messages` (`order_id`,`origin`,`id`,`rcpt_count`);--> statement-breakpoint
CREATE INDEX `messages_order_subject` ON `messages` (`order_id`,`subject`,`id`,`rcpt_count`);--> statement-breakpoint
CREATE INDEX `messages_order_header_from` ON `messages` (`order_id`,`header_from`,`id`,`rcpt_count`);--> statement-breakpoint
CREATE INDEX `messages_order_reply_to` ON `messages` (`order_id`,`reply_to`,`id`,`rcpt_count`);