//! The credential cache (spec §5.10): one per engine, scoped by where the credential options
//! come from (native chains) or by the callback's `cache_prefix` (custom providers), with
//! single flight, refresh in the last tenth of a lifetime, a 60 s recheck of static values,
//! and no negative caching.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use super::{Auth, CredentialHttp, LoadContext, Resolved, is_expired, load_native};
use crate::config::{
    Credentials, CredentialsKind, OptionSource, Settings, canonical_prefix, prefix_matches,
};
use crate::error::{Error, Result, Status};
use crate::locator::Locator;

/// How long native values without an expiry are reused before the chain runs again, so
/// edited profiles take effect.
const STATIC_RECHECK: Duration = Duration::from_secs(60);

/// Shortest and longest refresh margin before an expiry.
const MARGIN_MIN: Duration = Duration::from_secs(1);
const MARGIN_MAX: Duration = Duration::from_secs(60);

/// What a cache entry is keyed by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Scope {
    /// A native chain: the kind plus, per credential option, where its value comes from
    /// (never the secrets themselves).
    Native(CredentialsKind, Vec<Origin>),
    /// A custom provider's lookup in flight for one exact path.
    Custom(CredentialsKind, String),
}

/// An owned [`OptionSource`], to key the cache with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Origin {
    Rule(Box<str>),
    Explicit,
    Environment,
    Default,
}

impl From<OptionSource<'_>> for Origin {
    fn from(source: OptionSource<'_>) -> Origin {
        match source {
            OptionSource::Rule(prefix) => Origin::Rule(prefix.into()),
            OptionSource::Explicit => Origin::Explicit,
            OptionSource::Environment => Origin::Environment,
            OptionSource::Default => Origin::Default,
        }
    }
}

/// A reusable value.
#[derive(Clone, Debug)]
struct Entry {
    value: Arc<Resolved>,
    /// Reusable while the wall clock is before this (`None`: forever).
    reuse_until: Option<SystemTime>,
}

impl Entry {
    fn fresh(&self, now: SystemTime) -> bool {
        self.reuse_until.is_none_or(|t| now < t)
    }
}

/// The outcome of one lookup, shared by everyone who waited for it.
type Outcome = Result<Option<Arc<Resolved>>>;

/// One lookup in flight: its waiters block on `done` until `outcome` is set.
#[derive(Debug, Default)]
struct Flight {
    outcome: Mutex<Option<Outcome>>,
    done: Condvar,
}

impl Flight {
    fn finish(&self, outcome: Outcome) {
        *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
        self.done.notify_all();
    }

