//! A device that stops answering: it turns offline without slowing the others,
//! keeps its last values, and comes back when it answers again.

use std::time::Duration;

use crate::common::site::{self, SUMMER_MORNING_MS};
use crate::common::wait_for;
use crate::steering_support::TestSite;
use serde_json::Value;

async fn status(site: &site::SmallSite, device: &str) -> Value {
    let list = site.get_ok("/devices").await;
    list.as_array()
        .unwrap()
        .iter()
        .find(|d| d["deviceReference"] == device)
        .unwrap()["status"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_device_goes_offline_and_comes_back() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let (_, soc_before) = site.latest("dvc_bat", "soc").await.unwrap();

    site.sim.stop_server("bat").await;
    wait_for("battery offline", Duration::from_secs(5), || async {
        (status(&site, "dvc_bat").await["online"] == false).then_some(())
    })
    .await;
    let frozen = site.latest("dvc_bat", "soc").await.unwrap();

    // The others keep updating meanwhile.
    for device in ["dvc_pv", "dvc_grid"] {
        let (t0, _) = site.latest(device, "activePower").await.unwrap();
        wait_for(
            &format!("{device} to keep updating"),
            Duration::from_secs(3),
            || async {
                site.latest(device, "activePower")
                    .await
                    .filter(|(t, _)| *t > t0)
            },
        )
        .await;
        assert_eq!(status(&site, device).await["online"], true);
    }
    // The offline battery answers with its last value and its old timestamp, also
    // after 500 ms of the agent's retries on its closed port (backoff 100..400 ms).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(site.latest("dvc_bat", "soc").await.unwrap(), frozen);
    assert!((0.0..=100.0).contains(&soc_before));

    site.sim.start_server("bat").await.unwrap();
    wait_for("battery back online", Duration::from_secs(5), || async {
        (status(&site, "dvc_bat").await["online"] == true).then_some(())
    })
    .await;
    let (t_back, _) = site.latest("dvc_bat", "soc").await.unwrap();
    assert!(
        t_back > frozen.0,
        "fresh samples after the device came back"
    );
    site.stop().await;
}
