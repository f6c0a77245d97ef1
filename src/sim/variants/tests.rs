use super::*;
use crate::sim::device::Device;
use crate::sim::{SimDeviceSpec, SimKind};

fn device(variant: Variant, base: u16) -> Device {
    let spec = SimDeviceSpec {
        unit_id: 7,
        kind: SimKind::Fixed {
            variant,
            rated_w: 8000.0,
        },
        serial: "FIX-7".into(),
        refuse_writes: false,
        sunspec_base: base,
        response: crate::sim::SimResponse::IDEAL,
    };
    Device::new(&spec, crate::sim::device::Build::calm(30_000.0))
}

#[test]
fn every_register_of_the_families_is_laid_out() {
    for (variant, ids) in [
        (Variant::Inverter101, vec![1, 101, 120, 121]),
        (Variant::Inverter102, vec![1, 102, 120]),
        (Variant::Inverter111, vec![1, 111, 120]),
        (Variant::Inverter112, vec![1, 112]),
        (Variant::Meter201, vec![1, 201]),
        (Variant::Meter202, vec![1, 202]),
        (Variant::Meter204, vec![1, 204]),
        (Variant::Meter211, vec![1, 211]),
        (Variant::Meter212, vec![1, 212]),
        (Variant::Meter214, vec![1, 214]),
    ] {
        let d = device(variant, 40000);
        let got: Vec<u16> = d.map.models().iter().map(|m| m.id).collect();
        assert_eq!(got, ids, "{variant:?}");
        assert_eq!(d.map.undeclared(), Vec::<u16>::new(), "{variant:?}");
    }
}

#[test]
fn a_map_sits_at_its_base() {
    for base in [0, 40000, 50000] {
        let d = device(Variant::Meter201, base);
        assert_eq!(d.map.read(base, 2), Ok(vec![0x5375, 0x6E53]), "{base}");
        assert_eq!(d.map.models()[0].addr, base + 2);
    }
    let d = device(Variant::Meter201, 0);
    assert!(d.map.read(40000, 2).is_err(), "nothing at 40000");
}

#[test]
fn expected_and_absent_properties_do_not_overlap() {
    use Variant as V;
    for v in [
        V::InverterFloat,
        V::MeterFloat,
        V::DerStorage,
        V::Inverter101,
        V::Inverter102,
        V::Inverter111,
        V::Inverter112,
        V::Meter201,
        V::Meter202,
        V::Meter204,
        V::Meter211,
        V::Meter212,
        V::Meter214,
    ] {
        let shown: Vec<Property> = expected(v, 8000.0).into_iter().map(|(p, _)| p).collect();
        assert!(!shown.is_empty(), "{v:?}");
        for p in absent(v) {
            assert!(!shown.contains(&p), "{v:?} {p:?}");
        }
    }
}
