//! AWS-format shared config and credentials files (spec §5.9): the INI reader, profile
//! lookup, and the credentials a profile yields by itself. The AWS and Source chains share
//! it, each with its own option names and label.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::PathBuf;

use super::keys::key_pair;
use super::{LoadContext, process};
use crate::config::Credentials;
use crate::error::{Error, Result};

/// Largest config or credentials file read.
const FILE_LIMIT: u64 = 1 << 20;

/// One namespace's profile options.
pub(super) struct ProfileOptions {
    /// "AWS" or "Source", for messages.
    pub(super) label: &'static str,
    /// The option naming the profile.
    pub(super) profile: &'static str,
    /// The profile read when that option is unset.
    pub(super) default_profile: &'static str,
    /// The option naming the config file (`[profile P]` sections).
    pub(super) config_file: &'static str,
    /// The option naming the shared credentials file (`[P]` sections).
    pub(super) credentials_file: &'static str,
}

/// A profile's merged keys (credentials file over config file), lower-cased.
#[derive(Debug, Default)]
pub(super) struct Profile {
    values: BTreeMap<String, String>,
}

impl Profile {
    /// The value of `key` (lower case), empty values counting as unset.
    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.values
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The profile's `region`.
    pub(super) fn region(&self) -> Option<String> {
        self.get("region").map(str::to_owned)
    }
}

/// The profile a chain asked for.
pub(super) struct Lookup {
    /// The profile's name.
    pub(super) name: String,
    /// True when the profile option was set rather than defaulted.
    pub(super) explicit: bool,
    /// Its keys, `None` when neither file has it.
    pub(super) profile: Option<Profile>,
}

/// Reads the profile `options` name for `ctx.path` from the config and credentials files.
/// A file named by an option must exist; the default `~/.aws/...` files are read only with
/// discovery and skipped when missing.
pub(super) fn lookup(ctx: &LoadContext, options: &ProfileOptions) -> Result<Lookup> {
    let named = ctx.option(options.profile);
    let name = named.unwrap_or(options.default_profile).to_owned();
    let config = read_file(ctx, options, options.config_file, "config", "config")?;
    let credentials = read_file(
        ctx,
        options,
        options.credentials_file,
        "shared credentials",
        "credentials",
    )?;

    let config_section = if name == "default" {
        "default".to_owned()
    } else {
        format!("profile {name}")
    };
    let sections = [
        config.as_ref().and_then(|c| c.get(&config_section)),
        credentials.as_ref().and_then(|c| c.get(&name)),
    ];
    let profile = sections.iter().any(Option::is_some).then(|| Profile {
        values: sections.into_iter().flatten().flatten().fold(
            BTreeMap::new(),
            |mut all, (k, v)| {
                all.insert(k.clone(), v.clone());
                all
            },
        ),
    });
    Ok(Lookup {
        name,
        explicit: named.is_some(),
        profile,
    })
}

/// The error for a profile that neither file has.
pub(super) fn not_found(ctx: &LoadContext, label: &str, name: &str) -> Error {
    ctx.failure(format!("{label} profile '{name}' was not found"))
}

/// The credentials a profile holds by itself: refusals for IAM Identity Center and role
/// profiles, then `credential_process`, then static keys. `None` when it has none.
pub(super) fn credentials(
    ctx: &LoadContext,
    label: &str,
    profile: &Profile,
) -> Result<Option<Credentials>> {
    if profile.get("sso_session").is_some() || profile.get("sso_start_url").is_some() {
        return Err(ctx.failure(format!(
            "{label} IAM Identity Center profiles require a custom credential provider"
        )));
    }
    if ["role_arn", "source_profile", "web_identity_token_file"]
        .iter()
        .any(|k| profile.get(k).is_some())
    {
        return Err(ctx.failure(format!(
            "{label} AssumeRole profiles require a custom credential provider"
        )));
    }
    if let Some(command) = profile.get("credential_process") {
        return process::credentials(ctx, label, command).map(Some);
    }
    let keys = (
        profile.get("aws_access_key_id"),
        profile.get("aws_secret_access_key"),
        profile.get("aws_session_token"),
    );
    key_pair(
        ctx,
        keys,
        format_args!("{label} profile access key and secret must be set together"),
    )
}

