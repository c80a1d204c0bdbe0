CREATE TABLE `accounts` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`currency` text NOT NULL,
	`price_base` real NOT NULL,
	`price_per_message` real NOT NULL,
	`billing_day` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `api_keys` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account_id` integer NOT NULL,
	`prefix` text NOT NULL,
	`hash` text NOT NULL,
	`created_at` integer NOT NULL,
	`revoked_at` integer,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `api_keys_hash` ON `api_keys` (`hash`);--> statement-breakpoint
CREATE INDEX `api_keys_account` ON `api_keys` (`account_id`);--> statement-breakpoint
CREATE TABLE `block_events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account_id` integer NOT NULL,
	`rule` text NOT NULL,
	`env_from` text NOT NULL,
	`message_id` text,
	`subject` text DEFAULT '' NOT NULL,
	`rcpt_to` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `block_events_account` ON `block_events` (`account_id`,`rule`,`created_at`);--> statement-breakpoint
CREATE INDEX `block_events_from` ON `block_events` (`account_id`,`env_from`);--> statement-breakpoint
CREATE INDEX `block_events_created` ON `block_events` (`created_at`);--> statement-breakpoint
CREATE TABLE `block_list` (
	`account_id` integer NOT NULL,
	`source` text NOT NULL,
	`kind` text NOT NULL,
	`address` text NOT NULL,
	`reason` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`account_id`, `address`, `kind`, `source`),
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE TABLE `deliveries` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`message_id` integer NOT NULL,
	`seq` integer NOT NULL,
	`recipient` text NOT NULL,
	`domain` text NOT NULL,
	`state` text NOT NULL,
	`delivered` integer DEFAULT 0 NOT NULL,
	`code` integer,
	`response` text,
	`mx_hostname` text,
	`locked` integer DEFAULT 0 NOT NULL,
	`lock_time` text,
	`assigned` text,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer,
	`queued` text NOT NULL,
	FOREIGN KEY (`message_id`) REFERENCES `messages`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `deliveries_message_seq` ON `deliveries` (`message_id`,`seq`);--> statement-breakpoint
CREATE INDEX `deliveries_recipient` ON `deliveries` (`recipient`,`message_id`);--> statement-breakpoint
CREATE INDEX `deliveries_mx` ON `deliveries` (`mx_hostname`,`message_id`);--> statement-breakpoint
CREATE INDEX `deliveries_delivered` ON `deliveries` (`delivered`,`message_id`);--> statement-breakpoint
CREATE INDEX `deliveries_due` ON `deliveries` (`next_attempt_at`) WHERE next_attempt_at IS NOT NULL;--> statement-breakpoint
CREATE TABLE `deny_rules` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`order_id` integer NOT NULL,
	`type` text NOT NULL,
	`data` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`order_id`) REFERENCES `mail_orders`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `deny_rules_unique` ON `deny_rules` (`order_id`,`type`,`data`);--> statement-breakpoint
CREATE TABLE `mail_orders` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account_id` integer NOT NULL,
	`status` text NOT NULL,
	`comment` text,
	`password_enc` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `mail_orders_account` ON `mail_orders` (`account_id`,`status`);--> statement-breakpoint
CREATE TABLE `message_bodies` (
	`message_id` integer PRIMARY KEY NOT NULL,
	`raw` blob NOT NULL,
	FOREIGN KEY (`message_id`) REFERENCES `messages`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE TABLE `messages` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`txid` text NOT NULL,
	`account_id` integer NOT NULL,
	`order_id` integer NOT NULL,
	`env_from` text NOT NULL,
	`header_from` text,
	`reply_to` text,
	`subject` text,
	`message_id` text,
	`origin` text NOT NULL,
	`transtype` text NOT NULL,
	`interface` text NOT NULL,
	`sending_zone` text NOT NULL,
	`body_size` integer NOT NULL,
	`rcpt_to` text NOT NULL,
	`time` integer NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`order_id`) REFERENCES `mail_orders`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `messages_txid` ON `messages` (`txid`);--> statement-breakpoint
CREATE INDEX `messages_order` ON `messages` (`order_id`);--> statement-breakpoint
CREATE INDEX `messages_order_time` ON `messages` (`order_id`,`time`);--> statement-breakpoint
CREATE INDEX `messages_order_from` ON `messages` (`order_id`,`env_from`);--> statement-breakpoint
CREATE INDEX `messages_order_origin` ON `messages` (`order_id`,`origin`);--> statement-breakpoint
CREATE INDEX `messages_order_subject` ON `messages` (`order_id`,`subject`);--> statement-breakpoint
CREATE INDEX `messages_order_header_from` ON `messages` (`order_id`,`header_from`);--> statement-breakpoint
CREATE INDEX `messages_order_reply_to` ON `messages` (`order_id`,`reply_to`);--> statement-breakpoint
CREATE INDEX `messages_account_time` ON `messages` (`account_id`,`time`);--> statement-breakpoint
CREATE TABLE `order_senders` (
	`order_id` integer NOT NULL,
	`pattern` text NOT NULL,
	PRIMARY KEY(`order_id`, `pattern`),
	FOREIGN KEY (`order_id`) REFERENCES `mail_orders`(`id`) ON UPDATE no action ON DELETE no action
);
