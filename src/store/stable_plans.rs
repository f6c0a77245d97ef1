//! Query plans that do not depend on the values bound to a statement.
//!
//! By default SQLite marks a prepared statement for a new plan when a newly
//! bound value could change the plan's estimates (among others an equality's
//! value moving between 0 or 1 and any other integer, a `LIMIT ?`, a
//! `LIKE ?`), and parses and plans it again at its next step. The store's
//! hot statements are cached and bound again for every series: in the MQTT
//! record test (`a_flood_of_unique_get_requests_leaves_the_history_untouched`)
//! 47 % of the CPU samples were SQLite preparing the writer's duplicate check
//! (`chunks::contains`) again. The store's statements are written for the
//! plans they get (the window index, `chunks.rs`), so a plan is made once,
//! from the statement's text alone (SQLite's query planner stability
//! guarantee). The same test binary built with and without it, two runs
//! each: 18 CPU-seconds instead of 42 to 44, and 10 s instead of 26 to 27.
//! (An earlier run without it took 20 CPU-seconds: how often a binding
//! crosses 0 or 1 depends on which series got those ids, which the order of
//! the first polls decides.)
//!
//! Must not: depend on statistics (the store runs no `ANALYZE`).

use rusqlite::config::DbConfig;
use rusqlite::Connection;

/// Plans from the text alone, on every connection the store opens.
pub(crate) fn enable(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map(|_| ())
}
