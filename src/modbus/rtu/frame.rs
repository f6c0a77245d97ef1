//! Modbus RTU framing (Modbus over Serial Line v1.02): the CRC, request and
//! response frames for functions 3, 4, 6 and 16, how long an answer will be
//! once its first bytes are in, and the silent interval between frames.
//!
//! Pure: bytes in, bytes or values out. Both the agent's RTU client and the
//! simulator's RTU server use it; neither the line nor time lives here.

use std::time::Duration;

use tokio_modbus::ExceptionCode;

/// Largest RTU frame: address, PDU of at most 253 bytes, CRC.
pub const MAX_FRAME: usize = 256;

/// CRC-16/MODBUS (polynomial 0xA001 reflected, initial 0xFFFF), sent low byte first.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    for &b in bytes {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xA001
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// Appends the CRC to a frame body.
pub fn seal(mut body: Vec<u8>) -> Vec<u8> {
    let crc = crc16(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pdu {
    ReadHolding {
        addr: u16,
        count: u16,
    },
    ReadInput {
        addr: u16,
        count: u16,
    },
    /// Discrete inputs: `count` bits, answered as words of 0 or 1.
    ReadDiscrete {
        addr: u16,
        count: u16,
    },
    WriteSingle {
        addr: u16,
        value: u16,
    },
    WriteMultiple {
        addr: u16,
        values: Vec<u16>,
    },
}

impl Pdu {
    /// The same request as tokio-modbus names it: what a TCP client sends
    /// and what a server's handler answers.
    pub fn request(&self) -> tokio_modbus::Request<'_> {
        use tokio_modbus::Request;
        match self {
            Pdu::ReadHolding { addr, count } => Request::ReadHoldingRegisters(*addr, *count),
            Pdu::ReadInput { addr, count } => Request::ReadInputRegisters(*addr, *count),
            Pdu::ReadDiscrete { addr, count } => Request::ReadDiscreteInputs(*addr, *count),
            Pdu::WriteSingle { addr, value } => Request::WriteSingleRegister(*addr, *value),
            Pdu::WriteMultiple { addr, values } => {
                Request::WriteMultipleRegisters(*addr, values.as_slice().into())
            }
        }
    }

    pub fn function(&self) -> u8 {
        match self {
            Pdu::ReadHolding { .. } => 3,
            Pdu::ReadInput { .. } => 4,
            Pdu::ReadDiscrete { .. } => 2,
            Pdu::WriteSingle { .. } => 6,
            Pdu::WriteMultiple { .. } => 16,
        }
    }
}

/// What an answer carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Words(Vec<u16>),
    Written,
    Exception(ExceptionCode),
}

/// Why received bytes are not the answer to a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("CRC mismatch: frame says {got:#06x}, bytes give {want:#06x}")]
    Crc { got: u16, want: u16 },
    #[error("answer from unit {got}, asked unit {want}")]
    WrongUnit { got: u8, want: u8 },
    #[error("answer for function {got}, asked function {want}")]
    WrongFunction { got: u8, want: u8 },
    #[error("{0}")]
    Malformed(String),
}

/// A request frame for `unit`.
pub fn request(unit: u8, pdu: &Pdu) -> Vec<u8> {
    let mut b = vec![unit, pdu.function()];
    match pdu {
        Pdu::ReadHolding { addr, count }
        | Pdu::ReadInput { addr, count }
        | Pdu::ReadDiscrete { addr, count } => {
            b.extend_from_slice(&addr.to_be_bytes());
            b.extend_from_slice(&count.to_be_bytes());
        }
        Pdu::WriteSingle { addr, value } => {
            b.extend_from_slice(&addr.to_be_bytes());
            b.extend_from_slice(&value.to_be_bytes());
        }
        Pdu::WriteMultiple { addr, values } => {
            b.extend_from_slice(&addr.to_be_bytes());
            b.extend_from_slice(&(values.len() as u16).to_be_bytes());
            b.push((values.len() * 2) as u8);
            for v in values {
                b.extend_from_slice(&v.to_be_bytes());
            }
        }
    }
    seal(b)
}

/// Length of the answer frame that starts with `head`, once enough of it is in
/// to tell (`None`: need more bytes).
pub fn answer_len(head: &[u8]) -> Option<usize> {
    let function = *head.get(1)?;
    if function & 0x80 != 0 {
        return Some(5);
    }
    match function {
        2..=4 => head.get(2).map(|&n| 3 + usize::from(n) + 2),
        _ => Some(8),
    }
}

/// Length of the request frame that starts with `head` (server side).
pub fn request_len(head: &[u8]) -> Option<usize> {
    match *head.get(1)? {
        16 => head.get(6).map(|&n| 7 + usize::from(n) + 2),
        _ => Some(8),
    }
}

/// The frame without its CRC, when the CRC checks.
pub(crate) fn check_crc(frame: &[u8]) -> Result<&[u8], FrameError> {
    if frame.len() < 4 {
        return Err(FrameError::Malformed(format!(
            "{} bytes is too short for a frame",
            frame.len()
        )));
    }
    let (body, crc) = frame.split_at(frame.len() - 2);
    let got = u16::from_le_bytes([crc[0], crc[1]]);
    let want = crc16(body);
    if got != want {
        return Err(FrameError::Crc { got, want });
    }
    Ok(body)
}

fn words(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect()
}

