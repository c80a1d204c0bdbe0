-- Every delivery attempt (the delivery row keeps the last), and the volume index: counts per mail
-- order and UTC hour. Both without a rowid (drizzle's schema cannot say so): their primary key is
-- the table, one b-tree to write instead of two.
CREATE TABLE `delivery_attempts` (
	`delivery_id` integer NOT NULL,
	`attempt` integer NOT NULL,
	`time` integer NOT NULL,
	`state` text NOT NULL,
	`code` integer,
	`response` text,
	`mx_hostname` text,
	`mx_address` text,
	`tls` integer,
	`next_attempt_at` integer,
	`suppressed` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`delivery_id`, `attempt`)
) WITHOUT ROWID;
--> statement-breakpoint
CREATE TABLE `volume_hours` (
	`order_id` integer NOT NULL,
	`hour_start` integer NOT NULL,
	`accepted` integer DEFAULT 0 NOT NULL,
	`delivered` integer DEFAULT 0 NOT NULL,
	`deferred` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`refused` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`order_id`, `hour_start`)
) WITHOUT ROWID;
--> statement-breakpoint
-- The volume of the log as it stands, so that an upgraded relay's charts start full: recipients
-- accepted in their message's hour; each recipient's outcome so far, and the deferrals its count of
-- attempts implies (every attempt before a final one was deferred), in the same hour, since when
-- they happened was not kept. Refusals were not kept either.
INSERT INTO `volume_hours` (`order_id`, `hour_start`, `accepted`, `delivered`, `deferred`, `failed`)
SELECT `order_id`, `hour_start`, SUM(`accepted`), SUM(`delivered`), SUM(`deferred`), SUM(`failed`) FROM (
  SELECT `order_id`, (`time` / 3600) * 3600000 AS `hour_start`, SUM(`rcpt_count`) AS `accepted`,
    0 AS `delivered`, 0 AS `deferred`, 0 AS `failed`
  FROM `messages` GROUP BY `order_id`, `time` / 3600
  UNION ALL
  SELECT d.`order_id`, (m.`time` / 3600) * 3600000, 0, SUM(d.`state` = 'delivered'),
    SUM(CASE WHEN d.`state` IN ('delivered', 'failed') THEN MAX(d.`attempts` - 1, 0) ELSE d.`attempts` END),
    SUM(d.`state` = 'failed')
  FROM `deliveries` d JOIN `messages` m ON m.`id` = d.`message_id` WHERE d.`attempts` > 0 OR d.`state` = 'failed'
  GROUP BY d.`order_id`, m.`time` / 3600
) GROUP BY `order_id`, `hour_start`;
