-- Whether a configuration change applied live, without a restart
-- (src/ops/config_history.rs, config::live_change). Earlier rows restarted.

ALTER TABLE config_history ADD COLUMN live INTEGER NOT NULL DEFAULT 0;
