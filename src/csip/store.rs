//! The CSIP-AUS schedule kept in the agent's database (migration
//! `0012_csip_schedule`): what the client last received and decided, so a
//! restart while the server cannot be reached resumes the same control.
//! Saved whole per site, in one transaction of the store's writer, when it
//! changed; read once at start.
//!
//! SQL for the client lives here and in its migration only; the store owns
//! the connection.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, Row};

use super::resource::program::{Control, ControlBase, DefaultControl, EventStatus};
use super::resource::response::ResponseStatus;
use super::schedule::{Phase, ProgramState, Schedule, Tracked};
use crate::store::{StoreError, StoreHandle};

/// A Response waiting to be posted.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    pub reply_to: String,
    pub mrid: String,
    pub status: ResponseStatus,
    /// When it happened, server time, s.
    pub at_s: i64,
}

/// Everything kept of one site's client.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Saved {
    pub schedule: Schedule,
    pub offset_ms: i64,
    pub pending: Vec<Pending>,
}

/// The client's tables, through the store.
#[derive(Clone)]
pub struct CsipStore {
    store: Option<StoreHandle>,
}

impl CsipStore {
    pub fn new(store: StoreHandle) -> CsipStore {
        CsipStore { store: Some(store) }
    }

    /// Keeps nothing (a test's client, or an agent without a store).
    pub fn none() -> CsipStore {
        CsipStore { store: None }
    }

    /// The site's schedule as saved; `None` when nothing was.
    pub async fn load(&self, site: &str) -> Result<Option<Saved>, StoreError> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let site = site.to_string();
        store.read(move |conn: &Connection| read(conn, &site)).await
    }

    /// Replaces the site's saved schedule.
    pub async fn save(&self, site: &str, saved: Saved, now_ms: i64) -> Result<(), StoreError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let site = site.to_string();
        store
            .execute(move |conn: &Connection| write(conn, &site, &saved, now_ms))
            .await
    }
}

const BASE: &str =
    "connect, energize, max_lim_pct, ramp_s, import_w, export_w, generation_w, load_w, storage_w";

fn base_of(r: &Row<'_>, at: usize) -> rusqlite::Result<ControlBase> {
    Ok(ControlBase {
        connect: r.get::<_, Option<bool>>(at)?,
        energize: r.get::<_, Option<bool>>(at + 1)?,
        max_lim_pct: r.get(at + 2)?,
        ramp_s: r.get(at + 3)?,
        import_w: r.get(at + 4)?,
        export_w: r.get(at + 5)?,
        generation_w: r.get(at + 6)?,
        load_w: r.get(at + 7)?,
        storage_target_w: r.get(at + 8)?,
    })
}

fn read(conn: &Connection, site: &str) -> Result<Option<Saved>, StoreError> {
    let state: Option<i64> = conn
        .query_row(
            "SELECT offset_ms FROM csip_state WHERE site = ?1",
            [site],
            |r| r.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    let Some(offset_ms) = state else {
        return Ok(None);
    };
    let mut schedule = Schedule::default();
    schedule.programs = read_programs(conn, site)?;
    schedule.events = read_events(conn, site)?;
    let pending = read_pending(conn, site)?;
    Ok(Some(Saved {
        schedule,
        offset_ms,
        pending,
    }))
}

/// The site's DER programs, by href.
fn read_programs(
    conn: &Connection,
    site: &str,
) -> rusqlite::Result<BTreeMap<String, ProgramState>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT href, list, mrid, primacy, default_mrid, set_grad_w, {BASE} FROM csip_programs WHERE site = ?1"
    ))?;
    let programs = stmt.query_map([site], |r| {
        let default = match r.get::<_, Option<String>>(4)? {
            Some(mrid) => Some(DefaultControl {
                mrid,
                set_grad_w: r.get(5)?,
                base: base_of(r, 6)?,
            }),
            None => None,
        };
        Ok(ProgramState {
            href: r.get(0)?,
            list: r.get(1)?,
            mrid: r.get(2)?,
            primacy: r.get(3)?,
            default,
        })
    })?;
    let mut by_href = BTreeMap::new();
    for p in programs {
        let p = p?;
        by_href.insert(p.href.clone(), p);
    }
    Ok(by_href)
}

/// The site's tracked events, by mRID.
fn read_events(conn: &Connection, site: &str) -> rusqlite::Result<BTreeMap<String, Tracked>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT mrid, program, primacy, href, description, reply_to, response_required, creation_s, status,
                start_s, duration_s, randomize_start_s, randomize_duration_s, start_offset_s, duration_offset_s,
                phase, listed, {BASE}
         FROM csip_events WHERE site = ?1"
    ))?;
    let events = stmt.query_map([site], |r| {
        let status: u8 = r.get(8)?;
        let phase: String = r.get(15)?;
        Ok(Tracked {
            control: Control {
                mrid: r.get(0)?,
                href: r.get(3)?,
                description: r.get(4)?,
                reply_to: r.get(5)?,
                response_required: r.get(6)?,
                creation_s: r.get(7)?,
                status: EventStatus::of_code(status).unwrap_or(EventStatus::Scheduled),
                start_s: r.get(9)?,
                duration_s: r.get(10)?,
                randomize_start_s: r.get(11)?,
                randomize_duration_s: r.get(12)?,
                base: base_of(r, 17)?,
            },
            program: r.get(1)?,
            primacy: r.get(2)?,
            start_offset_s: r.get(13)?,
            duration_offset_s: r.get(14)?,
            // A phase this binary does not know: the event is over.
            phase: Phase::from_wire(&phase).unwrap_or(Phase::Completed),
            listed: r.get(16)?,
        })
    })?;
    let mut by_mrid = BTreeMap::new();
    for e in events {
        let e = e?;
        by_mrid.insert(e.control.mrid.clone(), e);
    }
    Ok(by_mrid)
}

