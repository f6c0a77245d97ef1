//! The test server's documents, written as envoy (the reference CSIP-AUS
//! server) writes them: the 2030.5 namespace as the default, CSIP-AUS's
//! limits under a prefix with ActivePower's children unprefixed. Text
//! templates of its own: nothing of the client's XML code.

use super::{BaseSpec, Control, DefaultSpec, Mirror, Program};

pub const NS: &str = r#"xmlns="urn:ieee:std:2030.5:ns" xmlns:csipaus="https://csipaus.org/ns""#;

fn power(name: &str, w: Option<f64>, multiplier: i8) -> String {
    match w {
        None => String::new(),
        Some(w) => {
            let value = (w / 10f64.powi(i32::from(multiplier))).round() as i64;
            format!("<csipaus:{name}><multiplier>{multiplier}</multiplier><value>{value}</value></csipaus:{name}>")
        }
    }
}

pub fn base(b: &BaseSpec) -> String {
    let flag = |name: &str, v: Option<bool>| {
        v.map(|v| format!("<{name}>{v}</{name}>"))
            .unwrap_or_default()
    };
    let m = b.multiplier;
    format!(
        "<DERControlBase>{}{}{}{}{}{}{}{}</DERControlBase>",
        flag("opModConnect", b.connect),
        flag("opModEnergize", b.energize),
        b.ramp_tms
            .map(|r| format!("<rampTms>{r}</rampTms>"))
            .unwrap_or_default(),
        power("opModImpLimW", b.import_w, m),
        power("opModExpLimW", b.export_w, m),
        power("opModGenLimW", b.generation_w, m),
        power("opModLoadLimW", b.load_w, m),
        power("opModStorageTargetW", b.storage_w, m),
    )
}

pub fn control(k: usize, c: &Control, now_s: i64) -> String {
    let status = if c.cancelled {
        2
    } else if c.superseded {
        4
    } else if now_s >= c.start_s {
        1
    } else {
        0
    };
    let random = if c.randomize_start_s != 0 {
        format!("<randomizeStart>{}</randomizeStart>", c.randomize_start_s)
    } else {
        String::new()
    };
    format!(
        r#"<DERControl href="/edev/1/derp/{k}/derc/{mrid}" replyTo="/edev/1/rsps/site_control/rsp" responseRequired="03" subscribable="0"><mRID>{mrid}</mRID><description>{tag}</description><version>0</version><creationTime>{created}</creationTime><EventStatus><currentStatus>{status}</currentStatus><dateTime>{created}</dateTime><potentiallySuperseded>false</potentiallySuperseded></EventStatus><interval><duration>{duration}</duration><start>{start}</start></interval>{random}{base}</DERControl>"#,
        mrid = c.mrid,
        tag = c.tag,
        created = c.created_s,
        duration = c.duration_s,
        start = c.start_s,
        base = base(&c.base),
    )
}

pub fn default(k: usize, d: &DefaultSpec) -> String {
    let grad = d
        .set_grad_w
        .map(|g| format!("<setGradW>{g}</setGradW>"))
        .unwrap_or_default();
    // envoy writes the base after the settings; the client reads any order.
    format!(
        r#"<DefaultDERControl {NS} href="/edev/1/derp/{k}/dderc" subscribable="1"><mRID>DEFA{k:028}</mRID><description>default</description><version>0</version>{grad}{base}</DefaultDERControl>"#,
        base = base(&d.base)
    )
}

pub fn program(k: usize, p: &Program) -> String {
    let dflt = if p.default.is_some() {
        format!(r#"<DefaultDERControlLink href="/edev/1/derp/{k}/dderc"/>"#)
    } else {
        String::new()
    };
    format!(
        r#"<DERProgram href="/edev/1/derp/{k}" subscribable="1"><mRID>PROG{k:028}</mRID><description>program {k}</description><version>0</version><ActiveDERControlListLink href="/edev/1/derp/{k}/actderc" all="0"/>{dflt}<DERControlListLink href="/edev/1/derp/{k}/derc" all="{n}"/><primacy>{primacy}</primacy></DERProgram>"#,
        n = p.controls.len(),
        primacy = p.primacy
    )
}

pub fn list(
    root: &str,
    all: usize,
    items: &[String],
    poll_rate: Option<u32>,
    href: &str,
) -> String {
    let rate = poll_rate
        .map(|r| format!(r#" pollRate="{r}""#))
        .unwrap_or_default();
    format!(
        r#"<{root} {NS} href="{href}" all="{all}" results="{}"{rate}>{}</{root}>"#,
        items.len(),
        items.join("")
    )
}

pub fn end_device(lfdi: &str, sfdi: u64, registration_link: bool, post_rate: u32) -> String {
    let rg = if registration_link {
        r#"<RegistrationLink href="/edev/1/rg"/>"#
    } else {
        ""
    };
    format!(
        r#"<EndDevice href="/edev/1" subscribable="0"><DERListLink href="/edev/1/der" all="1"/><lFDI>{lfdi}</lFDI><LogEventListLink href="/edev/1/lel" all="0"/><sFDI>{sfdi}</sFDI><changedTime>1700000000</changedTime><enabled>1</enabled><FunctionSetAssignmentsListLink href="/edev/1/fsa" all="1"/><postRate>{post_rate}</postRate>{rg}<SubscriptionListLink href="/edev/1/sub" all="0"/><csipaus:ConnectionPointLink href="/edev/1/cp"/></EndDevice>"#
    )
}

pub fn mirror(id: usize, m: &Mirror, post_rate: u32) -> String {
    format!(
        r#"<MirrorUsagePoint href="/mup/{id}"><mRID>{}</mRID><description>mirror</description><roleFlags>{:02X}</roleFlags><serviceCategoryKind>0</serviceCategoryKind><status>1</status><deviceLFDI>{}</deviceLFDI><postRate>{post_rate}</postRate></MirrorUsagePoint>"#,
        m.mrid, m.role, m.lfdi
    )
}
