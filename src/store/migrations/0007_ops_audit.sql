-- The operations channel's audit history (src/ops/audit.rs): one row per
-- operation id, written when it is accepted and again when it ends, so a
-- repeated id is answered from here after a restart and runs nothing again.
-- The newest 1,000 rows are kept.

CREATE TABLE ops_audit (
    id          TEXT    PRIMARY KEY,
    kind        TEXT    NOT NULL,  -- logs, bundle, restart, scan
    args        TEXT    NOT NULL,  -- the arguments as key=value text
    transport   TEXT    NOT NULL,  -- http, mqtt
    caller      TEXT    NOT NULL,  -- the token's name, or mqtt / anonymous
    state       TEXT    NOT NULL,  -- accepted, running, succeeded, failed
    accepted_ms INTEGER NOT NULL,
    finished_ms INTEGER,
    summary     TEXT,
    error       TEXT
) WITHOUT ROWID;

CREATE INDEX ops_audit_by_time ON ops_audit (accepted_ms);
