//! The frozen snapshot a client keeps: validated layers, defaults applied, typed accessors.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::headers::{MALFORMED, parse_headers};
use super::options::{credential_options, def, id_of, resolve, secret_options};
use super::provider::{CredentialsKind, CredentialsProvider};
use super::rules::prefix_matches;
use super::validate::{check_layer, is_truthy, uint_or};
use super::{Config, Layers, Providers};
use crate::error::{Error, Result, Status};

/// The HTTP version requested from servers (`KARU_HTTP_VERSION`).
///
/// ```
/// use karu::HttpVersion;
/// assert_eq!(HttpVersion::parse("2tls"), Some(HttpVersion::Http2Tls));
/// assert_eq!(HttpVersion::default(), HttpVersion::Http1_1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HttpVersion {
    /// `AUTO`: negotiate.
    Auto,
    /// `1.1` (the default).
    #[default]
    Http1_1,
    /// `2`: HTTP/2 over TLS, falling back to HTTP/1.1 when not negotiated.
    Http2,
    /// `2TLS`: HTTP/2 over TLS.
    Http2Tls,
    /// `2PRIOR_KNOWLEDGE`: cleartext HTTP/2 without upgrade.
    Http2PriorKnowledge,
}

impl HttpVersion {
    /// Parses a `KARU_HTTP_VERSION` value, case-insensitively.
    pub fn parse(value: &str) -> Option<HttpVersion> {
        const NAMES: [(&str, HttpVersion); 5] = [
            ("AUTO", HttpVersion::Auto),
            ("1.1", HttpVersion::Http1_1),
            ("2", HttpVersion::Http2),
            ("2TLS", HttpVersion::Http2Tls),
            ("2PRIOR_KNOWLEDGE", HttpVersion::Http2PriorKnowledge),
        ];
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(value))
            .map(|(_, v)| *v)
    }
}

/// Where the value of an option for a path came from (credential cache scopes key on it).
///
/// ```
/// use karu::{Config, OptionSource};
/// let mut config = Config::empty();
/// config.set("AWS_REGION", Some("us-east-2"))?;
/// config.set_path("s3://archive", "AWS_REGION", Some("ap-south-1"))?;
/// let settings = config.freeze()?;
/// let source = |name, path| settings.option_source(name, path);
/// assert_eq!(source("AWS_REGION", "/vsis3/archive/x"), OptionSource::Rule("/vsis3/archive"));
/// assert_eq!(source("AWS_REGION", "/vsis3/data/x"), OptionSource::Explicit);
/// assert_eq!(source("AWS_PROFILE", "/vsis3/data/x"), OptionSource::Default);
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OptionSource<'a> {
    /// The path rule with this (canonical) prefix.
    Rule(&'a str),
    /// A value set through [`Config::set`].
    Explicit,
    /// The environment snapshot.
    Environment,
    /// Not set anywhere: the built-in default applies.
    Default,
}

/// Client-wide values with defaults applied (spec 3.4 and 3.5), computed once at freeze.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Derived {
    concurrency: u32,
    io_threads: u32,
    coalesce_gap: u64,
    coalesce_limit: u64,
    coalesce_parts: u64,
    coalesce_amplification: u64,
    range_fallback_limit: u64,
    max_attempts: u32,
    request_timeout: u64,
    connect_timeout: u64,
    low_speed_time: u64,
    low_speed_limit: u64,
    /// `None` when `KARU_HTTP_HEADERS` is malformed.
    headers: Option<Vec<(String, String)>>,
    http_version: HttpVersion,
    ca_bundle: Option<PathBuf>,
    ca_bundle_explicit: bool,
    ca_path: Option<PathBuf>,
    proxy: Option<String>,
    proxy_credentials: Option<String>,
    user_agent: Option<String>,
    cache_dir: Option<PathBuf>,
}

struct Inner {
    layers: Layers,
    providers: Providers,
    derived: Derived,
}

