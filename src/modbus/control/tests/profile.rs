//! Profile recipes' plans on the shipped profiles: the recipe's writes in the
//! recipe's order, releases, and a read-back of exactly what was written.

use super::*;
use crate::profile::{
    parse, FixedWrite, LimitControl, LimitUnit, RevertTimeout, ValueRegister, BUILTIN,
};
use crate::register::codec::{ValueType, WordOrder};
use crate::register::plan::{Image, Span, Table};

fn shipped(name: &str) -> Recipe {
    let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name).unwrap();
    let p = parse(name, "built-in", text).unwrap();
    Recipe::ProfileStorage(ProfileEss {
        control: p.controls.ess_power.unwrap(),
        rated_w: Some(5_000.0),
    })
}

fn w(addr: u16, values: &[u16]) -> RegWrite {
    RegWrite {
        addr,
        values: values.to_vec(),
    }
}

fn holding(addr: u16, len: u16) -> Span {
    Span::new(Table::Holding, addr, len)
}

#[test]
fn sungrow_mode_then_power_then_direction() {
    let c = shipped("sungrow-sh");
    let charge = c
        .plan(Command::EssPower(-3000.0), 30, &Image::new())
        .unwrap();
    assert_eq!(
        charge.writes,
        [w(13049, &[2]), w(13051, &[3000]), w(13050, &[0xAA])]
    );
    // The three neighbours are read back in one request.
    assert_eq!(charge.read_back, [holding(13049, 3)]);
    assert_eq!(charge.expect, [(13049, 2), (13051, 3000), (13050, 0xAA)]);
    let discharge = c
        .plan(Command::EssPower(2500.0), 30, &Image::new())
        .unwrap();
    assert_eq!(
        discharge.writes[1..],
        [w(13051, &[2500]), w(13050, &[0xBB])]
    );
    let idle = c.plan(Command::EssPower(0.0), 30, &Image::new()).unwrap();
    assert_eq!(idle.writes[1..], [w(13051, &[0]), w(13050, &[0xCC])]);
    let release = c.plan(Command::EssRelease, 30, &Image::new()).unwrap();
    assert_eq!(release.writes, [w(13049, &[0]), w(13050, &[0xCC])]);
    assert_eq!(release.read_back, [holding(13049, 2)]);
    assert_eq!(
        c.plan(Command::ProductionLimit(1.0), 30, &Image::new()),
        Err(WriteError::WrongCommand(Command::ProductionLimit(1.0)))
    );
}

#[test]
fn huawei_revert_timer_in_minutes_and_split_power() {
    let c = shipped("huawei-luna2000");
    // 30 s rounds up to one minute: the actuator's refresh (15 s) comes first.
    let p = c
        .plan(Command::EssPower(2500.0), 30, &Image::new())
        .unwrap();
    assert_eq!(
        p.writes,
        [
            w(47083, &[1]),
            w(47246, &[0]),
            w(47087, &[1]),
            w(47247, &[0, 0]),
            w(47249, &[0, 2500]),
            w(47100, &[2]),
        ]
    );
    // 47083..47250 is more than one request may read: two ranges.
    assert_eq!(p.read_back, [holding(47083, 18), holding(47246, 5)]);
    assert_eq!(
        p.read_back_by_point(),
        [
            holding(47083, 1),
            holding(47087, 1),
            holding(47100, 1),
            holding(47246, 5)
        ]
    );
    let charge = c
        .plan(Command::EssPower(-70_000.0), 600, &Image::new())
        .unwrap();
    assert_eq!(charge.writes[0], w(47083, &[10]));
    assert_eq!(charge.writes[3], w(47247, &[1, 0x1170]));
    assert_eq!(charge.writes[5], w(47100, &[1]));
    // Release: charge from grid off (the device's default), forcing stopped.
    let release = c.plan(Command::EssRelease, 30, &Image::new()).unwrap();
    assert_eq!(release.writes, [w(47087, &[0]), w(47100, &[0])]);
    assert_eq!(release.expect, [(47087, 0), (47100, 0)]);
}

#[test]
fn goodwe_power_then_mode() {
    let c = shipped("goodwe-et");
    let p = c
        .plan(Command::EssPower(1500.0), 30, &Image::new())
        .unwrap();
    assert_eq!(p.writes, [w(47512, &[1500]), w(47511, &[12])]);
    assert_eq!(p.read_back, [holding(47511, 2)]);
    assert_eq!(p.expect, [(47512, 1500), (47511, 12)]);
    let release = c.plan(Command::EssRelease, 30, &Image::new()).unwrap();
    assert_eq!(release.writes, [w(47511, &[1])]);
    // A power beyond the register's range is an error, not a wrapped value.
    assert!(matches!(
        c.plan(Command::EssPower(70_000.0), 30, &Image::new()),
        Err(WriteError::Encode(_))
    ));
}

