//! The polls: the DeviceCapability, the time, the EndDevice list, the
//! function sets and the DER programs with their controls and defaults
//! (`GEN`, `LOA`, `ALL-11` to `ALL-30`), and the DER and mirror lists whose
//! answers `report.rs` works on. Each poll takes up the `pollRate` of its
//! answer; a failure is counted and the poll tried again after a backoff.

use std::collections::BTreeSet;

use super::polls::Poll;
use super::{Client, Failure};
use crate::csip::resource::{der, discovery, mirror, program};

impl Client {
    /// Runs poll `p`.
    pub(super) async fn poll(&mut self, p: &Poll) {
        // The next poll counts from this one's start: its rate is kept
        // exactly, however long the answer takes.
        let started = self.mono_ms();
        let result = match p {
            Poll::DeviceCapability => self.poll_dcap().await,
            Poll::Time => self.poll_time().await,
            Poll::EndDevices => self.poll_end_devices().await,
            Poll::FunctionSets => self.poll_function_sets().await,
            Poll::Programs(list) => self.poll_programs(list).await,
            Poll::Ders => self.poll_ders().await,
            Poll::Mirrors => self.poll_mirrors().await,
        };
        let now = self.mono_ms();
        match result {
            Ok(rate) => {
                self.contact(p.label());
                self.polls.done(p, started, rate);
            }
            Err(f) => {
                self.failed(p.label(), &f);
                if let Failure::Http(crate::csip::http::HttpError::Status { status, .. }) = &f {
                    if *status == hyper::StatusCode::NOT_FOUND
                        && matches!(p, Poll::EndDevices | Poll::FunctionSets)
                    {
                        self.rediscover("a resource of the device is gone");
                        return;
                    }
                }
                self.polls.failed(p, now);
            }
        }
    }

    async fn poll_dcap(&mut self) -> Result<Option<u32>, Failure> {
        let href = self.cfg.server.path.clone();
        let text = self.get(&href).await?;
        let d = discovery::device_capability(&text)?;
        if d.end_devices != self.links.end_devices {
            self.rediscover("the EndDevice list moved");
        }
        self.links.time = d.time;
        self.links.mirrors = d.mirror_usage_points;
        Ok(d.poll_rate_s)
    }

    async fn poll_time(&mut self) -> Result<Option<u32>, Failure> {
        let Some(href) = self.links.time.clone() else {
            self.polls.remove(&Poll::Time);
            return Ok(None);
        };
        self.read_time(&href).await?;
        Ok(None)
    }

    async fn poll_end_devices(&mut self) -> Result<Option<u32>, Failure> {
        let Some(list) = self.links.end_devices.clone() else {
            return Ok(None);
        };
        let (devices, rate) = self.list(&list, discovery::end_device_list).await?;
        match devices.into_iter().find(|d| d.is(&self.lfdi, self.sfdi)) {
            Some(me) => {
                let before = self.links.function_sets.clone();
                self.take_end_device(&me);
                if self.links.function_sets != before {
                    let now = self.mono_ms();
                    self.polls.add(Poll::FunctionSets, now);
                    self.polls.now(&Poll::FunctionSets, now);
                }
            }
            None => self.rediscover("the server no longer lists this device"),
        }
        Ok(rate)
    }

    async fn poll_function_sets(&mut self) -> Result<Option<u32>, Failure> {
        let Some(href) = self.links.function_sets.clone() else {
            return Ok(None);
        };
        let (sets, rate) = self.list(&href, discovery::function_sets).await?;
        let lists: BTreeSet<String> = sets.into_iter().filter_map(|f| f.programs).collect();
        let now = self.mono_ms();
        for l in &lists {
            let p = Poll::Programs(l.clone());
            if !self.polls.contains(&p) {
                self.polls.add(p, now);
            }
        }
        self.polls.retain(|p| match p {
            Poll::Programs(l) => lists.contains(l),
            _ => true,
        });
        let mut sh = self.shared.lock();
        let gone: Vec<String> = sh
            .schedule
            .programs
            .values()
            .map(|p| p.list.clone())
            .filter(|l| !lists.contains(l))
            .collect();
        for l in gone {
            sh.schedule.set_programs(&l, &[]);
            sh.dirty = true;
        }
        drop(sh);
        Ok(rate)
    }

