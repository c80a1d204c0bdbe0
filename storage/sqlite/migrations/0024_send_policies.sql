CREATE TABLE `holds` (
	`txid` text PRIMARY KEY NOT NULL,
	`message_row_id` integer NOT NULL,
	`account_id` integer NOT NULL,
	`order_id` integer NOT NULL,
	`holder` text NOT NULL,
	`holder_label` text NOT NULL,
	`reason` text NOT NULL,
	`status` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`decided_at` integer,
	`decided_by` text,
	`approval_url` text NOT NULL,
	`elicitation_id` text,
	`elicitation_state` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `holds_message` ON `holds` (`message_row_id`);--> statement-breakpoint
CREATE UNIQUE INDEX `holds_elicitation` ON `holds` (`elicitation_id`);--> statement-breakpoint
CREATE INDEX `holds_account` ON `holds` (`account_id`,`status`,`created_at`);--> statement-breakpoint
CREATE INDEX `holds_expires` ON `holds` (`expires_at`) WHERE status = 'held';--> statement-breakpoint
CREATE TABLE `send_counts` (
	`holder` text NOT NULL,
	`period` text NOT NULL,
	`start` integer NOT NULL,
	`count` integer NOT NULL,
	PRIMARY KEY(`holder`, `period`, `start`)
);
--> statement-breakpoint
ALTER TABLE `api_keys` ADD `send_policy` text;--> statement-breakpoint
ALTER TABLE `mail_orders` ADD `send_policy` text;--> statement-breakpoint
ALTER TABLE `mcp_sessions` ADD `elicitation` text;--> statement-breakpoint
ALTER TABLE `oauth_codes` ADD `send_policy` text;--> statement-breakpoint
ALTER TABLE `oauth_grants` ADD `send_policy` text;--> statement-breakpoint
CREATE INDEX `deliveries_order_domain` ON `deliveries` (`order_id`,`domain`);