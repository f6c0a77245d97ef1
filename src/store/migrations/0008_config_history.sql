-- The history of configuration changes made through the operations channel
-- (src/ops/config_history.rs): one row per config.put operation, written
-- when it is refused or written and again when its trial ends (applied,
-- rolled_back, abandoned). The newest 200 rows are kept.

CREATE TABLE config_history (
    op_id      TEXT    PRIMARY KEY,
    at_ms      INTEGER NOT NULL,
    transport  TEXT    NOT NULL,  -- http, mqtt
    caller     TEXT    NOT NULL,  -- the token's name, or mqtt / anonymous
    old_sha256 TEXT    NOT NULL,
    new_sha256 TEXT    NOT NULL,  -- empty when refused before a text was made
    result     TEXT    NOT NULL,  -- pending, applied, rolled_back, refused, abandoned
    reason     TEXT,
    version    INTEGER            -- the version an applied change made
) WITHOUT ROWID;

CREATE INDEX config_history_by_time ON config_history (at_ms);
