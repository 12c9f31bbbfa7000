//! The Hugging Face Hub (spec §5.8): the resolve URL under `HF_ENDPOINT`, and a token read
//! afresh for every attempt (no cache, so a rotated token file takes effect at once). The
//! resolve endpoint redirects to a CDN; the transport drops `Authorization` when a redirect
//! leaves the origin.

use std::borrow::Cow;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use ::http::header::AUTHORIZATION;

use super::attempt::Attempt;
use super::{Prepared, profile};
use crate::error::{Error, Result, Status};
use crate::locator::Locator;

/// `HF_ENDPOINT`'s default.
pub(super) const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

pub(super) fn prepare(a: &Attempt, options: &profile::HuggingFace) -> Result<Prepared> {
    let root = a.endpoint(&options.endpoint)?.root();
    let uri = a.uri(&format!("{root}{}", a.locator.target()))?;
    let mut headers = a.read_headers()?;
    if let Some(token) = token(a, options)? {
        a.header(&mut headers, AUTHORIZATION, &format!("Bearer {token}"))?;
    }
    a.finish(uri, headers, a.follow_redirects(), true)
}

/// The token of the first source that has one: `HF_TOKEN` (or its alias), the file at
/// `HF_TOKEN_PATH`, `<HF_HOME>/token`, then with discovery only the default token cache.
/// `None` means anonymous.
fn token<'p>(a: &Attempt, options: &'p profile::HuggingFace) -> Result<Option<Cow<'p, str>>> {
    let settings = a.settings;
    if let Some(t) = &options.token {
        return Ok(Some(Cow::Borrowed(t)));
    }
    let mut files: Vec<PathBuf> = Vec::new();
    if let Some(file) = &options.token_path {
        files.push(settings.expand_home(file));
    }
    if let Some(home) = &options.home {
        files.push(settings.expand_home(home).join("token"));
    }
    if settings.discovery()
        && let Some(cache) = settings.cache_dir()
    {
        files.push(cache.join("huggingface").join("token"));
    }
    for file in files {
        if let Some(t) = read_token(a.locator, &file)? {
            return Ok(Some(Cow::Owned(t)));
        }
    }
    Ok(None)
}

