CREATE TABLE `inbound_bodies` (
	`message_id` text NOT NULL,
	`part` integer NOT NULL,
	`raw` blob NOT NULL,
	PRIMARY KEY(`message_id`, `part`),
	FOREIGN KEY (`message_id`) REFERENCES `inbound_messages`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `inbound_messages` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` integer NOT NULL,
	`inbox_id` integer NOT NULL,
	`thread_id` text NOT NULL,
	`message_id` text,
	`in_reply_to` text,
	`mail_from` text NOT NULL,
	`remote_address` text NOT NULL,
	`received_at` integer NOT NULL,
	`from_address` text,
	`from_name` text,
	`subject` text,
	`text` text,
	`html` text,
	`extracted_text` text,
	`meta` text NOT NULL,
	`auth` text NOT NULL,
	`size` integer NOT NULL,
	`read` integer DEFAULT false NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`inbox_id`) REFERENCES `inboxes`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `inbound_messages_account_received` ON `inbound_messages` (`account_id`,`received_at`);--> statement-breakpoint
CREATE INDEX `inbound_messages_inbox_received` ON `inbound_messages` (`inbox_id`,`received_at`);--> statement-breakpoint
CREATE INDEX `inbound_messages_thread` ON `inbound_messages` (`account_id`,`thread_id`,`received_at`);--> statement-breakpoint
CREATE INDEX `inbound_messages_message_id` ON `inbound_messages` (`account_id`,`message_id`);--> statement-breakpoint
CREATE INDEX `inbound_messages_received` ON `inbound_messages` (`received_at`);--> statement-breakpoint
CREATE TABLE `inboxes` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account_id` integer NOT NULL,
	`address` text NOT NULL,
	`domain` text NOT NULL,
	`created_at` integer NOT NULL,
	`stored_bytes` integer DEFAULT 0 NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `inboxes_address` ON `inboxes` (`address`);--> statement-breakpoint
CREATE INDEX `inboxes_account` ON `inboxes` (`account_id`);--> statement-breakpoint
CREATE TABLE `receiving_domains` (
	`domain` text PRIMARY KEY NOT NULL,
	`account_id` integer NOT NULL,
	`catch_all` integer DEFAULT false NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`domain`) REFERENCES `sending_domains`(`domain`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `receiving_domains_account` ON `receiving_domains` (`account_id`);--> statement-breakpoint
CREATE TABLE `sent_threads` (
	`message_row_id` integer PRIMARY KEY NOT NULL,
	`account_id` integer NOT NULL,
	`thread_id` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sent_threads_thread` ON `sent_threads` (`account_id`,`thread_id`);--> statement-breakpoint
CREATE INDEX `messages_message_id` ON `messages` (`message_id`) WHERE message_id IS NOT NULL;