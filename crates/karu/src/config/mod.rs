//! Configuration (spec section 3): the option table, the [`Config`] builder (an environment
//! snapshot or hermetic), path rules with segment-boundary longest-prefix matching, and the
//! frozen [`Settings`] a client keeps.
//!
//! This room does no network I/O and knows nothing of transport; it only answers "what is
//! option N for path P" and hands out typed client-wide values.

mod headers;
mod options;
mod provider;
mod rules;
mod settings;
mod validate;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use headers::check_managed_headers;
pub use provider::{Credentials, CredentialsKind, CredentialsProvider};
pub use rules::{canonical_prefix, prefix_matches};
pub use settings::{HttpVersion, OptionSource, Settings};

use options::{ACCEPTED_NAMES, OPTIONS, OptId, def, is_client_wide, resolve};
use rules::Rule;

use crate::error::{Error, Result, Status};
pub(crate) use provider::Redacted;

/// Every accepted option name, aliases included, in the order of spec 3.7.
///
/// ```
/// assert!(karu::option_names().contains(&"AWS_DEFAULT_REGION"));
/// assert!(!karu::option_names().contains(&"KARU_THREADS"));
/// ```
pub fn option_names() -> &'static [&'static str] {
    ACCEPTED_NAMES
}

/// Directories snapshotted with the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Dirs {
    home: Option<PathBuf>,
    xdg_cache: Option<PathBuf>,
    app_data: Option<PathBuf>,
}

/// Everything of a builder but its providers: compared by value in `matches`.
#[derive(Clone, Default, PartialEq, Eq)]
struct Layers {
    env: BTreeMap<OptId, String>,
    explicit: BTreeMap<OptId, String>,
    /// In creation order; prefixes are canonical and unique.
    rules: Vec<Rule>,
    dirs: Dirs,
    system_ca_bundle: Option<PathBuf>,
    discovery: bool,
}

impl Layers {
    /// Spec 3.1: longest defining rule, then explicit, then environment.
    fn lookup(&self, id: OptId, path: &str) -> Option<(&str, OptionSource<'_>)> {
        if let Some((prefix, v)) = rules::lookup(&self.rules, id, path) {
            return Some((v, OptionSource::Rule(prefix)));
        }
        if let Some(v) = self.explicit.get(&id) {
            return Some((v, OptionSource::Explicit));
        }
        self.env
            .get(&id)
            .map(|v| (v.as_str(), OptionSource::Environment))
    }

    fn expand_home(&self, value: &str) -> PathBuf {
        let Some(home) = &self.dirs.home else {
            return PathBuf::from(value);
        };
        if value == "~" {
            return home.clone();
        }
        let rest = value
            .strip_prefix("~/")
            .or_else(|| value.strip_prefix("~\\").filter(|_| cfg!(windows)));
        match rest {
            Some(rest) => home.join(rest),
            None => PathBuf::from(value),
        }
    }
}

/// Option values in a `Debug`-safe form: secrets are redacted.
struct LayerView<'a>(&'a BTreeMap<OptId, String>);

impl fmt::Debug for LayerView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (id, value) in self.0 {
            let d = def(*id);
            if d.secret {
                map.entry(&d.name, &"<redacted>");
            } else {
                map.entry(&d.name, value);
            }
        }
        map.finish()
    }
}

impl fmt::Debug for Layers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules: Vec<_> = self
            .rules
            .iter()
            .map(|r| (r.prefix.as_str(), LayerView(&r.values)))
            .collect();
        f.debug_struct("Layers")
            .field("env", &LayerView(&self.env))
            .field("explicit", &LayerView(&self.explicit))
            .field("rules", &rules)
            .field("dirs", &self.dirs)
            .field("system_ca_bundle", &self.system_ca_bundle)
            .field("discovery", &self.discovery)
            .finish()
    }
}

/// One optional provider per [`CredentialsKind`], indexed by `kind.index()`.
type Providers = [Option<Arc<dyn CredentialsProvider>>; 4];

/// Shows which kinds have a provider (providers themselves are opaque).
struct ProviderKinds<'a>(&'a Providers);

impl fmt::Debug for ProviderKinds<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(
                CredentialsKind::ALL
                    .iter()
                    .filter(|k| self.0[k.index()].is_some()),
            )
            .finish()
    }
}

