CREATE TABLE `sts_policies` (
	`domain` text PRIMARY KEY NOT NULL,
	`policy_id` text NOT NULL,
	`mode` text NOT NULL,
	`mx` text NOT NULL,
	`max_age` integer NOT NULL,
	`text` text NOT NULL,
	`fetched_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `tls_reports` (
	`domain` text NOT NULL,
	`day` integer NOT NULL,
	`node` text NOT NULL,
	`claimed_at` integer NOT NULL,
	PRIMARY KEY(`domain`, `day`)
);
--> statement-breakpoint
CREATE INDEX `tls_reports_day` ON `tls_reports` (`day`);--> statement-breakpoint
CREATE TABLE `tls_result_counts` (
	`domain` text NOT NULL,
	`day` integer NOT NULL,
	`policy_type` text NOT NULL,
	`result_type` text NOT NULL,
	`mx_host` text NOT NULL,
	`count` integer NOT NULL,
	PRIMARY KEY(`domain`, `day`, `policy_type`, `result_type`, `mx_host`)
);
--> statement-breakpoint
ALTER TABLE `delivery_attempts` ADD `tls_policy` text;--> statement-breakpoint
ALTER TABLE `delivery_attempts` ADD `tls_policy_domain` text;--> statement-breakpoint
ALTER TABLE `delivery_attempts` ADD `cert_valid` integer;