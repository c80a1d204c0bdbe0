-- The foreign keys of the two tables written at every send and every outcome: each check is a
-- query PostgreSQL plans once per connection, and a plan made while messages was small scanned it
-- whole for every row inserted, ever slower as the log grew (2.8 ms a row after 25,000 messages).
-- Bodies and deliveries are only inserted with their message, which is never deleted.
ALTER TABLE "deliveries" DROP CONSTRAINT "deliveries_message_id_messages_id_fk";
--> statement-breakpoint
ALTER TABLE "message_bodies" DROP CONSTRAINT "message_bodies_message_id_messages_id_fk";
