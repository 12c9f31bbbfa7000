//! Host resolution: the system resolver (`getaddrinfo`) on a blocking thread, behind a cache
//! shared by every IO loop of a client (spec §5.7).
//!
//! Why ours and not hyper-util's `GaiResolver`: that one resolves again for every new
//! connection and caches nothing. The spec wants answers (failures included) kept 60 s, one
//! lookup shared by concurrent callers, IPv6 first, and the list rotated for each new
//! connection so that connections spread over a host's addresses.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::client::legacy::connect::dns::Name;
use tokio::sync::OnceCell;

/// How long an answer (or a failure) is kept.
pub(crate) const DNS_TTL: Duration = Duration::from_secs(60);

/// Most hosts kept in the cache.
pub(crate) const DNS_MAX_HOSTS: usize = 256;

/// The function that does one blocking lookup; replaceable so tests can count and delay.
type LookupFn = dyn Fn(&str) -> io::Result<Vec<IpAddr>> + Send + Sync;

/// A failed lookup, kept in the cache and returned to every connection attempt for that host.
///
/// It is its own type so that the transport can tell a resolve failure from a connect failure
/// by downcasting the error chain, not by reading message text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResolveError {
    /// The host that did not resolve.
    pub host: String,
    /// The operating system's explanation.
    pub detail: String,
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Could not resolve host: {} ({})", self.host, self.detail)
    }
}

impl std::error::Error for ResolveError {}

/// One answer with the time it was obtained.
#[derive(Clone, Debug)]
struct Answer {
    result: Result<Arc<[IpAddr]>, ResolveError>,
    at: Instant,
}

impl Answer {
    fn expired(&self, now: Instant) -> bool {
        now.duration_since(self.at) >= DNS_TTL
    }
}

/// A cache slot: the (possibly still running) lookup and the host's rotation counter.
#[derive(Clone)]
struct Entry {
    answer: Arc<OnceCell<Answer>>,
    rotation: Arc<AtomicUsize>,
}

impl Entry {
    fn new(rotation: Arc<AtomicUsize>) -> Entry {
        Entry {
            answer: Arc::new(OnceCell::new()),
            rotation,
        }
    }

    /// Still useful: a lookup in flight, or an answer younger than the TTL.
    fn live(&self, now: Instant) -> bool {
        self.answer.get().is_none_or(|a| !a.expired(now))
    }
}

/// The DNS cache shared by all IO loops of one client.
pub(crate) struct DnsCache {
    entries: Mutex<HashMap<String, Entry>>,
    lookups: AtomicU64,
    lookup: Arc<LookupFn>,
}

impl fmt::Debug for DnsCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DnsCache")
            .field("lookups", &self.lookups())
            .finish_non_exhaustive()
    }
}

impl DnsCache {
    /// A cache over the system resolver.
    pub(crate) fn new() -> DnsCache {
        DnsCache::with_lookup(Arc::new(system_lookup))
    }

    /// A cache over another lookup function (tests count and delay lookups with it).
    pub(crate) fn with_lookup(lookup: Arc<LookupFn>) -> DnsCache {
        DnsCache {
            entries: Mutex::new(HashMap::new()),
            lookups: AtomicU64::new(0),
            lookup,
        }
    }

