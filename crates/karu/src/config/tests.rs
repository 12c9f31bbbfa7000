//! Builder and snapshot tests. Hermetic: only `Config::empty` and `Config::from_vars`.

use std::path::Path;
use std::time::Duration;

use super::*;

fn vars(pairs: &[(&str, &str)]) -> Config {
    Config::from_vars(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

fn freeze(config: &Config) -> Settings {
    config.freeze().expect("valid config")
}

fn freeze_err(config: &Config) -> String {
    let e = config.freeze().unwrap_err();
    assert_eq!(e.status(), Status::Config);
    e.message().to_string()
}

struct Fixed;

impl CredentialsProvider for Fixed {
    fn credentials(&self, _kind: CredentialsKind, _path: &str) -> Result<Credentials> {
        Ok(Credentials::default())
    }
}

#[test]
fn defaults() {
    let s = freeze(&Config::empty());
    assert_eq!(s.concurrency(), 64);
    assert_eq!(s.io_threads(), 4);
    assert_eq!(s.loop_shares(), vec![16, 16, 16, 16]);
    assert_eq!(s.coalesce_gap(), 1_048_576);
    assert_eq!(s.coalesce_limit(), 67_108_864);
    assert_eq!(s.coalesce_parts(), 1024);
    assert_eq!(s.coalesce_amplification(), 16);
    assert_eq!(s.range_fallback_limit(), 8_388_608);
    assert_eq!(s.max_attempts(), 8);
    assert_eq!(s.request_timeout(), Some(Duration::from_secs(120)));
    assert_eq!(s.connect_timeout(), Duration::from_secs(30));
    assert_eq!(s.low_speed_time(), Duration::from_secs(60));
    assert_eq!(s.low_speed_limit(), 1024);
    assert_eq!(s.http_headers().unwrap(), &[]);
    assert!(!s.has_http_headers());
    assert_eq!(s.http_version(), HttpVersion::Http1_1);
    assert_eq!(s.ca_bundle(), None);
    assert_eq!(s.ca_path(), None);
    assert_eq!(s.proxy(), None);
    assert_eq!(s.proxy_credentials(), None);
    assert_eq!(
        s.user_agent(),
        Some(concat!("karu/", env!("CARGO_PKG_VERSION")))
    );
    assert!(!s.discovery());
    assert_eq!(s.home_dir(), None);
    assert_eq!(s.cache_dir(), None);
    for k in CredentialsKind::ALL {
        assert!(s.credentials_provider(k).is_none());
    }
}

#[test]
fn client_values_from_env_and_api() {
    let mut c = vars(&[
        ("KARU_CONCURRENCY", "10"),
        ("KARU_COALESCE_GAP", "0"),
        ("KARU_REQUEST_TIMEOUT", "0"),
        ("KARU_HTTP_VERSION", "2prior_knowledge"),
        ("KARU_HTTP_PROXY", "http://proxy:3128"),
        ("KARU_HTTP_PROXY_CREDENTIALS", "u:p"),
        ("KARU_LOW_SPEED_LIMIT", "9223372036854775807"),
    ]);
    c.set("karu_max_retries", Some("3")).unwrap();
    let s = freeze(&c);
    assert_eq!(s.concurrency(), 10);
    assert_eq!(s.loop_shares(), vec![3, 3, 2, 2]);
    assert_eq!(s.coalesce_gap(), 0);
    assert_eq!(s.request_timeout(), None);
    assert_eq!(s.http_version(), HttpVersion::Http2PriorKnowledge);
    assert_eq!(s.proxy(), Some("http://proxy:3128"));
    assert_eq!(s.proxy_credentials(), Some("u:p"));
    assert_eq!(s.max_attempts(), 3);
    assert_eq!(s.low_speed_limit(), i64::MAX as u64);
    assert!(s.discovery());
}

#[test]
fn io_threads_are_clamped_by_concurrency_and_64() {
    let mut c = Config::empty();
    c.set("KARU_CONCURRENCY", Some("2")).unwrap();
    c.set("KARU_IO_THREADS", Some("8")).unwrap();
    let s = freeze(&c);
    assert_eq!(s.io_threads(), 2);
    assert_eq!(s.io_threads_configured(), 8);
    assert_eq!(s.loop_shares(), vec![1, 1]);

    c.set("KARU_CONCURRENCY", Some("4096")).unwrap();
    c.set("KARU_IO_THREADS", Some("64")).unwrap();
    let s = freeze(&c);
    assert_eq!(s.io_threads(), 64);
    assert_eq!(s.loop_shares(), vec![64; 64]);

    c.set("KARU_CONCURRENCY", Some("1")).unwrap();
    let s = freeze(&c);
    assert_eq!(s.io_threads(), 1);
    assert_eq!(s.loop_shares(), vec![1]);

    c.set("KARU_CONCURRENCY", Some("100")).unwrap();
    c.set("KARU_IO_THREADS", Some("7")).unwrap();
    let shares = freeze(&c).loop_shares();
    assert_eq!(shares, vec![15, 15, 14, 14, 14, 14, 14]);
    assert_eq!(shares.iter().sum::<u32>(), 100);
}

#[test]
fn name_errors() {
    let mut c = Config::empty();
    let e = c.set("", Some("x")).unwrap_err();
    assert_eq!(
        (e.status(), e.message()),
        (Status::Config, "option name is empty")
    );
    for name in [
        "KARU_THREADS",
        "karu_threads",
        "GDAL_HTTP_HEADERS",
        "CPL_CURL_VERBOSE",
        "GS_SECRET_ACCESS_KEY",
        " AWS_REGION",
        "AWS_REGION ",
    ] {
        let e = c.set(name, Some("x")).unwrap_err();
        assert_eq!(e.status(), Status::Config);
        assert_eq!(e.message(), format!("unknown Karu option '{name}'"));
        // Removing an unknown name fails the same way.
        assert!(c.set(name, None).is_err());
    }
    let e = c.set_path("/vsis3/b", "nope", Some("x")).unwrap_err();
    assert_eq!(e.message(), "unknown Karu option 'nope'");
    let e = c.set_path("/vsis3/b", "", Some("x")).unwrap_err();
    assert_eq!(e.message(), "option name is empty");
}

#[test]
fn every_accepted_name_can_be_set_in_any_case() {
    let mut c = Config::empty();
    for name in option_names() {
        c.set(name, Some("x")).unwrap();
        c.set(&name.to_ascii_lowercase(), None).unwrap();
    }
    assert!(c.layers.explicit.is_empty());
}

#[test]
fn api_aliases_write_the_canonical_name_last_call_wins() {
    let groups: &[&[&str]] = &[
        &["AWS_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
        &["AWS_REGION", "AWS_DEFAULT_REGION"],
        &["AWS_PROFILE", "AWS_DEFAULT_PROFILE"],
        &["KARU_MAX_ATTEMPTS", "KARU_MAX_RETRIES"],
        &["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"],
        &["KARU_HTTP_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"],
        &["SOURCE_ENDPOINT", "SOURCE_PROXY_URL"],
    ];
    for group in groups {
        let mut c = Config::empty();
        for (i, spelling) in group.iter().enumerate() {
            c.set(spelling, Some(&(i + 1).to_string())).unwrap();
            let s = freeze(&c);
            let want = (i + 1).to_string();
            // Every spelling reads the one canonical value.
            for other in *group {
                assert_eq!(s.option(other, ""), Some(want.as_str()), "{other}");
            }
        }
        assert_eq!(c.layers.explicit.len(), 1);
        // Removing through an alias removes the canonical value.
        c.set(group[group.len() - 1], None).unwrap();
        assert!(c.layers.explicit.is_empty());
    }
}

#[test]
fn env_aliases_canonical_first_then_table_order() {
    let c = vars(&[
        ("AWS_ENDPOINT_URL", "c"),
        ("AWS_ENDPOINT_URL_S3", "b"),
        ("AWS_S3_ENDPOINT", "a"),
    ]);
    assert_eq!(freeze(&c).option("AWS_S3_ENDPOINT", ""), Some("a"));
    let c = vars(&[("AWS_ENDPOINT_URL", "c"), ("AWS_ENDPOINT_URL_S3", "b")]);
    assert_eq!(freeze(&c).option("AWS_S3_ENDPOINT", ""), Some("b"));
    let c = vars(&[("AWS_ENDPOINT_URL", "c")]);
    assert_eq!(freeze(&c).option("AWS_S3_ENDPOINT", ""), Some("c"));

    let c = vars(&[
        ("SSL_CERT_FILE", "/ssl.pem"),
        ("CURL_CA_BUNDLE", "/curl.pem"),
    ]);
    assert_eq!(freeze(&c).ca_bundle(), Some(Path::new("/curl.pem")));
    let c = vars(&[("KARU_MAX_RETRIES", "2"), ("KARU_MAX_ATTEMPTS", "5")]);
    assert_eq!(freeze(&c).max_attempts(), 5);
    let c = vars(&[("HUGGING_FACE_HUB_TOKEN", "old")]);
    assert_eq!(freeze(&c).option("HF_TOKEN", "/vsihf/x"), Some("old"));
    let c = vars(&[
        ("SOURCE_PROXY_URL", "https://p"),
        ("AWS_DEFAULT_PROFILE", "d"),
    ]);
    let s = freeze(&c);
    assert_eq!(s.option("SOURCE_ENDPOINT", ""), Some("https://p"));
    assert_eq!(s.option("AWS_PROFILE", ""), Some("d"));
}

#[test]
fn env_names_are_exact_and_empty_values_ignored() {
    let c = vars(&[
        ("aws_region", "lower-case is not the variable"),
        ("AWS_PROFILE", ""),
        ("AWS_DEFAULT_PROFILE", "fallback"),
        ("KARU_HTTP_USER_AGENT", ""),
        ("KARU_THREADS", "8"),
        ("PATH", "/bin"),
    ]);
    let s = freeze(&c);
    assert_eq!(s.option("AWS_REGION", ""), None);
    // An empty canonical value is absent, so the alias supplies the value.
    assert_eq!(s.option("AWS_PROFILE", ""), Some("fallback"));
    // An empty environment value cannot disable the User-Agent.
    assert!(s.user_agent().is_some());
}

#[test]
fn empty_api_value_is_kept() {
    let mut c = vars(&[
        ("AWS_REGION", "eu-west-1"),
        ("KARU_HTTP_USER_AGENT", "env-agent"),
    ]);
    assert_eq!(freeze(&c).user_agent(), Some("env-agent"));
    c.set("KARU_HTTP_USER_AGENT", Some("")).unwrap();
    c.set("AWS_REGION", Some("")).unwrap();
    let s = freeze(&c);
    assert_eq!(s.user_agent(), None);
    assert_eq!(s.option("AWS_REGION", "/vsis3/b/k"), Some(""));
    c.set("KARU_HTTP_USER_AGENT", Some("mine/1")).unwrap();
    assert_eq!(freeze(&c).user_agent(), Some("mine/1"));
    c.set("KARU_HTTP_USER_AGENT", None).unwrap();
    assert_eq!(freeze(&c).user_agent(), Some("env-agent"));
}

#[test]
fn layer_order_rule_explicit_env_default() {
    let path = "/vsis3/team/private/x";
    let mut c = vars(&[("AWS_REGION", "env")]);
    let s = freeze(&c);
    assert_eq!(s.option("AWS_REGION", path), Some("env"));
    assert_eq!(
        s.option_source("AWS_REGION", path),
        OptionSource::Environment
    );
    assert_eq!(s.option_source("AWS_PROFILE", path), OptionSource::Default);
    assert_eq!(s.option("AWS_PROFILE", path), None);

    c.set("AWS_REGION", Some("explicit")).unwrap();
    let s = freeze(&c);
    assert_eq!(s.option("AWS_REGION", path), Some("explicit"));
    assert_eq!(s.option_source("AWS_REGION", path), OptionSource::Explicit);

    c.set_path("s3://team", "AWS_REGION", Some("rule")).unwrap();
    let s = freeze(&c);
    assert_eq!(s.option("AWS_REGION", path), Some("rule"));
    assert_eq!(
        s.option_source("AWS_REGION", path),
        OptionSource::Rule("/vsis3/team")
    );
    // Paths outside the rule still see the explicit value; the empty path sees no rule.
    assert_eq!(s.option("AWS_REGION", "/vsis3/other/x"), Some("explicit"));
    assert_eq!(s.option("AWS_REGION", ""), Some("explicit"));

    c.set_path("s3://team/private", "AWS_REGION", Some("deeper"))
        .unwrap();
    let s = freeze(&c);
    assert_eq!(s.option("AWS_REGION", path), Some("deeper"));
    assert_eq!(s.option("AWS_REGION", "/vsis3/team/public"), Some("rule"));
    assert_eq!(
        s.option("AWS_REGION", "/vsis3/team/private-copy/x"),
        Some("rule")
    );
}

#[test]
fn deeper_rule_without_the_option_does_not_hide_a_shallower_one() {
    let mut c = Config::empty();
    c.set_path("s3://team", "AWS_PROFILE", Some("team"))
        .unwrap();
    c.set_path("s3://team/private", "AWS_REGION", Some("eu-north-1"))
        .unwrap();
    c.set("AWS_PROFILE", Some("global")).unwrap();
    let s = freeze(&c);
    let path = "/vsis3/team/private/x";
    assert_eq!(s.option("AWS_PROFILE", path), Some("team"));
    assert_eq!(s.option("AWS_REGION", path), Some("eu-north-1"));
}

#[test]
fn rule_prefixes_are_canonicalized_and_merged() {
    let mut c = Config::empty();
    c.set_path("s3://b/dir", "AWS_REGION", Some("one")).unwrap();
    c.set_path("/vsis3/b/dir", "AWS_PROFILE", Some("p"))
        .unwrap();
    assert_eq!(c.layers.rules.len(), 1);
    assert_eq!(c.layers.rules[0].prefix, "/vsis3/b/dir");
    c.set_path("gs://g", "GCS_USER_PROJECT", Some("proj"))
        .unwrap();
    c.set_path("az://acct/c", "AZURE_STORAGE_ACCOUNT", Some("acct"))
        .unwrap();
    c.set_path("abfs://fs", "AZURE_STORAGE_ACCOUNT", Some("dl"))
        .unwrap();
    c.set_path("hf://datasets/o", "HF_TOKEN", Some("t"))
        .unwrap();
    c.set_path("source://org", "SOURCE_PROFILE", Some("s"))
        .unwrap();
    c.set_path("https://h.example/data", "AWS_REGION", Some("h"))
        .unwrap();
    let s = freeze(&c);
    assert_eq!(s.option("AWS_REGION", "/vsis3/b/dir/k"), Some("one"));
    assert_eq!(s.option("AWS_PROFILE", "/vsis3/b/dir/k"), Some("p"));
    assert_eq!(s.option("GCS_USER_PROJECT", "/vsigs/g/k"), Some("proj"));
    assert_eq!(
        s.option("AZURE_STORAGE_ACCOUNT", "/vsiaz/acct/c/k"),
        Some("acct")
    );
    assert_eq!(
        s.option("AZURE_STORAGE_ACCOUNT", "/vsiadls/fs/k"),
        Some("dl")
    );
    assert_eq!(s.option("HF_TOKEN", "/vsihf/datasets/o/r"), Some("t"));
    assert_eq!(s.option("SOURCE_PROFILE", "/vsisource/org/r"), Some("s"));
    assert_eq!(
        s.option("AWS_REGION", "https://h.example/data/f.bin"),
        Some("h")
    );
    assert_eq!(s.option("AWS_REGION", "https://h.example/database"), None);

    // Removing the last option of a rule drops the rule.
    c.set_path("s3://b/dir", "AWS_REGION", None).unwrap();
    c.set_path("s3://b/dir", "AWS_PROFILE", None).unwrap();
    c.set_path("s3://never", "AWS_PROFILE", None).unwrap();
    assert!(
        c.layers
            .rules
            .iter()
            .all(|r| !r.prefix.starts_with("/vsis3/"))
    );
}

#[test]
fn path_rule_errors() {
    let mut c = Config::empty();
    let e = c.set_path("", "AWS_REGION", Some("x")).unwrap_err();
    assert_eq!(e.status(), Status::Config);
    assert_eq!(e.message(), "path-specific option has an empty prefix");
    // The prefix is checked before the name.
    let e = c.set_path("", "bogus", Some("x")).unwrap_err();
    assert_eq!(e.message(), "path-specific option has an empty prefix");

    for (given, canonical) in [
        ("KARU_CONCURRENCY", "KARU_CONCURRENCY"),
        ("karu_max_retries", "KARU_MAX_ATTEMPTS"),
        ("KARU_HTTP_HEADERS", "KARU_HTTP_HEADERS"),
        ("KARU_HTTP_USER_AGENT", "KARU_HTTP_USER_AGENT"),
        ("CURL_CA_BUNDLE", "KARU_HTTP_CA_BUNDLE"),
        ("SSL_CERT_FILE", "KARU_HTTP_CA_BUNDLE"),
    ] {
        let e = c.set_path("s3://b", given, Some("1")).unwrap_err();
        assert_eq!(e.status(), Status::Config);
        assert_eq!(
            e.message(),
            format!("{canonical} is client-wide and cannot be path-specific")
        );
        assert!(c.set_path("s3://b", given, None).is_err());
    }
    assert!(c.layers.rules.is_empty());
}

#[test]
fn validation_covers_every_layer() {
    let c = vars(&[("AWS_HTTPS", "maybe")]);
    assert_eq!(
        freeze_err(&c),
        "AWS_HTTPS must be YES/NO, TRUE/FALSE, ON/OFF, or 1/0"
    );
    // An explicit value does not excuse a bad inherited one.
    let mut c = vars(&[("KARU_MAX_RETRIES", "0")]);
    c.set("KARU_MAX_ATTEMPTS", Some("4")).unwrap();
    assert_eq!(
        freeze_err(&c),
        "KARU_MAX_ATTEMPTS must be an integer in [1, 16]"
    );

    let mut c = Config::empty();
    c.set("AWS_REQUEST_PAYER", Some("owner")).unwrap();
    assert_eq!(freeze_err(&c), "AWS_REQUEST_PAYER must be 'requester'");
    c.set("AWS_REQUEST_PAYER", Some("Requester")).unwrap();
    freeze(&c);

    c.set_path("s3://team/x", "AWS_METADATA_SERVICE_TIMEOUT", Some("61"))
        .unwrap();
    assert_eq!(
        freeze_err(&c),
        "/vsis3/team/x: AWS_METADATA_SERVICE_TIMEOUT must be an integer in [1, 60]"
    );
    c.set_path("s3://team/x", "AWS_METADATA_SERVICE_TIMEOUT", Some("5"))
        .unwrap();
    c.set_path("gs://g", "GCS_NO_SIGN_REQUEST", Some("perhaps"))
        .unwrap();
    assert_eq!(
        freeze_err(&c),
        "/vsigs/g: GCS_NO_SIGN_REQUEST must be YES/NO, TRUE/FALSE, ON/OFF, or 1/0"
    );
    c.set_path("gs://g", "GCS_NO_SIGN_REQUEST", Some("Yes"))
        .unwrap();
    let s = freeze(&c);
    assert!(s.is_true("GCS_NO_SIGN_REQUEST", "/vsigs/g/k"));
    assert_eq!(s.flag("GCS_NO_SIGN_REQUEST", "/vsigs/g/k"), Some(true));
    assert_eq!(s.flag("GCS_NO_SIGN_REQUEST", "/vsigs/other"), None);

    let mut c = Config::empty();
    c.set("KARU_HTTP_VERSION", Some("3")).unwrap();
    assert_eq!(
        freeze_err(&c),
        "KARU_HTTP_VERSION must be AUTO, 1.1, 2, 2TLS, or 2PRIOR_KNOWLEDGE"
    );
    // An empty API value is a value, and not a valid number.
    let mut c = Config::empty();
    c.set("KARU_CONCURRENCY", Some("")).unwrap();
    assert_eq!(
        freeze_err(&c),
        "KARU_CONCURRENCY must be an integer in [1, 4096]"
    );
}

#[test]
fn booleans_for_paths() {
    let mut c = vars(&[("AWS_NO_SIGN_REQUEST", "ON")]);
    c.set_path("s3://signed", "AWS_NO_SIGN_REQUEST", Some("0"))
        .unwrap();
    let s = freeze(&c);
    assert!(s.is_true("AWS_NO_SIGN_REQUEST", "/vsis3/public/k"));
    assert!(!s.is_true("AWS_NO_SIGN_REQUEST", "/vsis3/signed/k"));
    assert_eq!(
        s.flag("AWS_NO_SIGN_REQUEST", "/vsis3/signed/k"),
        Some(false)
    );
    assert!(!s.is_true("AWS_HTTPS", "/vsis3/public/k"));
    assert!(!s.is_true("NOT_AN_OPTION", "/vsis3/public/k"));
}

#[test]
fn malformed_headers_fail_reads_not_creation() {
    let c = vars(&[("KARU_HTTP_HEADERS", "X-Good: 1\nbad line")]);
    let s = freeze(&c);
    let e = s.http_headers().unwrap_err();
    assert_eq!(e.status(), Status::Config);
    assert_eq!(e.message(), "KARU_HTTP_HEADERS contains a malformed header");
    assert!(s.has_http_headers());

    let mut c = Config::empty();
    c.set(
        "KARU_HTTP_HEADERS",
        Some(" X-A: 1 \r\n\r\nX-B: two words\n"),
    )
    .unwrap();
    let s = freeze(&c);
    assert_eq!(
        s.http_headers().unwrap(),
        &[
            ("X-A".to_string(), "1".to_string()),
            ("X-B".to_string(), "two words".to_string())
        ]
    );
    assert!(s.has_http_headers());
    let headers = s.http_headers().unwrap();
    assert!(check_managed_headers(headers, &["User-Agent"], true).is_ok());
}

#[test]
fn ca_bundle_rules() {
    let mut c = vars(&[("HOME", "/home/u")]);
    c.layers.system_ca_bundle = Some("/etc/ssl/system.pem".into());
    let s = freeze(&c);
    assert_eq!(s.ca_bundle(), Some(Path::new("/etc/ssl/system.pem")));
    assert!(!s.ca_bundle_is_explicit());

    // A CA directory turns off the system bundle.
    c.set("KARU_HTTP_CA_PATH", Some("~/certs")).unwrap();
    let s = freeze(&c);
    assert_eq!(s.ca_bundle(), None);
    assert_eq!(s.ca_path(), Some(Path::new("/home/u/certs")));
    assert_eq!(s.system_ca_bundle(), Some(Path::new("/etc/ssl/system.pem")));

    c.set("SSL_CERT_FILE", Some("/my/ca.pem")).unwrap();
    let s = freeze(&c);
    assert_eq!(s.ca_bundle(), Some(Path::new("/my/ca.pem")));
    assert!(s.ca_bundle_is_explicit());

    // The empty builder never finds a system bundle.
    assert_eq!(freeze(&Config::empty()).system_ca_bundle(), None);
}

#[test]
fn home_cache_and_expansion() {
    let c = vars(&[("HOME", "/home/u"), ("AWS_CONFIG_FILE", "~/.aws/alt")]);
    let s = freeze(&c);
    if cfg!(windows) {
        return;
    }
    assert_eq!(s.home_dir(), Some(Path::new("/home/u")));
    assert_eq!(s.cache_dir(), Some(Path::new("/home/u/.cache")));
    let file = s.option("AWS_CONFIG_FILE", "/vsis3/b").unwrap();
    assert_eq!(s.expand_home(file), Path::new("/home/u/.aws/alt"));
    assert_eq!(s.expand_home("~"), Path::new("/home/u"));
    assert_eq!(s.expand_home("~other/x"), Path::new("~other/x"));
    assert_eq!(s.expand_home("/abs/~/x"), Path::new("/abs/~/x"));

    let s = freeze(&vars(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg")]));
    assert_eq!(s.cache_dir(), Some(Path::new("/xdg")));

    // Without a home directory nothing expands.
    let s = freeze(&Config::empty());
    assert_eq!(s.expand_home("~/x"), Path::new("~/x"));
}

#[test]
fn matches_compares_snapshots() {
    let mut a = vars(&[("AWS_REGION", "eu-west-1"), ("HOME", "/h")]);
    a.set("KARU_CONCURRENCY", Some("8")).unwrap();
    a.set_path("s3://b", "AWS_PROFILE", Some("p")).unwrap();
    let s = freeze(&a);
    assert!(s.matches(&a).unwrap());
    assert!(s.matches(&a.clone()).unwrap());

    let mut b = a.clone();
    b.set("KARU_CONCURRENCY", Some("9")).unwrap();
    assert!(!s.matches(&b).unwrap());

    let mut b = a.clone();
    b.set_path("s3://b", "AWS_PROFILE", Some("q")).unwrap();
    assert!(!s.matches(&b).unwrap());

    // Environment, home and discovery are part of the snapshot.
    assert!(!s.matches(&vars(&[("AWS_REGION", "eu-west-1")])).unwrap());
    let mut b = Config::empty();
    b.set("AWS_REGION", Some("eu-west-1")).unwrap();
    assert!(!s.matches(&b).unwrap());

    // Rule order counts.
    let mut x = Config::empty();
    x.set_path("s3://1", "AWS_REGION", Some("a")).unwrap();
    x.set_path("s3://2", "AWS_REGION", Some("b")).unwrap();
    let mut y = Config::empty();
    y.set_path("s3://2", "AWS_REGION", Some("b")).unwrap();
    y.set_path("s3://1", "AWS_REGION", Some("a")).unwrap();
    assert!(!freeze(&x).matches(&y).unwrap());

    // An invalid builder is a Config error, not "no match".
    let mut bad = a.clone();
    bad.set("KARU_IO_THREADS", Some("65")).unwrap();
    let e = s.matches(&bad).unwrap_err();
    assert_eq!(e.status(), Status::Config);
    assert_eq!(e.message(), "KARU_IO_THREADS must be an integer in [1, 64]");
}

#[test]
fn matches_compares_providers_by_identity() {
    let provider: Arc<dyn CredentialsProvider> = Arc::new(Fixed);
    let mut a = Config::empty();
    a.set_credentials_provider(CredentialsKind::Aws, Some(provider.clone()));
    let s = freeze(&a);
    assert!(Arc::ptr_eq(
        &s.credentials_provider(CredentialsKind::Aws).unwrap(),
        &provider
    ));
    assert!(s.credentials_provider(CredentialsKind::Gcs).is_none());
    assert!(s.matches(&a).unwrap());

    // An equal but distinct registration does not match.
    let mut b = Config::empty();
    b.set_credentials_provider(CredentialsKind::Aws, Some(Arc::new(Fixed)));
    assert!(!s.matches(&b).unwrap());

    // The same registration under another kind does not match either.
    let mut b = Config::empty();
    b.set_credentials_provider(CredentialsKind::Gcs, Some(provider.clone()));
    assert!(!s.matches(&b).unwrap());

    // Removing it does not match; re-installing the same one does.
    let mut b = a.clone();
    b.set_credentials_provider(CredentialsKind::Aws, None);
    assert!(!s.matches(&b).unwrap());
    b.set_credentials_provider(CredentialsKind::Aws, Some(provider.clone()));
    assert!(s.matches(&b).unwrap());
}

#[test]
fn provider_is_released_with_its_last_holder() {
    let provider: Arc<dyn CredentialsProvider> = Arc::new(Fixed);
    let mut c = Config::empty();
    c.set_credentials_provider(CredentialsKind::Azure, Some(provider.clone()));
    let s = freeze(&c);
    assert_eq!(Arc::strong_count(&provider), 3);
    drop(c);
    assert_eq!(Arc::strong_count(&provider), 2);
    drop(s);
    assert_eq!(Arc::strong_count(&provider), 1);
}

#[test]
fn azure_imds_selector_at_most_one() {
    let path = "/vsiaz/acct/c/k";
    let s = freeze(&Config::empty());
    assert_eq!(s.azure_imds_selector(path).unwrap(), None);

    let mut c = vars(&[("AZURE_CLIENT_ID", "app")]);
    let s = freeze(&c);
    assert_eq!(
        s.azure_imds_selector(path).unwrap(),
        Some(("AZURE_IMDS_CLIENT_ID", "app"))
    );
    c.set("AZURE_IMDS_OBJECT_ID", Some("obj")).unwrap();
    let s = freeze(&c);
    assert_eq!(
        s.azure_imds_selector(path).unwrap(),
        Some(("AZURE_IMDS_OBJECT_ID", "obj"))
    );
    c.set_path("az://acct", "AZURE_IMDS_MSI_RES_ID", Some("/sub/x"))
        .unwrap();
    let s = freeze(&c);
    let e = s.azure_imds_selector(path).unwrap_err();
    assert_eq!(e.status(), Status::Config);
    assert!(e.message().starts_with("at most one of"));
    // Other paths see only the explicit selector.
    assert!(s.azure_imds_selector("/vsiaz/other/c/k").is_ok());
}

#[test]
fn debug_output_redacts_secrets() {
    let mut c = vars(&[
        ("AWS_SECRET_ACCESS_KEY", "env-secret"),
        ("AWS_REGION", "eu"),
    ]);
    c.set("KARU_HTTP_HEADERS", Some("Authorization: Bearer tok"))
        .unwrap();
    c.set_path("s3://b", "AWS_SESSION_TOKEN", Some("rule-secret"))
        .unwrap();
    c.set_credentials_provider(CredentialsKind::Source, Some(Arc::new(Fixed)));
    let shown = format!("{c:?} {:?}", freeze(&c));
    for secret in ["env-secret", "Bearer tok", "rule-secret"] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(shown.contains("AWS_REGION") && shown.contains("Source"));
}

#[test]
fn builders_do_not_read_the_real_environment() {
    // `empty` and `from_vars` are hermetic whatever the process environment holds.
    let s = freeze(&Config::empty());
    assert!(s.option("PATH", "").is_none());
    assert!(s.home_dir().is_none());
    let s = freeze(&vars(&[]));
    assert!(s.home_dir().is_none());
    assert!(s.system_ca_bundle().is_none());
    assert!(s.discovery());
}
