//! The event rules, each as the CACTUS procedure that asks for it.

use super::*;
use crate::csip::resource::program::{ControlBase, EventStatus};

const T0: i64 = 1_800_000_000;

fn program(href: &str, primacy: u8) -> Program {
    Program {
        href: href.into(),
        mrid: format!("P{href}"),
        primacy,
        default_control: None,
        controls: None,
    }
}

fn control(mrid: &str, created: i64, start: i64, duration: u32, base: ControlBase) -> Control {
    Control {
        href: None,
        mrid: mrid.into(),
        description: None,
        reply_to: Some("/rsp".into()),
        response_required: 3,
        creation_s: created,
        status: EventStatus::Scheduled,
        start_s: start,
        duration_s: duration,
        randomize_start_s: 0,
        randomize_duration_s: 0,
        base,
    }
}

fn export(w: f64) -> ControlBase {
    ControlBase {
        export_w: Some(w),
        ..ControlBase::default()
    }
}

fn none(_: i16) -> i64 {
    0
}

fn ms(s: i64) -> i64 {
    s * 1000
}

/// Statuses of `events` as `(mrid, code)`.
fn said(events: &[Event]) -> Vec<(String, u8)> {
    events
        .iter()
        .map(|e| (e.mrid.clone(), e.status.code()))
        .collect()
}

fn pairs(v: &[(&str, u8)]) -> Vec<(String, u8)> {
    v.iter().map(|(m, c)| (m.to_string(), *c)).collect()
}

fn schedule(programs: &[(&str, u8)]) -> Schedule {
    let mut s = Schedule::default();
    let list: Vec<Program> = programs.iter().map(|(h, p)| program(h, *p)).collect();
    s.set_programs("/derp", &list);
    s
}

#[test]
fn all_18_an_event_is_received_started_and_completed_in_turn() {
    let mut s = schedule(&[("/p1", 0)]);
    let got = s.set_events(
        "/p1",
        vec![control("C1", T0, T0, 120, export(5e3))],
        ms(T0),
        &mut none,
    );
    assert_eq!(said(&got), pairs(&[("C1", 1)]));
    assert_eq!(said(&s.advance(ms(T0))), pairs(&[("C1", 2)]));
    assert_eq!(s.in_force(ms(T0 + 60)).get(Mode::Export), Some(5e3));
    assert!(s.advance(ms(T0 + 119)).is_empty());
    assert_eq!(said(&s.advance(ms(T0 + 120))), pairs(&[("C1", 3)]));
    assert_eq!(s.in_force(ms(T0 + 120)).get(Mode::Export), None);
}

#[test]
fn all_18_a_cancelled_event_answers_6_started_or_not() {
    let mut s = schedule(&[("/p1", 0)]);
    s.set_events(
        "/p1",
        vec![
            control("C2", T0, T0, 600, export(1e3)),
            control("C3", T0, T0 + 600, 120, export(0.0)),
        ],
        ms(T0),
        &mut none,
    );
    s.advance(ms(T0 + 1));
    let mut c2 = control("C2", T0, T0, 600, export(1e3));
    c2.status = EventStatus::Cancelled;
    let mut c3 = control("C3", T0, T0 + 600, 120, export(0.0));
    c3.status = EventStatus::Cancelled;
    let got = s.set_events("/p1", vec![c2, c3], ms(T0 + 5), &mut none);
    assert_eq!(said(&got), pairs(&[("C2", 6), ("C3", 6)]));
    assert!(
        s.advance(ms(T0 + 700)).is_empty(),
        "a cancelled event never starts"
    );
    assert_eq!(s.in_force(ms(T0 + 610)).get(Mode::Export), None);
}

#[test]
fn all_18_a_newer_event_at_the_same_start_supersedes_the_scheduled_one_at_once() {
    let mut s = schedule(&[("/p1", 0)]);
    let c4 = control("C4", T0, T0 + 600, 600, export(9e3));
    s.set_events("/p1", vec![c4.clone()], ms(T0), &mut none);
    s.advance(ms(T0));
    let c5 = control("C5", T0 + 3, T0 + 600, 60, export(0.0));
    let got = s.set_events("/p1", vec![c4, c5], ms(T0 + 3), &mut none);
    assert_eq!(said(&got), pairs(&[("C5", 1)]));
    assert_eq!(said(&s.advance(ms(T0 + 3))), pairs(&[("C4", 7)]));
    // C5 runs its minute; C4 never resumes after it.
    assert_eq!(said(&s.advance(ms(T0 + 600))), pairs(&[("C5", 2)]));
    assert_eq!(said(&s.advance(ms(T0 + 660))), pairs(&[("C5", 3)]));
    assert_eq!(s.in_force(ms(T0 + 700)).get(Mode::Export), None);
}

