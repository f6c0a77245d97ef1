//! Nameplate information read once at discovery: identity and ratings.

use sunspec::models::{
    model1::Model1 as Common, model120::Model120 as Nameplate, model121::Model121 as Settings,
    model702::Model702 as DerCapacity, model713::Model713 as DerStor,
    model802::Model802 as Battery,
};
use sunspec::{Group, Point, Value};

use super::ModelBlock;
use crate::modbus::error::ModbusError;
use crate::modbus::reader::{read_spans, RegisterReader};
use crate::register::codec::{self, Absent, ValueType};
use crate::register::plan::{Image, Span, Table};
use crate::telemetry::DeviceInfo;

fn span<G: Group, T: Value>(b: &ModelBlock, p: &Point<G, T>) -> Option<Span> {
    b.holds(p.offset, p.length)
        .then(|| Span::new(Table::Holding, b.point(p.offset), p.length))
}

/// A uint16 rating scaled by its sunssf, both in block `b`.
fn rating<G: Group, A: Value, B: Value>(
    img: &Image,
    b: &ModelBlock,
    p: &Point<G, A>,
    sf: &Point<G, B>,
) -> Option<f64> {
    let v = span(b, p).and_then(|s| img.get(s.table, s.addr, 1))?;
    let raw = codec::decode(v, ValueType::U16, Default::default(), Absent::SunspecNumber)?;
    let sf = span(b, sf).and_then(|s| img.get(s.table, s.addr, 1))?;
    Some(codec::apply_sf(raw, codec::decode_sf(sf[0])?))
}

fn text<G: Group, T: Value>(img: &Image, b: &ModelBlock, p: &Point<G, T>) -> Option<String> {
    let s = span(b, p)?;
    codec::decode_string(img.get(s.table, s.addr, s.len)?)
}

/// Reads identity (Common model) and ratings (120, 121, 702, 713, 802) in as few
/// requests as the planner allows: a SunSpec map should be readable end to end,
/// so reads span any gap; a device that refuses part of one (model 1's `Opt`,
/// 103's event registers answered with "illegal data address") gets the read
/// split, and a point it refuses alone is left out of the info.
pub async fn read_info<R: RegisterReader>(
    r: &mut R,
    chain: &[ModelBlock],
) -> Result<DeviceInfo, ModbusError> {
    let mut spans = Vec::new();
    for b in chain {
        let s: Vec<Option<Span>> = match b.id {
            1 => vec![
                span(b, &Common::MN),
                span(b, &Common::MD),
                span(b, &Common::VR),
                span(b, &Common::SN),
            ],
            120 => vec![
                span(b, &Nameplate::W_RTG),
                span(b, &Nameplate::W_RTG_SF),
                span(b, &Nameplate::WH_RTG),
                span(b, &Nameplate::WH_RTG_SF),
            ],
            121 => vec![span(b, &Settings::W_MAX), span(b, &Settings::W_MAX_SF)],
            702 => vec![
                span(b, &DerCapacity::W_MAX_RTG),
                span(b, &DerCapacity::W_SF),
            ],
            713 => vec![span(b, &DerStor::WH_RTG), span(b, &DerStor::WH_SF)],
            802 => vec![span(b, &Battery::WH_RTG), span(b, &Battery::WH_RTG_SF)],
            _ => vec![],
        };
        spans.extend(s.into_iter().flatten());
    }
    let img = read_spans(r, &spans, u16::MAX).await?;
    let mut info = DeviceInfo {
        sunspec_models: chain.iter().map(|b| b.id).collect(),
        ..DeviceInfo::default()
    };
    // Later models do not override earlier answers: WMax (121) is the setting
    // the limit percentages refer to, so it wins over the WRtg nameplate.
    let mut wmax = None;
    let mut wrtg = None;
    for b in chain {
        match b.id {
            1 => {
                info.manufacturer = text(&img, b, &Common::MN);
                info.model = text(&img, b, &Common::MD);
                info.version = text(&img, b, &Common::VR);
                info.serial = text(&img, b, &Common::SN);
            }
            120 => {
                wrtg = wrtg.or(rating(&img, b, &Nameplate::W_RTG, &Nameplate::W_RTG_SF));
                info.capacity_wh =
                    info.capacity_wh
                        .or(rating(&img, b, &Nameplate::WH_RTG, &Nameplate::WH_RTG_SF));
            }
            121 => wmax = wmax.or(rating(&img, b, &Settings::W_MAX, &Settings::W_MAX_SF)),
            702 => wrtg = wrtg.or(rating(&img, b, &DerCapacity::W_MAX_RTG, &DerCapacity::W_SF)),
            713 => {
                info.capacity_wh =
                    info.capacity_wh
                        .or(rating(&img, b, &DerStor::WH_RTG, &DerStor::WH_SF))
            }
            802 => {
                info.capacity_wh =
                    info.capacity_wh
                        .or(rating(&img, b, &Battery::WH_RTG, &Battery::WH_RTG_SF))
            }
            _ => {}
        }
    }
    info.rated_power_w = wmax.or(wrtg);
    Ok(info)
}
