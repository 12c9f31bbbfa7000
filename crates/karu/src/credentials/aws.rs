//! The native AWS credential chain (spec §5.9), first match wins: explicit keys.

use super::{LoadContext, Resolved};
use crate::config::Credentials;
use crate::error::{Error, Result, Status};

/// Loads credentials for `ctx.path`; `Ok(None)` when no source has any.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Resolved>> {
    Ok(option_keys(ctx, "AWS", OPTION_KEYS)?.map(Resolved::new))
}

/// The option names of one namespace's key id, secret and session token.
pub(super) type KeyOptions = [&'static str; 3];

/// AWS's explicit key options.
const OPTION_KEYS: KeyOptions = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// Static keys from options (key id, secret, optional token): `None` when neither half of
/// the pair is set, an error naming `label` when only one is.
pub(super) fn option_keys(
    ctx: &LoadContext,
    label: &str,
    [id, secret, token]: KeyOptions,
) -> Result<Option<Credentials>> {
    match (ctx.option(id), ctx.option(secret)) {
        (None, None) => Ok(None),
        (Some(id), Some(secret)) => Ok(Some(Credentials {
            access_key_id: id.to_owned(),
            secret_access_key: secret.to_owned(),
            session_token: ctx.option(token).unwrap_or_default().to_owned(),
            ..Credentials::default()
        })),
        _ => Err(Error::new(
            Status::Credentials,
            format!(
                "{}: {label} access key and secret must be set together",
                ctx.path
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::test_support::{settings, with_context};

    const PATH: &str = "/vsis3/bucket/key";

    fn run(options: &[(&str, &str)]) -> Result<Option<Resolved>> {
        with_context(&settings(options), PATH, None, load)
    }

    #[test]
    fn explicit_keys_with_and_without_token() {
        let r = run(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "SECRET"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(r.credentials.access_key_id, "AKID");
        assert_eq!(r.credentials.secret_access_key, "SECRET");
        assert_eq!(r.credentials.session_token, "");
        assert_eq!(r.credentials.expires_at, None);
        assert_eq!(r.region, None);

        let r = run(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "SECRET"),
            ("AWS_SESSION_TOKEN", "TOKEN"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(r.credentials.session_token, "TOKEN");
    }

    #[test]
    fn half_a_key_pair_fails() {
        for half in [
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "SECRET"),
        ] {
            let e = run(&[half]).unwrap_err();
            assert_eq!(e.status(), Status::Credentials);
            assert_eq!(
                e.message(),
                "/vsis3/bucket/key: AWS access key and secret must be set together"
            );
        }
        // Empty values count as unset.
        let e = run(&[("AWS_ACCESS_KEY_ID", "AKID"), ("AWS_SECRET_ACCESS_KEY", "")]).unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
    }

    #[test]
    fn nothing_configured_is_empty() {
        assert_eq!(run(&[]).unwrap(), None);
    }
}
