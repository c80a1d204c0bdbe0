-- Sandbox mail is not billed: the usage of a billing cycle is its messages less its sandbox ones,
-- counted from this index of sandbox messages alone (docs/api.md#the-sandbox).
CREATE INDEX `messages_sandbox_order_time` ON `messages` (`order_id`,`time`) WHERE sandbox = 1;