/// An immutable, validated configuration snapshot, made by [`Config::freeze`]. Cheap to
/// clone and shareable across threads.
///
/// Client-wide options have typed accessors with their defaults applied; backend options are
/// read per path with [`Settings::option`], which applies the layers of spec 3.1.
///
/// ```
/// use karu::Config;
/// let mut config = Config::empty();
/// config.set("KARU_CONCURRENCY", Some("10"))?;
/// config.set_path("s3://team/private", "AWS_PROFILE", Some("secret-team"))?;
/// config.set("AWS_PROFILE", Some("everyone"))?;
/// let settings = config.freeze()?;
///
/// assert_eq!(settings.concurrency(), 10);
/// assert_eq!(settings.loop_shares(), vec![3, 3, 2, 2]);
/// assert_eq!(settings.max_attempts(), 8);
/// assert_eq!(settings.option("AWS_PROFILE", "/vsis3/team/private/a.bin"), Some("secret-team"));
/// assert_eq!(settings.option("aws_default_profile", "/vsis3/team/public/a.bin"), Some("everyone"));
/// assert!(settings.matches(&config)?);
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone)]
pub struct Settings(Arc<Inner>);

const DEFAULT_USER_AGENT: &str = concat!("karu/", env!("CARGO_PKG_VERSION"));

/// Split of `concurrency` slots across `loops` loops: equal shares, the first
/// `concurrency % loops` loops one more.
fn split(concurrency: u32, loops: u32) -> Vec<u32> {
    let loops = loops.max(1);
    let (share, extra) = (concurrency / loops, concurrency % loops);
    (0..loops).map(|i| share + u32::from(i < extra)).collect()
}

impl Settings {
    /// Validates every layer and computes the client-wide values.
    pub(crate) fn build(config: &Config) -> Result<Settings> {
        let layers = &config.layers;
        check_layer(&layers.env)?;
        check_layer(&layers.explicit)?;
        for rule in &layers.rules {
            check_layer(&rule.values).map_err(|e| e.context(&rule.prefix))?;
        }

        // Client-wide options never come from rules, so they are read with an empty path.
        let get = |name: &str| layers.lookup(id_of(name), "").map(|(v, _)| v);
        // Values are validated above, so the ranges below already hold; `uint_or` only
        // supplies the default for an unset option.
        let small = |name: &str, default: u32| uint_or(get(name), default.into()) as u32;
        let non_empty = |name: &str| get(name).filter(|v| !v.is_empty());

        let concurrency = small("KARU_CONCURRENCY", 64);
        let explicit_bundle = non_empty("KARU_HTTP_CA_BUNDLE").map(|v| layers.expand_home(v));
        let ca_path = non_empty("KARU_HTTP_CA_PATH").map(|v| layers.expand_home(v));
        let ca_bundle_explicit = explicit_bundle.is_some();
        // Either CA option turns off the auto-detected system bundle.
        let ca_bundle = match (&explicit_bundle, &ca_path) {
            (Some(b), _) => Some(b.clone()),
            (None, Some(_)) => None,
            (None, None) => layers.system_ca_bundle.clone(),
        };
        let cache_dir = match &layers.dirs.xdg_cache {
            Some(xdg) => Some(xdg.clone()),
            None => layers.dirs.home.as_ref().map(|h| h.join(".cache")),
        };

        let derived = Derived {
            concurrency,
            io_threads: small("KARU_IO_THREADS", 4),
            coalesce_gap: uint_or(get("KARU_COALESCE_GAP"), 1 << 20),
            coalesce_limit: uint_or(get("KARU_COALESCE_LIMIT"), 64 << 20),
            coalesce_parts: uint_or(get("KARU_COALESCE_PARTS"), 1024),
            coalesce_amplification: uint_or(get("KARU_COALESCE_AMPLIFICATION"), 16),
            range_fallback_limit: uint_or(get("KARU_RANGE_FALLBACK_LIMIT"), 8 << 20),
            max_attempts: small("KARU_MAX_ATTEMPTS", 8),
            request_timeout: uint_or(get("KARU_REQUEST_TIMEOUT"), 120),
            connect_timeout: uint_or(get("KARU_CONNECT_TIMEOUT"), 30),
            low_speed_time: uint_or(get("KARU_LOW_SPEED_TIME"), 60),
            low_speed_limit: uint_or(get("KARU_LOW_SPEED_LIMIT"), 1024),
            headers: parse_headers(get("KARU_HTTP_HEADERS").unwrap_or("")),
            http_version: get("KARU_HTTP_VERSION")
                .and_then(HttpVersion::parse)
                .unwrap_or_default(),
            ca_bundle,
            ca_bundle_explicit,
            ca_path,
            proxy: non_empty("KARU_HTTP_PROXY").map(str::to_string),
            proxy_credentials: non_empty("KARU_HTTP_PROXY_CREDENTIALS").map(str::to_string),
            // Unset gives the default; an explicit empty value sends no User-Agent.
            user_agent: match get("KARU_HTTP_USER_AGENT") {
                None => Some(DEFAULT_USER_AGENT.to_string()),
                Some("") => None,
                Some(v) => Some(v.to_string()),
            },
            cache_dir,
        };
        Ok(Settings(Arc::new(Inner {
            layers: layers.clone(),
            providers: config.providers.clone(),
            derived,
        })))
    }