/// The configuration builder: an environment layer (snapshotted once), explicit values,
/// path rules and credentials providers. [`Config::freeze`] validates it into [`Settings`].
///
/// Values are not validated when set, only at freeze; names are, at once.
///
/// ```
/// use karu::{Config, Status};
/// let mut config = Config::from_vars([
///     ("KARU_CONCURRENCY".to_string(), "32".to_string()),
///     ("AWS_DEFAULT_REGION".to_string(), "eu-west-1".to_string()),
/// ]);
/// config
///     .set("aws_region", Some("us-east-2"))?        // names are case-insensitive
///     .set_path("s3://archive", "AWS_REGION", Some("ap-south-1"))?;
///
/// let settings = config.freeze()?;
/// assert_eq!(settings.concurrency(), 32);                                  // environment
/// assert_eq!(settings.option("AWS_REGION", "/vsis3/data/x"), Some("us-east-2")); // explicit
/// assert_eq!(settings.option("AWS_REGION", "/vsis3/archive/x"), Some("ap-south-1")); // rule
///
/// let err = config.set("KARU_THREADS", Some("8")).unwrap_err();
/// assert_eq!(err.status(), Status::Config);
/// assert_eq!(err.message(), "unknown Karu option 'KARU_THREADS'");
///
/// config.set("KARU_IO_THREADS", Some("0"))?;       // accepted now, refused at freeze
/// assert_eq!(
///     config.freeze().unwrap_err().message(),
///     "KARU_IO_THREADS must be an integer in [1, 64]"
/// );
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct Config {
    layers: Layers,
    providers: Providers,
}

/// The system CA bundles tried in order; the first regular file wins (spec 3.5).
#[cfg(target_os = "linux")]
const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];
#[cfg(target_os = "macos")]
const SYSTEM_CA_BUNDLES: &[&str] = &["/etc/ssl/cert.pem"];
/// Elsewhere the TLS library's own defaults apply.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
const SYSTEM_CA_BUNDLES: &[&str] = &[];

/// The first system CA bundle that exists (spec 3.5's list), also used by the transport
/// when a hermetic configuration names no CA.
pub(crate) fn system_ca_bundle() -> Option<PathBuf> {
    SYSTEM_CA_BUNDLES
        .iter()
        .map(Path::new)
        // `metadata` follows symlinks: a link to a regular file counts as one.
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .map(Path::to_path_buf)
}

fn config_error(message: impl Into<String>) -> Error {
    Error::new(Status::Config, message)
}

/// Resolves an API spelling to its canonical option, with the reference's messages.
fn resolve_name(name: &str) -> Result<OptId> {
    if name.is_empty() {
        return Err(config_error("option name is empty"));
    }
    resolve(name).ok_or_else(|| config_error(format!("unknown Karu option '{name}'")))
}

impl Config {
    /// A builder from a snapshot of the process environment: every accepted name and alias,
    /// `XDG_CACHE_HOME`, the home directory (`HOME`; `USERPROFILE` and `APPDATA` on
    /// Windows), and the system CA bundle. Credential discovery is on.
    ///
    /// Later changes to the environment are invisible to this builder. Variables whose
    /// value is not valid UTF-8 are ignored.
    pub fn from_env() -> Config {
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        let mut config = Config::from_vars(vars);
        config.layers.system_ca_bundle = system_ca_bundle();
        config
    }

    /// A hermetic builder: reads no environment, home directory or CA bundle, and turns
    /// implicit credential discovery off. Explicit options opt back in (spec 3.9).
    pub fn empty() -> Config {
        Config::default()
    }

