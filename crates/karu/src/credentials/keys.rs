//! Key id and secret pairs (spec §5.9): the explicit key options of the AWS and Source
//! chains, a profile's static keys and GCS's HMAC keys all come as two halves that must be
//! set together.

use std::fmt;

use super::LoadContext;
use crate::config::Credentials;
use crate::error::Result;

/// The option names of one namespace's key id, secret and session token.
pub(super) type KeyOptions = [&'static str; 3];

/// Static keys from options (key id, secret, optional token): `None` when neither half of
/// the pair is set, an error naming `label` when only one is.
pub(super) fn option_keys(
    ctx: &LoadContext,
    label: &str,
    [id, secret, token]: KeyOptions,
) -> Result<Option<Credentials>> {
    key_pair(
        ctx,
        (ctx.option(id), ctx.option(secret), ctx.option(token)),
        format_args!("{label} access key and secret must be set together"),
    )
}

/// A key id, a secret and an optional session token: `None` when neither half of the pair
/// is set, the CREDENTIALS error `half` when only one is.
pub(super) fn key_pair(
    ctx: &LoadContext,
    (id, secret, token): (Option<&str>, Option<&str>, Option<&str>),
    half: impl fmt::Display,
) -> Result<Option<Credentials>> {
    match (id, secret) {
        (None, None) => Ok(None),
        (Some(id), Some(secret)) => Ok(Some(Credentials {
            access_key_id: id.to_owned(),
            secret_access_key: secret.to_owned(),
            session_token: token.unwrap_or_default().to_owned(),
            ..Credentials::default()
        })),
        _ => Err(ctx.failure(half)),
    }
}
