//! The proxies of Toxiproxy's API and their toxics: each call of the API
//! as Toxiproxy answers it. A proxy lives here, in memory, until deleted
//! (a config reload leaves it alone); its listener is the data plane's,
//! its toxics are fault experiments in the config.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Value};
use sluice_filters::{ProxyPatch, ProxySpec, ToxicSpec};

use super::toxics;
use super::TcpListeners;
use crate::config::RUNTIME_LISTENER_PREFIX;
use crate::events::EventLog;
use crate::store::SnapshotStore;

/// What `GET /version` answers: the Toxiproxy API it speaks, and who.
pub(crate) const VERSION: &str = "2.12.0-sluice";
/// The source of this API's entries in the audit log.
pub(super) const SOURCE: &str = "toxiproxy";

/// One answer: a status and a JSON body (or a text one for `/version`).
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Option<Value>,
    pub text: bool,
}

impl Answer {
    pub(super) fn json(status: StatusCode, body: Value) -> Answer {
        Answer {
            status,
            body: Some(body),
            text: false,
        }
    }

    pub(super) fn text(text: &str) -> Answer {
        Answer {
            status: StatusCode::OK,
            body: Some(Value::String(text.to_string())),
            text: true,
        }
    }

    pub(super) fn empty() -> Answer {
        Answer {
            status: StatusCode::NO_CONTENT,
            body: None,
            text: false,
        }
    }

    /// Toxiproxy's error body.
    pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Answer {
        let message = message.into();
        Answer::json(status, json!({"error": message, "status": status.as_u16()}))
    }

    pub(super) fn bad_body(e: impl std::fmt::Display) -> Answer {
        Answer::error(StatusCode::BAD_REQUEST, format!("bad request body: {e}"))
    }

    pub(super) fn proxy_not_found() -> Answer {
        Answer::error(StatusCode::NOT_FOUND, "proxy not found")
    }
}

pub(super) struct Proxy {
    pub(super) spec: ProxySpec,
    /// Where it listens, or listened before it was disabled: enabled again,
    /// it opens the same address (a port 0 keeps the port it got).
    bound: Option<SocketAddr>,
    pub(super) toxics: Vec<Toxic>,
}

pub(super) struct Toxic {
    pub(super) spec: ToxicSpec,
    /// The id of its fault experiment.
    pub(super) fault: String,
}

/// The API's state: the proxies by name (Toxiproxy lists them by name).
pub(crate) struct Toxiproxy {
    listeners: Arc<dyn TcpListeners>,
    pub(super) store: Arc<SnapshotStore>,
    events: Arc<EventLog>,
    /// The TTL each toxic's experiment gets.
    pub(super) ttl: Duration,
    proxies: Mutex<BTreeMap<String, Proxy>>,
}

/// The listener name of proxy `name`: its metrics' label and what its
/// toxics' experiments match.
pub(crate) fn listener_name(name: &str) -> String {
    format!("{RUNTIME_LISTENER_PREFIX}{name}")
}

impl Proxy {
    fn to_json(&self) -> Value {
        let listen = self
            .bound
            .map_or_else(|| self.spec.listen.clone(), |a| a.to_string());
        json!({
            "name": self.spec.name,
            "listen": listen,
            "upstream": self.spec.upstream,
            "enabled": self.spec.enabled,
            "toxics": self.toxics_json(),
        })
    }

    pub(super) fn toxics_json(&self) -> Value {
        Value::Array(self.toxics.iter().map(|t| t.spec.to_json()).collect())
    }
}

impl Toxiproxy {
    pub(crate) fn new(
        listeners: Arc<dyn TcpListeners>,
        store: Arc<SnapshotStore>,
        events: Arc<EventLog>,
        ttl: Duration,
    ) -> Toxiproxy {
        Toxiproxy {
            listeners,
            store,
            events,
            ttl,
            proxies: Mutex::default(),
        }
    }

