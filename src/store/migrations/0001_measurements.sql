-- Measurements: series, raw samples, minute and hour rollups.
--
-- A series is one (device reference, property). Its id is assigned once and never
-- reused, so every other table stores the small integer, not the strings.
CREATE TABLE series (
    id       INTEGER PRIMARY KEY,
    device   TEXT NOT NULL,
    property TEXT NOT NULL,
    UNIQUE (device, property)
);

-- One row per stored sample, clustered on (series, ts): a time-range read of one
-- series is one contiguous b-tree scan. WITHOUT ROWID keeps the key in the table
-- itself (no second index). Integral REAL values are stored as small integers by
-- SQLite, which keeps whole-watt readings at a few bytes.
CREATE TABLE raw (
    series INTEGER NOT NULL,
    ts     INTEGER NOT NULL, -- epoch ms
    value  REAL    NOT NULL,
    PRIMARY KEY (series, ts)
) WITHOUT ROWID;

-- Samples committed but not yet compacted into `raw` and the rollups. Keyed by
-- time first, so a small commit (one sample of each of hundreds of series) appends
-- to the end of one b-tree instead of dirtying one `raw` page per series: that is
-- what keeps a 1 s flush interval from wearing out the flash. The writer moves
-- these rows into `raw` every minute (and at start and shutdown); readers add
-- them to what `raw` and the rollups say. A (series, ts) is never in both.
CREATE TABLE recent (
    ts     INTEGER NOT NULL,
    series INTEGER NOT NULL,
    value  REAL    NOT NULL,
    PRIMARY KEY (ts, series)
) WITHOUT ROWID;

-- Rollups: one row per series and whole period (minute, hour) holding at least
-- one sample. `bucket` is the period start (epoch ms, aligned to the period);
-- first/last keep their time as an offset (ms) from `bucket` so that later
-- samples of the same period merge correctly.
CREATE TABLE rollup_1m (
    series    INTEGER NOT NULL,
    bucket    INTEGER NOT NULL,
    n         INTEGER NOT NULL,
    total     REAL    NOT NULL,
    lo        REAL    NOT NULL,
    hi        REAL    NOT NULL,
    first_off INTEGER NOT NULL,
    first_v   REAL    NOT NULL,
    last_off  INTEGER NOT NULL,
    last_v    REAL    NOT NULL,
    PRIMARY KEY (series, bucket)
) WITHOUT ROWID;

CREATE TABLE rollup_1h (
    series    INTEGER NOT NULL,
    bucket    INTEGER NOT NULL,
    n         INTEGER NOT NULL,
    total     REAL    NOT NULL,
    lo        REAL    NOT NULL,
    hi        REAL    NOT NULL,
    first_off INTEGER NOT NULL,
    first_v   REAL    NOT NULL,
    last_off  INTEGER NOT NULL,
    last_v    REAL    NOT NULL,
    PRIMARY KEY (series, bucket)
) WITHOUT ROWID;
