//! Modbus TCP framing for the server: the MBAP header, the requests it
//! understands, the answers and exceptions it writes.
//!
//! Pure: bytes in, typed requests out, and back. It reads no socket and
//! decides nothing about what a request may see (`dispatch.rs` does).

/// The MBAP header's length.
pub const HEADER: usize = 7;
/// The most registers one read may ask for.
pub const MAX_READ: u16 = 125;
/// The most registers one write may carry.
pub const MAX_WRITE: u16 = 123;

/// A Modbus exception code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exception {
    IllegalFunction = 0x01,
    IllegalDataAddress = 0x02,
    IllegalDataValue = 0x03,
    ServerBusy = 0x06,
    GatewayTargetFailed = 0x0B,
}

impl Exception {
    /// The `result` label the request is counted under.
    pub const fn label(self) -> &'static str {
        match self {
            Exception::IllegalFunction => "illegal_function",
            Exception::IllegalDataAddress => "illegal_data_address",
            Exception::IllegalDataValue => "illegal_data_value",
            Exception::ServerBusy => "server_busy",
            Exception::GatewayTargetFailed => "gateway_target_failed",
        }
    }

    pub const ALL: [Exception; 5] = [
        Exception::IllegalFunction,
        Exception::IllegalDataAddress,
        Exception::IllegalDataValue,
        Exception::ServerBusy,
        Exception::GatewayTargetFailed,
    ];
}

/// A frame's header, once its seven bytes are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub transaction: u16,
    pub unit: u8,
    /// Bytes of the PDU that follow (the function code and its data).
    pub pdu_len: usize,
}

/// Why a header cannot start a frame: the stream cannot be trusted past
/// it, so the connection closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadHeader {
    #[error("protocol id {0} is not Modbus (0)")]
    Protocol(u16),
    #[error("length {0} is outside 2 to 254")]
    Length(u16),
}

/// Reads a header; the length must leave room for a function code and at
/// most a 253-byte PDU.
pub fn header(b: &[u8; HEADER]) -> Result<Header, BadHeader> {
    let word = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    let (transaction, protocol, len) = (word(0), word(2), word(4));
    if protocol != 0 {
        return Err(BadHeader::Protocol(protocol));
    }
    if !(2..=254).contains(&len) {
        return Err(BadHeader::Length(len));
    }
    Ok(Header {
        transaction,
        unit: b[6],
        pdu_len: usize::from(len) - 1,
    })
}

/// Which table a read is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadTable {
    /// Function 3.
    Holding,
    /// Function 4.
    Input,
}

/// A request the server understands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Read {
        table: ReadTable,
        addr: u16,
        count: u16,
    },
    /// Functions 6 (one register) and 16 (several).
    Write { addr: u16, values: Vec<u16> },
}

/// The request in a PDU, or the exception that answers it.
pub fn request(pdu: &[u8]) -> Result<Request, Exception> {
    let (&function, data) = pdu.split_first().ok_or(Exception::IllegalFunction)?;
    let word = |i: usize| data.get(i..i + 2).map(|w| u16::from_be_bytes([w[0], w[1]]));
    match function {
        0x03 | 0x04 => {
            if data.len() != 4 {
                return Err(Exception::IllegalDataValue);
            }
            let (addr, count) = (word(0).unwrap_or(0), word(2).unwrap_or(0));
            if count == 0 || count > MAX_READ {
                return Err(Exception::IllegalDataValue);
            }
            if u32::from(addr) + u32::from(count) > 0x1_0000 {
                return Err(Exception::IllegalDataAddress);
            }
            let table = if function == 0x03 {
                ReadTable::Holding
            } else {
                ReadTable::Input
            };
            Ok(Request::Read { table, addr, count })
        }
        0x06 => match (data.len(), word(0), word(2)) {
            (4, Some(addr), Some(value)) => Ok(Request::Write {
                addr,
                values: vec![value],
            }),
            _ => Err(Exception::IllegalDataValue),
        },
        0x10 => {
            let (Some(addr), Some(count), Some(&bytes)) = (word(0), word(2), data.get(4)) else {
                return Err(Exception::IllegalDataValue);
            };
            let ok = (1..=MAX_WRITE).contains(&count)
                && usize::from(bytes) == 2 * usize::from(count)
                && data.len() == 5 + usize::from(bytes);
            if !ok {
                return Err(Exception::IllegalDataValue);
            }
            if u32::from(addr) + u32::from(count) > 0x1_0000 {
                return Err(Exception::IllegalDataAddress);
            }
            let values = data[5..]
                .chunks_exact(2)
                .map(|w| u16::from_be_bytes([w[0], w[1]]))
                .collect();
            Ok(Request::Write { addr, values })
        }
        _ => Err(Exception::IllegalFunction),
    }
}

