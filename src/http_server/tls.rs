//! The HTTPS certificate in service: read (or made, when self-signed) at
//! start and logged with its fingerprint, and issued again before it
//! expires; the listeners bound with it. `https/` makes and reads
//! certificates, `serve.rs` accepts the connections; this file must not do
//! either.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::serve::{bind, Listener};
use super::ServeError;
use crate::config::Config;

/// Binds the plain listeners and, when HTTPS is configured, the HTTPS ones
/// with the certificate in service (a self-signed one kept renewed).
pub async fn listeners(
    config: &Arc<Config>,
    tracker: &tokio_util::task::TaskTracker,
    cancel: &CancellationToken,
) -> Result<(Vec<Listener>, Option<Arc<crate::https::Certs>>), ServeError> {
    let mut listeners: Vec<Listener> = bind(&config.http.listen)
        .await?
        .into_iter()
        .map(|tcp| Listener { tcp, tls: None })
        .collect();
    let Some((certs, server)) = start(config).await? else {
        return Ok((listeners, None));
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(server);
    for tcp in bind(&config.http.https_listen).await? {
        listeners.push(Listener {
            tcp,
            tls: Some(acceptor.clone()),
        });
    }
    if let Some(crate::config::HttpTls::SelfSigned { .. }) = &config.http.tls {
        tracker.spawn(renew_self_signed(
            config.clone(),
            certs.clone(),
            cancel.child_token(),
        ));
    }
    Ok((listeners, Some(certs)))
}

/// The HTTPS certificate (read, or made when self-signed) and the rustls
/// configuration over it, logged with its fingerprint; `None` without
/// `http.tls`.
async fn start(
    config: &Arc<Config>,
) -> Result<Option<(Arc<crate::https::Certs>, Arc<rustls::ServerConfig>)>, ServeError> {
    let c = config.clone();
    let Some(loaded) = tokio::task::spawn_blocking(move || crate::https::load_for(&c))
        .await
        .unwrap_or_else(|e| {
            Some(Err(crate::https::HttpsError::Rustls(format!(
                "reading the certificate failed: {e}"
            ))))
        })
    else {
        return Ok(None);
    };
    let (pair, issued) = loaded?;
    log_certificate("HTTPS certificate", &pair, &issued);
    let certs = crate::https::Certs::new(pair);
    let server = crate::https::server_config(certs.clone())?;
    Ok(Some((certs, server)))
}

fn log_certificate(what: &str, pair: &crate::https::Pair, issued: &crate::https::Issued) {
    let expires = pair
        .key
        .end_entity_cert()
        .ok()
        .and_then(|c| crate::https::validity::not_after(c.as_ref()))
        .map(|s| crate::model::time::format_utc(s.saturating_mul(1000)))
        .unwrap_or_default();
    let issued = match issued {
        crate::https::Issued::Kept => "kept",
        crate::https::Issued::New(why) => why,
    };
    tracing::info!(
        fingerprint_sha256 = %pair.fingerprint,
        pubkey_pin = pair.pin.as_deref().unwrap_or("-"),
        expires = %expires,
        issued,
        "{what}"
    );
}

/// How often a self-signed certificate's expiry is looked at.
const RENEW_CHECK: Duration = Duration::from_secs(6 * 3600);

/// Issues the self-signed certificate again when it comes near its expiry
/// (or its names change), and serves the new one.
async fn renew_self_signed(
    config: Arc<Config>,
    certs: Arc<crate::https::Certs>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(RENEW_CHECK) => {}
        }
        let c = config.clone();
        match tokio::task::spawn_blocking(move || crate::https::load_for(&c)).await {
            Ok(Some(Ok((pair, issued @ crate::https::Issued::New(_))))) => {
                log_certificate("HTTPS certificate issued again", &pair, &issued);
                certs.replace(pair);
            }
            Ok(Some(Err(e))) => {
                tracing::error!(error = %e, "HTTPS certificate not renewed; the one in service stays");
            }
            _ => {}
        }
    }
}