fn limit(unit: LimitUnit, rated_w: Option<f64>) -> Recipe {
    Recipe::ProfileLimit(ProfileLimit {
        control: LimitControl {
            register: ValueRegister {
                addr: 500,
                ty: ValueType::U16,
                order: WordOrder::HighFirst,
                scale: 0.1,
                offset: 0.0,
            },
            unit,
            enable: vec![FixedWrite::word(501, 1)],
            release: vec![FixedWrite::word(501, 0), FixedWrite::word(500, 1000)],
            revert_timeout: Some(RevertTimeout {
                addr: 502,
                ty: ValueType::U32,
                order: WordOrder::LowFirst,
                seconds_per_unit: 1,
            }),
        },
        rated_w,
    })
}

#[test]
fn production_limit_in_percent_of_the_rating() {
    let c = limit(LimitUnit::Percent, Some(10_000.0));
    let p = c
        .plan(Command::ProductionLimit(5_000.0), 60, &Image::new())
        .unwrap();
    assert_eq!(p.writes, [w(502, &[60, 0]), w(501, &[1]), w(500, &[500])]);
    assert_eq!(p.read_back, [holding(500, 4)]);
    let release = c
        .plan(Command::ProductionRelease, 60, &Image::new())
        .unwrap();
    assert_eq!(release.writes, [w(501, &[0]), w(500, &[1000])]);
    let no_rating = limit(LimitUnit::Percent, None);
    assert!(matches!(
        no_rating.plan(Command::ProductionLimit(5_000.0), 60, &Image::new()),
        Err(WriteError::Missing {
            what: "rated power",
            ..
        })
    ));
    // In W no rating is needed.
    let watts = limit(LimitUnit::Watts, None);
    let p = watts
        .plan(Command::ProductionLimit(5_000.0), 60, &Image::new())
        .unwrap();
    assert_eq!(p.writes[2], w(500, &[50_000]));
    assert!(matches!(
        c.plan(Command::EssRelease, 60, &Image::new()),
        Err(WriteError::WrongCommand(_))
    ));
}

#[test]
fn echo_expects_the_last_word_per_register_and_verify_finds_each() {
    let plan = WritePlan::new(vec![w(10, &[1, 2]), w(20, &[3]), w(11, &[4])]);
    assert_eq!(plan.expect, [(10, 1), (20, 3), (11, 4)]);
    assert_eq!(plan.read_back, [holding(10, 11)], "one range");
    let by_point = plan.read_back_by_point();
    assert_eq!(by_point, [holding(10, 2), holding(20, 1)]);
    let image = |reads: &[&[u16]]| {
        let mut i = Image::new();
        for (s, words) in by_point.iter().zip(reads) {
            i.insert(*s, words.to_vec());
        }
        i
    };
    assert_eq!(verify(&plan, &image(&[&[1, 4], &[3]])), Ok(()));
    let mut range = Image::new();
    range.insert(holding(10, 11), vec![1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 3]);
    assert_eq!(verify(&plan, &range), Ok(()));
    let e = verify(&plan, &image(&[&[1, 2], &[3]])).unwrap_err();
    assert_eq!(
        e,
        Mismatch {
            addr: 11,
            got: Some(2),
            want: 4
        }
    );
    assert_eq!(
        e.to_string(),
        "read-back of register 11 shows 2 instead of 4"
    );
    let e = verify(&plan, &image(&[&[1, 4]])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "read-back of register 20 shows nothing instead of 3"
    );
}

#[test]
fn shipped_revert_timers_never_fire_before_the_refresh() {
    // The actuator refreshes every revert_s / 2: the device's timer must be at
    // least revert_s, whatever its unit.
    for (name, text) in BUILTIN {
        let p = parse(name, "built-in", text).unwrap();
        let Some(ess) = p.controls.ess_power else {
            continue;
        };
        let Some(timer) = ess.revert_timeout else {
            continue;
        };
        let c = Recipe::ProfileStorage(ProfileEss {
            control: ess,
            rated_w: Some(5_000.0),
        });
        for revert_s in [2u16, 30, 59, 60, 61, 3599, u16::MAX] {
            let plan = c
                .plan(Command::EssPower(100.0), revert_s, &Image::new())
                .unwrap();
            let w = plan.writes.iter().find(|w| w.addr == timer.addr).unwrap();
            let units = crate::register::codec::decode(
                &w.values,
                timer.ty,
                timer.order,
                crate::register::codec::Absent::Never,
            )
            .unwrap();
            let seconds = units * f64::from(timer.seconds_per_unit);
            assert!(
                seconds >= f64::from(revert_s),
                "{name}: {revert_s} s → {seconds} s"
            );
        }
    }
}
