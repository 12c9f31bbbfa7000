//! The typed configuration of one backend for the paths that share the same path rules:
//! endpoint, region, addressing style, signing inputs and headers, read from the options
//! once and kept per IO loop, so an attempt reads fields instead of looking options up by
//! name and parsing its endpoint again.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::azure::connection_string::ConnectionString;
use super::endpoint::Endpoint;
use super::sigv4::Signers;
use crate::config::Settings;
use crate::locator::{Backend, Locator};

/// Scopes kept per loop before the cache starts again (each is a few hundred bytes; a
/// client with more path rule combinations than this in use only re-reads its options).
const MAX_SCOPES: usize = 1024;

/// A profile's key: the backend and the path rules that apply (by position).
type Key = (Backend, Vec<usize>);

/// One loop's profiles, by backend and the path rules that apply, and its SigV4 signer
/// credentials.
#[derive(Debug, Default)]
pub(crate) struct Profiles {
    cache: RefCell<HashMap<Key, Rc<Profile>>>,
    /// SigV4 signer credentials (S3, Source).
    pub(super) signers: Signers,
}

impl Profiles {
    /// The profile of `locator`'s backend for its path, read from `settings` the first time.
    pub(super) fn get(&self, settings: &Settings, locator: &Locator) -> Rc<Profile> {
        let key = (locator.backend(), settings.rule_scope(locator.identity()));
        if let Some(p) = self.cache.borrow().get(&key) {
            return Rc::clone(p);
        }
        let profile = Rc::new(Profile::read(settings, locator));
        let mut cache = self.cache.borrow_mut();
        if cache.len() >= MAX_SCOPES {
            cache.clear();
        }
        cache.insert(key, Rc::clone(&profile));
        profile
    }
}

/// A checked endpoint, or the problem with it (`OPTION problem`, shown after the object's
/// path: the value may carry secrets).
pub(super) type Checked = std::result::Result<Endpoint, String>;

/// What one backend reads from the options.
#[derive(Debug)]
pub(crate) enum Profile {
    /// Plain HTTP(S) (and local files, which never get here): nothing beyond the client-wide
    /// options.
    Plain,
    /// Amazon S3 and compatible stores.
    S3(S3),
    /// Source Cooperative.
    Source(Source),
    /// Google Cloud Storage.
    Gcs(Gcs),
    /// Azure Blob and Data Lake Storage.
    Azure(Azure),
    /// The Hugging Face Hub.
    HuggingFace(HuggingFace),
}

/// S3's options.
#[derive(Debug)]
pub(crate) struct S3 {
    /// `AWS_REGION`.
    pub(super) region: Option<String>,
    /// `AWS_S3_ENDPOINT`, checked, a bare host taking its scheme from `AWS_HTTPS`.
    pub(super) endpoint: Option<Checked>,
    /// The scheme of the default endpoint (`AWS_HTTPS`).
    pub(super) scheme: &'static str,
    /// `AWS_VIRTUAL_HOSTING`, when set.
    pub(super) virtual_hosting: Option<bool>,
    /// `AWS_REQUEST_PAYER` is set (validated at freeze: "requester").
    pub(super) request_payer: bool,
}

/// Source Cooperative's options.
#[derive(Debug)]
pub(crate) struct Source {
    /// `SOURCE_ENDPOINT` or the public one.
    pub(super) endpoint: Checked,
    /// `SOURCE_REGION`.
    pub(super) region: Option<String>,
}

/// Google Cloud Storage's options.
#[derive(Debug)]
pub(crate) struct Gcs {
    /// `GCS_ENDPOINT` or the public one.
    pub(super) endpoint: Checked,
    /// `GCS_USER_PROJECT`.
    pub(super) user_project: Option<String>,
}

/// Azure's options (the credential stage's fields win over these per attempt).
#[derive(Debug)]
pub(crate) struct Azure {
    /// `AZURE_STORAGE_CONNECTION_STRING`, parsed (empty when unset), or why it is malformed.
    pub(super) connection_string: std::result::Result<ConnectionString, String>,
    /// `AZURE_STORAGE_ENDPOINT`, checked.
    pub(super) endpoint: Option<Checked>,
    /// `AZURE_STORAGE_ACCOUNT`.
    pub(super) account: Option<String>,
    /// `AZURE_STORAGE_ACCESS_KEY`.
    pub(super) key: Option<String>,
    /// `AZURE_STORAGE_SAS_TOKEN`.
    pub(super) sas: Option<String>,
    /// `AZURE_STORAGE_ACCESS_TOKEN`.
    pub(super) token: Option<String>,
}

/// Hugging Face's options (token files are read afresh per attempt).
#[derive(Debug)]
pub(crate) struct HuggingFace {
    /// `HF_ENDPOINT` or the public one.
    pub(super) endpoint: Checked,
    /// `HF_TOKEN`, trimmed, when not blank.
    pub(super) token: Option<String>,
    /// `HF_TOKEN_PATH`.
    pub(super) token_path: Option<String>,
    /// `HF_HOME`.
    pub(super) home: Option<String>,
}