#[test]
fn a_later_overlapping_event_supersedes_a_running_one_only_from_its_own_start() {
    let mut s = schedule(&[("/p1", 0)]);
    let long = control("LONG", T0, T0, 3600, export(8e3));
    let short = control("SHORT", T0 + 1, T0 + 1800, 900, export(2e3));
    s.set_events("/p1", vec![long, short], ms(T0), &mut none);
    assert_eq!(said(&s.advance(ms(T0))), pairs(&[("LONG", 2)]));
    assert_eq!(s.in_force(ms(T0 + 100)).get(Mode::Export), Some(8e3));
    let got = s.advance(ms(T0 + 1800));
    assert_eq!(said(&got), pairs(&[("LONG", 7), ("SHORT", 2)]));
    assert_eq!(s.in_force(ms(T0 + 1800)).get(Mode::Export), Some(2e3));
}

#[test]
fn all_21_back_to_back_events_complete_and_start_without_superseding() {
    let mut s = schedule(&[("/p1", 0)]);
    let list: Vec<Control> = (0..24)
        .map(|i| {
            control(
                &format!("D{i:02}"),
                T0,
                T0 + 60 * i,
                60,
                export(1e3 * i as f64),
            )
        })
        .collect();
    let got = s.set_events("/p1", list, ms(T0), &mut none);
    assert_eq!(got.len(), 24);
    assert!(got.iter().all(|e| e.status == ResponseStatus::Received));
    let mut all = Vec::new();
    for t in 0..=(24 * 60) {
        all.extend(s.advance(ms(T0 + t)));
        if t < 24 * 60 {
            assert_eq!(
                s.in_force(ms(T0 + t)).get(Mode::Export),
                Some(1e3 * (t / 60) as f64)
            );
        }
    }
    assert!(all.iter().all(|e| e.status != ResponseStatus::Superseded));
    assert_eq!(
        all.iter()
            .filter(|e| e.status == ResponseStatus::Started)
            .count(),
        24
    );
    assert_eq!(
        all.iter()
            .filter(|e| e.status == ResponseStatus::Completed)
            .count(),
        24
    );
    // At each boundary the one ending is answered before the one starting.
    let boundary: Vec<_> = all.iter().filter(|e| e.at_ms == ms(T0 + 60)).collect();
    assert_eq!(
        boundary
            .iter()
            .map(|e| (e.mrid.as_str(), e.status.code()))
            .collect::<Vec<_>>(),
        vec![("D00", 3), ("D01", 2)]
    );
}

#[test]
fn gen_10_primacy_decides_per_mode_and_supersedes_only_what_it_covers() {
    let mut s = schedule(&[("/d1", 1), ("/d6", 2)]);
    s.set_default(
        "/d1",
        Some(DefaultControl {
            base: export(3e3),
            ..DefaultControl::default()
        }),
    );
    s.set_default(
        "/d6",
        Some(DefaultControl {
            base: export(1e3),
            ..DefaultControl::default()
        }),
    );
    // Defaults: the lowest primacy's, not the tightest.
    assert_eq!(s.in_force(ms(T0)).get(Mode::Export), Some(3e3));

    // DERC1 on derp 6 runs, then DERC2 on derp 1 supersedes it.
    s.set_events(
        "/d6",
        vec![control("DERC1", T0, T0, 600, export(20e3))],
        ms(T0),
        &mut none,
    );
    assert_eq!(said(&s.advance(ms(T0))), pairs(&[("DERC1", 2)]));
    s.set_events(
        "/d1",
        vec![control("DERC2", T0 + 60, T0 + 60, 840, export(0.0))],
        ms(T0 + 60),
        &mut none,
    );
    assert_eq!(
        said(&s.advance(ms(T0 + 60))),
        pairs(&[("DERC1", 7), ("DERC2", 2)])
    );
    assert_eq!(s.in_force(ms(T0 + 61)).get(Mode::Export), Some(0.0));

    // DERC4 (derp 1: generation 0, disconnect) does not cover DERC5's export.
    let gen_off = ControlBase {
        generation_w: Some(0.0),
        connect: Some(false),
        ..ControlBase::default()
    };
    let t = T0 + 2000;
    assert_eq!(said(&s.advance(ms(T0 + 900))), pairs(&[("DERC2", 3)]));
    s.set_events(
        "/d1",
        vec![control("DERC4", t, t, 300, gen_off)],
        ms(t),
        &mut none,
    );
    s.set_events(
        "/d6",
        vec![control("DERC5", t + 1, t + 1, 1200, export(20e3))],
        ms(t + 1),
        &mut none,
    );
    let got = s.advance(ms(t + 1));
    assert_eq!(said(&got), pairs(&[("DERC4", 2), ("DERC5", 2)]));
    let f = s.in_force(ms(t + 2));
    assert_eq!(f.get(Mode::Export), Some(20e3));
    assert_eq!(f.get(Mode::Connect), Some(0.0));
    assert_eq!(f.get(Mode::Generation), Some(0.0));

    // DERC8 sets export and generation; DERC7 (higher primacy) only export:
    // DERC8 starts, keeps generation, and loses export to DERC7.
    let t = T0 + 5000;
    s.advance(ms(t - 1));
    s.set_events(
        "/d1",
        vec![control("DERC7", t, t, 300, export(0.0))],
        ms(t),
        &mut none,
    );
    let both = ControlBase {
        export_w: Some(10e3),
        generation_w: Some(6e3),
        ..ControlBase::default()
    };
    s.set_events(
        "/d6",
        vec![control("DERC8", t + 1, t + 1, 300, both)],
        ms(t + 1),
        &mut none,
    );
    let got = s.advance(ms(t + 1));
    assert!(
        got.iter().all(|e| e.status != ResponseStatus::Superseded),
        "{got:?}"
    );
    let f = s.in_force(ms(t + 2));
    assert_eq!(f.get(Mode::Export), Some(0.0));
    assert_eq!(f.get(Mode::Generation), Some(6e3));
    assert!(
        matches!(&f.modes[&Mode::Generation].origin, Origin::Event { mrid, .. } if mrid == "DERC8")
    );
}

