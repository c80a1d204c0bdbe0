CREATE TABLE `oauth_clients` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text,
	`redirect_uris` text NOT NULL,
	`registered_from` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `oauth_clients_from` ON `oauth_clients` (`registered_from`,`created_at`);--> statement-breakpoint
CREATE INDEX `oauth_clients_created` ON `oauth_clients` (`created_at`);--> statement-breakpoint
CREATE TABLE `oauth_codes` (
	`hash` text PRIMARY KEY NOT NULL,
	`account_id` integer NOT NULL,
	`client_id` text NOT NULL,
	`client_name` text,
	`redirect_uri` text NOT NULL,
	`code_challenge` text NOT NULL,
	`scopes` text NOT NULL,
	`resource` text NOT NULL,
	`sandbox` integer DEFAULT false NOT NULL,
	`expires_at` integer NOT NULL,
	`used_at` integer,
	`grant_id` integer,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `oauth_codes_expires` ON `oauth_codes` (`expires_at`);--> statement-breakpoint
CREATE TABLE `oauth_grants` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account_id` integer NOT NULL,
	`client_id` text NOT NULL,
	`client_name` text,
	`scopes` text NOT NULL,
	`resource` text NOT NULL,
	`sandbox` integer DEFAULT false NOT NULL,
	`created_at` integer NOT NULL,
	`refreshed_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `oauth_grants_account` ON `oauth_grants` (`account_id`);--> statement-breakpoint
CREATE INDEX `oauth_grants_client` ON `oauth_grants` (`client_id`);--> statement-breakpoint
CREATE TABLE `oauth_tokens` (
	`hash` text PRIMARY KEY NOT NULL,
	`grant_id` integer NOT NULL,
	`kind` text NOT NULL,
	`expires_at` integer NOT NULL,
	`used_at` integer,
	FOREIGN KEY (`grant_id`) REFERENCES `oauth_grants`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `oauth_tokens_grant` ON `oauth_tokens` (`grant_id`);--> statement-breakpoint
CREATE INDEX `oauth_tokens_expires` ON `oauth_tokens` (`expires_at`);