impl Profile {
    fn read(settings: &Settings, locator: &Locator) -> Profile {
        let path = locator.identity();
        // Empty values count as unset.
        let option = |name: &str| {
            settings
                .option(name, path)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let endpoint = |name: &str, default: &str| {
            Endpoint::check(name, option(name).as_deref().unwrap_or(default), "https")
        };
        match locator.backend() {
            Backend::File | Backend::Http => Profile::Plain,
            Backend::S3 => {
                let scheme = match settings.flag("AWS_HTTPS", path) {
                    Some(false) => "http",
                    _ => "https",
                };
                Profile::S3(S3 {
                    region: option("AWS_REGION"),
                    endpoint: option("AWS_S3_ENDPOINT")
                        .map(|v| Endpoint::check("AWS_S3_ENDPOINT", &v, scheme)),
                    scheme,
                    virtual_hosting: settings.flag("AWS_VIRTUAL_HOSTING", path),
                    request_payer: option("AWS_REQUEST_PAYER").is_some(),
                })
            }
            Backend::Source => Profile::Source(Source {
                endpoint: endpoint("SOURCE_ENDPOINT", super::source::DEFAULT_ENDPOINT),
                region: option("SOURCE_REGION"),
            }),
            Backend::Gcs => Profile::Gcs(Gcs {
                endpoint: endpoint("GCS_ENDPOINT", super::gcs::DEFAULT_ENDPOINT),
                user_project: option("GCS_USER_PROJECT"),
            }),
            Backend::Azure | Backend::AzureDataLake => Profile::Azure(Azure {
                connection_string: match option("AZURE_STORAGE_CONNECTION_STRING") {
                    None => Ok(ConnectionString::default()),
                    Some(text) => ConnectionString::parse(&text).map_err(|why| why.to_string()),
                },
                endpoint: option("AZURE_STORAGE_ENDPOINT")
                    .map(|v| Endpoint::check("AZURE_STORAGE_ENDPOINT", &v, "https")),
                account: option("AZURE_STORAGE_ACCOUNT"),
                key: option("AZURE_STORAGE_ACCESS_KEY"),
                sas: option("AZURE_STORAGE_SAS_TOKEN"),
                token: option("AZURE_STORAGE_ACCESS_TOKEN"),
            }),
            Backend::HuggingFace => Profile::HuggingFace(HuggingFace {
                endpoint: endpoint("HF_ENDPOINT", super::hugging_face::DEFAULT_ENDPOINT),
                token: option("HF_TOKEN")
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty()),
                token_path: option("HF_TOKEN_PATH"),
                home: option("HF_HOME"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::super::{ByteRange, Signing, prepare};
    use super::*;
    use crate::config::Config;
    use crate::credentials::Auth;
    use crate::error::Status;

    /// One loop's profiles serve every path: paths under the same rules share one profile,
    /// and a rule's options reach only its paths, however the reads interleave.
    #[test]
    fn profiles_are_shared_per_path_rules_and_keep_rules_apart() {
        let mut config = Config::empty();
        config
            .set("AWS_S3_ENDPOINT", Some("http://127.0.0.1:9000"))
            .unwrap();
        config.set("AWS_REGION", Some("eu-west-1")).unwrap();
        config
            .set_path(
                "s3://team/private",
                "AWS_S3_ENDPOINT",
                Some("http://127.0.0.1:9001/root"),
            )
            .unwrap();
        config
            .set_path("s3://bad", "AWS_S3_ENDPOINT", Some("http://h/?secret=1"))
            .unwrap();
        let settings = config.freeze().unwrap();
        let profiles = Profiles::default();
        let url = |uri: &str| {
            let locator = Locator::parse(uri).unwrap();
            let signing = Signing {
                auth: &Auth::Anonymous,
                region: None,
                now: SystemTime::now(),
            };
            let range = ByteRange::Span { first: 0, last: 9 };
            prepare(&settings, &profiles, &locator, range, None, signing)
                .map(|p| p.request.uri.to_string())
        };
        for _ in 0..2 {
            assert_eq!(
                url("s3://team/public/a").unwrap(),
                "http://127.0.0.1:9000/team/public/a"
            );
            assert_eq!(
                url("s3://team/private/a").unwrap(),
                "http://127.0.0.1:9001/root/team/private/a"
            );
            assert_eq!(
                url("s3://other/b").unwrap(),
                "http://127.0.0.1:9000/other/b"
            );
            // A bad endpoint fails each read with its own path, never the value.
            for uri in ["s3://bad/k1", "s3://bad/k2"] {
                let e = url(uri).unwrap_err();
                assert_eq!(e.status(), Status::Config);
                let path = Locator::parse(uri).unwrap().identity().to_owned();
                assert_eq!(
                    e.message(),
                    format!("{path}: AWS_S3_ENDPOINT cannot contain a query")
                );
            }
        }
        let profile = |uri: &str| profiles.get(&settings, &Locator::parse(uri).unwrap());
        assert!(Rc::ptr_eq(
            &profile("s3://team/public/a"),
            &profile("s3://other/b")
        ));
        assert!(!Rc::ptr_eq(
            &profile("s3://team/public/a"),
            &profile("s3://team/private/a")
        ));
        // Paths under no rule share one profile; each rule has its own.
        assert_eq!(profiles.cache.borrow().len(), 3);
        let Profile::S3(s3) = &*profile("s3://other/b") else {
            panic!("an S3 profile")
        };
        assert_eq!(s3.region.as_deref(), Some("eu-west-1"));
    }
}
