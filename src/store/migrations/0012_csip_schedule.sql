-- The CSIP-AUS client's schedule as last received (src/csip/store.rs):
-- each site's DER programs with their DefaultDERControl, the events it
-- follows with what it decided for them (randomization, phase), the server
-- time offset, and the Responses not posted yet. A restart in an outage
-- resumes from here, not from "no limit".

CREATE TABLE csip_programs (
    site         TEXT NOT NULL,
    href         TEXT NOT NULL,
    list         TEXT NOT NULL,
    mrid         TEXT NOT NULL,
    primacy      INTEGER NOT NULL,
    -- The default; all NULL when the program has none.
    default_mrid TEXT,
    set_grad_w   INTEGER,
    connect      INTEGER,
    energize     INTEGER,
    max_lim_pct  REAL,
    ramp_s       REAL,
    import_w     REAL,
    export_w     REAL,
    generation_w REAL,
    load_w       REAL,
    storage_w    REAL,
    PRIMARY KEY (site, href)
);

CREATE TABLE csip_events (
    site                 TEXT NOT NULL,
    mrid                 TEXT NOT NULL,
    program              TEXT NOT NULL,
    primacy              INTEGER NOT NULL,
    href                 TEXT,
    description          TEXT,
    reply_to             TEXT,
    response_required    INTEGER NOT NULL,
    creation_s           INTEGER NOT NULL,
    status               INTEGER NOT NULL,
    start_s              INTEGER NOT NULL,
    duration_s           INTEGER NOT NULL,
    randomize_start_s    INTEGER NOT NULL,
    randomize_duration_s INTEGER NOT NULL,
    start_offset_s       INTEGER NOT NULL,
    duration_offset_s    INTEGER NOT NULL,
    phase                TEXT NOT NULL,
    listed               INTEGER NOT NULL,
    connect              INTEGER,
    energize             INTEGER,
    max_lim_pct          REAL,
    ramp_s               REAL,
    import_w             REAL,
    export_w             REAL,
    generation_w         REAL,
    load_w               REAL,
    storage_w            REAL,
    PRIMARY KEY (site, mrid)
);

CREATE TABLE csip_state (
    site      TEXT PRIMARY KEY,
    offset_ms INTEGER NOT NULL,
    saved_ms  INTEGER NOT NULL
);

CREATE TABLE csip_responses (
    site     TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    reply_to TEXT NOT NULL,
    mrid     TEXT NOT NULL,
    status   INTEGER NOT NULL,
    at_s     INTEGER NOT NULL,
    PRIMARY KEY (site, seq)
);