    fn d(&self) -> &Derived {
        &self.0.derived
    }

    /// `KARU_CONCURRENCY`: active remote transfers per client (default 64).
    pub fn concurrency(&self) -> u32 {
        self.d().concurrency
    }

    /// The effective number of IO loops: `KARU_IO_THREADS` (default 4) clamped to
    /// `[1, min(concurrency, 64)]`.
    pub fn io_threads(&self) -> u32 {
        self.d().io_threads.clamp(1, self.d().concurrency.min(64))
    }

    /// `KARU_IO_THREADS` as configured, before clamping.
    pub fn io_threads_configured(&self) -> u32 {
        self.d().io_threads
    }

    /// The concurrency slots of each IO loop: equal shares of [`Settings::concurrency`] over
    /// [`Settings::io_threads`] loops, the first `concurrency % loops` loops getting one more.
    pub fn loop_shares(&self) -> Vec<u32> {
        split(self.concurrency(), self.io_threads())
    }

    /// `KARU_COALESCE_GAP`: largest gap merged between remote ranges (default 1 MiB; 0
    /// disables merging).
    pub fn coalesce_gap(&self) -> u64 {
        self.d().coalesce_gap
    }

    /// `KARU_COALESCE_LIMIT`: largest merged span (default 64 MiB).
    pub fn coalesce_limit(&self) -> u64 {
        self.d().coalesce_limit
    }

    /// `KARU_COALESCE_PARTS`: most requests served by one transfer (default 1024).
    pub fn coalesce_parts(&self) -> u64 {
        self.d().coalesce_parts
    }

    /// `KARU_COALESCE_AMPLIFICATION`: most transferred bytes per requested byte (default 16).
    pub fn coalesce_amplification(&self) -> u64 {
        self.d().coalesce_amplification
    }

    /// `KARU_RANGE_FALLBACK_LIMIT`: largest prefix discarded when a server ignores `Range`
    /// (default 8 MiB; 0 refuses every nonzero offset).
    pub fn range_fallback_limit(&self) -> u64 {
        self.d().range_fallback_limit
    }

    /// `KARU_MAX_ATTEMPTS`: total attempts for transient failures (default 8).
    pub fn max_attempts(&self) -> u32 {
        self.d().max_attempts
    }

    /// `KARU_REQUEST_TIMEOUT`: the deadline of one logical read (default 120 s); `None` when
    /// set to 0 (no deadline).
    pub fn request_timeout(&self) -> Option<Duration> {
        match self.d().request_timeout {
            0 => None,
            s => Some(Duration::from_secs(s)),
        }
    }

