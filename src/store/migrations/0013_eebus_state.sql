-- The EEBus node's limitation use cases as last in force (src/eebus/store.rs):
-- per site and use case (lpc, lpp) the state, whether the failsafe held and
-- since when, the box's active limit with its end, and the failsafe values
-- the box last wrote. A restart resumes from here, never from "no limit".

CREATE TABLE eebus_state (
    site                TEXT NOT NULL,
    use_case            TEXT NOT NULL,
    state               TEXT NOT NULL,
    failsafe            INTEGER NOT NULL,
    since_ms            INTEGER NOT NULL,
    limit_w             REAL,
    limit_until_ms      INTEGER,
    failsafe_w          REAL NOT NULL,
    failsafe_duration_s INTEGER NOT NULL,
    saved_ms            INTEGER NOT NULL,
    PRIMARY KEY (site, use_case)
) WITHOUT ROWID;
