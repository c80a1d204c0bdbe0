-- Sandbox keys and orders (docs/api.md#the-sandbox): what they send runs the whole pipeline but
-- never leaves the machine. A message carries the flag to the delivery worker, which records its
-- outcomes without a connection. Every existing key, order and message is real: 0.
ALTER TABLE `api_keys` ADD `sandbox` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `mail_orders` ADD `sandbox` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `messages` ADD `sandbox` integer DEFAULT 0 NOT NULL;
