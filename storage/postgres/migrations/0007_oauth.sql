CREATE TABLE "oauth_clients" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text,
	"redirect_uris" text NOT NULL,
	"registered_from" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "oauth_codes" (
	"hash" text PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"client_id" text NOT NULL,
	"client_name" text,
	"redirect_uri" text NOT NULL,
	"code_challenge" text NOT NULL,
	"scopes" text NOT NULL,
	"resource" text NOT NULL,
	"sandbox" boolean DEFAULT false NOT NULL,
	"expires_at" bigint NOT NULL,
	"used_at" bigint,
	"grant_id" integer
);
--> statement-breakpoint
CREATE TABLE "oauth_grants" (
	"id" serial PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"client_id" text NOT NULL,
	"client_name" text,
	"scopes" text NOT NULL,
	"resource" text NOT NULL,
	"sandbox" boolean DEFAULT false NOT NULL,
	"created_at" bigint NOT NULL,
	"refreshed_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "oauth_tokens" (
	"hash" text PRIMARY KEY NOT NULL,
	"grant_id" integer NOT NULL,
	"kind" text NOT NULL,
	"expires_at" bigint NOT NULL,
	"used_at" bigint
);
--> statement-breakpoint
ALTER TABLE "oauth_codes" ADD CONSTRAINT "oauth_codes_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "oauth_grants" ADD CONSTRAINT "oauth_grants_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "oauth_tokens" ADD CONSTRAINT "oauth_tokens_grant_id_oauth_grants_id_fk" FOREIGN KEY ("grant_id") REFERENCES "public"."oauth_grants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "oauth_clients_from" ON "oauth_clients" USING btree ("registered_from","created_at");--> statement-breakpoint
CREATE INDEX "oauth_clients_created" ON "oauth_clients" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "oauth_codes_expires" ON "oauth_codes" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "oauth_grants_account" ON "oauth_grants" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "oauth_grants_client" ON "oauth_grants" USING btree ("client_id");--> statement-breakpoint
CREATE INDEX "oauth_tokens_grant" ON "oauth_tokens" USING btree ("grant_id");--> statement-breakpoint
CREATE INDEX "oauth_tokens_expires" ON "oauth_tokens" USING btree ("expires_at");