CREATE TABLE `mcp_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` integer NOT NULL,
	`used_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `mcp_sessions_account` ON `mcp_sessions` (`account_id`,`used_at`);--> statement-breakpoint
CREATE INDEX `mcp_sessions_used` ON `mcp_sessions` (`used_at`);