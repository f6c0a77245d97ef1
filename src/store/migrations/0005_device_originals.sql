-- What each steered device's control registers held when the agent first
-- found them (the installer's values), written back when steering releases
-- the device. `steered` is 1 while the agent may have left values of its own
-- there: a start that finds it so keeps these words instead of reading the
-- agent's own as the device's.

CREATE TABLE device_originals (
    device   TEXT    PRIMARY KEY,  -- the device's reference
    points   TEXT    NOT NULL,     -- JSON [[addr, [word, ...]], ...]
    found_ms INTEGER NOT NULL,
    steered  INTEGER NOT NULL
) WITHOUT ROWID;