/// The trimmed contents of a token file; `None` when it is missing or blank.
fn read_token(locator: &Locator, file: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(file) {
        Ok(text) => {
            let t = text.trim();
            Ok((!t.is_empty()).then(|| t.to_owned()))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::new(
            Status::Credentials,
            format!(
                "{}: cannot read Hugging Face token file '{}': {e}",
                locator.display(),
                file.display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::ByteRange;
    use super::super::test_support::{anonymous, header, pairs, prepare, settings};
    use super::*;
    use crate::config::Config;
    use crate::transport::RedirectPolicy;

    fn build(options: &[(&str, &str)], uri: &str) -> Result<Prepared> {
        prepare(
            &settings(options),
            &Locator::parse(uri).unwrap(),
            ByteRange::Span { first: 0, last: 9 },
            Some("\"e\""),
            anonymous(),
        )
    }

    fn auth(p: &Prepared) -> Option<&str> {
        header(p, "Authorization")
    }

    #[test]
    fn resolve_urls_encode_revision_and_path() {
        let p = build(&[], "hf://datasets/org/repo@v1/path/a b.bin").unwrap();
        assert_eq!(
            p.request.uri,
            "https://huggingface.co/datasets/org/repo/resolve/v1/path/a%20b.bin"
        );
        assert_eq!(
            pairs(&p),
            vec![
                ("range".to_owned(), "bytes=0-9".to_owned()),
                ("if-match".to_owned(), "\"e\"".to_owned()),
            ]
        );
        assert!(matches!(
            p.redirect,
            RedirectPolicy::Follow {
                same_origin_only: false,
                ..
            }
        ));
        let endpoint = [("HF_ENDPOINT", "hub.example.test//")];
        let p = build(&endpoint, "/vsihf/spaces/o/app@dev/x").unwrap();
        assert_eq!(
            p.request.uri,
            "https://hub.example.test/spaces/o/app/resolve/dev/x"
        );
        let p = build(&endpoint, "hf://o/m@a%b+c/f").unwrap();
        assert_eq!(
            p.request.uri,
            "https://hub.example.test/o/m/resolve/a%25b%2Bc/f"
        );
        let p = build(&[("HF_ENDPOINT", "http://127.0.0.1:8/")], "hf://o/m/x/y").unwrap();
        assert_eq!(p.request.uri, "http://127.0.0.1:8/o/m/resolve/main/x/y");
    }

    #[test]
    fn endpoints_with_a_query_fail() {
        let e = build(&[("HF_ENDPOINT", "https://h/?a")], "hf://o/m/f").unwrap_err();
        assert_eq!(e.status(), Status::Config);
        assert_eq!(
            e.message(),
            "/vsihf/o/m/f: HF_ENDPOINT cannot contain a query"
        );
    }

    #[test]
    fn token_sources_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tok");
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::write(&file, "  from-file\n").unwrap();
        std::fs::write(home.join("token"), "from-home\n").unwrap();
        let file_s = file.to_str().unwrap();
        let home_s = home.to_str().unwrap();
        let uri = "hf://o/m/f";

        let p = build(&[("HF_TOKEN", " t0 "), ("HF_TOKEN_PATH", file_s)], uri).unwrap();
        assert_eq!(auth(&p), Some("Bearer t0"));
        let p = build(&[("HUGGING_FACE_HUB_TOKEN", "alias")], uri).unwrap();
        assert_eq!(auth(&p), Some("Bearer alias"));
        let p = build(&[("HF_TOKEN_PATH", file_s), ("HF_HOME", home_s)], uri).unwrap();
        assert_eq!(auth(&p), Some("Bearer from-file"));
        let p = build(&[("HF_HOME", home_s)], uri).unwrap();
        assert_eq!(auth(&p), Some("Bearer from-home"));
        // A missing or blank file is no token: the next source, else anonymous.
        let missing = dir.path().join("none");
        let missing_s = missing.to_str().unwrap();
        let p = build(&[("HF_TOKEN_PATH", missing_s), ("HF_HOME", home_s)], uri).unwrap();
        assert_eq!(auth(&p), Some("Bearer from-home"));
        std::fs::write(&file, " \n").unwrap();
        let p = build(&[("HF_TOKEN_PATH", file_s)], uri).unwrap();
        assert_eq!(auth(&p), None);
        let p = build(&[("HF_TOKEN_PATH", missing_s)], uri).unwrap();
        assert_eq!(auth(&p), None);
        // Every attempt reads the file again.
        let s = settings(&[("HF_TOKEN_PATH", file_s)]);
        let l = Locator::parse(uri).unwrap();
        for t in ["one", "two"] {
            std::fs::write(&file, t).unwrap();
            let p = prepare(&s, &l, ByteRange::Suffix(1), None, anonymous()).unwrap();
            assert_eq!(auth(&p), Some(format!("Bearer {t}").as_str()));
        }
    }

    #[test]
    fn the_default_token_cache_needs_discovery() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(cache.join("huggingface")).unwrap();
        std::fs::write(cache.join("huggingface/token"), "cached\n").unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".cache/huggingface")).unwrap();
        std::fs::write(home.join(".cache/huggingface/token"), "in-home\n").unwrap();
        let l = Locator::parse("hf://o/m/f").unwrap();
        let token_with = |vars: &[(&str, &Path)]| {
            let vars = vars
                .iter()
                .map(|(n, p)| (n.to_string(), p.to_str().unwrap().to_string()));
            let s = Config::from_vars(vars).freeze().unwrap();
            let p = prepare(&s, &l, ByteRange::Suffix(1), None, anonymous()).unwrap();
            auth(&p).map(str::to_owned)
        };
        assert_eq!(
            token_with(&[("XDG_CACHE_HOME", &cache), ("HOME", &home)]).as_deref(),
            Some("Bearer cached")
        );
        assert_eq!(
            token_with(&[("HOME", &home)]).as_deref(),
            Some("Bearer in-home")
        );
        // The hermetic builder never looks there.
        assert_eq!(auth(&build(&[], "hf://o/m/f").unwrap()), None);
    }

    #[test]
    fn unreadable_token_files_fail_with_credentials() {
        let dir = tempfile::tempdir().unwrap();
        // A directory exists but cannot be read as a file.
        let e = build(
            &[("HF_TOKEN_PATH", dir.path().to_str().unwrap())],
            "hf://o/m/f",
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert!(
            e.message().starts_with(&format!(
                "/vsihf/o/m/f: cannot read Hugging Face token file '{}': ",
                dir.path().display()
            )),
            "{e}"
        );
    }

    #[test]
    fn configured_headers_cannot_set_authorization() {
        let e = build(
            &[("KARU_HTTP_HEADERS", "authorization: Bearer x")],
            "hf://o/m/f",
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::Config);
        let p = build(&[("KARU_HTTP_HEADERS", "X-A: 1")], "hf://o/m/f").unwrap();
        assert!(pairs(&p).contains(&("x-a".into(), "1".into())));
        assert!(matches!(
            p.redirect,
            RedirectPolicy::Follow {
                same_origin_only: true,
                ..
            }
        ));
    }
}
