CREATE TABLE "inbound_bodies" (
	"message_id" text NOT NULL,
	"part" integer NOT NULL,
	"raw" "bytea" NOT NULL,
	CONSTRAINT "inbound_bodies_message_id_part_pk" PRIMARY KEY("message_id","part")
);
--> statement-breakpoint
CREATE TABLE "inbound_messages" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"inbox_id" integer NOT NULL,
	"thread_id" text NOT NULL,
	"message_id" text,
	"in_reply_to" text,
	"mail_from" text NOT NULL,
	"remote_address" text NOT NULL,
	"received_at" bigint NOT NULL,
	"from_address" text,
	"from_name" text,
	"subject" text,
	"text" text,
	"html" text,
	"extracted_text" text,
	"meta" text NOT NULL,
	"auth" text NOT NULL,
	"size" integer NOT NULL,
	"read" boolean DEFAULT false NOT NULL
);
--> statement-breakpoint
CREATE TABLE "inboxes" (
	"id" serial PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"address" text NOT NULL,
	"domain" text NOT NULL,
	"created_at" bigint NOT NULL,
	"stored_bytes" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "receiving_domains" (
	"domain" text PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"catch_all" boolean DEFAULT false NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sent_threads" (
	"message_row_id" bigint PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"thread_id" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "inbound_bodies" ADD CONSTRAINT "inbound_bodies_message_id_inbound_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."inbound_messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "inbound_messages" ADD CONSTRAINT "inbound_messages_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "inbound_messages" ADD CONSTRAINT "inbound_messages_inbox_id_inboxes_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inboxes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "inboxes" ADD CONSTRAINT "inboxes_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "receiving_domains" ADD CONSTRAINT "receiving_domains_domain_sending_domains_domain_fk" FOREIGN KEY ("domain") REFERENCES "public"."sending_domains"("domain") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "receiving_domains" ADD CONSTRAINT "receiving_domains_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "inbound_messages_account_received" ON "inbound_messages" USING btree ("account_id","received_at");--> statement-breakpoint
CREATE INDEX "inbound_messages_inbox_received" ON "inbound_messages" USING btree ("inbox_id","received_at");--> statement-breakpoint
CREATE INDEX "inbound_messages_thread" ON "inbound_messages" USING btree ("account_id","thread_id","received_at");--> statement-breakpoint
CREATE INDEX "inbound_messages_message_id" ON "inbound_messages" USING btree ("account_id","message_id");--> statement-breakpoint
CREATE INDEX "inbound_messages_received" ON "inbound_messages" USING btree ("received_at");--> statement-breakpoint
CREATE UNIQUE INDEX "inboxes_address" ON "inboxes" USING btree ("address");--> statement-breakpoint
CREATE INDEX "inboxes_account" ON "inboxes" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "receiving_domains_account" ON "receiving_domains" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "sent_threads_thread" ON "sent_threads" USING btree ("account_id","thread_id");--> statement-breakpoint
CREATE INDEX "messages_message_id" ON "messages" USING btree ("message_id") WHERE message_id IS NOT NULL;