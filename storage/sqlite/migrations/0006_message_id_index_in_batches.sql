-- The trigram index of Message-IDs is no longer written row by row in the transaction of each
-- accepted message (that cost more than the rest of the insert together). It is brought up to
-- date in batches: shortly after messages are queued, and before every messageId search (see
-- storage/sqlite-mail.ts). Its high-water mark is the largest id in its docsize table.
DROP TRIGGER `messages_fts_insert`;
--> statement-breakpoint
-- A row not yet indexed must not be deleted from the index.
DROP TRIGGER `messages_fts_delete`;
--> statement-breakpoint
CREATE TRIGGER `messages_fts_delete` AFTER DELETE ON `messages`
WHEN old.message_id IS NOT NULL AND old.id <= (SELECT COALESCE(MAX(id), 0) FROM `messages_fts_docsize`) BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, message_id) VALUES ('delete', old.id, old.message_id);
END;
