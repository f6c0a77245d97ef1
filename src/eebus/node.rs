//! The node's SPINE device: an energy manager with two CEM entities, one
//! playing LPC's Controllable System (entity 1) and one LPP's (entity 2),
//! each with the features its use case asks for, and the two actors on
//! them, set up with the failsafe values the store kept (the box may have
//! written them) or the config's; and a grid connection point (entity 3)
//! serving MGCP's measurements.
//!
//! Construction only; the hub loop (`task.rs`) drives them.

use std::time::Duration;

use eebus::model::{DeviceType, EntityType, FeatureAddress};
use eebus::spine::{Engine, LocalDevice, LocalEntity};
use eebus::usecases::limitation::{
    self, ControllableSystem, ControllableSystemActor, ControllableSystemBuilder, CsConfig,
    CsFeatures, Direction,
};
use eebus::usecases::monitoring::MonitoredUnit;
use eebus::usecases::{lpc, lpp, mgcp};

use super::monitoring;
use super::policy::Kept;
use crate::config::EebusConfig;

/// One use case: which, and where its limit is written.
pub struct UseCase {
    pub name: &'static str,
    pub direction: Direction,
    pub load_control: FeatureAddress,
    pub device_configuration: FeatureAddress,
}

/// MGCP's unit and the two features it is served from.
pub struct Monitor {
    pub unit: MonitoredUnit,
    pub electrical_connection: FeatureAddress,
    pub measurement: FeatureAddress,
}

/// The node's entity that serves MGCP.
const MONITOR_ENTITY: u32 = 3;

/// What [`build`] makes.
pub struct Built {
    pub engine: Engine,
    /// Per use case (LPC, then LPP), its builder.
    pub use_cases: Vec<(UseCase, ControllableSystemBuilder)>,
    /// MGCP's unit, already published on the engine.
    pub monitor: Monitor,
}

/// The node's SPINE device and its use cases.
pub fn build(c: &EebusConfig, kept: [Option<&Kept>; 2]) -> Result<Built, String> {
    let mut device = LocalDevice::new("n:sitegate", &c.serial, DeviceType::EnergyManagementSystem)
        .map_err(|e| format!("the node's device address: {e}"))?;
    let plays = [
        (
            "lpc",
            lpc::DIRECTION,
            &lpc::CONTROLLABLE_SYSTEM,
            c.failsafe_consumption_w,
            c.contractual_max_consumption_w,
        ),
        (
            "lpp",
            lpp::DIRECTION,
            &lpp::CONTROLLABLE_SYSTEM,
            c.failsafe_production_w,
            c.contractual_max_production_w,
        ),
    ];
    for entity in 1..=2u32 {
        device
            .add_entity(
                LocalEntity::new([entity], EntityType::CEM)
                    .with_feature(limitation::load_control_feature(1))
                    .with_feature(limitation::device_configuration_feature(2))
                    .with_feature(limitation::device_diagnosis_feature(3))
                    .with_feature(limitation::electrical_connection_feature(4))
                    .with_feature(limitation::device_diagnosis_client_feature(5)),
            )
            .map_err(|e| format!("the node's entity {entity}: {e}"))?;
    }
    let unit = monitoring::unit();
    device
        .add_entity(
            LocalEntity::new([MONITOR_ENTITY], EntityType::GridConnectionPointOfPremises)
                .with_feature(unit.electrical_connection_feature(1))
                .with_feature(unit.measurement_feature(2)),
        )
        .map_err(|e| format!("the node's entity {MONITOR_ENTITY}: {e}"))?;
    let addr = |d: &LocalDevice, entity: u32, f: u32| d.address_of(&[entity], f);
    let monitor = Monitor {
        unit,
        electrical_connection: addr(&device, MONITOR_ENTITY, 1),
        measurement: addr(&device, MONITOR_ENTITY, 2),
    };
    let features: Vec<(CsFeatures, FeatureAddress)> = (1..=2u32)
        .map(|e| {
            (
                CsFeatures {
                    load_control: addr(&device, e, 1),
                    device_configuration: addr(&device, e, 2),
                    device_diagnosis: addr(&device, e, 3),
                    device_diagnosis_client: addr(&device, e, 5),
                },
                addr(&device, e, 4),
            )
        })
        .collect();
    let mut engine = Engine::new(device);
    let mut out = Vec::new();
    for (i, ((name, direction, descriptor, failsafe_w, contract_w), (f, electrical))) in
        plays.into_iter().zip(features).enumerate()
    {
        engine.add_use_case([i as u32 + 1], 1, descriptor);
        let (failsafe_w, duration_s) = match kept[i] {
            Some(k) => (k.failsafe_w, k.failsafe_duration_s),
            None => (failsafe_w, c.failsafe_duration_s),
        };
        let system = ControllableSystem::new(
            CsConfig::new(failsafe_w, Duration::from_secs(duration_s))
                .on_cem()
                .with_contractual_max(contract_w),
            Duration::ZERO,
        );
        let load_control = f.load_control.clone();
        let device_configuration = f.device_configuration.clone();
        let builder = ControllableSystemActor::builder(system, direction, f)
            .with_electrical_connection(electrical);
        out.push((
            UseCase {
                name,
                direction,
                load_control,
                device_configuration,
            },
            builder,
        ));
    }
    engine.add_use_case_scenarios(
        [MONITOR_ENTITY],
        1,
        &mgcp::GRID_CONNECTION_POINT,
        monitoring::SCENARIOS,
    );
    monitor.unit.publish(
        &mut engine,
        &monitor.electrical_connection,
        &monitor.measurement,
    );
    Ok(Built {
        engine,
        use_cases: out,
        monitor,
    })
}
