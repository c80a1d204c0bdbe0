PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_message_bodies` (
	`message_id` integer NOT NULL,
	`part` integer DEFAULT 0 NOT NULL,
	`raw` blob NOT NULL,
	PRIMARY KEY(`message_id`, `part`),
	FOREIGN KEY (`message_id`) REFERENCES `messages`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
INSERT INTO `__new_message_bodies`("message_id", "part", "raw") SELECT "message_id", 0, "raw" FROM `message_bodies`;--> statement-breakpoint
DROP TABLE `message_bodies`;--> statement-breakpoint
ALTER TABLE `__new_message_bodies` RENAME TO `message_bodies`;--> statement-breakpoint
PRAGMA foreign_keys=ON;