    /// How many lookups actually ran (cache misses), for tests and counters.
    pub(crate) fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::Relaxed)
    }

    /// The addresses of `host`, IPv6 first, rotated by one position per call.
    ///
    /// Each call is one new connection (hyper-util's connector resolves once per connection),
    /// so the rotation spreads successive connections over the host's addresses.
    pub(crate) async fn resolve(self: &Arc<Self>, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        let host = host.to_ascii_lowercase();
        let entry = self.entry(&host);
        let answer = entry
            .answer
            .get_or_init(|| self.lookup_now(host.clone()))
            .await
            .clone();
        let addrs = answer.result?;
        let mut addrs = addrs.to_vec();
        if !addrs.is_empty() {
            let shift = entry.rotation.fetch_add(1, Ordering::Relaxed) % addrs.len();
            addrs.rotate_left(shift);
        }
        Ok(addrs)
    }

    /// The live entry for `host`, or a new one (inserted when the cache has room).
    fn entry(&self, host: &str) -> Entry {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = entries.get(host) {
            if entry.live(now) {
                return entry.clone();
            }
            // Expired: a fresh lookup, but keep rotating from where the host was.
            let fresh = Entry::new(entry.rotation.clone());
            entries.insert(host.to_owned(), fresh.clone());
            return fresh;
        }
        if entries.len() >= DNS_MAX_HOSTS {
            entries.retain(|_, e| e.live(now));
        }
        let fresh = Entry::new(Arc::new(AtomicUsize::new(0)));
        if entries.len() < DNS_MAX_HOSTS {
            entries.insert(host.to_owned(), fresh.clone());
        }
        // When every slot holds a live answer the lookup still runs, it just is not kept:
        // evicting a live host would only move the miss elsewhere.
        fresh
    }

    /// Runs one lookup on tokio's blocking pool, never on the IO loop itself.
    async fn lookup_now(self: &Arc<Self>, host: String) -> Answer {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let lookup = self.lookup.clone();
        let name = host.clone();
        let result = match tokio::task::spawn_blocking(move || lookup(&name)).await {
            Ok(Ok(addrs)) if !addrs.is_empty() => Ok(order(addrs).into()),
            Ok(Ok(_)) => Err(ResolveError {
                host,
                detail: "no addresses".into(),
            }),
            Ok(Err(e)) => Err(ResolveError {
                host,
                detail: e.to_string(),
            }),
            Err(e) => Err(ResolveError {
                host,
                detail: format!("lookup task failed: {e}"),
            }),
        };
        Answer {
            result,
            at: Instant::now(),
        }
    }
}

/// `getaddrinfo` for both families (the port is set later by the connector). `localhost`
/// and names under `.localhost` are loopback without asking anyone (RFC 6761, as curl
/// does): glibc does not resolve `bucket.localhost`, which virtual-hosted requests to a
/// local S3 emulator need.
fn system_lookup(host: &str) -> io::Result<Vec<IpAddr>> {
    if is_localhost(host) {
        return Ok(vec![
            IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        ]);
    }
    Ok((host, 0u16).to_socket_addrs()?.map(|a| a.ip()).collect())
}

/// `localhost` or a name ending in `.localhost` (any case, a final dot allowed).
fn is_localhost(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host).as_bytes();
    let tail = b"localhost";
    host.len() >= tail.len()
        && host[host.len() - tail.len()..].eq_ignore_ascii_case(tail)
        && (host.len() == tail.len() || host[host.len() - tail.len() - 1] == b'.')
}

/// IPv6 first, each family in the resolver's order, without duplicates.
fn order(addrs: Vec<IpAddr>) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::with_capacity(addrs.len());
    for want_v6 in [true, false] {
        for a in &addrs {
            if a.is_ipv6() == want_v6 && !out.contains(a) {
                out.push(*a);
            }
        }
    }
    out
}

/// The resolver plugged into hyper-util's `HttpConnector` (a tower `Service<Name>`).
///
/// `HttpConnector` parses IP literals itself and only calls this for names.
#[derive(Clone, Debug)]
pub(crate) struct Resolver {
    cache: Arc<DnsCache>,
}

impl Resolver {
    /// A resolver answering from `cache`.
    pub(crate) fn new(cache: Arc<DnsCache>) -> Resolver {
        Resolver { cache }
    }
}

