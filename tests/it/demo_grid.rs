//! The demo binary with no signal at all holds its 40 kW export limit through
//! noon: at `--speed 900` the simulated morning passes in seconds, the
//! batteries fill, and the grid meter must not show more export than the
//! limit and its tolerance once the loop holds it.

use std::time::Duration;
use tokio::time::Instant;

use crate::common::demo::Demo;
use nix::sys::signal::Signal;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_holds_max_export_through_noon_without_a_signal() {
    let mut demo = Demo::start(&["--speed", "900"]).await;
    let start = Instant::now();
    let mut held = 0;
    let mut worst_export = 0.0f64;
    // 07:00 + 5 h at 900x is noon after 20 s; the sun peaks around then.
    while start.elapsed() < Duration::from_secs(32) {
        let (_, st) = demo.get("/sites/ste_demo/steering").await;
        let (_, grid) = demo
            .get("/devices/dvc_grid/measurement?property=activePower")
            .await;
        if st["gridLoop"]["mode"] == "holdingExport" {
            held += 1;
            // One control interval to react after the sun passes the limit.
            if held > 4 {
                if let Some(w) = grid["value"].as_f64() {
                    worst_export = worst_export.max(-w);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        held > 8,
        "the loop never held the export limit:\n{}",
        demo.log()
    );
    // 40 kW and its tolerance (2 % of the limit, at least 500 W).
    assert!(
        worst_export <= 40_800.0,
        "the meter showed {worst_export} W of export while held"
    );
    assert!(
        demo.log().contains("grid loop holds a limit"),
        "{}",
        demo.log()
    );
    demo.stop(Signal::SIGTERM).await;
}
