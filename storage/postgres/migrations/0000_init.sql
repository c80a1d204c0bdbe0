CREATE TABLE "accounts" (
	"id" serial PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"currency" text NOT NULL,
	"price_base" double precision NOT NULL,
	"price_per_message" double precision NOT NULL,
	"billing_day" integer NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "api_keys" (
	"id" serial PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"prefix" text NOT NULL,
	"hash" text NOT NULL,
	"created_at" bigint NOT NULL,
	"revoked_at" bigint
);
--> statement-breakpoint
CREATE TABLE "block_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"rule" text NOT NULL,
	"env_from" text NOT NULL,
	"message_id" text,
	"subject" text DEFAULT '' NOT NULL,
	"rcpt_to" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "block_list" (
	"account_id" integer NOT NULL,
	"source" text NOT NULL,
	"kind" text NOT NULL,
	"address" text NOT NULL,
	"reason" text NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "block_list_account_id_address_kind_source_pk" PRIMARY KEY("account_id","address","kind","source")
);
--> statement-breakpoint
CREATE TABLE "deliveries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"message_id" bigint NOT NULL,
	"order_id" integer NOT NULL,
	"seq" integer NOT NULL,
	"recipient" text NOT NULL,
	"domain" text NOT NULL,
	"state" text NOT NULL,
	"delivered" smallint DEFAULT 0 NOT NULL,
	"code" integer,
	"response" text,
	"mx_hostname" text,
	"locked" smallint DEFAULT 0 NOT NULL,
	"lock_time" bigint,
	"assigned" text,
	"attempts" integer DEFAULT 0 NOT NULL,
	"delay_reported" boolean DEFAULT false NOT NULL,
	"next_attempt_at" bigint,
	"queued" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "deny_rules" (
	"id" serial PRIMARY KEY NOT NULL,
	"order_id" integer NOT NULL,
	"type" text NOT NULL,
	"data" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "dkim_keys" (
	"domain" text NOT NULL,
	"selector" text NOT NULL,
	"algorithm" text NOT NULL,
	"private_key_enc" text NOT NULL,
	"public_key" text NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "dkim_keys_domain_selector_pk" PRIMARY KEY("domain","selector")
);
--> statement-breakpoint
CREATE TABLE "mail_orders" (
	"id" serial PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"status" text NOT NULL,
	"comment" text,
	"password_enc" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "message_bodies" (
	"message_id" bigint NOT NULL,
	"part" integer DEFAULT 0 NOT NULL,
	"raw" "bytea" NOT NULL,
	CONSTRAINT "message_bodies_message_id_part_pk" PRIMARY KEY("message_id","part")
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"txid" text NOT NULL,
	"account_id" integer NOT NULL,
	"order_id" integer NOT NULL,
	"env_from" text NOT NULL,
	"header_from" text,
	"reply_to" text,
	"subject" text,
	"message_id" text,
	"origin" text NOT NULL,
	"transtype" text NOT NULL,
	"interface" text NOT NULL,
	"sending_zone" text NOT NULL,
	"body_size" integer NOT NULL,
	"rcpt_to" text NOT NULL,
	"rcpt_count" integer DEFAULT 1 NOT NULL,
	"time" bigint NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "order_senders" (
	"order_id" integer NOT NULL,
	"pattern" text NOT NULL,
	CONSTRAINT "order_senders_order_id_pattern_pk" PRIMARY KEY("order_id","pattern")
);
--> statement-breakpoint
CREATE TABLE "sending_domains" (
	"domain" text PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "settings_version" (
	"id" integer PRIMARY KEY NOT NULL,
	"n" bigint NOT NULL,
	CONSTRAINT "settings_version_one_row" CHECK ("settings_version"."id" = 1)
);
--> statement-breakpoint
CREATE TABLE "traps" (
	"pattern" text PRIMARY KEY NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "block_events" ADD CONSTRAINT "block_events_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "block_list" ADD CONSTRAINT "block_list_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "deliveries" ADD CONSTRAINT "deliveries_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "deny_rules" ADD CONSTRAINT "deny_rules_order_id_mail_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."mail_orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "dkim_keys" ADD CONSTRAINT "dkim_keys_domain_sending_domains_domain_fk" FOREIGN KEY ("domain") REFERENCES "public"."sending_domains"("domain") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mail_orders" ADD CONSTRAINT "mail_orders_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_bodies" ADD CONSTRAINT "message_bodies_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_order_id_mail_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."mail_orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "order_senders" ADD CONSTRAINT "order_senders_order_id_mail_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."mail_orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sending_domains" ADD CONSTRAINT "sending_domains_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_hash" ON "api_keys" USING btree ("hash");--> statement-breakpoint
CREATE INDEX "api_keys_account" ON "api_keys" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "block_events_account" ON "block_events" USING btree ("account_id","rule","created_at");--> statement-breakpoint
CREATE INDEX "block_events_from" ON "block_events" USING btree ("account_id","env_from","rule","subject","created_at");--> statement-breakpoint
CREATE INDEX "block_events_created" ON "block_events" USING btree ("created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "deliveries_message_seq" ON "deliveries" USING btree ("message_id","seq");--> statement-breakpoint
CREATE INDEX "deliveries_order_recipient" ON "deliveries" USING btree ("order_id","recipient","message_id");--> statement-breakpoint
CREATE INDEX "deliveries_order_mx" ON "deliveries" USING btree ("order_id","mx_hostname","message_id");--> statement-breakpoint
CREATE INDEX "deliveries_order_delivered" ON "deliveries" USING btree ("order_id","delivered","message_id");--> statement-breakpoint
CREATE INDEX "deliveries_due" ON "deliveries" USING btree ("next_attempt_at","id") WHERE next_attempt_at IS NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "deny_rules_unique" ON "deny_rules" USING btree ("order_id","type","data");--> statement-breakpoint
CREATE INDEX "mail_orders_account" ON "mail_orders" USING btree ("account_id","status");--> statement-breakpoint
CREATE UNIQUE INDEX "messages_txid" ON "messages" USING btree ("txid");--> statement-breakpoint
CREATE INDEX "messages_order" ON "messages" USING btree ("order_id","id","rcpt_count");--> statement-breakpoint
CREATE INDEX "messages_order_time" ON "messages" USING btree ("order_id","time","id","rcpt_count");--> statement-breakpoint
CREATE INDEX "messages_order_from" ON "messages" USING btree ("order_id","env_from","id","rcpt_count");--> statement-breakpoint
CREATE INDEX "messages_order_origin" ON "messages" USING btree ("order_id","origin","id","rcpt_count");--> statement-breakpoint
CREATE INDEX "messages_order_subject" ON "messages" USING btree ("order_id","subject","id","rcpt_count");--> statement-breakpoint
CREATE INDEX "messages_order_header_from" ON "messages" USING btree ("order_id","header_from","id","rcpt_count");--> statement-breakpoint
CREATE INDEX "messages_order_reply_to" ON "messages" USING btree ("order_id","reply_to","id","rcpt_count");--> statement-breakpoint
CREATE INDEX "sending_domains_account" ON "sending_domains" USING btree ("account_id");