-- The suppression list as getSuppressions shows it: the message whose bounce put a recipient on it
-- (null for entries from before, and for the operator's), and an index to page an account's
-- suppressed recipients newest first.
ALTER TABLE `block_list` ADD `txid` text;--> statement-breakpoint
CREATE INDEX `block_list_account_kind_created` ON `block_list` (`account_id`,`kind`,`created_at`);