/// The site's Responses waiting to be posted, oldest first (a status this
/// binary does not know is left out).
fn read_pending(conn: &Connection, site: &str) -> rusqlite::Result<Vec<Pending>> {
    let mut stmt = conn.prepare(
        "SELECT reply_to, mrid, status, at_s FROM csip_responses WHERE site = ?1 ORDER BY seq",
    )?;
    let pending = stmt
        .query_map([site], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, u8>(2)?,
                r.get(3)?,
            ))
        })?
        .filter_map(|row| {
            row.map(|(reply_to, mrid, code, at_s)| {
                ResponseStatus::of_code(code).map(|status| Pending {
                    reply_to,
                    mrid,
                    status,
                    at_s,
                })
            })
            .transpose()
        })
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(pending)
}

fn base_params(b: &ControlBase) -> [rusqlite::types::Value; 9] {
    use rusqlite::types::Value;
    let f = |v: Option<f64>| v.map_or(Value::Null, Value::Real);
    let b8 = |v: Option<bool>| v.map_or(Value::Null, |b| Value::Integer(i64::from(b)));
    [
        b8(b.connect),
        b8(b.energize),
        f(b.max_lim_pct),
        f(b.ramp_s),
        f(b.import_w),
        f(b.export_w),
        f(b.generation_w),
        f(b.load_w),
        f(b.storage_target_w),
    ]
}

fn write(conn: &Connection, site: &str, s: &Saved, now_ms: i64) -> Result<(), StoreError> {
    use rusqlite::types::Value;
    for table in ["csip_programs", "csip_events", "csip_responses"] {
        conn.execute(&format!("DELETE FROM {table} WHERE site = ?1"), [site])?;
    }
    conn.execute(
        "INSERT INTO csip_state (site, offset_ms, saved_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT(site) DO UPDATE SET offset_ms = excluded.offset_ms, saved_ms = excluded.saved_ms",
        params![site, s.offset_ms, now_ms],
    )?;
    let mut stmt = conn.prepare(&format!(
        "INSERT INTO csip_programs (site, href, list, mrid, primacy, default_mrid, set_grad_w, {BASE})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
    ))?;
    for p in s.schedule.programs.values() {
        let mut v: Vec<Value> = vec![
            site.to_string().into(),
            p.href.clone().into(),
            p.list.clone().into(),
            p.mrid.clone().into(),
            i64::from(p.primacy).into(),
        ];
        match &p.default {
            Some(d) => {
                v.push(d.mrid.clone().into());
                v.push(d.set_grad_w.map_or(Value::Null, |g| i64::from(g).into()));
                v.extend(base_params(&d.base));
            }
            None => v.extend(std::iter::repeat_n(Value::Null, 11)),
        }
        stmt.execute(rusqlite::params_from_iter(v))?;
    }
    let mut stmt = conn.prepare(&format!(
        "INSERT INTO csip_events (site, mrid, program, primacy, href, description, reply_to, response_required,
             creation_s, status, start_s, duration_s, randomize_start_s, randomize_duration_s, start_offset_s,
             duration_offset_s, phase, listed, {BASE})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
                 ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)"
    ))?;
    for t in s.schedule.events.values() {
        let c = &t.control;
        let text = |o: &Option<String>| o.clone().map_or(Value::Null, Value::Text);
        let mut v: Vec<Value> = vec![
            site.to_string().into(),
            c.mrid.clone().into(),
            t.program.clone().into(),
            i64::from(t.primacy).into(),
            text(&c.href),
            text(&c.description),
            text(&c.reply_to),
            i64::from(c.response_required).into(),
            c.creation_s.into(),
            i64::from(c.status.code()).into(),
            c.start_s.into(),
            i64::from(c.duration_s).into(),
            i64::from(c.randomize_start_s).into(),
            i64::from(c.randomize_duration_s).into(),
            t.start_offset_s.into(),
            t.duration_offset_s.into(),
            t.phase.wire_name().to_string().into(),
            i64::from(t.listed).into(),
        ];
        v.extend(base_params(&c.base));
        stmt.execute(rusqlite::params_from_iter(v))?;
    }
    let mut stmt = conn.prepare(
        "INSERT INTO csip_responses (site, seq, reply_to, mrid, status, at_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (i, p) in s.pending.iter().enumerate() {
        stmt.execute(params![
            site,
            i as i64,
            p.reply_to,
            p.mrid,
            p.status.code(),
            p.at_s
        ])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