    fn wait(&self) -> Outcome {
        let mut slot = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(o) = slot.as_ref() {
                return o.clone();
            }
            slot = self.done.wait(slot).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A lookup in flight and whether an invalidation overtook it (its result is then returned
/// to its waiters but not stored).
#[derive(Debug)]
struct InFlight {
    flight: Arc<Flight>,
    stale: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Native entries by scope.
    native: HashMap<Scope, Entry>,
    /// Custom entries: (kind, canonical prefix) → value.
    custom: Vec<(CredentialsKind, String, Entry)>,
    /// Lookups in flight.
    flights: HashMap<Scope, InFlight>,
}

/// The per-engine credential cache.
#[derive(Debug)]
pub(crate) struct CredentialCache {
    http: CredentialHttp,
    state: Mutex<State>,
}

impl CredentialCache {
    /// An empty cache whose native chains send requests through `http`.
    pub(crate) fn new(http: CredentialHttp) -> CredentialCache {
        CredentialCache {
            http,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the maps consistent, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Decides how a transfer of `locator` is signed and finds its credentials (blocking:
    /// call it on a credential worker).
    pub(crate) fn resolve(
        &self,
        settings: &Settings,
        locator: &Locator,
        deadline: Option<Instant>,
    ) -> Result<Auth> {
        let Some(kind) = super::signing_kind(settings, locator) else {
            return Ok(Auth::Anonymous);
        };
        let path = locator.identity();
        let found = match settings.credentials_provider(kind) {
            Some(provider) => self.custom(kind, path, |p| provider.credentials(kind, p))?,
            None => self.native(kind, settings, path, deadline)?,
        };
        Ok(auth(found))
    }

    /// What [`CredentialCache::resolve`] answers from the cache alone, without blocking:
    /// `None` when it would look up (nothing fresh cached, or a custom provider, which is
    /// asked per path).
    pub(crate) fn cached(&self, settings: &Settings, locator: &Locator) -> Option<Auth> {
        let Some(kind) = super::signing_kind(settings, locator) else {
            return Some(Auth::Anonymous);
        };
        if settings.credentials_provider(kind).is_some() {
            return None;
        }
        let scope = native_scope(kind, settings, locator.identity());
        let value = fresh_native(&self.lock(), &scope, SystemTime::now())?;
        Some(auth(Some(value)))
    }

    /// A key shared by the locators whose [`CredentialCache::resolve`] finds the same
    /// answer at one moment: a native chain reads only options, so the backend and the path
    /// rules that apply decide it. `None` under a custom provider, which is asked per path.
    pub(crate) fn scope(
        settings: &Settings,
        locator: &Locator,
    ) -> Option<(crate::locator::Backend, Vec<usize>)> {
        let kind = super::kind_of(locator.backend())?;
        if settings.credentials_provider(kind).is_some() {
            return None;
        }
        Some((locator.backend(), settings.rule_scope(locator.identity())))
    }

    /// Forgets `rejected`, the value a server refused for `locator` as expired, together
    /// with a lookup in flight for it, whose late result is then not stored. A value already
    /// replaced is left alone: when many transfers are rejected at once, the first refresh
    /// serves them all instead of each one throwing away the last one's result.
    pub(crate) fn invalidate(
        &self,
        settings: &Settings,
        locator: &Locator,
        rejected: &Arc<Resolved>,
    ) {
        let Some(kind) = super::kind_of(locator.backend()) else {
            return;
        };
        let path = locator.identity();
        let mut st = self.lock();
        let (scope, removed) = if settings.credentials_provider(kind).is_some() {
            let before = st.custom.len();
            st.custom.retain(|(k, prefix, e)| {
                !(*k == kind && prefix_matches(prefix, path) && Arc::ptr_eq(&e.value, rejected))
            });
            (
                Scope::Custom(kind, path.to_owned()),
                st.custom.len() < before,
            )
        } else {
            let scope = native_scope(kind, settings, path);
            let holds = st
                .native
                .get(&scope)
                .is_some_and(|e| Arc::ptr_eq(&e.value, rejected));
            if holds {
                st.native.remove(&scope);
            }
            (scope, holds)
        };
        if removed && let Some(f) = st.flights.get_mut(&scope) {
            f.stale = true;
        }
    }

    /// A native chain's value for `path`, shared by every path whose credential options
    /// come from the same places.
    fn native(
        &self,
        kind: CredentialsKind,
        settings: &Settings,
        path: &str,
        deadline: Option<Instant>,
    ) -> Outcome {
        let load = || {
            let started = SystemTime::now();
            let ctx = LoadContext {
                settings,
                path,
                deadline,
                http: &self.http,
            };
            Ok(load_native(kind, &ctx)?.map(|r| {
                let until = reuse_until(&r.credentials, started, STATIC_RECHECK);
                (Arc::new(r), until)
            }))
        };
        self.shared(
            native_scope(kind, settings, path),
            fresh_native,
            load,
            |st, scope, value, until| {
                let entry = Entry {
                    value,
                    reuse_until: Some(until),
                };
                st.native.insert(scope, entry);
            },
        )
    }

    /// A custom provider's value for `path`: reused under the longest stored prefix that
    /// contains it; without a prefix the provider is asked every time.
    fn custom(
        &self,
        kind: CredentialsKind,
        path: &str,
        call: impl FnOnce(&str) -> Result<Credentials>,
    ) -> Outcome {
        let load = || {
            let started = SystemTime::now();
            let c = call(path)?;
            if is_expired(&c, SystemTime::now()) {
                return Err(Error::new(
                    Status::Credentials,
                    format!("{path}: custom credential provider returned expired credentials"),
                ));
            }
            let prefix = match c.cache_prefix.as_deref().filter(|p| !p.is_empty()) {
                None => None,
                Some(p) => {
                    let canonical = canonical_prefix(p);
                    if !prefix_matches(&canonical, path) {
                        return Err(Error::new(
                            Status::Credentials,
                            format!(
                                "{path}: custom credential cache_prefix does not contain the \
                                 requested path"
                            ),
                        ));
                    }
                    Some(canonical)
                }
            };
            // Custom values without an expiry never expire.
            let until = c
                .expires_at
                .map(|_| reuse_until(&c, started, Duration::ZERO));
            Ok(Some((
                Arc::new(Resolved::new(c)),
                prefix.map(|p| (p, until)),
            )))
        };
        self.shared(
            Scope::Custom(kind, path.to_owned()),
            |st, _, now| {
                st.custom
                    .iter()
                    .filter(|(k, prefix, e)| {
                        *k == kind && prefix_matches(prefix, path) && e.fresh(now)
                    })
                    .max_by_key(|(_, prefix, _)| prefix.len())
                    .map(|(_, _, e)| Arc::clone(&e.value))
            },
            load,
            |st, _, value, reuse| {
                let Some((prefix, reuse_until)) = reuse else {
                    return;
                };
                st.custom.retain(|(k, p, _)| !(*k == kind && *p == prefix));
                st.custom.push((kind, prefix, Entry { value, reuse_until }));
            },
        )
    }

    /// Single flight: returns a fresh cached value, or waits for the lookup of `scope`
    /// already in flight, or runs `load` itself and stores its value with `store` (unless
    /// an invalidation overtook it). Failures are shared with the waiters, never stored.
    fn shared<T>(
        &self,
        scope: Scope,
        cached: impl Fn(&State, &Scope, SystemTime) -> Option<Arc<Resolved>>,
        load: impl FnOnce() -> Result<Option<(Arc<Resolved>, T)>>,
        store: impl FnOnce(&mut State, Scope, Arc<Resolved>, T),
    ) -> Outcome {
        let flight = {
            let mut st = self.lock();
            if let Some(v) = cached(&st, &scope, SystemTime::now()) {
                return Ok(Some(v));
            }
            if let Some(running) = st.flights.get(&scope) {
                let flight = Arc::clone(&running.flight);
                drop(st);
                return flight.wait();
            }
            let flight = Arc::new(Flight::default());
            st.flights.insert(
                scope.clone(),
                InFlight {
                    flight: Arc::clone(&flight),
                    stale: false,
                },
            );
            flight
        };
        let mut landing = Landing {
            cache: self,
            scope: Some(scope),
            flight,
        };
        let outcome = load();
        let mut st = self.lock();
        let landed = landing.take_flight(&mut st);
        let shared = match outcome {
            Ok(Some((value, extra))) => {
                if let Some((scope, false)) = landed {
                    store(&mut st, scope, Arc::clone(&value), extra);
                }
                Ok(Some(value))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        };
        drop(st);
        landing.flight.finish(shared.clone());
        shared
    }
}

/// Ends a lookup's flight even if the lookup panics (a custom provider may), so waiters
/// never hang.
struct Landing<'a> {
    cache: &'a CredentialCache,
    scope: Option<Scope>,
    flight: Arc<Flight>,
}

impl Landing<'_> {
    /// Removes the flight from the map: its scope, and true when an invalidation marked it
    /// stale (`None` once taken).
    fn take_flight(&mut self, st: &mut State) -> Option<(Scope, bool)> {
        let scope = self.scope.take()?;
        let stale = st.flights.remove(&scope).is_some_and(|f| f.stale);
        Some((scope, stale))
    }
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if self.scope.is_some() {
            let mut st = self.cache.lock();
            self.take_flight(&mut st);
            drop(st);
            self.flight.finish(Err(Error::new(
                Status::Credentials,
                "the credential lookup failed",
            )));
        }
    }
}

/// How a lookup's value signs: not at all when there is none or it is empty.
fn auth(found: Option<Arc<Resolved>>) -> Auth {
    match found {
        Some(r) if !is_empty(&r.credentials) => Auth::Signed(r),
        _ => Auth::Missing,
    }
}

/// A native scope's cached value, if still fresh at `now`.
fn fresh_native(st: &State, scope: &Scope, now: SystemTime) -> Option<Arc<Resolved>> {
    st.native
        .get(scope)
        .filter(|e| e.fresh(now))
        .map(|e| Arc::clone(&e.value))
}

/// Credentials with nothing to sign with.
fn is_empty(c: &Credentials) -> bool {
    [
        &c.access_key_id,
        &c.secret_access_key,
        &c.session_token,
        &c.bearer_token,
        &c.sas_token,
        &c.account_name,
    ]
    .iter()
    .all(|f| f.is_empty())
}

/// When a value loaded at `loaded` stops being reused: its expiry minus a tenth of its
/// lifetime (clamped to 1–60 s, never past the expiry), or `loaded + without_expiry` when it
/// has none.
fn reuse_until(c: &Credentials, loaded: SystemTime, without_expiry: Duration) -> SystemTime {
    match c.expires_at {
        None => loaded + without_expiry,
        Some(expiry) => {
            let lifetime = expiry.duration_since(loaded).unwrap_or_default();
            let margin = (lifetime / 10).clamp(MARGIN_MIN, MARGIN_MAX).min(lifetime);
            expiry - margin
        }
    }
}

/// The scope of a native chain for `path`.
fn native_scope(kind: CredentialsKind, settings: &Settings, path: &str) -> Scope {
    let origins = settings
        .credential_options(kind, path)
        .map(|(_, source)| Origin::from(source))
        .collect();
    Scope::Native(kind, origins)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, CredentialsProvider};
    use crate::transport::{Transport, TransportOptions};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Barrier, mpsc};
    use std::thread;

    fn cache() -> CredentialCache {
        let transport = Transport::new(TransportOptions::default()).unwrap();
        CredentialCache::new(CredentialHttp::new(transport))
    }

    fn at(s: &str) -> Locator {
        Locator::parse(s).unwrap()
    }

    /// A provider that counts calls, optionally waits, and hands out a new key per call.
    struct Counting {
        calls: AtomicUsize,
        wait: Duration,
        prefix: Option<String>,
        lifetime: Option<Duration>,
    }

    impl Counting {
        fn new(prefix: Option<&str>) -> Arc<Counting> {
            Arc::new(Counting {
                calls: AtomicUsize::new(0),
                wait: Duration::ZERO,
                prefix: prefix.map(str::to_owned),
                lifetime: None,
            })
        }
        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }
    }

    impl CredentialsProvider for Counting {
        fn credentials(&self, _kind: CredentialsKind, path: &str) -> Result<Credentials> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            thread::sleep(self.wait);
            if path.ends_with("/fail") && n == 1 {
                return Err(Error::new(Status::Credentials, "first call fails"));
            }
            Ok(Credentials {
                access_key_id: format!("key-{n}"),
                secret_access_key: "secret".into(),
                cache_prefix: self.prefix.clone(),
                expires_at: self.lifetime.map(|l| SystemTime::now() + l),
                ..Credentials::default()
            })
        }
    }