    /// The proxies, their toxics that ended (TTL, `DELETE /v1/faults`, a
    /// reload) left out.
    pub(super) fn proxies(&self) -> MutexGuard<'_, BTreeMap<String, Proxy>> {
        let mut proxies = self.proxies.lock().unwrap_or_else(|p| p.into_inner());
        let snapshot = self.store.load();
        for proxy in proxies.values_mut() {
            proxy.toxics.retain(|t| {
                let active = toxics::is_active(&snapshot, &t.fault);
                if !active {
                    // An expired experiment would stay listed in
                    // `/v1/faults`; the toxic is gone, so is it.
                    toxics::remove(&self.store, &t.fault, "remove ended toxic");
                }
                active
            });
        }
        proxies
    }

    fn audit(&self, action: String) {
        let version = self.store.load().version;
        self.events.push(SOURCE, &action, version, Vec::new());
    }

    /// Opens the proxy's listener where it listened before, else at `listen`.
    fn open(&self, proxy: &mut Proxy) -> Result<(), Answer> {
        let listen = proxy
            .bound
            .map_or_else(|| proxy.spec.listen.clone(), |a| a.to_string());
        let listener = listener_name(&proxy.spec.name);
        match self
            .listeners
            .open(&listener, &listen, &proxy.spec.upstream)
        {
            Ok(addr) => {
                proxy.bound = Some(addr);
                Ok(())
            }
            Err(e) => Err(Answer::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("listen {listen}: {e}"),
            )),
        }
    }

    fn close(&self, proxy: &Proxy) {
        self.listeners.close(&listener_name(&proxy.spec.name));
    }

    fn drop_toxics(&self, proxy: &mut Proxy) {
        for t in proxy.toxics.drain(..) {
            toxics::remove(&self.store, &t.fault, "remove toxic");
        }
    }

    pub(super) fn list(&self) -> Answer {
        let proxies = self.proxies();
        let all: serde_json::Map<String, Value> = proxies
            .iter()
            .map(|(name, p)| (name.clone(), p.to_json()))
            .collect();
        Answer::json(StatusCode::OK, Value::Object(all))
    }

    pub(super) fn create(&self, body: &Value) -> Answer {
        let spec = match ProxySpec::parse(body) {
            Ok(spec) => spec,
            Err(e) => return Answer::bad_body(e),
        };
        let mut proxies = self.proxies();
        if proxies.contains_key(&spec.name) {
            return Answer::error(StatusCode::CONFLICT, "proxy already exists");
        }
        match self.start(spec) {
            Ok(proxy) => {
                let answer = Answer::json(StatusCode::CREATED, proxy.to_json());
                proxies.insert(proxy.spec.name.clone(), proxy);
                answer
            }
            Err(e) => e,
        }
    }

    /// A new proxy, listening when enabled.
    fn start(&self, spec: ProxySpec) -> Result<Proxy, Answer> {
        let mut proxy = Proxy {
            spec,
            bound: None,
            toxics: Vec::new(),
        };
        if proxy.spec.enabled {
            self.open(&mut proxy)?;
        }
        self.audit(format!(
            "create proxy {} ({} -> {})",
            proxy.spec.name,
            proxy.to_json()["listen"].as_str().unwrap_or_default(),
            proxy.spec.upstream
        ));
        Ok(proxy)
    }

    /// Replace-or-create by name: a proxy of the same name, listen and
    /// upstream is kept with its toxics (its `enabled` applied); one that
    /// differs is replaced, toxics and all. Every item is read before any
    /// is applied.
    pub(super) fn populate(&self, body: &Value) -> Answer {
        let items = match body {
            Value::Array(items) => items.as_slice(),
            _ => return Answer::bad_body("must be a JSON array of proxies"),
        };
        let mut specs = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match ProxySpec::parse(item) {
                Ok(spec) => specs.push(spec),
                Err(e) => return Answer::bad_body(format!("[{i}].{e}")),
            }
        }
        let mut proxies = self.proxies();
        let mut out = Vec::new();
        for spec in specs {
            let same = proxies
                .get(&spec.name)
                .is_some_and(|p| p.spec.listen == spec.listen && p.spec.upstream == spec.upstream);
            if same {
                let patch = ProxyPatch {
                    enabled: Some(spec.enabled),
                    ..ProxyPatch::default()
                };
                if let Some(proxy) = proxies.get_mut(&spec.name) {
                    if let Err(e) = self.apply(proxy, patch) {
                        return e;
                    }
                    out.push(proxy.to_json());
                }
                continue;
            }
            if let Some(mut old) = proxies.remove(&spec.name) {
                self.close(&old);
                self.drop_toxics(&mut old);
            }
            match self.start(spec) {
                Ok(proxy) => {
                    out.push(proxy.to_json());
                    proxies.insert(proxy.spec.name.clone(), proxy);
                }
                Err(e) => return e,
            }
        }
        Answer::json(StatusCode::CREATED, json!({ "proxies": out }))
    }

    pub(super) fn show(&self, name: &str) -> Answer {
        match self.proxies().get(name) {
            Some(p) => Answer::json(StatusCode::OK, p.to_json()),
            None => Answer::proxy_not_found(),
        }
    }

    pub(super) fn update(&self, name: &str, body: &Value) -> Answer {
        let patch = match ProxyPatch::parse(body) {
            Ok(patch) => patch,
            Err(e) => return Answer::bad_body(e),
        };
        let mut proxies = self.proxies();
        let Some(proxy) = proxies.get_mut(name) else {
            return Answer::proxy_not_found();
        };
        match self.apply(proxy, patch) {
            Ok(()) => Answer::json(StatusCode::OK, proxy.to_json()),
            Err(e) => e,
        }
    }

    /// `enabled: false` closes the listener and its connections (down);
    /// a new listen or upstream reopens it.
    fn apply(&self, proxy: &mut Proxy, patch: ProxyPatch) -> Result<(), Answer> {
        let was = proxy.spec.enabled;
        let mut moved = false;
        if let Some(listen) = patch.listen.filter(|l| *l != proxy.spec.listen) {
            proxy.spec.listen = listen;
            proxy.bound = None;
            moved = true;
        }
        if let Some(upstream) = patch.upstream.filter(|u| *u != proxy.spec.upstream) {
            proxy.spec.upstream = upstream;
            moved = true;
        }
        let enabled = patch.enabled.unwrap_or(was);
        if was && (!enabled || moved) {
            self.close(proxy);
        }
        proxy.spec.enabled = enabled;
        if enabled && (!was || moved) {
            self.open(proxy)?;
        }
        if was != enabled || moved {
            let state = if enabled { "up" } else { "down" };
            self.audit(format!(
                "update proxy {} ({state}, -> {})",
                proxy.spec.name, proxy.spec.upstream
            ));
        }
        Ok(())
    }

    pub(super) fn delete(&self, name: &str) -> Answer {
        let mut proxies = self.proxies();
        let Some(mut proxy) = proxies.remove(name) else {
            return Answer::proxy_not_found();
        };
        self.close(&proxy);
        self.drop_toxics(&mut proxy);
        self.audit(format!("delete proxy {name}"));
        Answer::empty()
    }

    /// Every proxy enabled, every toxic removed (Toxiproxy's reset).
    pub(super) fn reset(&self) -> Answer {
        let mut proxies = self.proxies();
        for proxy in proxies.values_mut() {
            self.drop_toxics(proxy);
            if !proxy.spec.enabled {
                proxy.spec.enabled = true;
                if let Err(e) = self.open(proxy) {
                    return e;
                }
            }
        }
        self.audit("reset: every proxy enabled, every toxic removed".into());
        Answer::empty()
    }

    /// Closes every proxy's listener (the API is stopping).
    pub(crate) fn close_all(&self) {
        let proxies = self.proxies.lock().unwrap_or_else(|p| p.into_inner());
        for proxy in proxies.values() {
            self.close(proxy);
        }
    }
}
