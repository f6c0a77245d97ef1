//! The client's answers to events: a DERControlResponse posted to the
//! control's `replyTo`, with 2030.5's status codes (Table 27).

use crate::csip::xml::Writer;

/// The statuses the client sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResponseStatus {
    Received,
    Started,
    Completed,
    Cancelled,
    Superseded,
    /// Rejected: the event's end had passed when it was received.
    Expired,
}

impl ResponseStatus {
    pub const ALL: [ResponseStatus; 6] = [
        ResponseStatus::Received,
        ResponseStatus::Started,
        ResponseStatus::Completed,
        ResponseStatus::Cancelled,
        ResponseStatus::Superseded,
        ResponseStatus::Expired,
    ];

    pub fn code(self) -> u8 {
        match self {
            ResponseStatus::Received => 1,
            ResponseStatus::Started => 2,
            ResponseStatus::Completed => 3,
            ResponseStatus::Cancelled => 6,
            ResponseStatus::Superseded => 7,
            ResponseStatus::Expired => 254,
        }
    }

    pub fn of_code(c: u8) -> Option<ResponseStatus> {
        Self::ALL.into_iter().find(|s| s.code() == c)
    }

    pub fn wire_name(self) -> &'static str {
        match self {
            ResponseStatus::Received => "received",
            ResponseStatus::Started => "started",
            ResponseStatus::Completed => "completed",
            ResponseStatus::Cancelled => "cancelled",
            ResponseStatus::Superseded => "superseded",
            ResponseStatus::Expired => "expired",
        }
    }

    /// Whether a control's `responseRequired` asks for this status: bit 0
    /// for the receipt, bit 1 for the rest.
    pub fn required_by(self, response_required: u8) -> bool {
        match self {
            ResponseStatus::Received => response_required & 0b01 != 0,
            _ => response_required & 0b10 != 0,
        }
    }
}

/// The Response to control `mrid`.
pub fn encode_response(
    mrid: &str,
    status: ResponseStatus,
    lfdi: &str,
    now_s: i64,
    ns: &str,
) -> String {
    let mut w = Writer::new("DERControlResponse", ns);
    w.leaf("createdDateTime", now_s)
        .leaf("endDeviceLFDI", lfdi)
        .leaf("status", status.code())
        .leaf("subject", mrid);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csip::xml::Doc;

    #[test]
    fn a_response_names_its_control_and_status() {
        let text = encode_response(
            "8F20",
            ResponseStatus::Superseded,
            "AB",
            5,
            crate::csip::xml::write::CSIPAUS,
        );
        let doc = Doc::parse(&text).unwrap();
        let root = doc.root("DERControlResponse").unwrap();
        assert_eq!(root.number::<u8>("status").unwrap(), Some(7));
        assert_eq!(root.text_of("subject"), Some("8F20"));
        for s in ResponseStatus::ALL {
            assert_eq!(ResponseStatus::of_code(s.code()), Some(s));
        }
    }

    #[test]
    fn response_required_bits_gate_the_statuses() {
        assert!(ResponseStatus::Received.required_by(0x01));
        assert!(!ResponseStatus::Started.required_by(0x01));
        assert!(ResponseStatus::Started.required_by(0x03));
        assert!(!ResponseStatus::Received.required_by(0x02));
        assert!(!ResponseStatus::Completed.required_by(0));
    }
}
