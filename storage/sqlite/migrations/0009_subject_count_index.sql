DROP INDEX `block_events_from`;--> statement-breakpoint
CREATE INDEX `block_events_from` ON `block_events` (`account_id`,`env_from`,`rule`,`subject`,`created_at`);