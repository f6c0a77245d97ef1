-- The MQTT uplink: the telemetry outbox (one row per device batch, deleted on
-- PUBACK; `seq` is the message's gap-free, never reused sequence number) and
-- the first answer to each RPC id (24 h), for duplicate deliveries.

CREATE TABLE uplink_outbox (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT, -- the message's `seq`
    created_ms INTEGER NOT NULL,                  -- when committed: the age cap's clock
    device     TEXT    NOT NULL,                  -- device reference
    body       BLOB    NOT NULL                   -- uplink/outbox/codec.rs encoding of the samples
);

CREATE TABLE uplink_rpc_seen (
    id       TEXT    PRIMARY KEY,
    at_ms    INTEGER NOT NULL,
    response BLOB    NOT NULL                     -- the first answer's exact payload
);
CREATE INDEX uplink_rpc_seen_at ON uplink_rpc_seen (at_ms);
