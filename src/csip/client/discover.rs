//! Discovery and registration (ALL-01 to ALL-05): the DeviceCapability, the
//! server's time, the device's EndDevice found by its lFDI or registered in
//! band, its Registration PIN checked, the ConnectionPoint's NMI, and the
//! function sets, DERs and mirrors polled from then on. Lists are read page
//! by page.

use super::polls::Poll;
use super::{Client, Failure};
use crate::csip::resource::discovery::{self, EndDevice};
use crate::csip::resource::Page;
use crate::csip::status::State;
use crate::csip::xml::{Doc, XmlError};

/// Items asked for per page.
pub const PAGE: u32 = 100;
/// The most items read of one list: beyond it the rest is not read (and
/// said).
pub const MAX_ITEMS: usize = 10_000;

const DISCOVER_FIRST_MS: i64 = 5_000;
const DISCOVER_MAX_MS: i64 = 60_000;

impl Client {
    pub(super) fn http(&mut self) -> Result<&mut crate::csip::http::Http, Failure> {
        self.http
            .as_mut()
            .ok_or_else(|| Failure::Refused("no usable certificate".into()))
    }

    /// Takes up the CSIP-AUS namespace a server document declares.
    pub(super) fn learn_ns(&mut self, text: &str) {
        if !text.contains("csipaus.org") {
            return;
        }
        if let Some(ns) = Doc::parse(text).ok().and_then(|d| d.csipaus_namespace()) {
            // A versioned namespace (`/ns/v1.3`) is kept once seen: a server
            // may still declare the plain one in some documents.
            if ns != self.ns && ns.starts_with(&self.ns) {
                tracing::debug!(site = %self.cfg.site, namespace = %ns, "CSIP-AUS namespace of the server taken up");
                self.ns = ns;
            }
        }
    }

    /// GET `href`, its namespace learnt.
    pub(super) async fn get(&mut self, href: &str) -> Result<String, Failure> {
        let text = self.http()?.get(href).await?;
        self.learn_ns(&text);
        Ok(text)
    }

    /// Every page of the list at `href`: its items and its `pollRate`.
    pub(super) async fn list<T>(
        &mut self,
        href: &str,
        parse: fn(&str) -> Result<Page<T>, XmlError>,
    ) -> Result<(Vec<T>, Option<u32>), Failure> {
        let mut items = Vec::new();
        let mut rate = None;
        let sep = if href.contains('?') { '&' } else { '?' };
        loop {
            let page_href = format!("{href}{sep}s={}&l={PAGE}", items.len());
            let text = self.get(&page_href).await?;
            let page = parse(&text)?;
            rate = rate.or(page.poll_rate_s);
            let got = page.items.len();
            items.extend(page.items);
            if got == 0 || items.len() >= page.all as usize {
                break;
            }
            if items.len() >= MAX_ITEMS {
                tracing::warn!(site = %self.cfg.site, list = href, all = page.all, read = items.len(), "list longer than the client reads: the rest is left");
                break;
            }
        }
        Ok((items, rate))
    }

    /// Runs discovery; on failure, again after a backoff of 5 s to a minute.
    pub(super) async fn discover(&mut self) {
        match self.walk().await {
            Ok(()) => {
                self.discover_at = None;
                self.discover_backoff_ms = 0;
                self.set_state(State::Following);
                tracing::info!(site = %self.cfg.site, lfdi = %self.lfdi, sfdi = self.sfdi, "CSIP-AUS client registered: following the server's programs");
            }
            Err(Failure::Refused(why)) if self.state == State::PinRefused => {
                self.discover_at = None;
                tracing::error!(site = %self.cfg.site, error = %why, "CSIP-AUS registration refused: the client stops talking to the server until its config changes");
            }
            Err(f) => {
                self.failed("discovery", &f);
                self.discover_backoff_ms =
                    (self.discover_backoff_ms * 2).clamp(DISCOVER_FIRST_MS, DISCOVER_MAX_MS);
                self.discover_at = Some(self.mono_ms() + self.discover_backoff_ms);
            }
        }
    }

    /// Restarts discovery at once (the server lost the device, or moved it).
    pub(super) fn rediscover(&mut self, why: &str) {
        tracing::info!(site = %self.cfg.site, why, "CSIP-AUS client discovers its resources again");
        self.discover_at = Some(self.mono_ms());
        self.set_state(State::Discovering);
    }