    /// A DERProgramList, then each program's default and controls in the
    /// same cycle (a control created at the list's read is seen at once).
    async fn poll_programs(&mut self, list: &str) -> Result<Option<u32>, Failure> {
        let (programs, rate) = self.list(list, program::programs).await?;
        {
            let mut sh = self.shared.lock();
            let changed = sh
                .schedule
                .programs
                .values()
                .filter(|p| p.list == list)
                .map(|p| (&p.href, p.primacy))
                .ne(programs.iter().map(|p| (&p.href, p.primacy)));
            sh.dirty |= changed;
            sh.schedule.set_programs(list, &programs);
        }
        for p in &programs {
            let default =
                match &p.default_control {
                    Some(href) => match self.get(href).await {
                        Ok(text) => Some(program::default_control(&text)?),
                        Err(Failure::Http(crate::csip::http::HttpError::Status {
                            status, ..
                        })) if status == hyper::StatusCode::NOT_FOUND => None,
                        Err(e) => return Err(e),
                    },
                    None => None,
                };
            {
                let mut sh = self.shared.lock();
                let before = sh
                    .schedule
                    .programs
                    .get(&p.href)
                    .and_then(|s| s.default.clone());
                if before != default {
                    tracing::info!(site = %self.cfg.site, program = %p.href, default = %default.as_ref().map(|d| super::events::describe(&d.base)).unwrap_or_else(|| "none".into()), "CSIP-AUS default control");
                    sh.dirty = true;
                }
                sh.schedule.set_default(&p.href, default);
            }
            if let Some(href) = &p.controls {
                let (controls, bad, pages) = self.control_list(href).await?;
                for e in bad {
                    tracing::warn!(site = %self.cfg.site, program = %p.href, error = %e, "CSIP-AUS control not read: left out");
                }
                let rng = &mut self.rng;
                let mut sh = self.shared.lock();
                let server_now = sh.clock.server_ms(crate::model::time::now_ms());
                let events = sh
                    .schedule
                    .set_events(&p.href, controls, server_now, &mut |b| {
                        Client::randomize(rng, b)
                    });
                self.recorder.record(&mut sh, events);
                drop(sh);
                if pages > 1 {
                    // A long list's documents were parsed and dropped: their
                    // pages go back to the system, not into a heap that only
                    // grows (`memory.rs`).
                    crate::memory::give_back();
                }
            }
        }
        Ok(rate)
    }

    /// Every page of a DERControlList, with the controls left out.
    async fn control_list(
        &mut self,
        href: &str,
    ) -> Result<
        (
            Vec<program::Control>,
            Vec<crate::csip::xml::XmlError>,
            usize,
        ),
        Failure,
    > {
        let mut items = Vec::new();
        let mut bad = Vec::new();
        let mut pages = 0;
        let sep = if href.contains('?') { '&' } else { '?' };
        loop {
            let text = self
                .get(&format!(
                    "{href}{sep}s={}&l={}",
                    items.len() + bad.len(),
                    super::discover::PAGE
                ))
                .await?;
            let (page, wrong) = program::controls(&text)?;
            pages += 1;
            let got = page.items.len() + wrong.len();
            items.extend(page.items);
            bad.extend(wrong);
            if got == 0 || items.len() + bad.len() >= page.all as usize {
                break;
            }
            if items.len() >= super::discover::MAX_ITEMS {
                tracing::warn!(site = %self.cfg.site, list = href, all = page.all, "control list longer than the client reads: the rest is left");
                break;
            }
        }
        Ok((items, bad, pages))
    }

    async fn poll_ders(&mut self) -> Result<Option<u32>, Failure> {
        let Some(href) = self.links.ders.clone() else {
            return Ok(None);
        };
        let (ders, rate) = self.list(&href, der::der_list).await?;
        self.der = ders.into_iter().next();
        // Each DER list poll sends the DER's resources again: a status the
        // server missed is repeated (ALL-11).
        self.sent_capability = None;
        self.sent_settings = None;
        self.sent_status = None;
        Ok(rate)
    }

    async fn poll_mirrors(&mut self) -> Result<Option<u32>, Failure> {
        let Some(href) = self.links.mirrors.clone() else {
            return Ok(None);
        };
        let (listed, rate) = self.list(&href, mirror::mirror_list).await?;
        for role in [mirror::ROLE_SITE, mirror::ROLE_DER] {
            let mrid = mirror::mirror_mrid(&self.lfdi, role, self.cfg.pen);
            let found = listed.iter().find(|m| m.mrid.eq_ignore_ascii_case(&mrid));
            let entry = match found {
                Some(m) => (role, m.href.clone(), m.post_rate_s),
                None => self.create_mirror(&href, role).await?,
            };
            self.mirrors.retain(|(r, ..)| *r != role);
            self.mirrors.push(entry);
        }
        Ok(rate)
    }

    async fn create_mirror(
        &mut self,
        list: &str,
        role: u16,
    ) -> Result<(u16, String, Option<u32>), Failure> {
        let m = mirror::Mirror {
            role,
            quantities: self.quantities(role),
        };
        let body = mirror::encode_mirror(&m, &self.lfdi, self.cfg.pen, &self.ns);
        let reply = self.http()?.post(list, body).await?;
        let at = reply.location.ok_or_else(|| {
            Failure::Refused("the server took the MirrorUsagePoint but gave no Location".into())
        })?;
        let text = self.get(&at).await?;
        let got = mirror::mirror(&text, &at)?;
        tracing::info!(site = %self.cfg.site, role = format!("{role:02X}"), href = %got.href, "CSIP-AUS mirror usage point created");
        Ok((role, got.href, got.post_rate_s))
    }
}
