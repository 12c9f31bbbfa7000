//! The native AWS credential chain (spec §5.9), first match wins: explicit keys, the
//! profile (web identity, `credential_process` or static keys), container credentials, then
//! IMDSv2. The profile's region rides along with whatever the chain finds after reading it.

mod container;
mod imds;
mod web_identity;

#[cfg(feature = "fuzzing")]
pub(crate) use web_identity::elements as sts_elements;

use url::Url;

use super::keys::{KeyOptions, option_keys};
use super::profile::{self, ProfileOptions};
use super::{LoadContext, Resolved};
use crate::error::{Error, Result, Status};

/// AWS's profile options.
const PROFILE: ProfileOptions = ProfileOptions {
    label: "AWS",
    profile: "AWS_PROFILE",
    default_profile: "default",
    config_file: "AWS_CONFIG_FILE",
    credentials_file: "AWS_SHARED_CREDENTIALS_FILE",
};

/// AWS's explicit key options.
const OPTION_KEYS: KeyOptions = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// Loads credentials for `ctx.path`; `Ok(None)` when no source has any.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Resolved>> {
    if let Some(keys) = option_keys(ctx, "AWS", OPTION_KEYS)? {
        return Ok(Some(Resolved::new(keys)));
    }

    let found = profile::lookup(ctx, &PROFILE)?;
    if found.explicit && found.profile.is_none() {
        return Err(profile::not_found(ctx, "AWS", &found.name));
    }
    let profile = found.profile.unwrap_or_default();
    let with_region = |credentials| Resolved {
        credentials,
        region: profile.region(),
    };

    let role = ctx.option("AWS_ROLE_ARN").or(profile.get("role_arn"));
    let token_file = ctx
        .option("AWS_WEB_IDENTITY_TOKEN_FILE")
        .or(profile.get("web_identity_token_file"));
    match (role, token_file) {
        (Some(role), Some(token_file)) => {
            let session = ctx
                .option("AWS_ROLE_SESSION_NAME")
                .or(profile.get("role_session_name"));
            return web_identity::load(ctx, role, token_file, session)
                .map(|c| Some(with_region(c)));
        }
        (Some(_), None) => {
            return Err(ctx.failure(
                "AWS chained AssumeRole profiles require a custom credential provider; \
                 credential_process and web identity profiles are supported natively",
            ));
        }
        (None, _) => {}
    }

    if let Some(keys) = profile::credentials(ctx, "AWS", &profile)? {
        return Ok(Some(with_region(keys)));
    }
    if let Some(keys) = container::load(ctx)? {
        return Ok(Some(with_region(keys)));
    }
    Ok(imds::load(ctx)?.map(with_region))
}

/// Parses the URL of a credential endpoint named by option `name`: http or https with a
/// host and without user information. Errors are `Config` and never quote the value.
fn endpoint_url(ctx: &LoadContext, name: &str, value: &str) -> Result<Url> {
    let bad = |why: &str| Error::new(Status::Config, format!("{}: {name} {why}", ctx.path));
    let url = Url::parse(value).map_err(|_| bad("is not a valid URL"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(bad("must be an http or https URL with a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("must not contain user information"));
    }
    Ok(url)
}

/// The `Expiration` of a credential answer, when present and in the future.
fn future_expiry(text: Option<&str>) -> Option<std::time::SystemTime> {
    text.and_then(super::timestamp::parse)
        .filter(|t| *t > std::time::SystemTime::now())
}

#[cfg(test)]
mod tests;
