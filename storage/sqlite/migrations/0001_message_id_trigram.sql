-- The log's messageId filter is a case-insensitive substring match. A trigram index answers it
-- without scanning every message (patterns of three or more characters).
CREATE VIRTUAL TABLE `messages_fts` USING fts5(message_id, content='messages', content_rowid='id', tokenize='trigram');
--> statement-breakpoint
CREATE TRIGGER `messages_fts_insert` AFTER INSERT ON `messages` WHEN new.message_id IS NOT NULL BEGIN
  INSERT INTO messages_fts(rowid, message_id) VALUES (new.id, new.message_id);
END;
--> statement-breakpoint
CREATE TRIGGER `messages_fts_delete` AFTER DELETE ON `messages` WHEN old.message_id IS NOT NULL BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, message_id) VALUES ('delete', old.id, old.message_id);
END;