#[test]
fn all_22_randomization_moves_the_start_but_never_supersedes_the_next_event() {
    let mut s = schedule(&[("/p1", 0)]);
    let mut a = control("R1", T0, T0, 120, export(1e3));
    a.randomize_start_s = 60;
    let mut b = control("R2", T0, T0 + 120, 120, export(2e3));
    b.randomize_start_s = 60;
    // R1 starts 50 s late and so overlaps R2, which starts 10 s late.
    let mut offsets = [50, 0, 10, 0].into_iter();
    s.set_events("/p1", vec![a, b], ms(T0), &mut |_| offsets.next().unwrap());
    assert!(s.advance(ms(T0 + 49)).is_empty());
    assert_eq!(said(&s.advance(ms(T0 + 50))), pairs(&[("R1", 2)]));
    assert_eq!(said(&s.advance(ms(T0 + 130))), pairs(&[("R2", 2)]));
    // Both run: the newer (by mRID at equal creation) wins the mode.
    assert_eq!(s.in_force(ms(T0 + 131)).get(Mode::Export), Some(2e3));
    assert_eq!(said(&s.advance(ms(T0 + 170))), pairs(&[("R1", 3)]));
}

#[test]
fn an_event_received_after_its_end_is_refused_as_expired() {
    let mut s = schedule(&[("/p1", 0)]);
    let got = s.set_events(
        "/p1",
        vec![control("OLD", T0, T0 - 600, 300, export(0.0))],
        ms(T0),
        &mut none,
    );
    assert_eq!(said(&got), pairs(&[("OLD", 254)]));
    assert!(s.advance(ms(T0)).is_empty());
    // Listed again: not new, not answered again.
    let got = s.set_events(
        "/p1",
        vec![control("OLD", T0, T0 - 600, 300, export(0.0))],
        ms(T0 + 60),
        &mut none,
    );
    assert!(got.is_empty());
}

#[test]
fn an_event_that_leaves_the_list_runs_to_its_end() {
    let mut s = schedule(&[("/p1", 0)]);
    s.set_events(
        "/p1",
        vec![control("GONE", T0, T0, 600, export(2e3))],
        ms(T0),
        &mut none,
    );
    s.advance(ms(T0));
    s.set_events("/p1", Vec::new(), ms(T0 + 10), &mut none);
    assert_eq!(s.in_force(ms(T0 + 300)).get(Mode::Export), Some(2e3));
    assert_eq!(said(&s.advance(ms(T0 + 600))), pairs(&[("GONE", 3)]));
    // Unlisted and over: forgotten a day later.
    s.advance(ms(T0 + 600) + KEPT_AFTER_END_MS);
    assert!(s.events.is_empty());
}

#[test]
fn between_events_and_after_the_last_the_default_holds() {
    let mut s = schedule(&[("/p1", 0)]);
    s.set_default(
        "/p1",
        Some(DefaultControl {
            mrid: "DEF".into(),
            base: export(1_500.0),
            set_grad_w: Some(27),
        }),
    );
    s.set_events(
        "/p1",
        vec![control("E", T0, T0 + 60, 60, export(0.0))],
        ms(T0),
        &mut none,
    );
    s.advance(ms(T0));
    let f = s.in_force(ms(T0));
    assert_eq!(f.get(Mode::Export), Some(1_500.0));
    assert_eq!(f.set_grad_w, Some(27));
    s.advance(ms(T0 + 60));
    assert_eq!(s.in_force(ms(T0 + 60)).get(Mode::Export), Some(0.0));
    s.advance(ms(T0 + 120));
    assert_eq!(s.in_force(ms(T0 + 120)).get(Mode::Export), Some(1_500.0));
    assert_eq!(s.next_change_ms(ms(T0 + 120)), None);
}

#[test]
fn an_agent_away_through_a_whole_event_answers_started_then_completed() {
    let mut s = schedule(&[("/p1", 0)]);
    s.set_events(
        "/p1",
        vec![control("E", T0, T0 + 10, 60, export(0.0))],
        ms(T0),
        &mut none,
    );
    let got = s.advance(ms(T0 + 500));
    assert_eq!(said(&got), pairs(&[("E", 2), ("E", 3)]));
}
