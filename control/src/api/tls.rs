//! TLS on the admin listener (`admin.tls`): the server certificate, and
//! with `client_ca` the client certificates it demands (mTLS). rustls with
//! ring, the workspace's one TLS stack.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::config::AdminTls;

/// The acceptor for `tls`, or what is wrong with its files.
pub(crate) fn acceptor(tls: &AdminTls) -> Result<TlsAcceptor, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = certificates(&tls.cert, "admin.tls.cert")?;
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .map_err(|e| format!("admin.tls.key: {}: {e}", tls.key.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("admin.tls: {e}"))?;
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca, "admin.tls.client_ca")? {
                roots
                    .add(cert)
                    .map_err(|e| format!("admin.tls.client_ca: {}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .map_err(|e| format!("admin.tls.client_ca: {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("admin.tls: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn certificates(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{key}: {}: {e}", path.display()))?
        .collect();
    let certs = certs.map_err(|e| format!("{key}: {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{key}: {}: no PEM certificate in it",
            path.display()
        ));
    }
    Ok(certs)
}
