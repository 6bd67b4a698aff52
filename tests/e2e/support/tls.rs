//! TLS material for tests: a self-signed certificate for `localhost` and `127.0.0.1`,
//! written to a temp dir as PEM files, and the client and server configs that use it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Makes ring the process-wide rustls provider. rustls panics when it must pick between
/// two compiled-in providers; this project compiles only ring, and installing it first
/// keeps that true whatever else links rustls. Later calls are no-ops.
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A self-signed certificate (SANs `localhost`, `127.0.0.1`) and its key, also on disk
/// as `cert.pem` and `key.pem` in a private temp dir that is removed on drop.
pub(crate) struct TlsFixture {
    dir: PathBuf,
    cert_pem: String,
    key_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

impl TlsFixture {
    pub(crate) fn new() -> anyhow::Result<Self> {
        install_crypto_provider();
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
                .context("generate self-signed certificate")?;
        let dir = unique_temp_dir("sluice-tls")?;
        let fixture = Self {
            dir,
            cert_pem: certified.cert.pem(),
            key_pem: certified.key_pair.serialize_pem(),
            cert_der: certified.cert.der().to_vec(),
            key_der: certified.key_pair.serialize_der(),
        };
        std::fs::write(fixture.cert_path(), &fixture.cert_pem).context("write cert.pem")?;
        std::fs::write(fixture.key_path(), &fixture.key_pem).context("write key.pem")?;
        Ok(fixture)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn cert_path(&self) -> PathBuf {
        self.dir.join("cert.pem")
    }

    pub(crate) fn key_path(&self) -> PathBuf {
        self.dir.join("key.pem")
    }

    pub(crate) fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub(crate) fn key_pem(&self) -> &str {
        &self.key_pem
    }

    pub(crate) fn cert_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// The certificate as a root a reqwest client can trust.
    pub(crate) fn reqwest_certificate(&self) -> anyhow::Result<reqwest::Certificate> {
        reqwest::Certificate::from_pem(self.cert_pem.as_bytes()).context("parse cert.pem")
    }

    /// A reqwest client that trusts this certificate and nothing else.
    pub(crate) fn client(&self) -> anyhow::Result<reqwest::Client> {
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(self.reqwest_certificate()?)
            .build()
            .context("build reqwest client")
    }

    /// A rustls server config (ring provider) serving this certificate, ALPN h2 and http/1.1.
    pub(crate) fn server_config(&self) -> anyhow::Result<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(self.cert_der.clone())], key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl Drop for TlsFixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A new directory under the system temp dir, named `<prefix>-<pid>-<n>-<nanos>`.
fn unique_temp_dir(prefix: &str) -> anyhow::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}
