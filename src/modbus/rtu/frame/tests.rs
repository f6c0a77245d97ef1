use super::*;

#[test]
fn crc_matches_the_spec_example() {
    // Modbus over Serial Line, appendix: read 2 holding registers from 0x006B... the
    // classic example "01 03 00 00 00 0A" has CRC C5 CD (sent low byte first).
    let frame = request(1, &Pdu::ReadHolding { addr: 0, count: 10 });
    assert_eq!(frame, [0x01, 0x03, 0x00, 0x00, 0x00, 0x0A, 0xC5, 0xCD]);
    assert_eq!(crc16(&[0x02, 0x07]), 0x1241);
}

#[test]
fn requests_and_answers_round_trip() {
    let pdus = [
        Pdu::ReadHolding {
            addr: 40000,
            count: 2,
        },
        Pdu::ReadInput {
            addr: 13021,
            count: 1,
        },
        Pdu::WriteSingle {
            addr: 47100,
            value: 2,
        },
        Pdu::WriteMultiple {
            addr: 47247,
            values: vec![0, 2500],
        },
    ];
    for pdu in pdus {
        let req = request(9, &pdu);
        assert_eq!(request_len(&req), Some(req.len()), "{pdu:?}");
        assert_eq!(decode_request(&req).unwrap(), (9, Ok(pdu.clone())));
        let a = match pdu {
            Pdu::ReadHolding { count, .. } | Pdu::ReadInput { count, .. } => {
                Answer::Words((0..count).map(|i| 0x5300 + i).collect())
            }
            _ => Answer::Written,
        };
        let frame = answer(9, pdu.function(), &a, Some(&pdu));
        assert_eq!(answer_len(&frame[..3]), Some(frame.len()));
        assert_eq!(decode_answer(9, &pdu, &frame).unwrap(), a);
    }
}

#[test]
fn bad_answers_are_named() {
    let pdu = Pdu::ReadHolding { addr: 0, count: 1 };
    let good = answer(1, 3, &Answer::Words(vec![7]), None);
    let mut bad = good.clone();
    bad[3] ^= 0xFF;
    assert!(matches!(
        decode_answer(1, &pdu, &bad),
        Err(FrameError::Crc { .. })
    ));
    assert_eq!(
        decode_answer(2, &pdu, &good),
        Err(FrameError::WrongUnit { got: 1, want: 2 })
    );
    let other = Pdu::ReadInput { addr: 0, count: 1 };
    assert!(matches!(
        decode_answer(1, &other, &good),
        Err(FrameError::WrongFunction { got: 3, want: 4 })
    ));
    let two = Pdu::ReadHolding { addr: 0, count: 2 };
    assert!(matches!(
        decode_answer(1, &two, &good),
        Err(FrameError::Malformed(_))
    ));
    let exc = answer(
        1,
        3,
        &Answer::Exception(ExceptionCode::IllegalDataAddress),
        None,
    );
    assert_eq!(answer_len(&exc[..2]), Some(5));
    assert_eq!(
        decode_answer(1, &pdu, &exc),
        Ok(Answer::Exception(ExceptionCode::IllegalDataAddress))
    );
}

#[test]
fn silent_interval_is_three_and_a_half_characters_up_to_19200() {
    // 9600 8N1: 10 bits per char, 3.5 chars = 35 bits = 3.646 ms.
    let b = bits_per_char(8, false, 1);
    assert_eq!(b, 10);
    assert_eq!(silent_interval(9600, b), Duration::from_micros(3646));
    // 19200 8E1: 11 bits, 38.5 bits = 2.005 ms.
    assert_eq!(
        silent_interval(19_200, bits_per_char(8, true, 1)),
        Duration::from_micros(2006)
    );
    assert_eq!(silent_interval(38_400, b), Duration::from_micros(1750));
    assert_eq!(silent_interval(115_200, b), Duration::from_micros(1750));
}
