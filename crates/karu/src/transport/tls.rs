//! The rustls client configuration: built once per [`Transport`](super::Transport), at its
//! first `https://` connection ([`Trust`]), and shared through one `Arc`, so every IO loop
//! uses the same TLS session cache (resumption).
//!
//! Trust roots, in order:
//! - `ca_bundle` and/or `ca_path` set: only those certificates (spec §3.5: either option
//!   replaces the system bundle);
//! - else `system_ca`: the platform's roots through `rustls-native-certs` (which also honours
//!   `SSL_CERT_FILE` / `SSL_CERT_DIR`, as libcurl-based builds did through their aliases);
//! - else (a hermetic configuration, which reads no environment): the first regular file of
//!   the fixed platform list below, like libcurl's compiled-in default bundle; on platforms
//!   without one, the platform store. An empty store is not an error here: plain `http://`
//!   still works and `https://` fails with a TLS error that says why.

use std::fmt;
use std::fs;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};

use super::{HttpVersion, TransportOptions};
use crate::{Error, Status};

/// The client configuration, built at the first `https://` connection and then shared.
///
/// Reading and parsing the trust anchors (the system bundle holds some 150 certificates)
/// took 0.8–2.7 ms (median 1.4) of every cold client's first batch, which plain `http://`
/// reads never use; libcurl, too, loads its CA only for TLS. Unreadable CA options therefore
/// fail `https://` connections (with CONFIG), not plain ones.
#[derive(Default)]
pub(crate) struct Trust {
    config: OnceLock<Result<Arc<ClientConfig>, Error>>,
}

impl Trust {
    /// The configuration for `options` (the transport's own, always the same), built on the
    /// first call (by the loop that makes the client's first TLS connection; the others
    /// wait for it).
    pub(crate) fn config(
        &self,
        options: &TransportOptions,
    ) -> Result<Arc<ClientConfig>, UntrustedSetup> {
        self.config
            .get_or_init(|| client_config(options))
            .clone()
            .map_err(UntrustedSetup)
    }
}

impl fmt::Debug for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trust")
            .field("built", &self.config.get().is_some())
            .finish()
    }
}

/// The TLS configuration could not be built (an unreadable or empty CA option): a
/// connection error whose status is CONFIG (see `TransportErrorKind::Setup`).
#[derive(Clone, Debug)]
pub(crate) struct UntrustedSetup(pub(crate) Error);

impl fmt::Display for UntrustedSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.message())
    }
}

impl std::error::Error for UntrustedSetup {}

/// Builds the shared client configuration for `options`.
fn client_config(options: &TransportOptions) -> Result<Arc<ClientConfig>, Error> {
    let roots = root_store(options)?;
    // The provider is named explicitly so nothing depends on a process-wide default.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(Status::Config, format!("TLS setup failed: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn(options.http_version);
    Ok(Arc::new(config))
}

/// ALPN offers per HTTP version: HTTP/1.1 alone offers only http/1.1; every HTTP/2 choice
/// offers h2 first and falls back to http/1.1 when the server does not speak h2.
fn alpn(version: HttpVersion) -> Vec<Vec<u8>> {
    match version {
        HttpVersion::Http1_1 => vec![b"http/1.1".to_vec()],
        HttpVersion::Auto
        | HttpVersion::Http2
        | HttpVersion::Http2Tls
        | HttpVersion::Http2PriorKnowledge => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    }
}

fn root_store(options: &TransportOptions) -> Result<RootCertStore, Error> {
    let mut roots = RootCertStore::empty();
    if options.ca_bundle.is_some() || options.ca_path.is_some() {
        if let Some(bundle) = &options.ca_bundle {
            let certs = read_pem_file(bundle)?;
            if certs.is_empty() {
                return Err(Error::new(
                    Status::Config,
                    format!("CA bundle {} holds no PEM certificate", bundle.display()),
                ));
            }
            add(&mut roots, certs);
        }
        if let Some(dir) = &options.ca_path {
            let certs = read_pem_dir(dir)?;
            if certs.is_empty() {
                return Err(Error::new(
                    Status::Config,
                    format!("CA path {} holds no PEM certificate", dir.display()),
                ));
            }
            add(&mut roots, certs);
        }
        return Ok(roots);
    }
    if !options.system_ca
        && let Some(bundle) = crate::config::system_ca_bundle()
    {
        // Unreadable or damaged system files leave the store empty rather than failing
        // construction: the caller configured nothing wrong.
        add(&mut roots, read_pem_file(&bundle).unwrap_or_default());
        return Ok(roots);
    }
    add(&mut roots, rustls_native_certs::load_native_certs().certs);
    Ok(roots)
}

/// Adds what parses; a bundle may carry certificates webpki cannot use, which curl also skips.
fn add(roots: &mut RootCertStore, certs: Vec<CertificateDer<'static>>) {
    roots.add_parsable_certificates(certs);
}

fn read_pem_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let bytes = fs::read(path).map_err(|e| {
        Error::new(
            Status::Config,
            format!("cannot read CA bundle {}: {e}", path.display()),
        )
    })?;
    // Damaged PEM blocks are skipped like non-certificate blocks: a bundle is usable as long
    // as some certificate in it is.
    Ok(CertificateDer::pem_slice_iter(&bytes)
        .filter_map(Result::ok)
        .collect())
}

/// Every PEM certificate of every regular file in `dir` (symbolic links followed, so OpenSSL
/// hashed directories work).
fn read_pem_dir(dir: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let entries = fs::read_dir(dir).map_err(|e| {
        Error::new(
            Status::Config,
            format!("cannot read CA path {}: {e}", dir.display()),
        )
    })?;
    let mut certs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if fs::metadata(&path).is_ok_and(|m| m.is_file())
            && let Ok(mut found) = read_pem_file(&path)
        {
            certs.append(&mut found);
        }
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_per_version() {
        assert_eq!(alpn(HttpVersion::Http1_1), vec![b"http/1.1".to_vec()]);
        for v in [
            HttpVersion::Auto,
            HttpVersion::Http2,
            HttpVersion::Http2Tls,
            HttpVersion::Http2PriorKnowledge,
        ] {
            assert_eq!(alpn(v), vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        }
    }

    #[test]
    fn unreadable_or_empty_ca_options_are_config_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = TransportOptions {
            ca_bundle: Some(dir.path().join("missing.pem")),
            ..TransportOptions::default()
        };
        let e = client_config(&missing).unwrap_err();
        assert_eq!(e.status(), Status::Config);
        assert!(e.message().contains("cannot read CA bundle"), "{e}");

        let junk = dir.path().join("junk.pem");
        fs::write(&junk, "not a certificate").unwrap();
        let e = client_config(&TransportOptions {
            ca_bundle: Some(junk),
            ..TransportOptions::default()
        })
        .unwrap_err();
        assert!(e.message().contains("holds no PEM certificate"), "{e}");

        let e = client_config(&TransportOptions {
            ca_path: Some(dir.path().join("nodir")),
            ..TransportOptions::default()
        })
        .unwrap_err();
        assert!(e.message().contains("cannot read CA path"), "{e}");
    }

    #[test]
    fn hermetic_and_system_roots_build() {
        for system_ca in [false, true] {
            let config = client_config(&TransportOptions {
                system_ca,
                ..TransportOptions::default()
            })
            .unwrap();
            assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        }
    }
}