    async fn walk(&mut self) -> Result<(), Failure> {
        let dcap_href = self.cfg.server.path.clone();
        let text = self.get(&dcap_href).await?;
        let dcap = discovery::device_capability(&text)?;
        self.contact("dcap");
        let now = self.mono_ms();
        self.polls.add(Poll::DeviceCapability, now);
        self.polls
            .done(&Poll::DeviceCapability, now, dcap.poll_rate_s);
        self.links.time = dcap.time.clone();
        self.links.mirrors = dcap.mirror_usage_points.clone();
        if let Some(tm) = &dcap.time {
            let tm = tm.clone();
            self.read_time(&tm).await?;
            self.polls.add(Poll::Time, self.mono_ms());
            self.polls.done(&Poll::Time, self.mono_ms(), None);
        }
        let list = dcap.end_devices.ok_or_else(|| {
            Failure::Refused("the DeviceCapability has no EndDeviceListLink".into())
        })?;
        self.links.end_devices = Some(list.clone());
        let me = self.find_or_register(&list).await?;
        if let Some(rg) = &me.registration {
            let rg = rg.clone();
            self.check_registration(&rg).await?;
        }
        if let Some(cp) = &me.connection_point {
            let cp = cp.clone();
            self.put_connection_point(&cp).await?;
        }
        self.take_end_device(&me);
        let now = self.mono_ms();
        self.polls.add(Poll::EndDevices, now);
        self.polls
            .done(&Poll::EndDevices, now, self.polls.rate_s(&Poll::EndDevices));
        for p in [Poll::FunctionSets, Poll::Ders, Poll::Mirrors] {
            let have = match p {
                Poll::FunctionSets => self.links.function_sets.is_some(),
                Poll::Ders => self.links.ders.is_some(),
                _ => self.links.mirrors.is_some(),
            };
            if have {
                self.polls.add(p.clone(), now);
                self.polls.now(&p, now);
            }
        }
        Ok(())
    }

    /// Takes up the links of the device's EndDevice.
    pub(super) fn take_end_device(&mut self, me: &EndDevice) {
        self.links.end_device = me.href.clone().or(self.links.end_device.take());
        self.links.function_sets = me.function_sets.clone();
        self.links.ders = me.ders.clone();
        self.links.post_rate_s = me.post_rate_s;
    }

    /// The server's time: the clock anchored to it.
    pub(super) async fn read_time(&mut self, href: &str) -> Result<(), Failure> {
        let sent = tokio::time::Instant::now();
        let text = self.get(href).await?;
        let t = discovery::time(&text)?;
        self.shared().clock.read(t.current_s, sent);
        self.contact("tm");
        let wall = crate::model::time::now_ms();
        let offset = self.shared().clock.server_ms(wall) - wall;
        if offset.abs() > 60_000 {
            tracing::warn!(site = %self.cfg.site, offset_ms = offset, "the controller's clock differs from the CSIP-AUS server's by more than a minute: events run on the server's time");
        }
        Ok(())
    }

    /// The device's EndDevice: listed already (registered out of band), or
    /// registered now by POSTing it.
    pub(super) async fn find_or_register(&mut self, list: &str) -> Result<EndDevice, Failure> {
        let (devices, rate) = self.list(list, discovery::end_device_list).await?;
        self.contact("edev");
        self.polls.add(Poll::EndDevices, self.mono_ms());
        self.polls.done(&Poll::EndDevices, self.mono_ms(), rate);
        if let Some(me) = devices.into_iter().find(|d| d.is(&self.lfdi, self.sfdi)) {
            return Ok(me);
        }
        let body = discovery::encode_end_device(
            &self.lfdi,
            self.sfdi,
            device_category(self.site.devices.batteries.is_empty()),
            self.server_ms() / 1000,
            &self.ns,
        );
        let reply = self.http()?.post(list, body).await?;
        tracing::info!(site = %self.cfg.site, lfdi = %self.lfdi, location = ?reply.location, "CSIP-AUS EndDevice registered in band");
        if let Some(at) = reply.location {
            let text = self.get(&at).await?;
            let mut me = discovery::end_device(&text)?;
            me.href = me.href.or(Some(at));
            return Ok(me);
        }
        let (devices, _) = self.list(list, discovery::end_device_list).await?;
        devices
            .into_iter()
            .find(|d| d.is(&self.lfdi, self.sfdi))
            .ok_or_else(|| {
                Failure::Refused("the server took the EndDevice but does not list it".into())
            })
    }

    /// The Registration's PIN against the configured one (ALL-03-REJ: a
    /// wrong one stops the client).
    async fn check_registration(&mut self, href: &str) -> Result<(), Failure> {
        let text = self.get(href).await?;
        let rg = discovery::registration(&text)?;
        match self.cfg.pin {
            Some(pin) if pin != rg.pin => {
                self.set_state(State::PinRefused);
                let why = format!(
                    "the server registered this device with PIN {}, not the configured {pin}: it is the wrong server or the wrong registration",
                    rg.pin
                );
                self.status.update(|s| s.last_error = Some(why.clone()));
                Err(Failure::Refused(why))
            }
            Some(_) => Ok(()),
            None => {
                tracing::warn!(site = %self.cfg.site, "no pin in [csip_aus]: the server's registration is not checked");
                Ok(())
            }
        }
    }

    /// Sends the NMI (CSIP-AUS ConnectionPoint): PUT, or POST where the
    /// server does not take a PUT.
    async fn put_connection_point(&mut self, href: &str) -> Result<(), Failure> {
        let body = discovery::encode_connection_point(&self.cfg.nmi, &self.ns);
        match self.http()?.put(href, body.clone()).await {
            Ok(_) => Ok(()),
            Err(crate::csip::http::HttpError::Status { status, .. })
                if status == hyper::StatusCode::METHOD_NOT_ALLOWED =>
            {
                self.http()?.post(href, body).await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// The EndDevice's DeviceCategory: PV (bit 21), or PV with storage (23).
fn device_category(pv_only: bool) -> u32 {
    if pv_only {
        1 << 21
    } else {
        1 << 23
    }
}
