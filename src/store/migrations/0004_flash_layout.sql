-- A layout that spares the flash: samples are staged in a ring of fixed-size
-- slots rewritten in place (one page per commit), and kept at rest as encoded
-- chunks of one series (about 3 bytes a sample instead of a 22-byte row), so
-- the bytes written per sample stay close to the data itself. See
-- docs/store.md, "Flash wear".
--
-- The older tables stay: `raw` rows are read and expired as before but no
-- longer written; `recent` rows are compacted into `raw_chunk` at the next
-- start and stay empty.

-- The staging ring. `body` is a fixed-size blob: the commit's sequence number,
-- a sample count, a base time, then the encoded samples (store/stage.rs).
CREATE TABLE stage_slot (
    slot INTEGER PRIMARY KEY,
    body BLOB    NOT NULL
);

-- Raw samples of one series from `start_ts` to `end_ts` (epoch ms, both
-- included; less than an hour apart), `n` of them, encoded in `body`
-- (store/codec.rs).
CREATE TABLE raw_chunk (
    id       INTEGER PRIMARY KEY,
    series   INTEGER NOT NULL,
    start_ts INTEGER NOT NULL,
    end_ts   INTEGER NOT NULL,
    n        INTEGER NOT NULL,
    body     BLOB    NOT NULL
);
CREATE INDEX raw_chunk_by_series ON raw_chunk (series, start_ts, end_ts);
-- Retention deletes the chunks that ended first, all series together: whole
-- pages of the table are freed instead of each being rewritten series by
-- series. Compaction appends to the end of this index.
CREATE INDEX raw_chunk_by_end ON raw_chunk (end_ts);

-- Small counters of the store itself: `stage_compacted` is the newest staging
-- sequence number already moved into `raw_chunk` and the rollups.
CREATE TABLE store_state (
    key   TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