impl tower_service::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = ResolveError;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let cache = self.cache.clone();
        Box::pin(async move {
            let addrs = cache.resolve(name.as_str()).await?;
            Ok(addrs
                .into_iter()
                .map(|ip| SocketAddr::new(ip, 0))
                .collect::<Vec<_>>()
                .into_iter())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[tokio::test(flavor = "current_thread")]
    async fn localhost_resolves_and_is_cached() {
        let cache = Arc::new(DnsCache::new());
        let first = cache
            .resolve("localhost")
            .await
            .expect("localhost resolves");
        assert!(first.iter().any(|a| a.is_loopback()), "{first:?}");
        let second = cache.resolve("LOCALHOST").await.expect("cached");
        assert_eq!(cache.lookups(), 1, "second answer must come from the cache");
        let mut a = first.clone();
        let mut b = second.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }

    #[test]
    fn localhost_names_are_loopback_without_a_lookup() {
        for host in [
            "localhost",
            "bucket.localhost",
            "a.b.LOCALHOST",
            "x.localhost.",
        ] {
            assert!(is_localhost(host), "{host}");
            let addrs = system_lookup(host).unwrap();
            assert!(
                !addrs.is_empty() && addrs.iter().all(IpAddr::is_loopback),
                "{host}"
            );
        }
        for host in [
            "notlocalhost",
            "localhost.example",
            "localhostx",
            "xlocalhost.",
        ] {
            assert!(!is_localhost(host), "{host}");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn virtual_host_names_under_localhost_resolve_through_the_cache() {
        let cache = Arc::new(DnsCache::new());
        let mut addrs = cache.resolve("Bucket.LocalHost").await.unwrap();
        addrs.sort();
        assert_eq!(
            addrs,
            [
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            ]
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn failures_are_cached() {
        let cache = Arc::new(DnsCache::new());
        let e = cache.resolve("no-such-host.invalid").await.unwrap_err();
        assert_eq!(e.host, "no-such-host.invalid");
        assert!(
            e.to_string()
                .starts_with("Could not resolve host: no-such-host.invalid")
        );
        let again = cache.resolve("no-such-host.invalid").await.unwrap_err();
        assert_eq!(again, e);
        assert_eq!(cache.lookups(), 1);
    }

    fn fake(addrs: Vec<IpAddr>, delay: Duration) -> Arc<LookupFn> {
        Arc::new(move |_host: &str| {
            std::thread::sleep(delay);
            Ok(addrs.clone())
        })
    }

    #[tokio::test(flavor = "current_thread")]
    async fn ipv6_first_no_duplicates_and_rotation() {
        let v4a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let v4b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let cache = Arc::new(DnsCache::with_lookup(fake(
            vec![v4a, v6, v4a, v4b, v6],
            Duration::ZERO,
        )));
        assert_eq!(cache.resolve("h").await.unwrap(), vec![v6, v4a, v4b]);
        assert_eq!(cache.resolve("h").await.unwrap(), vec![v4a, v4b, v6]);
        assert_eq!(cache.resolve("h").await.unwrap(), vec![v4b, v6, v4a]);
        assert_eq!(cache.resolve("h").await.unwrap(), vec![v6, v4a, v4b]);
        assert_eq!(cache.lookups(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn concurrent_callers_share_one_lookup() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let cache = Arc::new(DnsCache::with_lookup(fake(
            vec![ip],
            Duration::from_millis(50),
        )));
        let (a, b, c) = tokio::join!(
            cache.resolve("shared"),
            cache.resolve("shared"),
            cache.resolve("shared")
        );
        assert_eq!(
            (a.unwrap(), b.unwrap(), c.unwrap()),
            (vec![ip], vec![ip], vec![ip])
        );
        assert_eq!(cache.lookups(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn cache_is_bounded_and_expired_entries_are_replaced() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let cache = Arc::new(DnsCache::with_lookup(fake(vec![ip], Duration::ZERO)));
        for i in 0..DNS_MAX_HOSTS + 10 {
            cache.resolve(&format!("h{i}")).await.unwrap();
        }
        assert_eq!(cache.entries.lock().unwrap().len(), DNS_MAX_HOSTS);
        // Age one entry past the TTL: the next call looks it up again.
        {
            let mut entries = cache.entries.lock().unwrap();
            let e = entries.get_mut("h0").unwrap();
            let old = Answer {
                result: Ok(vec![ip].into()),
                at: Instant::now() - DNS_TTL - Duration::from_secs(1),
            };
            let cell = OnceCell::new();
            cell.set(old).unwrap();
            e.answer = Arc::new(cell);
        }
        let before = cache.lookups();
        cache.resolve("h0").await.unwrap();
        assert_eq!(cache.lookups(), before + 1);
        cache.resolve("h0").await.unwrap();
        assert_eq!(cache.lookups(), before + 1);
    }
}
