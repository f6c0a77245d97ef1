//! DER programs and their controls: DERProgram (primacy, where its controls
//! and its default are), DERControl (an event: when, how long, what), the
//! DefaultDERControl that holds between events, and the DERControlBase both
//! carry with CSIP-AUS's limits.

use super::{href_of, page, Page};
use crate::csip::xml::{Doc, El, XmlError};

/// One DERProgram of a list.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub href: String,
    pub mrid: String,
    /// Lower wins.
    pub primacy: u8,
    pub default_control: Option<String>,
    pub controls: Option<String>,
}

pub fn programs(text: &str) -> Result<Page<Program>, XmlError> {
    let doc = Doc::parse(text)?;
    page(&doc.root("DERProgramList")?, "DERProgram", |el| {
        Ok(Program {
            href: href_of(el)?,
            mrid: el.text_of("mRID").unwrap_or_default().to_string(),
            primacy: el.required("primacy")?,
            default_control: el.link("DefaultDERControlLink")?,
            controls: el.link("DERControlListLink")?,
        })
    })
}

/// What a control or a default sets; every mode optional. Powers in W.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ControlBase {
    pub connect: Option<bool>,
    pub energize: Option<bool>,
    /// `opModMaxLimW`: production at most this share of `setMaxW`, %.
    pub max_lim_pct: Option<f64>,
    /// The ramp to this control's values, s (`rampTms` is hundredths).
    pub ramp_s: Option<f64>,
    pub import_w: Option<f64>,
    pub export_w: Option<f64>,
    pub generation_w: Option<f64>,
    pub load_w: Option<f64>,
    /// + discharge, − charge.
    pub storage_target_w: Option<f64>,
}

impl ControlBase {
    /// The modes this base sets.
    pub fn modes(&self) -> Vec<Mode> {
        Mode::ALL
            .into_iter()
            .filter(|m| self.value(*m).is_some())
            .collect()
    }

    /// The value of mode `m` (connect and energize: 1 on, 0 off).
    pub fn value(&self, m: Mode) -> Option<f64> {
        let flag = |b: Option<bool>| b.map(|b| if b { 1.0 } else { 0.0 });
        match m {
            Mode::Connect => flag(self.connect),
            Mode::Energize => flag(self.energize),
            Mode::MaxLimPct => self.max_lim_pct,
            Mode::Import => self.import_w,
            Mode::Export => self.export_w,
            Mode::Generation => self.generation_w,
            Mode::Load => self.load_w,
            Mode::StorageTarget => self.storage_target_w,
        }
    }
}

/// One control mode: what primacy and supersession are decided on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    Connect,
    Energize,
    MaxLimPct,
    Import,
    Export,
    Generation,
    Load,
    StorageTarget,
}

impl Mode {
    pub const ALL: [Mode; 8] = [
        Mode::Connect,
        Mode::Energize,
        Mode::MaxLimPct,
        Mode::Import,
        Mode::Export,
        Mode::Generation,
        Mode::Load,
        Mode::StorageTarget,
    ];

    /// The element's name.
    pub fn element(self) -> &'static str {
        match self {
            Mode::Connect => "opModConnect",
            Mode::Energize => "opModEnergize",
            Mode::MaxLimPct => "opModMaxLimW",
            Mode::Import => "opModImpLimW",
            Mode::Export => "opModExpLimW",
            Mode::Generation => "opModGenLimW",
            Mode::Load => "opModLoadLimW",
            Mode::StorageTarget => "opModStorageTargetW",
        }
    }
}

/// `ActivePower`: `value` × 10^`multiplier` W.
fn active_power(el: &El<'_, '_>, name: &str) -> Result<Option<f64>, XmlError> {
    let Some(p) = el.child(name) else {
        return Ok(None);
    };
    let value: i64 = p.required("value")?;
    let multiplier: i8 = p.number("multiplier")?.unwrap_or(0);
    if !(-9..=9).contains(&multiplier) {
        return Err(XmlError {
            path: format!("{}/multiplier", p.path()),
            message: format!("{multiplier} is beyond the powers of ten a power can have (-9 to 9)"),
        });
    }
    Ok(Some(value as f64 * 10f64.powi(i32::from(multiplier))))
}

fn control_base(parent: &El<'_, '_>) -> Result<ControlBase, XmlError> {
    let Some(el) = parent.child("DERControlBase") else {
        return Ok(ControlBase::default());
    };
    Ok(ControlBase {
        connect: el.boolean("opModConnect")?,
        energize: el.boolean("opModEnergize")?,
        // PerCent: hundredths of a percent.
        max_lim_pct: el
            .number::<u16>("opModMaxLimW")?
            .map(|v| f64::from(v) / 100.0),
        ramp_s: el.number::<u16>("rampTms")?.map(|v| f64::from(v) / 100.0),
        import_w: active_power(&el, "opModImpLimW")?,
        export_w: active_power(&el, "opModExpLimW")?,
        generation_w: active_power(&el, "opModGenLimW")?,
        load_w: active_power(&el, "opModLoadLimW")?,
        storage_target_w: active_power(&el, "opModStorageTargetW")?,
    })
}