/// Sections of one INI file: section name → key → value.
pub(crate) type Sections = BTreeMap<String, BTreeMap<String, String>>;

/// Reads and parses the file named by `option`, or the default `~/.aws/<default_name>`
/// with discovery. `None` when there is no file to read.
fn read_file(
    ctx: &LoadContext,
    options: &ProfileOptions,
    option: &str,
    what: &str,
    default_name: &str,
) -> Result<Option<Sections>> {
    let label = options.label;
    let (path, explicit): (PathBuf, bool) = match ctx.option(option) {
        Some(p) => (ctx.settings.expand_home(p), true),
        None => match ctx.settings.home_dir() {
            Some(home) if ctx.settings.discovery() => (home.join(".aws").join(default_name), false),
            _ => return Ok(None),
        },
    };
    let shown = path.display();
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return if explicit {
                Err(ctx.failure(format!("{label} {what} file does not exist: '{shown}'")))
            } else {
                Ok(None)
            };
        }
        Err(e) => {
            return Err(ctx.failure(format!("cannot read {label} {what} file '{shown}': {e}")));
        }
    };
    let mut bytes = Vec::new();
    file.take(FILE_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ctx.failure(format!("cannot read {label} {what} file '{shown}': {e}")))?;
    if bytes.len() as u64 > FILE_LIMIT {
        return Err(ctx.failure(format!(
            "{label} {what} file is larger than 1 MiB: '{shown}'"
        )));
    }
    Ok(Some(parse(&String::from_utf8_lossy(&bytes))))
}

