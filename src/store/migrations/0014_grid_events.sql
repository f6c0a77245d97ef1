-- The evidence log of grid-operator events (src/grid_events/store.rs): each
-- limit a grid operator's source held, from its start to its end, with the
-- most the meter saw imported and exported meanwhile. An open event has no
-- end yet. Kept two years, and at most a cap of rows.

CREATE TABLE grid_events (
    id            INTEGER PRIMARY KEY,
    site          TEXT NOT NULL,
    source        TEXT NOT NULL,
    kind          TEXT NOT NULL,
    reference     TEXT NOT NULL,
    limit_w       REAL NOT NULL,
    failsafe      INTEGER NOT NULL,
    start_ms      INTEGER NOT NULL,
    end_ms        INTEGER,
    max_import_w  REAL,
    max_export_w  REAL
);
CREATE INDEX grid_events_start ON grid_events (start_ms);
