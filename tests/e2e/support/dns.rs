//! A tiny authoritative DNS server on 127.0.0.1:0 (UDP) for one name: its A
//! records are a set the test changes while it runs, every other type of
//! the name answers no record, other names NXDOMAIN, and it can be told to
//! answer SERVFAIL. Messages are encoded by hand (RFC 1035 §4): a header,
//! the question copied back, one answer per address with a pointer to the
//! question's name and a TTL of 0. Stops when dropped.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::net::UdpSocket;

const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;
const RCODE_SERVFAIL: u16 = 2;
const RCODE_NXDOMAIN: u16 = 3;
/// A pointer to the name at offset 12, where the question starts.
const NAME_POINTER: [u8; 2] = [0xc0, 0x0c];

#[derive(Default)]
struct Records {
    addresses: Vec<Ipv4Addr>,
    servfail: bool,
    /// Queries answered, for a test that wants to see it asked.
    queries: u64,
}

pub(crate) struct DnsServer {
    addr: SocketAddr,
    records: Arc<Mutex<Records>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl DnsServer {
    /// Answers for `name` (no trailing dot) with `addresses`.
    pub(crate) async fn start(name: &str, addresses: Vec<Ipv4Addr>) -> DnsServer {
        let socket = UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind the DNS socket");
        let addr = socket.local_addr().expect("the DNS socket's address");
        let records = Arc::new(Mutex::new(Records {
            addresses,
            ..Records::default()
        }));
        let (name, shared) = (name.to_ascii_lowercase(), records.clone());
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            loop {
                let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                    return;
                };
                let answer = {
                    let mut r = shared.lock().unwrap();
                    r.queries += 1;
                    answer(&buf[..n], &name, &r)
                };
                if let Some(answer) = answer {
                    let _ = socket.send_to(&answer, peer).await;
                }
            }
        });
        DnsServer {
            addr,
            records,
            task,
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The name's A records from now on.
    pub(crate) fn set(&self, addresses: Vec<Ipv4Addr>) {
        self.records.lock().unwrap().addresses = addresses;
    }

    /// Every answer SERVFAIL (`true`) or back to the records.
    pub(crate) fn fail(&self, servfail: bool) {
        self.records.lock().unwrap().servfail = servfail;
    }

    pub(crate) fn queries(&self) -> u64 {
        self.records.lock().unwrap().queries
    }
}

/// The answer to `query`, or `None` for what is not a one-question query.
fn answer(query: &[u8], name: &str, records: &Records) -> Option<Vec<u8>> {
    if query.len() < 12 || u16::from_be_bytes([query[4], query[5]]) != 1 {
        return None;
    }
    // The question: labels up to the root, then type and class.
    let mut labels = Vec::new();
    let mut at = 12;
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        let label = query.get(at..at + len)?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    let question = &query[12..at + 4];
    let ours = labels.join(".") == name;
    let rcode = match (records.servfail, ours) {
        (true, _) => RCODE_SERVFAIL,
        (false, false) => RCODE_NXDOMAIN,
        (false, true) => 0,
    };
    let found: &[Ipv4Addr] = if rcode == 0 && qtype == TYPE_A {
        &records.addresses
    } else {
        &[]
    };
    // QR, the query's opcode and RD, AA, RA; then the rcode.
    let flags = 0x8000 | (u16::from_be_bytes([query[2], query[3]]) & 0x7900) | 0x0480 | rcode;
    let mut out = Vec::with_capacity(12 + question.len() + 16 * found.len());
    out.extend_from_slice(&query[..2]);
    out.extend_from_slice(&flags.to_be_bytes());
    for count in [1, found.len() as u16, 0, 0] {
        out.extend_from_slice(&count.to_be_bytes());
    }
    out.extend_from_slice(question);
    for ip in found {
        out.extend_from_slice(&NAME_POINTER);
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&ip.octets());
    }
    Some(out)
}
