CREATE TABLE `traps` (
	`pattern` text PRIMARY KEY NOT NULL,
	`created_at` integer NOT NULL
);
