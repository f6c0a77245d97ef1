-- Site steering: component timelines (replaced per component on every change),
-- the audit log (requests and device writes), and idempotency keys (24 h).

CREATE TABLE steering_timeline (
    site       TEXT    NOT NULL,
    component  TEXT    NOT NULL,   -- ess | curtailment | maximizeGridImport
    from_ms    INTEGER NOT NULL,
    until_ms   INTEGER NOT NULL,
    value      TEXT    NOT NULL,   -- the component's value as JSON
    request_id TEXT    NOT NULL,
    PRIMARY KEY (site, component, from_ms)
) WITHOUT ROWID;

CREATE TABLE steering_audit (
    id     INTEGER PRIMARY KEY,
    site   TEXT    NOT NULL,
    at_ms  INTEGER NOT NULL,
    kind   TEXT    NOT NULL,      -- request | write
    record TEXT    NOT NULL       -- the history entry as JSON
);
CREATE INDEX steering_audit_by_site ON steering_audit (site, at_ms, id);
CREATE INDEX steering_audit_by_time ON steering_audit (at_ms);

CREATE TABLE steering_idempotency (
    caller TEXT    NOT NULL,
    key    TEXT    NOT NULL,
    at_ms  INTEGER NOT NULL,
    answer TEXT    NOT NULL,
    PRIMARY KEY (caller, key)
) WITHOUT ROWID;
