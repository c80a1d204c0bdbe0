-- Sandbox keys and orders (docs/api.md#the-sandbox): what they send runs the whole pipeline but
-- never leaves the machine. A message carries the flag to the delivery worker, which records its
-- outcomes without a connection. Every existing key, order and message is real: false (a constant
-- default, so the tables are not rewritten).
ALTER TABLE "api_keys" ADD COLUMN "sandbox" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "mail_orders" ADD COLUMN "sandbox" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "sandbox" boolean DEFAULT false NOT NULL;
