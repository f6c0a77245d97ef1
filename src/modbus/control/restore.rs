//! Leaving a device as the installer left it: which holding registers a
//! device's recipe may write (its footprint), what they held when the agent
//! first found them (its [`Originals`]), and the release plan that writes
//! those values back.
//!
//! A release hands control back to the device; the recipe's own release writes
//! (a mode register back to "auto", a limit switched off) are what a device
//! gets when nothing else is known. With the originals known, every register
//! the recipe may write gets the word it held before: the installer's mode,
//! a power limit an installer had set, a charge or discharge limit, the
//! remote-command timeout. Pure: no I/O, no state.

use super::{Command, Recipe, RegWrite, WritePlan};
use crate::register::plan::{Image, Span, Table};

/// What a device's control registers held when the agent first found them,
/// point by point (each `values` as long as the recipe writes that point).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Originals {
    pub points: Vec<RegWrite>,
}

impl Originals {
    /// The points of `footprint` as read (`reads[i]` for `footprint[i]`); a
    /// point whose read came back short is left out.
    pub fn from_reads(footprint: &[Span], reads: &[Vec<u16>]) -> Originals {
        let points = footprint
            .iter()
            .zip(reads)
            .filter(|(span, words)| words.len() == usize::from(span.len))
            .map(|(span, words)| RegWrite {
                addr: span.addr,
                values: words.clone(),
            })
            .collect();
        Originals { points }
    }

    /// The addresses and lengths it holds, to compare with a footprint.
    pub fn spans(&self) -> Vec<Span> {
        self.points
            .iter()
            .map(|p| Span::new(Table::Holding, p.addr, p.values.len() as u16))
            .collect()
    }

    /// The word found at `addr`, if it was read.
    pub fn word(&self, addr: u16) -> Option<u16> {
        self.points.iter().find_map(|p| {
            addr.checked_sub(p.addr)
                .and_then(|i| p.values.get(usize::from(i)))
                .copied()
        })
    }

