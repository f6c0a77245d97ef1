-- Keys that put time first, so a compaction appends instead of touching one
-- page per series in every table it writes (docs/store.md, "Flash wear").
--
-- `raw_chunk`: the index by series gives way to one by ten-minute window of
-- the chunk's start, then series: the chunks one compaction writes all start
-- in the same window or two, so their index entries go to the end of the
-- index. A reader looks a series up window by window (store/chunks.rs).
DROP INDEX raw_chunk_by_series;
CREATE INDEX raw_chunk_by_window ON raw_chunk (start_ts / 600000, series, start_ts);

-- The newest compacted sample of each series, which the index by series used
-- to find: one small row per series, rewritten by each compaction. Filled
-- from the hour rollups, which hold the newest sample of every hour.
CREATE TABLE series_last (
    series INTEGER PRIMARY KEY,
    ts     INTEGER NOT NULL,
    value  REAL    NOT NULL
);
INSERT INTO series_last (series, ts, value)
    SELECT r.series, r.bucket + r.last_off, r.last_v
    FROM rollup_1h r
    WHERE r.bucket = (SELECT max(bucket) FROM rollup_1h WHERE series = r.series);

-- The rollups keyed by (bucket, series): a compaction's new periods go to the
-- end of the table; the periods it extends are the newest, all together.
CREATE TABLE rollup_1m_by_time (
    bucket    INTEGER NOT NULL,
    series    INTEGER NOT NULL,
    n         INTEGER NOT NULL,
    total     REAL    NOT NULL,
    lo        REAL    NOT NULL,
    hi        REAL    NOT NULL,
    first_off INTEGER NOT NULL,
    first_v   REAL    NOT NULL,
    last_off  INTEGER NOT NULL,
    last_v    REAL    NOT NULL,
    PRIMARY KEY (bucket, series)
) WITHOUT ROWID;
INSERT INTO rollup_1m_by_time
    SELECT bucket, series, n, total, lo, hi, first_off, first_v, last_off, last_v
    FROM rollup_1m ORDER BY bucket, series;
DROP TABLE rollup_1m;
ALTER TABLE rollup_1m_by_time RENAME TO rollup_1m;

CREATE TABLE rollup_1h_by_time (
    bucket    INTEGER NOT NULL,
    series    INTEGER NOT NULL,
    n         INTEGER NOT NULL,
    total     REAL    NOT NULL,
    lo        REAL    NOT NULL,
    hi        REAL    NOT NULL,
    first_off INTEGER NOT NULL,
    first_v   REAL    NOT NULL,
    last_off  INTEGER NOT NULL,
    last_v    REAL    NOT NULL,
    PRIMARY KEY (bucket, series)
) WITHOUT ROWID;
INSERT INTO rollup_1h_by_time
    SELECT bucket, series, n, total, lo, hi, first_off, first_v, last_off, last_v
    FROM rollup_1h ORDER BY bucket, series;
DROP TABLE rollup_1h;
ALTER TABLE rollup_1h_by_time RENAME TO rollup_1h;