    /// Like [`Config::from_env`], but the environment is the given map (for tests and
    /// embedding). Discovery is on. No file system probing happens: the system CA bundle is
    /// not searched for.
    ///
    /// Names match exactly, as environment variables do. Empty values are ignored. When
    /// several spellings of one option are present, the canonical name wins, then the
    /// aliases in table order.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Config {
        let vars: HashMap<String, String> =
            vars.into_iter().filter(|(_, v)| !v.is_empty()).collect();
        let mut env = BTreeMap::new();
        for (id, d) in OPTIONS.iter().enumerate() {
            let first = std::iter::once(&d.name)
                .chain(d.aliases)
                .find_map(|n| vars.get(*n));
            if let Some(v) = first {
                env.insert(id, v.clone());
            }
        }
        let dir = |name: &str| vars.get(name).map(PathBuf::from);
        let dirs = if cfg!(windows) {
            Dirs {
                home: dir("USERPROFILE"),
                xdg_cache: dir("XDG_CACHE_HOME"),
                app_data: dir("APPDATA"),
            }
        } else {
            Dirs {
                home: dir("HOME"),
                xdg_cache: dir("XDG_CACHE_HOME"),
                app_data: None,
            }
        };
        Config {
            layers: Layers {
                env,
                dirs,
                discovery: true,
                ..Layers::default()
            },
            providers: Providers::default(),
        }
    }

    /// Sets (or with `None` removes) the explicit value of an option. Any spelling writes the
    /// canonical name, so the last call wins. An empty value is kept (an empty
    /// `KARU_HTTP_USER_AGENT` sends no User-Agent).
    ///
    /// Errors (`Config`): "option name is empty", `"unknown Karu option '<name>'"`. Values are
    /// validated by [`Config::freeze`].
    pub fn set(&mut self, name: &str, value: Option<&str>) -> Result<&mut Config> {
        let id = resolve_name(name)?;
        match value {
            Some(v) => {
                self.layers.explicit.insert(id, v.to_string());
            }
            None => {
                self.layers.explicit.remove(&id);
            }
        }
        Ok(self)
    }

    /// Sets (or with `None` removes) an option for every path under `prefix`. The prefix is
    /// canonicalized (`s3://` becomes `/vsis3/`, `gs://` `/vsigs/`, `az://` `/vsiaz/`,
    /// `abfs://` `/vsiadls/`, `hf://` `/vsihf/`, `source://` `/vsisource/`) and matches at
    /// segment boundaries (`/vsis3/a/b` covers `/vsis3/a/b/c`, not `/vsis3/a/bc`). A rule
    /// left with no option is dropped.
    ///
    /// Errors (`Config`), in this order: "path-specific option has an empty prefix", the
    /// name errors of [`Config::set`], and `"<NAME> is client-wide and cannot be
    /// path-specific"` for any `KARU_*` option (aliases included).
    pub fn set_path(
        &mut self,
        prefix: &str,
        name: &str,
        value: Option<&str>,
    ) -> Result<&mut Config> {
        if prefix.is_empty() {
            return Err(config_error("path-specific option has an empty prefix"));
        }
        let id = resolve_name(name)?;
        if is_client_wide(id) {
            return Err(config_error(format!(
                "{} is client-wide and cannot be path-specific",
                def(id).name
            )));
        }
        let prefix = canonical_prefix(prefix);
        let rules = &mut self.layers.rules;
        let at = rules.iter().position(|r| r.prefix == prefix);
        match (value, at) {
            (Some(v), Some(i)) => {
                rules[i].values.insert(id, v.to_string());
            }
            (Some(v), None) => rules.push(Rule {
                prefix,
                values: BTreeMap::from([(id, v.to_string())]),
            }),
            (None, Some(i)) => {
                rules[i].values.remove(&id);
                if rules[i].values.is_empty() {
                    rules.remove(i);
                }
            }
            (None, None) => {}
        }
        Ok(self)
    }

    /// Installs (or with `None` removes) the custom credentials provider for `kind`,
    /// replacing any earlier one. It replaces native discovery for that kind. The provider
    /// is released when no builder, settings snapshot or engine holds it any more.
    pub fn set_credentials_provider(
        &mut self,
        kind: CredentialsKind,
        provider: Option<Arc<dyn CredentialsProvider>>,
    ) -> &mut Config {
        self.providers[kind.index()] = provider;
        self
    }

    /// Validates every layer (environment, explicit values, then each path rule, whose
    /// errors are prefixed `"<prefix>: "`) and applies defaults. Errors are `Config`.
    /// A malformed `KARU_HTTP_HEADERS` does not fail here (see [`Settings::http_headers`]).
    pub fn freeze(&self) -> Result<Settings> {
        Settings::build(self)
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("layers", &self.layers)
            .field("providers", &ProviderKinds(&self.providers))
            .finish()
    }
}

#[cfg(test)]
mod tests;
