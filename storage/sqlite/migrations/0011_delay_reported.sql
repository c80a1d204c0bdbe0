-- Whether the sender of a recipient's message was sent its one `delayed` report (RFC 3464), set in
-- the commit that queues that report: after a restart or on another node it is never sent twice.
ALTER TABLE `deliveries` ADD `delay_reported` integer DEFAULT 0 NOT NULL;