//! What the client owes the server: the DER's capability, settings and
//! status (ALL-07 to ALL-09, ALL-11 to ALL-17: the status again on every
//! change of its connect and operating bits, and at each DER list poll),
//! the readings of both mirrors each post interval (ALL-06, ALL-10,
//! ALL-29), and the Responses the events asked for, in order, kept and sent
//! again while the server cannot be reached.

use super::Client;
use crate::csip::resource::der::{encode_capability, encode_settings, encode_status};
use crate::csip::resource::mirror::{encode_readings, Quantity, ROLE_DER, ROLE_SITE};
use crate::csip::resource::response::encode_response;
use crate::csip::site;

/// The post rate when the server gives none, s (CSIP-AUS's five minutes).
pub const DEFAULT_POST_RATE_S: u32 = 300;

impl Client {
    /// The quantities mirror `role` declares: what the site measures now,
    /// and at least power, reactive power and a voltage.
    pub(super) fn quantities(&self, role: u16) -> Vec<Quantity> {
        let snap = site::snapshot(&self.live, &self.site.devices);
        let (m, stored) = if role == ROLE_SITE {
            (&snap.meter, None)
        } else {
            (&snap.der, snap.has_storage().then_some(0.0))
        };
        let mut q = vec![
            Quantity::ActivePower,
            Quantity::ReactivePower,
            Quantity::Voltage(1),
        ];
        for (i, v) in m.v.iter().enumerate().skip(1) {
            if v.is_some() {
                q.push(Quantity::Voltage(i as u8 + 1));
            }
        }
        if m.hz.is_some() || role == ROLE_SITE {
            q.push(Quantity::Frequency);
        }
        if stored.is_some() {
            q.push(Quantity::StoredEnergy);
        }
        q
    }

    /// The post rate in force: the mirrors', else the EndDevice's.
    fn post_rate_s(&self) -> u32 {
        self.mirrors
            .iter()
            .filter_map(|(_, _, r)| *r)
            .min()
            .or(self.links.post_rate_s)
            .unwrap_or(DEFAULT_POST_RATE_S)
            .max(1)
    }

    /// Samples the site into the current interval; a finished interval's
    /// readings wait to be posted.
    pub(super) fn sample(&mut self, now: i64, snap: &site::SiteSnapshot) {
        if self.mirrors.is_empty() {
            return;
        }
        let now_s = self.shared().clock.server_ms(now).div_euclid(1000);
        let rate = self.post_rate_s();
        let mut ended =
            self.averager
                .add(now_s, rate, ROLE_SITE, &site::samples(&snap.meter, None));
        if let Some(e) = self.averager.add(
            now_s,
            rate,
            ROLE_DER,
            &site::samples(&snap.der, snap.stored_wh),
        ) {
            ended = Some(e);
        }
        let Some(interval) = ended else { return };
        for (role, samples) in &interval.by_role {
            let Some((_, href, _)) = self.mirrors.iter().find(|(r, ..)| r == role) else {
                continue;
            };
            let body = encode_readings(
                *role,
                samples,
                interval.start_s,
                interval.duration_s,
                &self.lfdi,
                self.cfg.pen,
                &self.ns,
            );
            if self.readings.len() >= super::READINGS_MAX {
                self.readings.pop_front();
            }
            self.readings.push_back((href.clone(), body));
        }
    }

    /// Sends what is owed, oldest first; stops at the first failure.
    pub(super) async fn report(&mut self, now: i64, snap: &site::SiteSnapshot) {
        let now_s = self.shared().clock.server_ms(now).div_euclid(1000);
        if let Err(f) = self.put_der(now_s, snap).await {
            self.failed("der", &f);
            if !f.answered() {
                self.report_later();
                return;
            }
        }
        while let Some((href, body)) = self.readings.front().cloned() {
            let Ok(http) = self.http() else { break };
            let sent = http.post(&href, body).await;
            match sent {
                Ok(_) => {
                    self.readings.pop_front();
                    self.contact("readings");
                }
                Err(e) => {
                    let f = e.into();
                    self.failed("readings", &f);
                    if f.answered() {
                        // Refused for what it is: not sent again.
                        self.readings.pop_front();
                    } else {
                        self.report_later();
                        return;
                    }
                    break;
                }
            }
        }
        loop {
            let Some(p) = self.shared().pending.front().cloned() else {
                break;
            };
            let body = encode_response(&p.mrid, p.status, &self.lfdi, p.at_s, &self.ns);
            let Ok(http) = self.http() else { break };
            let sent = http.post(&p.reply_to, body).await;
            match sent {
                Ok(_) => {
                    self.status
                        .update(|s| *s.responses.entry(p.status.code()).or_default() += 1);
                    self.contact("rsp");
                }
                Err(e) => {
                    let f = e.into();
                    self.failed("rsp", &f);
                    if !f.answered() {
                        self.report_later();
                        return;
                    }
                    self.status.update(|s| s.responses_failed += 1);
                }
            }
            // Sent, or refused for what it is: either way not sent again.
            let mut sh = self.shared();
            if sh.pending.front() == Some(&p) {
                sh.pending.pop_front();
            }
            sh.dirty = true;
        }
        self.report_backoff_ms = 0;
    }

    /// PUTs the DER's capability and settings when they changed, and its
    /// status when its connect or operating bits did.
    async fn put_der(
        &mut self,
        now_s: i64,
        snap: &site::SiteSnapshot,
    ) -> Result<(), super::Failure> {
        let Some(der) = self.der.clone() else {
            return Ok(());
        };
        let (held, set_grad_w) = {
            let sh = self.shared();
            (sh.held, sh.set_grad_w)
        };
        let storage_ns = self.ns.contains("v1.3");
        if let Some(href) = &der.capability {
            let c = site::capability(snap, storage_ns);
            if self.sent_capability.as_ref() != Some(&c) {
                let body = encode_capability(&c, &self.ns);
                self.http()?.put(href, body).await?;
                self.sent_capability = Some(c);
            }
        }
        if let Some(href) = &der.settings {
            let s = site::settings(snap, set_grad_w, storage_ns, 0);
            if self.sent_settings.as_ref() != Some(&s) {
                let body = encode_settings(
                    &crate::csip::resource::der::Settings {
                        updated_s: now_s,
                        ..s.clone()
                    },
                    &self.ns,
                );
                self.http()?.put(href, body).await?;
                self.sent_settings = Some(s);
            }
        }
        if let Some(href) = &der.status {
            let st = site::status(snap, held, now_s);
            let bits = (st.gen_connect, st.operational_mode);
            if self.sent_status != Some(bits) {
                let body = encode_status(&st, &self.ns);
                self.http()?.put(href, body).await?;
                self.sent_status = Some(bits);
            }
        }
        Ok(())
    }
}