/// The PDU answering a read with `words`.
pub fn read_answer(function: u8, words: &[u16]) -> Vec<u8> {
    let mut pdu = Vec::with_capacity(2 + 2 * words.len());
    pdu.push(function);
    pdu.push((2 * words.len()) as u8);
    for w in words {
        pdu.extend_from_slice(&w.to_be_bytes());
    }
    pdu
}

/// The PDU answering a write of `count` registers from `addr`.
pub fn write_answer(function: u8, addr: u16, values: &[u16]) -> Vec<u8> {
    let mut pdu = vec![function];
    pdu.extend_from_slice(&addr.to_be_bytes());
    if function == 0x06 {
        pdu.extend_from_slice(&values.first().copied().unwrap_or(0).to_be_bytes());
    } else {
        pdu.extend_from_slice(&(values.len() as u16).to_be_bytes());
    }
    pdu
}

/// The PDU of an exception to `function`.
pub fn exception(function: u8, e: Exception) -> Vec<u8> {
    vec![function | 0x80, e as u8]
}

/// A whole frame: the header for `transaction` and `unit`, then `pdu`.
pub fn frame(transaction: u16, unit: u8, pdu: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + pdu.len());
    out.extend_from_slice(&transaction.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&((pdu.len() + 1) as u16).to_be_bytes());
    out.push(unit);
    out.extend_from_slice(pdu);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_outside_modbus_close_the_stream() {
        assert_eq!(
            header(&[0, 7, 0, 0, 0, 6, 1]),
            Ok(Header {
                transaction: 7,
                unit: 1,
                pdu_len: 5
            })
        );
        assert_eq!(header(&[0, 7, 0, 1, 0, 6, 1]), Err(BadHeader::Protocol(1)));
        assert_eq!(header(&[0, 7, 0, 0, 0, 1, 1]), Err(BadHeader::Length(1)));
        assert_eq!(header(&[0, 7, 0, 0, 1, 0, 1]), Err(BadHeader::Length(256)));
    }

    #[test]
    fn requests_and_their_exceptions() {
        assert_eq!(
            request(&[3, 0x9c, 0x40, 0, 2]),
            Ok(Request::Read {
                table: ReadTable::Holding,
                addr: 40000,
                count: 2
            })
        );
        assert_eq!(
            request(&[3, 0, 0, 0, 126]),
            Err(Exception::IllegalDataValue)
        );
        assert_eq!(request(&[3, 0, 0, 0, 0]), Err(Exception::IllegalDataValue));
        assert_eq!(request(&[4, 0, 0, 0]), Err(Exception::IllegalDataValue));
        assert_eq!(
            request(&[4, 0xff, 0xff, 0, 2]),
            Err(Exception::IllegalDataAddress)
        );
        assert_eq!(
            request(&[0x2b, 0x0e, 1, 0]),
            Err(Exception::IllegalFunction)
        );
        assert_eq!(
            request(&[0x83, 0, 0, 0, 1]),
            Err(Exception::IllegalFunction)
        );
        assert_eq!(
            request(&[6, 0, 10, 0, 5]),
            Ok(Request::Write {
                addr: 10,
                values: vec![5]
            })
        );
        assert_eq!(
            request(&[0x10, 0, 10, 0, 2, 4, 0, 1, 0, 2]),
            Ok(Request::Write {
                addr: 10,
                values: vec![1, 2]
            })
        );
        assert_eq!(
            request(&[0x10, 0, 10, 0, 2, 3, 0, 1, 0]),
            Err(Exception::IllegalDataValue)
        );
    }

    #[test]
    fn answers_are_whole_frames() {
        let f = frame(9, 2, &read_answer(3, &[0x1234, 5]));
        assert_eq!(f, vec![0, 9, 0, 0, 0, 7, 2, 3, 4, 0x12, 0x34, 0, 5]);
        assert_eq!(exception(3, Exception::IllegalDataAddress), vec![0x83, 2]);
    }
}
