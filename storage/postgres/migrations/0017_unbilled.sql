DROP INDEX "messages_sandbox_order_time";--> statement-breakpoint
CREATE INDEX "messages_unbilled_order_time" ON "messages" USING btree ("order_id","time") WHERE sandbox OR interface = 'report';