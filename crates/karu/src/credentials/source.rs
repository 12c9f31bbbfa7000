//! The native Source Cooperative credential chain (spec §5.9): the `SOURCE_*` key pair, else
//! a profile (default `source-coop`) of AWS-format files that must yield keys. AWS options
//! and credentials are never used, and a profile's `endpoint_url` is ignored.

use super::aws::{KeyOptions, option_keys};
use super::profile::{self, ProfileOptions};
use super::{LoadContext, Resolved};
use crate::error::{Error, Result, Status};

/// Source's explicit key options.
const OPTION_KEYS: KeyOptions = [
    "SOURCE_ACCESS_KEY_ID",
    "SOURCE_SECRET_ACCESS_KEY",
    "SOURCE_SESSION_TOKEN",
];

/// Source's profile options.
const PROFILE: ProfileOptions = ProfileOptions {
    label: "Source",
    profile: "SOURCE_PROFILE",
    default_profile: "source-coop",
    config_file: "SOURCE_CONFIG_FILE",
    credentials_file: "SOURCE_SHARED_CREDENTIALS_FILE",
};

/// Loads credentials for `ctx.path`. Runs only when Source signing was asked for, so an
/// absent profile or one without keys is an error rather than an empty result.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Resolved>> {
    if let Some(keys) = option_keys(ctx, "Source", OPTION_KEYS)? {
        return Ok(Some(Resolved::new(keys)));
    }
    let found = profile::lookup(ctx, &PROFILE)?;
    let Some(profile) = found.profile else {
        return Err(profile::not_found(ctx, "Source", &found.name));
    };
    match profile::credentials(ctx, "Source", &profile)? {
        Some(credentials) => Ok(Some(Resolved {
            credentials,
            region: profile.region(),
        })),
        None => Err(Error::new(
            Status::Credentials,
            format!(
                "{}: Source profile '{}' did not provide credentials",
                ctx.path, found.name
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::credentials::test_support::{settings, with_context};

    const PATH: &str = "/vsisource/acct/product/key";

    fn run(options: &[(&str, &str)]) -> Result<Option<Resolved>> {
        with_context(&settings(options), PATH, None, load)
    }

    fn failure(options: &[(&str, &str)]) -> (Status, String) {
        let e = run(options).unwrap_err();
        (e.status(), e.message().to_owned())
    }

    fn credentials_error(message: &str) -> (Status, String) {
        (Status::Credentials, format!("{PATH}: {message}"))
    }

    fn keys(r: &Resolved) -> (&str, &str, &str) {
        let c = &r.credentials;
        (&c.access_key_id, &c.secret_access_key, &c.session_token)
    }

    #[test]
    fn key_pair_and_token() {
        let r = run(&[
            ("SOURCE_ACCESS_KEY_ID", "SKID"),
            ("SOURCE_SECRET_ACCESS_KEY", "SSECRET"),
            ("SOURCE_SESSION_TOKEN", "STOKEN"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(keys(&r), ("SKID", "SSECRET", "STOKEN"));
        assert_eq!(r.region, None);
    }

    #[test]
    fn half_a_key_pair_fails() {
        assert_eq!(
            failure(&[("SOURCE_SECRET_ACCESS_KEY", "SSECRET")]),
            credentials_error("Source access key and secret must be set together")
        );
    }

    /// Writes AWS-format `config` and `credentials` files in a temp directory.
    fn files(config: &str, credentials: &str) -> (tempfile::TempDir, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("config");
        let k = dir.path().join("credentials");
        std::fs::write(&c, config).unwrap();
        std::fs::write(&k, credentials).unwrap();
        let show = |p: std::path::PathBuf| p.display().to_string();
        (dir, show(c), show(k))
    }

    #[test]
    fn the_source_coop_profile() {
        let (_dir, config, credentials) = files(
            "[profile source-coop]\nregion = us-west-2\nendpoint_url = http://ignored.invalid\n\
             [profile other]\ncredential_process = printf \
             '{\"AccessKeyId\":\"P\",\"SecretAccessKey\":\"Q\"}'\n\
             [profile empty]\nregion = r\n[profile role]\nrole_arn = arn:aws:iam::1:role/r\n\
             [profile sso]\nsso_start_url = https://sso\n[profile failing]\n\
             credential_process = exit 9\n",
            "[source-coop]\naws_access_key_id = COOP\naws_secret_access_key = COOPS\n",
        );
        let base = [
            ("SOURCE_CONFIG_FILE", config.as_str()),
            ("SOURCE_SHARED_CREDENTIALS_FILE", credentials.as_str()),
        ];
        let with = |profile: &str| {
            let mut options = base.to_vec();
            options.push(("SOURCE_PROFILE", profile));
            run(&options)
        };
        let r = run(&base).unwrap().unwrap();
        assert_eq!(keys(&r), ("COOP", "COOPS", ""));
        assert_eq!(r.region.as_deref(), Some("us-west-2"));

        let r = with("other").unwrap().unwrap();
        assert_eq!(keys(&r), ("P", "Q", ""));

        let error = |profile: &str| {
            let e = with(profile).unwrap_err();
            (e.status(), e.message().to_owned())
        };
        assert_eq!(
            error("missing"),
            credentials_error("Source profile 'missing' was not found")
        );
        assert_eq!(
            error("empty"),
            credentials_error("Source profile 'empty' did not provide credentials")
        );
        assert_eq!(
            error("role"),
            credentials_error("Source AssumeRole profiles require a custom credential provider")
        );
        assert_eq!(
            error("sso"),
            credentials_error(
                "Source IAM Identity Center profiles require a custom credential provider"
            )
        );
        assert_eq!(
            error("failing"),
            credentials_error("Source credential_process exited with status 9")
        );
        // A named file must exist.
        let e = run(&[("SOURCE_CONFIG_FILE", "/nonexistent/config")]).unwrap_err();
        assert_eq!(
            e.message(),
            format!("{PATH}: Source config file does not exist: '/nonexistent/config'")
        );
    }

    #[test]
    fn the_default_profile_must_exist() {
        assert_eq!(
            failure(&[("SOURCE_NO_SIGN_REQUEST", "NO")]),
            credentials_error("Source profile 'source-coop' was not found")
        );
    }

    #[test]
    fn default_files_with_discovery() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join(".aws")).unwrap();
        std::fs::write(
            home.path().join(".aws/credentials"),
            "[source-coop]\naws_access_key_id = HOMEKEY\naws_secret_access_key = HOMES\n",
        )
        .unwrap();
        let settings = Config::from_vars([("HOME".to_owned(), home.path().display().to_string())])
            .freeze()
            .unwrap();
        let r = with_context(&settings, PATH, None, load).unwrap().unwrap();
        assert_eq!(keys(&r), ("HOMEKEY", "HOMES", ""));
    }

    #[test]
    fn aws_options_are_never_used() {
        let (_dir, config, _) = files(
            "[default]\naws_access_key_id = AWSPROFILE\naws_secret_access_key = S\n",
            "",
        );
        assert_eq!(
            failure(&[
                ("AWS_ACCESS_KEY_ID", "AKID"),
                ("AWS_SECRET_ACCESS_KEY", "SECRET"),
                ("AWS_CONFIG_FILE", &config),
                ("AWS_PROFILE", "default"),
            ]),
            credentials_error("Source profile 'source-coop' was not found")
        );
    }
}