    /// One line for the log: `addr=word[,word]` per point.
    pub fn describe(&self) -> String {
        let words = |v: &[u16]| v.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
        self.points
            .iter()
            .map(|p| format!("{}={}", p.addr, words(&p.values)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The commands whose plans together write every register a recipe may
/// write: both directions, idle and release for storage; a limit and its
/// release for production.
fn sample_commands(recipe: &Recipe) -> &'static [Command] {
    match recipe {
        Recipe::Storage124(_)
        | Recipe::StorageGen24(_)
        | Recipe::Storage704(_)
        | Recipe::ProfileStorage(_) => &[
            Command::EssPower(1000.0),
            Command::EssPower(-1000.0),
            Command::EssPower(0.0),
            Command::EssRelease,
        ],
        Recipe::Limit(_) | Recipe::ProfileLimit(_) => {
            &[Command::ProductionLimit(0.0), Command::ProductionRelease]
        }
    }
}

/// Every holding-register point the recipe may write, by address: the union
/// of what its plans write for [`sample_commands`] (which registers a plan
/// writes does not depend on the power, only on its direction). A command the
/// recipe cannot plan (a rating missing) adds nothing.
pub fn footprint(recipe: &Recipe, revert_s: u16, cal: &Image) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    for cmd in sample_commands(recipe) {
        let Ok(plan) = recipe.plan(*cmd, revert_s, cal) else {
            continue;
        };
        for w in plan.writes {
            let span = Span::new(Table::Holding, w.addr, w.values.len() as u16);
            if !spans.contains(&span) {
                spans.push(span);
            }
        }
    }
    spans.sort_by_key(|s| (s.addr, s.len));
    spans
}

/// The release `plan` with the originals written back: each word the release
/// writes becomes the word found there, in the release's order; then every
/// other original point, by address.
pub fn restore(plan: &WritePlan, originals: &Originals) -> WritePlan {
    if originals.points.is_empty() {
        return plan.clone();
    }
    let mut writes: Vec<RegWrite> = plan
        .writes
        .iter()
        .map(|w| RegWrite {
            addr: w.addr,
            values: w
                .values
                .iter()
                .enumerate()
                .map(|(i, word)| {
                    let addr = w.addr.wrapping_add(i as u16);
                    originals.word(addr).unwrap_or(*word)
                })
                .collect(),
        })
        .collect();
    let written = |addr: u16| {
        writes.iter().any(|w| {
            addr.checked_sub(w.addr)
                .is_some_and(|i| usize::from(i) < w.values.len())
        })
    };
    let rest: Vec<RegWrite> = originals
        .points
        .iter()
        .filter(|p| !written(p.addr))
        .cloned()
        .collect();
    writes.extend(rest);
    WritePlan::new(writes)
}

/// The words a plan changes against what the device held (`found`): one
/// `(addr, old, new)` per register that changes, for the log.
pub fn changes(plan: &WritePlan, found: &Originals) -> Vec<(u16, Option<u16>, u16)> {
    let mut out = Vec::new();
    for w in &plan.writes {
        for (i, new) in w.values.iter().enumerate() {
            let addr = w.addr.wrapping_add(i as u16);
            let old = found.word(addr);
            if old != Some(*new) {
                out.push((addr, old, *new));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modbus::control::ProfileEss;
    use crate::profile::{EssControl, EssSetpoint, FixedWrite, ValueRegister};
    use crate::register::codec::{ValueType, WordOrder};

    fn fixed(addr: u16, word: u16) -> FixedWrite {
        FixedWrite {
            addr,
            values: vec![word],
        }
    }

    /// A storage control as SolarEdge's: mode 0xE00D written to 4 for a
    /// setpoint, 7 at release; the charge and discharge limits 0xE00E/0xE010
    /// (two words each).
    fn recipe() -> Recipe {
        let reg = |addr| ValueRegister {
            addr,
            ty: ValueType::F32,
            order: WordOrder::default(),
            scale: 1.0,
            offset: 0.0,
        };
        Recipe::ProfileStorage(ProfileEss {
            control: EssControl {
                revert_timeout: None,
                enable: vec![fixed(0xE00D, 4)],
                setpoint: EssSetpoint::Split {
                    charge: reg(0xE00E),
                    discharge: reg(0xE010),
                },
                direction: None,
                release: vec![fixed(0xE00D, 7)],
                unused: Default::default(),
                limits: None,
                one_request: false,
                on_timeout: None,
            },
            rated_w: None,
        })
    }

    #[test]
    fn the_footprint_is_every_point_any_plan_writes() {
        let spans = footprint(&recipe(), 60, &Image::new());
        let addrs: Vec<(u16, u16)> = spans.iter().map(|s| (s.addr, s.len)).collect();
        assert_eq!(addrs, [(0xE00D, 1), (0xE00E, 2), (0xE010, 2)]);
    }

    #[test]
    fn a_release_writes_back_what_was_found() {
        let r = recipe();
        let spans = footprint(&r, 60, &Image::new());
        // The installer left mode 1 and limits of 5000 W (f32 words).
        let found = Originals::from_reads(
            &spans,
            &[vec![1], vec![0x459C, 0x4000], vec![0x459C, 0x4000]],
        );
        let release = r.plan(Command::EssRelease, 60, &Image::new()).unwrap();
        let p = restore(&release, &found);
        assert_eq!(
            p.writes,
            [
                RegWrite {
                    addr: 0xE00D,
                    values: vec![1]
                },
                RegWrite {
                    addr: 0xE00E,
                    values: vec![0x459C, 0x4000]
                },
                RegWrite {
                    addr: 0xE010,
                    values: vec![0x459C, 0x4000]
                },
            ]
        );
        assert!(p.expect.contains(&(0xE00D, 1)));
        // Nothing known: the recipe's own release.
        assert_eq!(restore(&release, &Originals::default()), release);
        // The log names what a write changes.
        assert_eq!(changes(&release, &found), [(0xE00D, Some(1), 7)]);
        assert!(changes(&p, &found).is_empty());
    }

    #[test]
    fn a_short_read_leaves_its_point_out() {
        let spans = [
            Span::new(Table::Holding, 10, 1),
            Span::new(Table::Holding, 20, 2),
        ];
        let o = Originals::from_reads(&spans, &[vec![5], vec![1]]);
        assert_eq!(o.describe(), "10=5");
    }
}
