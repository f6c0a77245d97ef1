//! A schedule saved and read back from SQLite on disk, across a reopen.

use super::*;
use crate::csip::resource::program::Program;
use crate::store::StoreHandle;

fn open(dir: &std::path::Path) -> StoreHandle {
    let config = crate::config::StorageConfig {
        path: dir.join("sitegate.db"),
        ..crate::config::StorageConfig::default()
    };
    StoreHandle::open(&config, Vec::new()).expect("store")
}

fn schedule() -> Schedule {
    let mut s = Schedule::default();
    s.set_programs(
        "/edev/1/fsa/1/derp",
        &[Program {
            href: "/edev/1/derp/1".into(),
            mrid: "P1".into(),
            primacy: 2,
            default_control: Some("/edev/1/derp/1/dderc".into()),
            controls: Some("/edev/1/derp/1/derc".into()),
        }],
    );
    s.set_default(
        "/edev/1/derp/1",
        Some(DefaultControl {
            mrid: "D1".into(),
            set_grad_w: Some(27),
            base: ControlBase {
                export_w: Some(1_500.0),
                connect: Some(true),
                ..ControlBase::default()
            },
        }),
    );
    let c = Control {
        href: Some("/edev/1/derp/1/derc/9".into()),
        mrid: "E9".into(),
        description: Some("evening".into()),
        reply_to: Some("/rsp".into()),
        response_required: 3,
        creation_s: 100,
        status: EventStatus::Active,
        start_s: 1_000,
        duration_s: 600,
        randomize_start_s: 60,
        randomize_duration_s: 0,
        base: ControlBase {
            import_w: Some(0.0),
            ramp_s: Some(60.0),
            ..ControlBase::default()
        },
    };
    s.set_events("/edev/1/derp/1", vec![c], 500_000, &mut |r| {
        i64::from(r) / 2
    });
    s
}

#[tokio::test]
async fn a_saved_schedule_reads_back_whole_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let saved = Saved {
        schedule: schedule(),
        offset_ms: -3_600_000,
        pending: vec![Pending {
            reply_to: "/rsp".into(),
            mrid: "E9".into(),
            status: ResponseStatus::Received,
            at_s: 500,
        }],
    };
    {
        let store = CsipStore::new(open(dir.path()));
        assert_eq!(store.load("ste_a").await.unwrap(), None);
        store.save("ste_a", saved.clone(), 1).await.unwrap();
        // Another site's schedule is its own.
        store.save("ste_b", Saved::default(), 1).await.unwrap();
    }
    let store = CsipStore::new(open(dir.path()));
    let back = store.load("ste_a").await.unwrap().unwrap();
    assert_eq!(back.offset_ms, -3_600_000);
    assert_eq!(back.pending, saved.pending);
    assert_eq!(back.schedule.programs, saved.schedule.programs);
    assert_eq!(back.schedule.events, saved.schedule.events);
    assert_eq!(back.schedule.events["E9"].start_offset_s, 30);
    // What holds is the same, read back or not.
    assert_eq!(
        back.schedule.in_force(1_100_000),
        saved.schedule.in_force(1_100_000)
    );
    let empty = store.load("ste_b").await.unwrap().unwrap();
    assert!(empty.schedule.events.is_empty());
    // Saving again replaces, never appends.
    store.save("ste_a", Saved::default(), 2).await.unwrap();
    assert!(store
        .load("ste_a")
        .await
        .unwrap()
        .unwrap()
        .schedule
        .programs
        .is_empty());
}
