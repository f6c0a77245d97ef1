//! A mirrored SunSpec device's answer to a read inside its models
//! (`docs/modbus-server.md`, "Devices"): each register as the device's last
//! poll, its static points or discovery read it, and every other register
//! of a model as its point's "not implemented" value
//! (`sunspec::unimplemented`), so a client that reads models whole walks
//! the mirror as it walks the device.
//!
//! Pure: it reads what the bus task published and never the device; it
//! must not decide whether the image is fresh (`dispatch.rs` does) nor make
//! up a word for a register outside every model, or one whose point the
//! definitions do not tell.

use crate::modbus::sunspec::{unimplemented, ModelBlock};
use crate::modbus::PollImage;
use crate::register::plan::Table;

/// The words of `count` holding registers from `addr`: each as read where
/// `image` holds it, else the "not implemented" word of its point in its
/// model of `chain`. `None` when one register is neither (outside every
/// model, or a point the definitions do not tell).
pub fn read(image: &PollImage, chain: &[ModelBlock], addr: u16, count: u16) -> Option<Vec<u16>> {
    let word = |a: u16| image.get(Table::Holding, a, 1).map(|w| w[0]);
    // The blocks the read touches, each laid out once.
    let mut laid: Vec<(&ModelBlock, Vec<u16>)> = Vec::new();
    let mut out = Vec::with_capacity(usize::from(count));
    for i in 0..count {
        let a = addr.checked_add(i)?;
        if let Some(w) = word(a) {
            out.push(w);
            continue;
        }
        let (b, offset) = chain
            .iter()
            .find_map(|b| b.data_offset(a).map(|o| (b, o)))?;
        if !laid.iter().any(|(l, _)| std::ptr::eq(*l, b)) {
            let data = b.addr + 2;
            let read = |o: u16| data.checked_add(o).and_then(word);
            laid.push((b, unimplemented::words(b, &read)));
        }
        let (_, words) = laid.iter().find(|(l, _)| std::ptr::eq(*l, b))?;
        out.push(*words.get(usize::from(offset))?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::register::plan::{Image, Span};

    /// Common (L 66) at 40002, 123 (L 24) at 40070, then the end marker.
    fn chain() -> Vec<ModelBlock> {
        vec![
            ModelBlock {
                id: 1,
                addr: 40002,
                len: 66,
            },
            ModelBlock {
                id: 123,
                addr: 40070,
                len: 24,
            },
        ]
    }

    fn image(polled: &[(u16, &[u16])]) -> PollImage {
        let mut img = Image::new();
        for (addr, words) in polled {
            img.insert(
                Span::new(Table::Holding, *addr, words.len() as u16),
                words.to_vec(),
            );
        }
        PollImage::build(
            &img,
            &Image::new(),
            &chain(),
            tokio::time::Instant::now(),
            0,
        )
    }

    #[test]
    fn registers_read_answer_as_read_and_the_rest_of_a_model_not_implemented() {
        // The Common model's Mn ("AB"), model 123's WMaxLimPct and
        // WMaxLim_Ena polled.
        let img = image(&[(40004, &[0x4142]), (40075, &[10000, 0, 0, 0, 1])]);
        let c = chain();
        // DA, Pad, then 123's header: the tail of the Common model.
        assert_eq!(
            read(&img, &c, 40068, 4),
            Some(vec![0xFFFF, 0, 123, 24]),
            "DA not implemented, the pad 0, the header as the device's"
        );
        let m123 = read(&img, &c, 40070, 26).expect("model 123 whole");
        assert_eq!(&m123[..2], [123, 24]);
        assert_eq!(&m123[5..10], [10000, 0, 0, 0, 1], "as polled");
        assert_eq!(&m123[2..5], [0xFFFF; 3], "Conn_WinTms, ...: uint16, enum16");
        assert_eq!(&m123[23..26], [0x8000; 3], "the scale factors: sunssf");
        // The whole map in one read: marker, both models, the end marker.
        let all = read(&img, &c, 40000, 98).expect("the map whole");
        assert_eq!(&all[..4], [0x5375, 0x6E53, 1, 66]);
        assert_eq!(all[4], 0x4142);
        assert_eq!(&all[96..], [0xFFFF, 0]);
    }

    #[test]
    fn a_read_outside_every_model_has_no_answer() {
        let img = image(&[]);
        let c = chain();
        assert_eq!(read(&img, &c, 40096, 3), None, "past the end marker");
        assert_eq!(read(&img, &c, 39999, 2), None, "before the marker");
        assert_eq!(read(&img, &c, 100, 1), None);
        assert_eq!(read(&img, &c, 0xFFFF, 2), None, "past 65535");
        // A model the definitions do not have: its unread registers neither.
        let vendor = [ModelBlock {
            id: 65000,
            addr: 40002,
            len: 4,
        }];
        assert_eq!(read(&img, &vendor, 40004, 1), None);
    }
}