    fn settings_with(provider: Arc<dyn CredentialsProvider>) -> Settings {
        let mut config = Config::empty();
        config.set_credentials_provider(CredentialsKind::Aws, Some(provider));
        config.freeze().unwrap()
    }

    fn key(auth: &Auth) -> String {
        match auth {
            Auth::Signed(r) => r.credentials.access_key_id.clone(),
            other => panic!("not signed: {other:?}"),
        }
    }

    #[test]
    fn refresh_margin_is_a_tenth_of_the_lifetime_within_one_to_sixty_seconds() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let with = |secs: f64| Credentials {
            expires_at: Some(t0 + Duration::from_secs_f64(secs)),
            ..Credentials::default()
        };
        let s = Duration::from_secs;
        assert_eq!(reuse_until(&with(3600.0), t0, s(60)), t0 + s(3540));
        assert_eq!(reuse_until(&with(100.0), t0, s(60)), t0 + s(90));
        assert_eq!(reuse_until(&with(5.0), t0, s(60)), t0 + s(4));
        // Shorter than the minimum margin: never reused past its own expiry, nor before it.
        assert_eq!(reuse_until(&with(0.5), t0, s(60)), t0);
        assert_eq!(reuse_until(&Credentials::default(), t0, s(60)), t0 + s(60));
    }

    #[test]
    fn native_scopes_follow_where_the_options_come_from() {
        let mut config = Config::empty();
        config.set("AWS_ACCESS_KEY_ID", Some("AKID")).unwrap();
        config.set("AWS_SECRET_ACCESS_KEY", Some("secret")).unwrap();
        config
            .set_path("s3://lab/", "AWS_PROFILE", Some("lab"))
            .unwrap();
        let settings = config.freeze().unwrap();
        let kind = CredentialsKind::Aws;
        let a = native_scope(kind, &settings, "/vsis3/data/a");
        let b = native_scope(kind, &settings, "/vsis3/other/b");
        let lab = native_scope(kind, &settings, "/vsis3/lab/x");
        assert_eq!(a, b);
        assert_ne!(a, lab);
        // The secrets are not part of the key: another key from the same place, same scope.
        let mut other = Config::empty();
        other.set("AWS_ACCESS_KEY_ID", Some("AKID2")).unwrap();
        other.set("AWS_SECRET_ACCESS_KEY", Some("other")).unwrap();
        let other = other.freeze().unwrap();
        assert_eq!(native_scope(kind, &other, "/vsis3/data/a"), a);
        assert_ne!(
            native_scope(CredentialsKind::Gcs, &settings, "/vsis3/data/a"),
            a
        );
    }

    /// The cache alone answers what needs no lookup: unsigned reads, and a native value
    /// once looked up; never a custom provider's (asked per path).
    #[test]
    fn cached_answers_without_a_lookup() {
        let cache = cache();
        let mut config = Config::empty();
        config.set("AWS_ACCESS_KEY_ID", Some("AKID")).unwrap();
        config.set("AWS_SECRET_ACCESS_KEY", Some("secret")).unwrap();
        config
            .set_path("s3://open/", "AWS_NO_SIGN_REQUEST", Some("YES"))
            .unwrap();
        let settings = config.freeze().unwrap();
        let l = at("s3://data/a");
        assert!(
            cache.cached(&settings, &l).is_none(),
            "nothing looked up yet"
        );
        let looked = cache.resolve(&settings, &l, None).unwrap();
        let cached = cache.cached(&settings, &at("s3://data/b")).unwrap();
        assert_eq!((key(&looked), key(&cached)), ("AKID".into(), "AKID".into()));
        let open = cache.cached(&settings, &at("s3://open/x"));
        assert!(matches!(open, Some(Auth::Anonymous)), "{open:?}");
        let provider = Counting::new(None);
        let custom = settings_with(provider.clone());
        cache.resolve(&custom, &l, None).unwrap();
        assert!(cache.cached(&custom, &l).is_none());
        assert_eq!(provider.calls(), 1);
    }

    #[test]
    fn anonymous_and_missing_decisions() {
        let cache = cache();
        let mut config = Config::empty();
        config.set("AWS_NO_SIGN_REQUEST", Some("YES")).unwrap();
        let settings = config.freeze().unwrap();
        let auth = cache.resolve(&settings, &at("s3://b/k"), None).unwrap();
        assert!(matches!(auth, Auth::Anonymous), "{auth:?}");
        // Source signs only when configured; HTTP never.
        let plain = Config::empty().freeze().unwrap();
        for l in ["source://acct/product/k", "https://example.com/x"] {
            let auth = cache.resolve(&plain, &at(l), None).unwrap();
            assert!(matches!(auth, Auth::Anonymous), "{l}: {auth:?}");
        }
        // A provider returning nothing at all leaves the backend to report "no credentials".
        struct Nothing;
        impl CredentialsProvider for Nothing {
            fn credentials(&self, _: CredentialsKind, _: &str) -> Result<Credentials> {
                Ok(Credentials::default())
            }
        }
        let settings = settings_with(Arc::new(Nothing));
        let auth = cache.resolve(&settings, &at("s3://b/k"), None).unwrap();
        assert!(matches!(auth, Auth::Missing), "{auth:?}");
    }

    #[test]
    fn custom_values_are_reused_only_under_their_prefix() {
        let cache = cache();
        let provider = Counting::new(Some("s3://data"));
        let settings = settings_with(provider.clone());
        let first = cache.resolve(&settings, &at("s3://data/a"), None).unwrap();
        let second = cache
            .resolve(&settings, &at("/vsis3/data/b/c"), None)
            .unwrap();
        assert_eq!(
            (key(&first), key(&second)),
            ("key-1".into(), "key-1".into())
        );
        // `s3://data` never authorises `s3://data-private`.
        let private = cache.resolve(&settings, &at("s3://data-private/x"), None);
        assert_eq!(
            private.unwrap_err().message(),
            "/vsis3/data-private/x: custom credential cache_prefix does not contain the \
             requested path"
        );
        assert_eq!(provider.calls(), 2);
    }

    #[test]
    fn the_longest_prefix_wins_and_no_prefix_means_no_reuse() {
        let cache = cache();
        let wide = Counting::new(Some("/vsis3/data/"));
        let settings = settings_with(wide.clone());
        cache.resolve(&settings, &at("s3://data/x"), None).unwrap();
        // Plant a narrower entry by hand-resolving with another provider value.
        let narrow = Counting::new(Some("/vsis3/data/deep"));
        let narrow_settings = settings_with(narrow.clone());
        let got = cache
            .resolve(&narrow_settings, &at("s3://data/deep/y"), None)
            .unwrap();
        // The wide entry already covers the path, so the narrow provider is not asked.
        assert_eq!(key(&got), "key-1");
        assert_eq!(narrow.calls(), 0);

        let none = Counting::new(None);
        let settings = settings_with(none.clone());
        for _ in 0..3 {
            cache
                .resolve(&settings, &at("s3://elsewhere/k"), None)
                .unwrap();
        }
        assert_eq!(none.calls(), 3);
    }

    #[test]
    fn concurrent_cold_lookups_of_one_path_make_one_call() {
        let cache = Arc::new(cache());
        let provider = Arc::new(Counting {
            calls: AtomicUsize::new(0),
            wait: Duration::from_millis(200),
            prefix: None,
            lifetime: None,
        });
        let settings = settings_with(provider.clone());
        let start = Arc::new(Barrier::new(8));
        let keys: Vec<String> = (0..8)
            .map(|_| {
                let (cache, settings, start) = (cache.clone(), settings.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    key(&cache.resolve(&settings, &at("s3://b/same"), None).unwrap())
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        assert_eq!(provider.calls(), 1);
        assert!(keys.iter().all(|k| k == "key-1"), "{keys:?}");
    }

    #[test]
    fn different_paths_look_up_concurrently() {
        // Four callbacks must be in flight at once: each waits for all four.
        struct Gate(Barrier);
        impl CredentialsProvider for Gate {
            fn credentials(&self, _: CredentialsKind, _: &str) -> Result<Credentials> {
                self.0.wait();
                Ok(Credentials {
                    access_key_id: "k".into(),
                    ..Credentials::default()
                })
            }
        }
        let cache = Arc::new(cache());
        let settings = settings_with(Arc::new(Gate(Barrier::new(4))));
        let (tx, rx) = mpsc::channel();
        for i in 0..4 {
            let (cache, settings, tx) = (cache.clone(), settings.clone(), tx.clone());
            thread::spawn(move || {
                let l = at(&format!("s3://b/{i}"));
                tx.send(cache.resolve(&settings, &l, None).is_ok()).unwrap();
            });
        }
        for _ in 0..4 {
            assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap());
        }
    }

    #[test]
    fn failures_are_shared_but_never_cached() {
        let cache = cache();
        let provider = Counting::new(Some("s3://b"));
        let settings = settings_with(provider.clone());
        let err = cache
            .resolve(&settings, &at("s3://b/fail"), None)
            .unwrap_err();
        assert_eq!(err.status(), Status::Credentials);
        let ok = cache.resolve(&settings, &at("s3://b/fail"), None).unwrap();
        assert_eq!(key(&ok), "key-2");
    }

    #[test]
    fn expiring_values_refresh_in_their_last_tenth_and_expired_ones_fail() {
        let cache = cache();
        // 5 s lifetime: the 1 s margin keeps it reusable for about 4 s.
        let long = Arc::new(Counting {
            calls: AtomicUsize::new(0),
            wait: Duration::ZERO,
            prefix: Some("s3://b".into()),
            lifetime: Some(Duration::from_secs(5)),
        });
        let settings = settings_with(long.clone());
        cache.resolve(&settings, &at("s3://b/1"), None).unwrap();
        cache.resolve(&settings, &at("s3://b/2"), None).unwrap();
        assert_eq!(long.calls(), 1);
        // 800 ms lifetime: inside its refresh window at once, so every lookup calls.
        let short = Arc::new(Counting {
            calls: AtomicUsize::new(0),
            wait: Duration::ZERO,
            prefix: Some("s3://c".into()),
            lifetime: Some(Duration::from_millis(800)),
        });
        let settings = settings_with(short.clone());
        cache.resolve(&settings, &at("s3://c/1"), None).unwrap();
        cache.resolve(&settings, &at("s3://c/2"), None).unwrap();
        assert_eq!(short.calls(), 2);

        struct Stale;
        impl CredentialsProvider for Stale {
            fn credentials(&self, _: CredentialsKind, _: &str) -> Result<Credentials> {
                Ok(Credentials {
                    access_key_id: "k".into(),
                    expires_at: Some(SystemTime::now() - Duration::from_secs(1)),
                    ..Credentials::default()
                })
            }
        }
        let err = cache
            .resolve(&settings_with(Arc::new(Stale)), &at("s3://d/k"), None)
            .unwrap_err();
        assert_eq!(
            err.message(),
            "/vsis3/d/k: custom credential provider returned expired credentials"
        );
    }

    fn signed(auth: Auth) -> Arc<Resolved> {
        match auth {
            Auth::Signed(r) => r,
            other => panic!("not signed: {other:?}"),
        }
    }

    #[test]
    fn invalidation_drops_only_the_rejected_value() {
        let cache = cache();
        let provider = Counting::new(Some("s3://b"));
        let settings = settings_with(provider.clone());
        let l = at("s3://b/k");
        let first = signed(cache.resolve(&settings, &l, None).unwrap());
        cache.invalidate(&settings, &l, &first);
        let second = signed(cache.resolve(&settings, &l, None).unwrap());
        assert_eq!(second.credentials.access_key_id, "key-2");
        // A late rejection of the first value leaves its replacement alone.
        cache.invalidate(&settings, &l, &first);
        let again = signed(cache.resolve(&settings, &l, None).unwrap());
        assert!(Arc::ptr_eq(&again, &second));
        assert_eq!(provider.calls(), 2);
    }

    #[test]
    fn a_lookup_overtaken_by_an_invalidation_is_not_stored() {
        let cache = Arc::new(cache());
        // 800 ms keys sit in their refresh window at once: every lookup reloads while the
        // old value is still stored.
        let provider = Arc::new(Counting {
            calls: AtomicUsize::new(0),
            wait: Duration::from_millis(300),
            prefix: Some("s3://b".into()),
            lifetime: Some(Duration::from_millis(800)),
        });
        let settings = settings_with(provider.clone());
        let l = at("s3://b/k");
        let first = signed(cache.resolve(&settings, &l, None).unwrap());
        let running = {
            let (cache, settings, l) = (cache.clone(), settings.clone(), l.clone());
            thread::spawn(move || key(&cache.resolve(&settings, &l, None).unwrap()))
        };
        thread::sleep(Duration::from_millis(100));
        cache.invalidate(&settings, &l, &first);
        // The overtaken lookup answers its caller but is not stored.
        assert_eq!(running.join().unwrap(), "key-2");
        assert_eq!(key(&cache.resolve(&settings, &l, None).unwrap()), "key-3");
        assert_eq!(provider.calls(), 3);
    }
}
