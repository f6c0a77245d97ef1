//! What a grid operator's server sets over the DER rather than at the
//! meter (`../shared/spec/grid-operators.md`, "Where the limits apply"):
//! a generation limit on the DER's production (the inverters and the
//! batteries' discharge), a load limit on its consumption (the batteries'
//! charge), a storage target in place of the partner's, and `connect` or
//! `energize` off, which takes the DER off: inverters to 0 W, batteries
//! idle, until lifted.
//!
//! Pure: applied by `decide` to the battery views before the grid loop and
//! to its answer after, so nothing the loop does can pass them.

use super::alloc::BatteryView;
use super::hold::{Held, ProductionPlan, SitePlan, StoragePlan};
use crate::steering::sources::{Kind, OperatorSet, SourceLimit};

/// The DER's bounds in force.
#[derive(Clone, Debug, Default)]
pub struct DerBounds {
    pub off: Option<SourceLimit>,
    pub generation: Option<SourceLimit>,
    pub load: Option<SourceLimit>,
    pub storage_target: Option<SourceLimit>,
}

impl DerBounds {
    pub fn of(set: &OperatorSet) -> DerBounds {
        DerBounds {
            off: set.der_off().cloned(),
            generation: set.tightest(Kind::Generation).cloned(),
            load: set.tightest(Kind::Load).cloned(),
            storage_target: set.tightest(Kind::StorageTarget).cloned(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.off.is_none()
            && self.generation.is_none()
            && self.load.is_none()
            && self.storage_target.is_none()
    }

    /// The batteries as the bounds leave them: none may move while the DER
    /// is off; together they charge at most the load limit and discharge at
    /// most the generation limit, each in proportion to its own limit.
    pub fn batteries(&self, views: &[BatteryView]) -> Vec<BatteryView> {
        let mut out = views.to_vec();
        if self.off.is_some() {
            for b in &mut out {
                b.max_charge_w = 0.0;
                b.max_discharge_w = 0.0;
            }
            return out;
        }
        let scale = |out: &mut [BatteryView], cap: f64, get: fn(&mut BatteryView) -> &mut f64| {
            let sum: f64 = out.iter_mut().map(|b| get(b).max(0.0)).sum();
            if sum > cap {
                let k = if sum > 0.0 { cap.max(0.0) / sum } else { 0.0 };
                for b in out.iter_mut() {
                    let v = get(b);
                    *v = v.max(0.0) * k;
                }
            }
        };
        if let Some(l) = &self.load {
            scale(&mut out, l.value, |b| &mut b.max_charge_w);
        }
        if let Some(g) = &self.generation {
            scale(&mut out, g.value, |b| &mut b.max_discharge_w);
        }
        out
    }

    /// The plan with the operator's storage target, or with the DER off;
    /// the limit that changed it, if any.
    pub fn plan(&self, plan: &mut SitePlan) -> Option<SourceLimit> {
        if let Some(off) = &self.off {
            plan.storage = StoragePlan::Power(0.0);
            plan.production = ProductionPlan::Limit(0.0);
            return Some(off.clone());
        }
        if let Some(target) = &self.storage_target {
            plan.storage = StoragePlan::Power(target.value);
            return Some(target.clone());
        }
        // Released batteries follow their own logic, which knows nothing
        // of a limit over the DER: a full battery covering a load would
        // discharge past a generation limit. Under such a limit they are
        // held (idle unless the grid loop moves them), never released.
        let over_der = self.generation.as_ref().or(self.load.as_ref())?;
        if plan.storage == StoragePlan::Release {
            plan.storage = StoragePlan::Power(0.0);
            return Some(over_der.clone());
        }
        None
    }

    /// The loop's answer within the bounds: the production at most what the
    /// generation limit leaves beside the batteries' discharge (`battery_w`:
    /// what they do when released); the limit that changed it, if any.
    pub fn clamp(&self, held: &mut Held, battery_w: f64) -> Option<SourceLimit> {
        if let Some(off) = &self.off {
            held.storage = StoragePlan::Power(0.0);
            held.production = ProductionPlan::Limit(0.0);
            return Some(off.clone());
        }
        let mut by = None;
        if let (Some(l), StoragePlan::Power(p)) = (&self.load, held.storage) {
            if p < -l.value {
                held.storage = StoragePlan::Power(-l.value.max(0.0));
                by = Some(l.clone());
            }
        }
        if let Some(g) = &self.generation {
            let discharge = held.storage.power_w().unwrap_or(battery_w).max(0.0);
            if let StoragePlan::Power(p) = held.storage {
                if p > g.value {
                    held.storage = StoragePlan::Power(g.value.max(0.0));
                }
            }
            let cap = (g.value - discharge.min(g.value)).max(0.0);
            let production = match held.production {
                ProductionPlan::Release => Some(ProductionPlan::Limit(cap)),
                ProductionPlan::Limit(l) if l > cap => Some(ProductionPlan::Limit(cap)),
                ProductionPlan::Cap(c) if c > cap => Some(ProductionPlan::Cap(cap)),
                _ => None,
            };
            if let Some(p) = production {
                held.production = p;
                by = Some(g.clone());
            }
        }
        by
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steering::hold::{ImportOrder, LoopMode, LoopState};
    use crate::steering::limits::LimitSource;

    fn limit(kind: Kind, value: f64) -> SourceLimit {
        SourceLimit {
            source: LimitSource::Csip,
            kind,
            value,
            until_ms: None,
            failsafe: false,
            since_ms: 0,
            reference: Some("M".into()),
        }
    }

    fn battery(charge: f64, discharge: f64) -> BatteryView {
        BatteryView {
            rated_w: charge.max(discharge),
            max_charge_w: charge,
            max_discharge_w: discharge,
            soc: Some(50.0),
            soc_min: 10.0,
            soc_max: 90.0,
            capacity_wh: Some(10_000.0),
            priority: 0,
        }
    }

    fn held(storage: StoragePlan, production: ProductionPlan) -> Held {
        Held {
            storage,
            production,
            mode: LoopMode::Free,
            changes: Vec::new(),
            state: LoopState::default(),
        }
    }

    fn set(limits: Vec<SourceLimit>) -> DerBounds {
        DerBounds::of(&OperatorSet { limits })
    }

    #[test]
    fn a_load_limit_shares_the_charge_and_a_generation_limit_the_discharge() {
        let b = set(vec![
            limit(Kind::Load, 3_000.0),
            limit(Kind::Generation, 1_000.0),
        ]);
        let v = b.batteries(&[battery(4_000.0, 4_000.0), battery(2_000.0, 2_000.0)]);
        assert_eq!((v[0].max_charge_w, v[1].max_charge_w), (2_000.0, 1_000.0));
        let discharge: f64 = v.iter().map(|b| b.max_discharge_w).sum();
        assert!((discharge - 1_000.0).abs() < 1e-9);
    }

    #[test]
    fn the_production_gets_what_the_generation_limit_leaves_beside_the_discharge() {
        let b = set(vec![limit(Kind::Generation, 5_000.0)]);
        let mut h = held(StoragePlan::Power(2_000.0), ProductionPlan::Release);
        assert!(b.clamp(&mut h, 0.0).is_some());
        assert_eq!(h.production, ProductionPlan::Limit(3_000.0));
        // Released batteries: their measured discharge counts.
        let mut h = held(StoragePlan::Release, ProductionPlan::Cap(9_000.0));
        b.clamp(&mut h, 4_000.0);
        assert_eq!(h.production, ProductionPlan::Cap(1_000.0));
        // Charging takes nothing from the generation limit.
        let mut h = held(StoragePlan::Power(-3_000.0), ProductionPlan::Limit(2_000.0));
        assert!(b.clamp(&mut h, 0.0).is_none());
        assert_eq!(h.production, ProductionPlan::Limit(2_000.0));
    }

    #[test]
    fn a_der_taken_off_holds_the_inverters_at_zero_and_the_batteries_idle() {
        let b = set(vec![limit(Kind::Connect, 0.0), limit(Kind::Load, 100.0)]);
        let v = b.batteries(&[battery(4_000.0, 4_000.0)]);
        assert_eq!((v[0].max_charge_w, v[0].max_discharge_w), (0.0, 0.0));
        let mut plan = SitePlan {
            storage: StoragePlan::Power(-4_000.0),
            production: ProductionPlan::Release,
            import_order: ImportOrder::LiftCurtailmentFirst,
        };
        assert_eq!(b.plan(&mut plan).map(|l| l.kind), Some(Kind::Connect));
        assert_eq!(plan.storage, StoragePlan::Power(0.0));
        let mut h = held(StoragePlan::Power(-500.0), ProductionPlan::Cap(300.0));
        b.clamp(&mut h, 0.0);
        assert_eq!(
            (h.storage, h.production),
            (StoragePlan::Power(0.0), ProductionPlan::Limit(0.0))
        );
    }

    #[test]
    fn a_storage_target_takes_the_place_of_the_partners() {
        let b = set(vec![limit(Kind::StorageTarget, -2_500.0)]);
        let mut plan = SitePlan {
            storage: StoragePlan::Release,
            production: ProductionPlan::Release,
            import_order: ImportOrder::LiftCurtailmentFirst,
        };
        b.plan(&mut plan);
        assert_eq!(plan.storage, StoragePlan::Power(-2_500.0));
        assert!(set(Vec::new()).is_empty());
    }

    #[test]
    fn released_batteries_are_held_under_a_generation_or_load_limit() {
        let released = || SitePlan {
            storage: StoragePlan::Release,
            production: ProductionPlan::Release,
            import_order: ImportOrder::LiftCurtailmentFirst,
        };
        for kind in [Kind::Generation, Kind::Load] {
            let b = set(vec![limit(kind, 10_000.0)]);
            let mut plan = released();
            assert_eq!(b.plan(&mut plan).map(|l| l.kind), Some(kind));
            assert_eq!(plan.storage, StoragePlan::Power(0.0), "{kind:?}");
            // A partner's request stays, for the loop and the clamp to bound.
            let mut asked = SitePlan {
                storage: StoragePlan::Power(4_000.0),
                ..released()
            };
            assert!(b.plan(&mut asked).is_none());
            assert_eq!(asked.storage, StoragePlan::Power(4_000.0));
        }
        // With no limit over the DER, released stays released.
        let mut plan = released();
        assert!(set(Vec::new()).plan(&mut plan).is_none());
        assert_eq!(plan.storage, StoragePlan::Release);
    }
}
