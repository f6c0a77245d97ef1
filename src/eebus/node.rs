//! The node's SPINE device: an energy manager with two CEM entities, one
//! playing LPC's Controllable System (entity 1) and one LPP's (entity 2),
//! each with the features its use case asks for, and the two actors on
//! them, set up with the failsafe values the store kept (the box may have
//! written them) or the config's; a grid connection point (entity 3)
//! serving MGCP's measurements; and the controllable consumers (entity 4,
//! an `Inverter`: the batteries' inverters, the one MPC entity type that
//! fits) serving MPC's.
//!
//! Construction only; the hub loop (`task.rs`) drives them.

use std::time::Duration;

use eebus::model::{DeviceType, EntityType, FeatureAddress};
use eebus::spine::{Engine, LocalDevice, LocalEntity};
use eebus::usecases::descriptor::UseCaseDescriptor;
use eebus::usecases::limitation::{
    self, ControllableSystem, ControllableSystemActor, ControllableSystemBuilder, CsConfig,
    CsFeatures, Direction,
};
use eebus::usecases::monitoring::MonitoredUnit;
use eebus::usecases::{lpc, lpp, mgcp, mpc};

use super::monitoring::{self, Monitored};
use super::policy::Kept;
use crate::config::EebusConfig;

/// One use case: which, and where its limit is written.
pub struct UseCase {
    pub name: &'static str,
    pub direction: Direction,
    pub load_control: FeatureAddress,
    pub device_configuration: FeatureAddress,
}

/// A monitored unit (MGCP's or MPC's) and the two features it is served
/// from.
pub struct Monitor {
    pub what: Monitored,
    pub unit: MonitoredUnit,
    pub electrical_connection: FeatureAddress,
    pub measurement: FeatureAddress,
}

/// The node's entities that serve MGCP and MPC, with their types.
const MONITORS: [(Monitored, u32, EntityType); 2] = [
    (
        Monitored::GridConnectionPoint,
        3,
        EntityType::GridConnectionPointOfPremises,
    ),
    (Monitored::Consumers, 4, EntityType::Inverter),
];

/// What [`build`] makes.
pub struct Built {
    pub engine: Engine,
    /// Per use case (LPC, then LPP), its builder.
    pub use_cases: Vec<(UseCase, ControllableSystemBuilder)>,
    /// MGCP's and MPC's units, already published on the engine.
    pub monitors: Vec<Monitor>,
}

/// What one use case is played with: its name, direction, descriptor, and
/// the config's failsafe and contractual values.
type Play = (
    &'static str,
    Direction,
    &'static UseCaseDescriptor,
    f64,
    f64,
);

/// The node's SPINE device and its use cases.
pub fn build(c: &EebusConfig, kept: [Option<&Kept>; 2]) -> Result<Built, String> {
    let mut device = LocalDevice::new("n:sitegate", &c.serial, DeviceType::EnergyManagementSystem)
        .map_err(|e| format!("the node's device address: {e}"))?;
    let plays: [Play; 2] = [
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
    let features = cem_entities(&mut device)?;
    let monitors = monitor_entities(&mut device)?;
    let mut engine = Engine::new(device);
    let mut use_cases = Vec::new();
    for (i, (play, f)) in plays.into_iter().zip(features).enumerate() {
        engine.add_use_case([i as u32 + 1], 1, play.2);
        use_cases.push(use_case(c, play, f, kept[i]));
    }
    publish_monitors(&mut engine, &monitors);
    Ok(Built {
        engine,
        use_cases,
        monitors,
    })
}

/// The two CEM entities (1: LPC, 2: LPP) with the features a Controllable
/// System needs, and their addresses with each one's electrical connection.
fn cem_entities(device: &mut LocalDevice) -> Result<Vec<(CsFeatures, FeatureAddress)>, String> {
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
    let addr = |entity: u32, f: u32| device.address_of(&[entity], f);
    Ok((1..=2u32)
        .map(|e| {
            (
                CsFeatures {
                    load_control: addr(e, 1),
                    device_configuration: addr(e, 2),
                    device_diagnosis: addr(e, 3),
                    device_diagnosis_client: addr(e, 5),
                },
                addr(e, 4),
            )
        })
        .collect())
}

/// The entities of the monitored units (MGCP's and MPC's), each with its
/// electrical connection and measurement features.
fn monitor_entities(device: &mut LocalDevice) -> Result<Vec<Monitor>, String> {
    let mut monitors = Vec::new();
    for (what, entity, kind) in MONITORS {
        let unit = what.unit();
        device
            .add_entity(
                LocalEntity::new([entity], kind)
                    .with_feature(unit.electrical_connection_feature(1))
                    .with_feature(unit.measurement_feature(2)),
            )
            .map_err(|e| format!("the node's entity {entity}: {e}"))?;
        monitors.push(Monitor {
            what,
            unit,
            electrical_connection: device.address_of(&[entity], 1),
            measurement: device.address_of(&[entity], 2),
        });
    }
    Ok(monitors)
}

/// One use case's actor, set up with the failsafe values the store kept
/// (the box may have written them) or the config's.
fn use_case(
    c: &EebusConfig,
    (name, direction, _, failsafe_w, contract_w): Play,
    (f, electrical): (CsFeatures, FeatureAddress),
    kept: Option<&Kept>,
) -> (UseCase, ControllableSystemBuilder) {
    let (failsafe_w, duration_s) = match kept {
        Some(k) => (k.failsafe_w, k.failsafe_duration_s),
        None => (failsafe_w, c.failsafe_duration_s),
    };
    let system = ControllableSystem::new(
        CsConfig::new(failsafe_w, Duration::from_secs(duration_s))
            .on_cem()
            .with_contractual_max(contract_w),
        Duration::ZERO,
    );
    let case = UseCase {
        name,
        direction,
        load_control: f.load_control.clone(),
        device_configuration: f.device_configuration.clone(),
    };
    let builder = ControllableSystemActor::builder(system, direction, f)
        .with_electrical_connection(electrical);
    (case, builder)
}

/// Announces the monitored units' use cases and publishes their units.
fn publish_monitors(engine: &mut Engine, monitors: &[Monitor]) {
    for (m, (_, entity, _)) in monitors.iter().zip(MONITORS) {
        let (descriptor, scenarios) = match m.what {
            Monitored::GridConnectionPoint => (&mgcp::GRID_CONNECTION_POINT, monitoring::SCENARIOS),
            Monitored::Consumers => (&mpc::MONITORED_UNIT, monitoring::CONSUMER_SCENARIOS),
        };
        engine.add_use_case_scenarios([entity], 1, descriptor, scenarios);
        m.unit
            .publish(engine, &m.electrical_connection, &m.measurement);
    }
}
