CREATE TABLE "mcp_sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" integer NOT NULL,
	"used_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "mcp_sessions" ADD CONSTRAINT "mcp_sessions_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "mcp_sessions_account" ON "mcp_sessions" USING btree ("account_id","used_at");--> statement-breakpoint
CREATE INDEX "mcp_sessions_used" ON "mcp_sessions" USING btree ("used_at");