/// `EventStatus.currentStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventStatus {
    Scheduled,
    Active,
    Cancelled,
    CancelledWithRandomization,
    Superseded,
}

impl EventStatus {
    pub fn code(self) -> u8 {
        match self {
            EventStatus::Scheduled => 0,
            EventStatus::Active => 1,
            EventStatus::Cancelled => 2,
            EventStatus::CancelledWithRandomization => 3,
            EventStatus::Superseded => 4,
        }
    }

    pub fn of_code(c: u8) -> Option<EventStatus> {
        [
            EventStatus::Scheduled,
            EventStatus::Active,
            EventStatus::Cancelled,
            EventStatus::CancelledWithRandomization,
            EventStatus::Superseded,
        ]
        .into_iter()
        .find(|s| s.code() == c)
    }
}

/// One DERControl: an event.
#[derive(Clone, Debug, PartialEq)]
pub struct Control {
    pub href: Option<String>,
    pub mrid: String,
    pub description: Option<String>,
    /// Where its Responses go, and which it wants (bit 0 received, bit 1
    /// the rest).
    pub reply_to: Option<String>,
    pub response_required: u8,
    pub creation_s: i64,
    pub status: EventStatus,
    pub start_s: i64,
    pub duration_s: u32,
    pub randomize_start_s: i16,
    pub randomize_duration_s: i16,
    pub base: ControlBase,
}

impl Control {
    /// When it ends, without randomization.
    pub fn end_s(&self) -> i64 {
        self.start_s + i64::from(self.duration_s)
    }
}

fn control_of(el: &El<'_, '_>) -> Result<Control, XmlError> {
    let mrid = el.text_of("mRID").unwrap_or_default();
    if mrid.is_empty() {
        return Err(XmlError {
            path: el.path().to_string(),
            message: "has no mRID".into(),
        });
    }
    let interval = el.child("interval").ok_or_else(|| XmlError {
        path: el.path().to_string(),
        message: "has no interval".into(),
    })?;
    let status = match el.child("EventStatus") {
        None => EventStatus::Scheduled,
        Some(s) => {
            let code: u8 = s.required("currentStatus")?;
            EventStatus::of_code(code).ok_or_else(|| XmlError {
                path: format!("{}/currentStatus", s.path()),
                message: format!("{code} is not an event status (0 to 4)"),
            })?
        }
    };
    let response_required = el.attr_hex("responseRequired")?.unwrap_or(0);
    Ok(Control {
        href: el.href(),
        mrid: mrid.to_string(),
        description: el.text_of("description").map(str::to_string),
        reply_to: el
            .attr("replyTo")
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_string),
        response_required: u8::try_from(response_required).unwrap_or(u8::MAX),
        creation_s: el.number("creationTime")?.unwrap_or(0),
        status,
        start_s: interval.required("start")?,
        duration_s: interval.required("duration")?,
        randomize_start_s: el.number("randomizeStart")?.unwrap_or(0),
        randomize_duration_s: el.number("randomizeDuration")?.unwrap_or(0),
        base: control_base(el)?,
    })
}

/// A page of a DERControlList. A control the client cannot read is left
/// out and said (its path and why), so one bad control does not hide the
/// others.
pub fn controls(text: &str) -> Result<(Page<Control>, Vec<XmlError>), XmlError> {
    let doc = Doc::parse(text)?;
    let root = doc.root("DERControlList")?;
    let mut bad = Vec::new();
    let page = page(&root, "DERControl", |el| Ok(control_of(el)))?;
    let items = page
        .items
        .into_iter()
        .filter_map(|r| r.map_err(|e| bad.push(e)).ok())
        .collect();
    Ok((
        Page {
            all: page.all,
            results: page.results,
            poll_rate_s: page.poll_rate_s,
            items,
        },
        bad,
    ))
}

/// A DefaultDERControl: what holds between events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DefaultControl {
    pub mrid: String,
    pub base: ControlBase,
    /// Hundredths of a percent of `setMaxW` per second; 0: no limit.
    pub set_grad_w: Option<u16>,
}

pub fn default_control(text: &str) -> Result<DefaultControl, XmlError> {
    let doc = Doc::parse(text)?;
    let root = doc.root("DefaultDERControl")?;
    Ok(DefaultControl {
        mrid: root.text_of("mRID").unwrap_or_default().to_string(),
        base: control_base(&root)?,
        set_grad_w: root.number("setGradW")?,
    })
}

#[cfg(test)]
mod tests;
