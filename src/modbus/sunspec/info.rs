//! Nameplate information read at discovery: identity and ratings. The
//! ratings are static points (`modbus::statics`): read again with them, and
//! [`ratings`] gives them from any image that holds [`rating_spans`]. Pure
//! but for the one read of [`read_info_with`].

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

/// The Common model's identity points (`Mn`, `Md`, `Vr`, `SN`).
fn identity_spans(chain: &[ModelBlock]) -> Vec<Span> {
    chain
        .iter()
        .filter(|b| b.id == 1)
        .flat_map(|b| {
            [
                span(b, &Common::MN),
                span(b, &Common::MD),
                span(b, &Common::VR),
                span(b, &Common::SN),
            ]
        })
        .flatten()
        .collect()
}

/// The rating points and their scale factors: 120 `WRtg` and `WHRtg`, 121
/// `WMax`, 702 `WMaxRtg`, 713 and 802 `WHRtg`. Settings and nameplate data:
/// static points (`modbus::statics`).
pub fn rating_spans(chain: &[ModelBlock]) -> Vec<Span> {
    let mut spans = Vec::new();
    for b in chain {
        let s: Vec<Option<Span>> = match b.id {
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
    spans
}

/// A device's power rating and storage capacity, as its models give them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ratings {
    /// 121 `WMax`, else 120 `WRtg`, else 702 `WMaxRtg`.
    pub power_w: Option<f64>,
    /// 120 `WHRtg`, else 713's, else 802's.
    pub capacity_wh: Option<f64>,
}

/// The ratings in `img` (which holds [`rating_spans`]). Later models do not
/// override earlier answers: `WMax` (121) is the setting the limit
/// percentages refer to, so it wins over the `WRtg` nameplate.
pub fn ratings(chain: &[ModelBlock], img: &Image) -> Ratings {
    let (mut wmax, mut wrtg, mut capacity) = (None, None, None);
    for b in chain {
        match b.id {
            120 => {
                wrtg = wrtg.or(rating(img, b, &Nameplate::W_RTG, &Nameplate::W_RTG_SF));
                capacity = capacity.or(rating(img, b, &Nameplate::WH_RTG, &Nameplate::WH_RTG_SF));
            }
            121 => wmax = wmax.or(rating(img, b, &Settings::W_MAX, &Settings::W_MAX_SF)),
            702 => wrtg = wrtg.or(rating(img, b, &DerCapacity::W_MAX_RTG, &DerCapacity::W_SF)),
            713 => capacity = capacity.or(rating(img, b, &DerStor::WH_RTG, &DerStor::WH_SF)),
            802 => capacity = capacity.or(rating(img, b, &Battery::WH_RTG, &Battery::WH_RTG_SF)),
            _ => {}
        }
    }
    Ratings {
        power_w: wmax.or(wrtg),
        capacity_wh: capacity,
    }
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
    Ok(read_info_with(r, chain, &[]).await?.0)
}

/// [`read_info`], reading `extra` spans in the same requests (discovery's
/// static points); returns the image read as well.
pub async fn read_info_with<R: RegisterReader>(
    r: &mut R,
    chain: &[ModelBlock],
    extra: &[Span],
) -> Result<(DeviceInfo, Image), ModbusError> {
    let mut spans = identity_spans(chain);
    spans.extend(rating_spans(chain));
    spans.extend_from_slice(extra);
    let img = read_spans(r, &spans, u16::MAX).await?;
    let mut info = DeviceInfo {
        sunspec_models: chain.iter().map(|b| b.id).collect(),
        ..DeviceInfo::default()
    };
    if let Some(b) = chain.iter().find(|b| b.id == 1) {
        info.manufacturer = text(&img, b, &Common::MN);
        info.model = text(&img, b, &Common::MD);
        info.version = text(&img, b, &Common::VR);
        info.serial = text(&img, b, &Common::SN);
    }
    let r = ratings(chain, &img);
    info.rated_power_w = r.power_w;
    info.capacity_wh = r.capacity_wh;
    Ok((info, img))
}