    /// `KARU_CONNECT_TIMEOUT`: connection setup limit (default 30 s).
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.d().connect_timeout)
    }

    /// `KARU_LOW_SPEED_TIME`: abort after this long below the low-speed limit (default 60 s;
    /// zero disables the check).
    pub fn low_speed_time(&self) -> Duration {
        Duration::from_secs(self.d().low_speed_time)
    }

    /// `KARU_LOW_SPEED_LIMIT`: the low-speed threshold in bytes per second (default 1024).
    pub fn low_speed_limit(&self) -> u64 {
        self.d().low_speed_limit
    }

    /// The parsed `KARU_HTTP_HEADERS` (empty when unset). A malformed setting does not stop
    /// freezing; it fails here, so every read fails with `Config`
    /// "KARU_HTTP_HEADERS contains a malformed header".
    pub fn http_headers(&self) -> Result<&[(String, String)]> {
        self.d()
            .headers
            .as_deref()
            .ok_or_else(|| Error::new(Status::Config, MALFORMED))
    }

    /// True when `KARU_HTTP_HEADERS` is set (even if malformed): redirects then stay on the
    /// same scheme, host and port.
    pub fn has_http_headers(&self) -> bool {
        self.d().headers.as_ref().is_none_or(|h| !h.is_empty())
    }

    /// `KARU_HTTP_VERSION` (default 1.1).
    pub fn http_version(&self) -> HttpVersion {
        self.d().http_version
    }

    /// The CA bundle to trust: the configured `KARU_HTTP_CA_BUNDLE`, else the system bundle
    /// found at config creation unless `KARU_HTTP_CA_PATH` is set.
    pub fn ca_bundle(&self) -> Option<&Path> {
        self.d().ca_bundle.as_deref()
    }

    /// True when the CA bundle was configured rather than auto-detected.
    pub fn ca_bundle_is_explicit(&self) -> bool {
        self.d().ca_bundle_explicit
    }

    /// The system CA bundle detected when the builder was created (whether used or not).
    pub fn system_ca_bundle(&self) -> Option<&Path> {
        self.0.layers.system_ca_bundle.as_deref()
    }

    /// `KARU_HTTP_CA_PATH`: a directory of certificates.
    pub fn ca_path(&self) -> Option<&Path> {
        self.d().ca_path.as_deref()
    }

    /// `KARU_HTTP_PROXY`.
    pub fn proxy(&self) -> Option<&str> {
        self.d().proxy.as_deref()
    }

    /// `KARU_HTTP_PROXY_CREDENTIALS` (`user:password`).
    pub fn proxy_credentials(&self) -> Option<&str> {
        self.d().proxy_credentials.as_deref()
    }

    /// The User-Agent to send: `karu/<version>` by default, `None` when set empty through
    /// the API.
    pub fn user_agent(&self) -> Option<&str> {
        self.d().user_agent.as_deref()
    }

    /// The value of option `name` (any spelling, any case) for canonical path `path`, per
    /// spec 3.1: the longest matching rule prefix that defines it, then the explicit value,
    /// then the environment. `None` when unset (the caller applies its default) or when the
    /// name is unknown. Client-wide names are best read with an empty path.
    pub fn option(&self, name: &str, path: &str) -> Option<&str> {
        let id = resolve(name)?;
        self.0.layers.lookup(id, path).map(|(v, _)| v)
    }

    /// The path rules that apply to `path`, by position: paths with the same rules read
    /// the same value of every option, so what is derived from options can be kept per
    /// scope (one entry for every path when no rule is set).
    pub(crate) fn rule_scope(&self, path: &str) -> Vec<usize> {
        self.0
            .layers
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| prefix_matches(&r.prefix, path))
            .map(|(i, _)| i)
            .collect()
    }

    /// Where [`Settings::option`] finds its value.
    pub fn option_source(&self, name: &str, path: &str) -> OptionSource<'_> {
        resolve(name)
            .and_then(|id| self.0.layers.lookup(id, path))
            .map_or(OptionSource::Default, |(_, s)| s)
    }

    /// The value for `path` and its source of every option feeding the native credential
    /// chain of `kind` (spec §5.10), in option-table order.
    pub(crate) fn credential_options(
        &self,
        kind: CredentialsKind,
        path: &str,
    ) -> impl Iterator<Item = (Option<&str>, OptionSource<'_>)> {
        credential_options(kind).map(move |id| match self.0.layers.lookup(id, path) {
            Some((value, source)) => (Some(value), source),
            None => (None, OptionSource::Default),
        })
    }

    /// The canonical name and value for `path` of every set option the table marks secret
    /// (keys, tokens, SAS, passwords, proxy credentials, `KARU_HTTP_HEADERS`): what error
    /// messages about `path` must not show.
    pub(crate) fn secret_options(&self, path: &str) -> impl Iterator<Item = (&'static str, &str)> {
        secret_options().filter_map(move |id| {
            let (value, _) = self.0.layers.lookup(id, path)?;
            Some((def(id).name, value))
        })
    }

    /// True when the option's value for `path` is "yes", "true" or "on" (any case) or
    /// exactly "1". Unset counts as false.
    pub fn is_true(&self, name: &str, path: &str) -> bool {
        self.option(name, path).is_some_and(is_truthy)
    }

    /// The truth value of a boolean option for `path`, or `None` when it is unset.
    pub fn flag(&self, name: &str, path: &str) -> Option<bool> {
        self.option(name, path).map(is_truthy)
    }

    /// The Azure managed-identity selector for `path`: at most one of
    /// `AZURE_IMDS_OBJECT_ID`, `AZURE_IMDS_CLIENT_ID` and `AZURE_IMDS_MSI_RES_ID` may be
    /// set (empty values count as unset). With none set, `AZURE_CLIENT_ID` acts as the
    /// client id. Returns the chosen option's canonical name and its value.
    pub fn azure_imds_selector(&self, path: &str) -> Result<Option<(&'static str, &str)>> {
        const SELECTORS: [&str; 3] = [
            "AZURE_IMDS_OBJECT_ID",
            "AZURE_IMDS_CLIENT_ID",
            "AZURE_IMDS_MSI_RES_ID",
        ];
        let set: Vec<(&'static str, &str)> = SELECTORS
            .iter()
            .filter_map(|n| {
                self.option(n, path)
                    .filter(|v| !v.is_empty())
                    .map(|v| (*n, v))
            })
            .collect();
        match set.as_slice() {
            [] => Ok(self
                .option("AZURE_CLIENT_ID", path)
                .filter(|v| !v.is_empty())
                .map(|v| ("AZURE_IMDS_CLIENT_ID", v))),
            [one] => Ok(Some(*one)),
            _ => Err(Error::new(
                Status::Config,
                "at most one of AZURE_IMDS_OBJECT_ID, AZURE_IMDS_CLIENT_ID and \
                 AZURE_IMDS_MSI_RES_ID may be set",
            )),
        }
    }

    /// Whether implicit credential discovery (profile files, ADC, token caches, metadata
    /// services) is on: true for [`Config::from_env`], false for [`Config::empty`].
    pub fn discovery(&self) -> bool {
        self.0.layers.discovery
    }

    /// The home directory snapshotted at builder creation.
    pub fn home_dir(&self) -> Option<&Path> {
        self.0.layers.dirs.home.as_deref()
    }

    /// The cache directory: `XDG_CACHE_HOME`, else `<home>/.cache`.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.d().cache_dir.as_deref()
    }

    /// `APPDATA` (snapshotted on Windows only).
    pub fn app_data_dir(&self) -> Option<&Path> {
        self.0.layers.dirs.app_data.as_deref()
    }

    /// Expands `~` and `~/...` in a file option against the snapshotted home directory.
    /// Other values, and every value when no home is known, are returned as written.
    pub fn expand_home(&self, value: &str) -> PathBuf {
        self.0.layers.expand_home(value)
    }

    /// The custom credentials provider installed for `kind`, if any.
    pub fn credentials_provider(
        &self,
        kind: CredentialsKind,
    ) -> Option<Arc<dyn CredentialsProvider>> {
        self.0.providers[kind.index()].clone()
    }

    /// Freezes `config` and compares it with this snapshot (spec 1.7 item 16): the
    /// environment, explicit values, path rules in order, directories, system CA bundle and
    /// discovery flag must be equal, and each provider must be the same registration
    /// (`Arc::ptr_eq`). Everything else is derived from those. Fails with `Config` when
    /// `config` holds an invalid value. Does no I/O.
    pub fn matches(&self, config: &Config) -> Result<bool> {
        let other = Settings::build(config)?;
        let same_providers = self
            .0
            .providers
            .iter()
            .zip(other.0.providers.iter())
            .all(|(a, b)| match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            });
        Ok(same_providers && self.0.layers == other.0.layers && self.d() == other.d())
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.d();
        f.debug_struct("Settings")
            .field("concurrency", &d.concurrency)
            .field("io_threads", &self.io_threads())
            .field("coalesce_gap", &d.coalesce_gap)
            .field("coalesce_limit", &d.coalesce_limit)
            .field("coalesce_parts", &d.coalesce_parts)
            .field("coalesce_amplification", &d.coalesce_amplification)
            .field("range_fallback_limit", &d.range_fallback_limit)
            .field("max_attempts", &d.max_attempts)
            .field("http_version", &d.http_version)
            .field("user_agent", &d.user_agent)
            .field("layers", &self.0.layers)
            .field("providers", &super::ProviderKinds(&self.0.providers))
            .finish_non_exhaustive()
    }
}

// Clients share one snapshot across threads.
const _: fn() = || {
    fn is<T: Send + Sync + Clone>() {}
    is::<Settings>();
};

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn split_examples() {
        assert_eq!(split(64, 4), vec![16, 16, 16, 16]);
        assert_eq!(split(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split(1, 1), vec![1]);
        assert_eq!(split(7, 7), vec![1; 7]);
        assert_eq!(split(4096, 64).iter().sum::<u32>(), 4096);
    }
}
