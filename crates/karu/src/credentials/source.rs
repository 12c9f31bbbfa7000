//! The native Source Cooperative credential chain (spec §5.9): the `SOURCE_*` key pair.

use super::aws::{KeyOptions, option_keys};
use super::{LoadContext, Resolved};
use crate::error::Result;

/// Source's explicit key options.
const OPTION_KEYS: KeyOptions = [
    "SOURCE_ACCESS_KEY_ID",
    "SOURCE_SECRET_ACCESS_KEY",
    "SOURCE_SESSION_TOKEN",
];

/// Loads credentials for `ctx.path`; `Ok(None)` when no source has any. AWS credentials
/// are never used.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Resolved>> {
    Ok(option_keys(ctx, "Source", OPTION_KEYS)?.map(Resolved::new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::test_support::{settings, with_context};
    use crate::error::Status;

    const PATH: &str = "/vsisource/acct/product/key";

    fn run(options: &[(&str, &str)]) -> Result<Option<Resolved>> {
        with_context(&settings(options), PATH, None, load)
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
        assert_eq!(r.credentials.access_key_id, "SKID");
        assert_eq!(r.credentials.secret_access_key, "SSECRET");
        assert_eq!(r.credentials.session_token, "STOKEN");
    }

    #[test]
    fn half_a_key_pair_fails() {
        let e = run(&[("SOURCE_SECRET_ACCESS_KEY", "SSECRET")]).unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert_eq!(
            e.message(),
            "/vsisource/acct/product/key: Source access key and secret must be set together"
        );
    }

    #[test]
    fn aws_keys_are_never_used() {
        let r = run(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "SECRET"),
        ]);
        assert_eq!(r.unwrap(), None);
    }
}
