use super::*;

/// SA Power Networks' shape: CSIP-AUS limits under a prefix, ActivePower's
/// children unprefixed.
const SAPN: &str = r#"<DERControlList xmlns="urn:ieee:std:2030.5:ns" xmlns:csipaus="https://csipaus.org/ns" all="2" results="2" subscribable="1">
<DERControl href="/edev/1/derp/1/derc/8f20" replyTo="/rsps/1/rsp" responseRequired="03">
  <mRID>8f20816bba3542a98b46774f20ee3dd9</mRID><description>DOE</description><version>1</version>
  <creationTime>1726633064</creationTime>
  <EventStatus><currentStatus>1</currentStatus><dateTime>1726633069</dateTime><potentiallySuperseded>false</potentiallySuperseded><reason>Created</reason></EventStatus>
  <interval><duration>600</duration><start>1726633063</start></interval>
  <randomizeStart>30</randomizeStart>
  <DERControlBase>
    <csipaus:opModImpLimW><multiplier>2</multiplier><value>150</value></csipaus:opModImpLimW>
    <csipaus:opModExpLimW><multiplier>0</multiplier><value>1500</value></csipaus:opModExpLimW>
    <opModEnergize>true</opModEnergize><rampTms>6000</rampTms>
  </DERControlBase>
</DERControl>
<DERControl><mRID>BAD</mRID><interval><start>1</start></interval></DERControl>
</DERControlList>"#;

#[test]
fn a_control_list_reads_times_limits_and_multipliers() {
    let (page, bad) = controls(SAPN).unwrap();
    assert_eq!(page.all, 2);
    let c = &page.items[0];
    assert_eq!(c.mrid, "8f20816bba3542a98b46774f20ee3dd9");
    assert_eq!(c.reply_to.as_deref(), Some("/rsps/1/rsp"));
    assert_eq!(c.response_required, 3);
    assert_eq!(c.status, EventStatus::Active);
    assert_eq!(
        (c.start_s, c.duration_s, c.end_s()),
        (1_726_633_063, 600, 1_726_633_663)
    );
    assert_eq!(c.randomize_start_s, 30);
    assert_eq!(c.base.import_w, Some(15_000.0));
    assert_eq!(c.base.export_w, Some(1_500.0));
    assert_eq!(c.base.energize, Some(true));
    assert_eq!(c.base.ramp_s, Some(60.0));
    assert_eq!(
        c.base.modes(),
        vec![Mode::Energize, Mode::Import, Mode::Export]
    );
    // The second has no duration: left out and said, the first kept.
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].path, "DERControlList/DERControl[1]/interval");
}

#[test]
fn programs_and_defaults_read_primacy_links_and_ramp() {
    let p = programs(r#"<DERProgramList xmlns="urn:ieee:std:2030.5:ns" all="1" results="1" pollRate="60">
      <DERProgram href="/edev/1/derp/1"><mRID>A1</mRID><DefaultDERControlLink href="/edev/1/derp/1/dderc"/>
      <DERControlListLink all="0" href="/edev/1/derp/1/derc"/><primacy>2</primacy></DERProgram></DERProgramList>"#)
    .unwrap();
    assert_eq!(p.poll_rate_s, Some(60));
    let p = &p.items[0];
    assert_eq!(
        (p.primacy, p.controls.as_deref()),
        (2, Some("/edev/1/derp/1/derc"))
    );
    assert_eq!(p.default_control.as_deref(), Some("/edev/1/derp/1/dderc"));
    let d = default_control(r#"<DefaultDERControl xmlns="urn:ieee:std:2030.5:ns" xmlns:ns2="https://csipaus.org/ns/v1.3">
      <mRID>03e4</mRID><setGradW>27</setGradW>
      <DERControlBase><ns2:opModExpLimW><value>1500</value></ns2:opModExpLimW><opModConnect>0</opModConnect></DERControlBase></DefaultDERControl>"#)
    .unwrap();
    assert_eq!(d.set_grad_w, Some(27));
    assert_eq!(d.base.export_w, Some(1500.0));
    assert_eq!(d.base.connect, Some(false));
    assert_eq!(d.base.value(Mode::Connect), Some(0.0));
}

#[test]
fn bad_values_name_the_element() {
    let e = default_control("<DefaultDERControl><DERControlBase><opModExpLimW><multiplier>40</multiplier><value>1</value></opModExpLimW></DERControlBase></DefaultDERControl>")
        .unwrap_err();
    assert_eq!(
        e.path,
        "DefaultDERControl/DERControlBase/opModExpLimW/multiplier"
    );
    let e = default_control("<DefaultDERControl><DERControlBase><opModExpLimW><value>lots</value></opModExpLimW></DERControlBase></DefaultDERControl>")
        .unwrap_err();
    assert!(e.to_string().contains("\"lots\""), "{e}");
    let (_, bad) = controls("<DERControlList all=\"1\" results=\"1\"><DERControl><mRID>X</mRID><EventStatus><currentStatus>9</currentStatus></EventStatus><interval><start>1</start><duration>1</duration></interval></DERControl></DERControlList>").unwrap();
    assert_eq!(bad[0].message, "9 is not an event status (0 to 4)");
}