/// Bits packed LSB first (input `addr` in bit 0 of the first byte), as words of 0 or 1.
fn unpack_bits(bytes: &[u8], count: u16) -> Vec<u16> {
    (0..usize::from(count))
        .map(|i| u16::from(bytes[i / 8] >> (i % 8) & 1))
        .collect()
}

/// Words of 0 or 1 packed as bits, LSB first.
pub fn pack_bits(bits: &[u16]) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, b) in bits.iter().enumerate() {
        if *b != 0 {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// Decodes the answer to `pdu` sent to `unit`.
pub fn decode_answer(unit: u8, pdu: &Pdu, frame: &[u8]) -> Result<Answer, FrameError> {
    let body = check_crc(frame)?;
    if body[0] != unit {
        return Err(FrameError::WrongUnit {
            got: body[0],
            want: unit,
        });
    }
    let function = body[1];
    if function & 0x7F != pdu.function() {
        return Err(FrameError::WrongFunction {
            got: function & 0x7F,
            want: pdu.function(),
        });
    }
    if function & 0x80 != 0 {
        return Ok(Answer::Exception(ExceptionCode::new(body[2])));
    }
    match pdu {
        Pdu::ReadHolding { count, .. } | Pdu::ReadInput { count, .. } => {
            let n = usize::from(body[2]);
            if n != usize::from(*count) * 2 || body.len() != 3 + n {
                return Err(FrameError::Malformed(format!(
                    "asked for {count} registers, answer carries {n} bytes"
                )));
            }
            Ok(Answer::Words(words(&body[3..])))
        }
        Pdu::ReadDiscrete { count, .. } => {
            let n = usize::from(body[2]);
            if n != usize::from(*count).div_ceil(8) || body.len() != 3 + n {
                return Err(FrameError::Malformed(format!(
                    "asked for {count} discrete inputs, answer carries {n} bytes"
                )));
            }
            Ok(Answer::Words(unpack_bits(&body[3..], *count)))
        }
        Pdu::WriteSingle { addr, .. } | Pdu::WriteMultiple { addr, .. } => {
            let echoed = u16::from_be_bytes([body[2], body[3]]);
            if echoed != *addr {
                return Err(FrameError::Malformed(format!(
                    "write to {addr} answered for {echoed}"
                )));
            }
            Ok(Answer::Written)
        }
    }
}

/// Server side: the unit and request in a frame (function codes 2, 3, 4, 6, 16;
/// others come back as `Err(function)` so the server can answer exception 1).
pub fn decode_request(frame: &[u8]) -> Result<(u8, Result<Pdu, u8>), FrameError> {
    let body = check_crc(frame)?;
    let short = || FrameError::Malformed("request too short".into());
    let u = |i: usize| -> Result<u16, FrameError> {
        Ok(u16::from_be_bytes([
            *body.get(i).ok_or_else(short)?,
            *body.get(i + 1).ok_or_else(short)?,
        ]))
    };
    let pdu = match body[1] {
        2 => Ok(Pdu::ReadDiscrete {
            addr: u(2)?,
            count: u(4)?,
        }),
        3 => Ok(Pdu::ReadHolding {
            addr: u(2)?,
            count: u(4)?,
        }),
        4 => Ok(Pdu::ReadInput {
            addr: u(2)?,
            count: u(4)?,
        }),
        6 => Ok(Pdu::WriteSingle {
            addr: u(2)?,
            value: u(4)?,
        }),
        16 => Ok(Pdu::WriteMultiple {
            addr: u(2)?,
            values: words(body.get(7..).ok_or_else(short)?),
        }),
        other => Err(other),
    };
    Ok((body[0], pdu))
}

/// Server side: the answer frame.
pub fn answer(unit: u8, function: u8, a: &Answer, pdu: Option<&Pdu>) -> Vec<u8> {
    let mut b = vec![unit];
    match a {
        Answer::Exception(code) => {
            b.push(function | 0x80);
            b.push(u8::from(*code));
        }
        Answer::Words(w) if function == 2 => {
            let packed = pack_bits(w);
            b.push(function);
            b.push(packed.len() as u8);
            b.extend_from_slice(&packed);
        }
        Answer::Words(w) => {
            b.push(function);
            b.push((w.len() * 2) as u8);
            for v in w {
                b.extend_from_slice(&v.to_be_bytes());
            }
        }
        Answer::Written => {
            b.push(function);
            match pdu {
                Some(Pdu::WriteSingle { addr, value }) => {
                    b.extend_from_slice(&addr.to_be_bytes());
                    b.extend_from_slice(&value.to_be_bytes());
                }
                Some(Pdu::WriteMultiple { addr, values }) => {
                    b.extend_from_slice(&addr.to_be_bytes());
                    b.extend_from_slice(&(values.len() as u16).to_be_bytes());
                }
                _ => {}
            }
        }
    }
    seal(b)
}

/// Bits one character takes on the line: start, data, parity, stop.
pub fn bits_per_char(data_bits: u8, parity: bool, stop_bits: u8) -> u32 {
    1 + u32::from(data_bits) + u32::from(parity) + u32::from(stop_bits)
}

/// The silent interval before a frame: 3.5 character times, or the fixed
/// 1.75 ms the Modbus serial line spec sets above 19200 baud.
pub fn silent_interval(baud: u32, bits_per_char: u32) -> Duration {
    if baud > 19_200 {
        return Duration::from_micros(1750);
    }
    let micros = 3.5 * f64::from(bits_per_char) * 1e6 / f64::from(baud.max(1));
    Duration::from_micros(micros.ceil() as u64)
}

#[cfg(test)]
mod tests;
