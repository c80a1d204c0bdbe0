CREATE TABLE `servers` (
	`id` text PRIMARY KEY NOT NULL,
	`node` text NOT NULL,
	`url` text NOT NULL,
	`delivery` text NOT NULL,
	`beat_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `servers_beat` ON `servers` (`beat_at`);