/// Parses AWS-format INI text: `[section]` headers (`[profile  P]` normalized to
/// `profile P`), `key = value` or `key: value` split at the first separator, keys
/// lower-cased, whole-line `#` and `;` comments. Indented lines under a key with an empty
/// value are that key's nested settings (such as `s3 =`) and are skipped. A section given
/// twice is merged, later values winning.
pub(crate) fn parse(text: &str) -> Sections {
    let mut sections = Sections::new();
    let mut current: Option<String> = None;
    let mut nested = false;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let indented = raw.starts_with([' ', '\t']);
        if nested && indented {
            continue;
        }
        nested = false;
        if let Some(inner) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let inner = inner.trim();
            let name = match inner.split_once(char::is_whitespace) {
                Some(("profile", rest)) => format!("profile {}", rest.trim()),
                _ => inner.to_owned(),
            };
            sections.entry(name.clone()).or_default();
            current = Some(name);
            continue;
        }
        let (Some(section), Some(at)) = (&current, line.find(['=', ':'])) else {
            continue;
        };
        let key = line[..at].trim().to_ascii_lowercase();
        let value = line[at + 1..].trim();
        nested = value.is_empty();
        if !key.is_empty() {
            sections
                .entry(section.clone())
                .or_default()
                .insert(key, value.to_owned());
        }
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::credentials::test_support::with_context;
    use crate::error::Status;

    const AWS: ProfileOptions = ProfileOptions {
        label: "AWS",
        profile: "AWS_PROFILE",
        default_profile: "default",
        config_file: "AWS_CONFIG_FILE",
        credentials_file: "AWS_SHARED_CREDENTIALS_FILE",
    };
    const PATH: &str = "/vsis3/b/k";

    fn section<'a>(s: &'a Sections, name: &str) -> Vec<(&'a str, &'a str)> {
        s[name]
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    #[test]
    fn ini_rules() {
        let text = "\
top = ignored before any section
# comment
; another comment
[default]
Region = eu-west-1
AWS_Access_Key_ID: AKID
url = https://host:8443/a=b
  indented = kept
empty =
[ profile   dev ]
s3 =
  region = nested-not-profile
  addressing_style = path
region=us-west-2
=no key
no separator here
[default]
output = json
region = eu-central-1
";
        let s = parse(text);
        assert_eq!(s.keys().collect::<Vec<_>>(), vec!["default", "profile dev"]);
        assert_eq!(
            section(&s, "default"),
            vec![
                ("aws_access_key_id", "AKID"),
                ("empty", ""),
                ("indented", "kept"),
                ("output", "json"),
                ("region", "eu-central-1"),
                ("url", "https://host:8443/a=b"),
            ]
        );
        assert_eq!(
            section(&s, "profile dev"),
            vec![("region", "us-west-2"), ("s3", "")]
        );
        // The first of `=` and `:` splits.
        let s = parse("[p]\na:b=c\nd=e:f\n");
        assert_eq!(section(&s, "p"), vec![("a", "b=c"), ("d", "e:f")]);
    }

    /// A temp home with `.aws/config` and `.aws/credentials`, and settings over it.
    struct Home {
        dir: tempfile::TempDir,
    }

    impl Home {
        fn new(config: &str, credentials: &str) -> Home {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join(".aws")).unwrap();
            std::fs::write(dir.path().join(".aws/config"), config).unwrap();
            std::fs::write(dir.path().join(".aws/credentials"), credentials).unwrap();
            Home { dir }
        }

        fn path(&self, name: &str) -> String {
            self.dir.path().join(name).display().to_string()
        }

        /// Discovery on, `HOME` here, plus `vars`.
        fn lookup(&self, vars: &[(&str, &str)]) -> Result<Lookup> {
            let mut all = vec![("HOME".to_owned(), self.path(""))];
            all.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            let settings = Config::from_vars(all).freeze().unwrap();
            with_context(&settings, PATH, None, |ctx| lookup(ctx, &AWS))
        }
    }

    fn values(l: &Lookup) -> Vec<(&str, &str)> {
        l.profile
            .as_ref()
            .unwrap()
            .values
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    #[test]
    fn credentials_file_overrides_config_file() {
        let home = Home::new(
            "[default]\nregion = eu-west-1\naws_access_key_id = FROM-CONFIG\n\
             [profile dev]\nregion = us-west-2\n[dev]\nregion = wrong-section\n",
            "[default]\naws_access_key_id = FROM-CREDENTIALS\n\
             [dev]\naws_secret_access_key = S\n[profile dev]\nregion = wrong-section\n",
        );
        let l = home.lookup(&[]).unwrap();
        assert_eq!((l.name.as_str(), l.explicit), ("default", false));
        assert_eq!(
            values(&l),
            vec![
                ("aws_access_key_id", "FROM-CREDENTIALS"),
                ("region", "eu-west-1")
            ]
        );
        let l = home.lookup(&[("AWS_PROFILE", "dev")]).unwrap();
        assert_eq!((l.name.as_str(), l.explicit), ("dev", true));
        assert_eq!(
            values(&l),
            vec![("aws_secret_access_key", "S"), ("region", "us-west-2")]
        );
        // The alias names the profile too.
        let l = home.lookup(&[("AWS_DEFAULT_PROFILE", "dev")]).unwrap();
        assert_eq!(l.profile.unwrap().region().as_deref(), Some("us-west-2"));
    }

    #[test]
    fn missing_profiles_and_files() {
        let home = Home::new("[default]\n", "");
        let l = home.lookup(&[("AWS_PROFILE", "nope")]).unwrap();
        assert!(l.profile.is_none() && l.explicit);

        let missing = home.path("absent");
        for (option, what) in [
            ("AWS_CONFIG_FILE", "config"),
            ("AWS_SHARED_CREDENTIALS_FILE", "shared credentials"),
        ] {
            let e = home.lookup(&[(option, &missing)]).err().unwrap();
            assert_eq!(e.status(), Status::Credentials);
            assert_eq!(
                e.message(),
                format!("{PATH}: AWS {what} file does not exist: '{missing}'")
            );
        }

        // Default files that do not exist are skipped.
        let empty = tempfile::tempdir().unwrap();
        let settings = Config::from_vars([("HOME".into(), empty.path().display().to_string())])
            .freeze()
            .unwrap();
        let l = with_context(&settings, PATH, None, |ctx| lookup(ctx, &AWS)).unwrap();
        assert!(l.profile.is_none() && !l.explicit);
    }

    #[test]
    fn hermetic_reads_only_named_files() {
        let home = Home::new("[default]\nregion = from-home\n", "");
        let mut config = Config::empty();
        config.set("AWS_PROFILE", Some("default")).unwrap();
        let settings = config.freeze().unwrap();
        let l = with_context(&settings, PATH, None, |ctx| lookup(ctx, &AWS)).unwrap();
        assert!(l.profile.is_none());

        config
            .set("AWS_CONFIG_FILE", Some(&home.path(".aws/config")))
            .unwrap();
        let settings = config.freeze().unwrap();
        let l = with_context(&settings, PATH, None, |ctx| lookup(ctx, &AWS)).unwrap();
        assert_eq!(l.profile.unwrap().region().as_deref(), Some("from-home"));
    }

    #[test]
    fn tilde_expands_against_the_home_snapshot() {
        let home = Home::new("", "");
        std::fs::write(home.path("other"), "[profile x]\nregion = r\n").unwrap();
        let l = home
            .lookup(&[("AWS_CONFIG_FILE", "~/other"), ("AWS_PROFILE", "x")])
            .unwrap();
        assert_eq!(l.profile.unwrap().region().as_deref(), Some("r"));
    }

    #[test]
    fn files_over_one_mib_fail() {
        let mut big = String::from("[default]\n");
        while big.len() <= FILE_LIMIT as usize {
            big.push_str("# padding padding padding padding padding padding padding\n");
        }
        let home = Home::new(&big, "");
        let e = home.lookup(&[]).err().unwrap();
        assert_eq!(e.status(), Status::Credentials);
        assert_eq!(
            e.message(),
            format!(
                "{PATH}: AWS config file is larger than 1 MiB: '{}'",
                home.path(".aws/config")
            )
        );
        // Exactly 1 MiB is fine.
        big.truncate(FILE_LIMIT as usize);
        std::fs::write(home.path(".aws/config"), &big).unwrap();
        assert!(home.lookup(&[]).unwrap().profile.is_some());
    }

    fn profile(pairs: &[(&str, &str)]) -> Profile {
        Profile {
            values: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn content(label: &str, pairs: &[(&str, &str)]) -> Result<Option<Credentials>> {
        let settings = Config::empty().freeze().unwrap();
        with_context(&settings, PATH, None, |ctx| {
            credentials(ctx, label, &profile(pairs))
        })
    }

    #[test]
    fn profile_content_rules() {
        let c = content(
            "AWS",
            &[
                ("aws_access_key_id", "AKID"),
                ("aws_secret_access_key", "S"),
                ("aws_session_token", "T"),
                ("region", "r"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                c.access_key_id.as_str(),
                c.secret_access_key.as_str(),
                c.session_token.as_str(),
                c.expires_at
            ),
            ("AKID", "S", "T", None)
        );
        assert_eq!(content("AWS", &[("region", "r")]).unwrap(), None);

        let refused = [
            (
                ("sso_session", "s"),
                "IAM Identity Center profiles require a custom credential provider",
            ),
            (
                ("sso_start_url", "https://x"),
                "IAM Identity Center profiles require a custom credential provider",
            ),
            (
                ("role_arn", "arn:aws:iam::1:role/r"),
                "AssumeRole profiles require a custom credential provider",
            ),
            (
                ("source_profile", "base"),
                "AssumeRole profiles require a custom credential provider",
            ),
            (
                ("web_identity_token_file", "/t"),
                "AssumeRole profiles require a custom credential provider",
            ),
            (
                ("aws_access_key_id", "AKID"),
                "profile access key and secret must be set together",
            ),
            (
                ("aws_secret_access_key", "S"),
                "profile access key and secret must be set together",
            ),
        ];
        for label in ["AWS", "Source"] {
            for (pair, message) in refused {
                let e = content(label, &[pair, ("region", "r")]).unwrap_err();
                assert_eq!(e.status(), Status::Credentials);
                assert_eq!(e.message(), format!("{PATH}: {label} {message}"));
            }
        }
    }

    #[test]
    fn credential_process_runs_from_a_profile() {
        let c = content(
            "AWS",
            &[
                (
                    "credential_process",
                    r#"printf '{"AccessKeyId":"P","SecretAccessKey":"Q"}'"#,
                ),
                ("aws_access_key_id", "ignored"),
                ("aws_secret_access_key", "ignored"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.access_key_id.as_str(), c.secret_access_key.as_str()),
            ("P", "Q")
        );
    }
}
