//! Path rules (spec 3.8): prefix canonicalization and segment-boundary matching.

use std::collections::BTreeMap;

use super::options::OptId;

/// Scheme rewrites applied to rule prefixes, in the order they are tried.
const SCHEMES: &[(&str, &str)] = &[
    ("s3://", "/vsis3/"),
    ("gs://", "/vsigs/"),
    ("az://", "/vsiaz/"),
    ("abfs://", "/vsiadls/"),
    ("hf://", "/vsihf/"),
    ("source://", "/vsisource/"),
];

/// Canonicalizes a path-rule prefix: `s3://` becomes `/vsis3/`, `gs://` `/vsigs/`, `az://`
/// `/vsiaz/`, `abfs://` `/vsiadls/`, `hf://` `/vsihf/` and `source://` `/vsisource/`.
/// Anything else (HTTP URLs, local paths, VSI paths) is kept as written.
///
/// The rewrite is a plain, case-sensitive prefix rewrite, as in the reference: no
/// percent-decoding and no locator parsing.
pub fn canonical_prefix(prefix: &str) -> String {
    for (scheme, vsi) in SCHEMES {
        if let Some(rest) = prefix.strip_prefix(scheme) {
            return format!("{vsi}{rest}");
        }
    }
    prefix.to_string()
}

/// True when `prefix` (already canonical) matches the canonical `path` at a segment
/// boundary: the path starts with the prefix and then ends, or the prefix ends in `/`, or the
/// next path character is `/`. An empty prefix matches nothing.
pub fn prefix_matches(prefix: &str, path: &str) -> bool {
    if prefix.is_empty() {
        return false;
    }
    match path.strip_prefix(prefix) {
        None => false,
        Some(rest) => rest.is_empty() || prefix.ends_with('/') || rest.starts_with('/'),
    }
}

/// One path rule: a canonical prefix and the options it defines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) prefix: String,
    pub(crate) values: BTreeMap<OptId, String>,
}

/// The value and prefix of the longest rule matching `path` that defines `id`.
///
/// A deeper rule lacking the option does not hide a shallower one that has it, because
/// only rules defining `id` compete.
pub(crate) fn lookup<'a>(rules: &'a [Rule], id: OptId, path: &str) -> Option<(&'a str, &'a str)> {
    rules
        .iter()
        .filter(|r| prefix_matches(&r.prefix, path))
        .filter_map(|r| r.values.get(&id).map(|v| (r.prefix.as_str(), v.as_str())))
        // Prefixes are unique after canonicalization, so lengths of matching prefixes of one
        // path are distinct: the maximum is unambiguous.
        .max_by_key(|(prefix, _)| prefix.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    #[test]
    fn cloud_schemes_become_vsi_prefixes_matched_at_segment_boundaries() {
        assert_eq!(canonical_prefix("s3://team/private"), "/vsis3/team/private");
        assert_eq!(canonical_prefix("abfs://fs/dir/"), "/vsiadls/fs/dir/");
        assert_eq!(
            canonical_prefix("https://example.com/data"),
            "https://example.com/data"
        );
        assert!(prefix_matches(
            "/vsis3/team/private",
            "/vsis3/team/private/x"
        ));
        assert!(!prefix_matches(
            "/vsis3/team/private",
            "/vsis3/team/private-copy/x"
        ));
    }

    proptest! {
        #[test]
        fn matching_is_at_segment_boundaries(
            prefix in "/vsis3/[a-z]{1,8}(/[a-z-]{1,8}){0,2}",
            next in "[a-z0-9.-]",
            rest in "[a-z/]{0,8}",
        ) {
            let below = format!("{prefix}/{rest}");
            let sibling = format!("{prefix}{next}{rest}");
            let with_slash = format!("{prefix}/");
            let under_slash = format!("{with_slash}{next}{rest}");
            prop_assert!(prefix_matches(&prefix, &prefix));
            prop_assert!(prefix_matches(&prefix, &below));
            prop_assert!(!prefix_matches(&prefix, &sibling));
            prop_assert!(prefix_matches(&with_slash, &under_slash));
            prop_assert!(!prefix_matches(&with_slash, &prefix));
        }
    }

    #[test]
    fn schemes_are_rewritten() {
        assert_eq!(canonical_prefix("s3://b/k"), "/vsis3/b/k");
        assert_eq!(canonical_prefix("gs://b"), "/vsigs/b");
        assert_eq!(canonical_prefix("az://acct/c"), "/vsiaz/acct/c");
        assert_eq!(canonical_prefix("abfs://fs/"), "/vsiadls/fs/");
        assert_eq!(canonical_prefix("hf://datasets/x"), "/vsihf/datasets/x");
        assert_eq!(canonical_prefix("source://org/repo"), "/vsisource/org/repo");
    }

    #[test]
    fn other_prefixes_are_kept() {
        for p in [
            "https://host/a",
            "http://host",
            "/data/local",
            "/vsis3/b",
            "/vsicurl/https://host/a",
            "S3://upper",
            "relative/path",
        ] {
            assert_eq!(canonical_prefix(p), p);
        }
    }

    #[test]
    fn segment_boundaries() {
        let p = "/vsis3/team/private";
        assert!(prefix_matches(p, "/vsis3/team/private"));
        assert!(prefix_matches(p, "/vsis3/team/private/x"));
        assert!(!prefix_matches(p, "/vsis3/team/private-copy/x"));
        assert!(!prefix_matches(p, "/vsis3/team/privatex"));
        assert!(!prefix_matches(p, "/vsis3/team"));
        assert!(prefix_matches("/vsis3/team/", "/vsis3/team/private"));
        // A prefix ending mid-segment with '/' semantics: the trailing '/' is the boundary.
        assert!(!prefix_matches("/vsis3/team/", "/vsis3/team"));
        assert!(prefix_matches("https://h/a", "https://h/a/b.bin"));
        assert!(!prefix_matches("", "/vsis3/x"));
        assert!(!prefix_matches("", ""));
    }

    #[test]
    fn longest_defining_rule_wins() {
        let rule = |prefix: &str, pairs: &[(OptId, &str)]| Rule {
            prefix: prefix.to_string(),
            values: pairs.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        };
        let rules = vec![
            rule("/vsis3/team", &[(1, "shallow"), (2, "only-shallow")]),
            rule("/vsis3/team/private", &[(1, "deep")]),
        ];
        assert_eq!(
            lookup(&rules, 1, "/vsis3/team/private/x"),
            Some(("/vsis3/team/private", "deep"))
        );
        assert_eq!(
            lookup(&rules, 2, "/vsis3/team/private/x"),
            Some(("/vsis3/team", "only-shallow"))
        );
        assert_eq!(
            lookup(&rules, 1, "/vsis3/team/private-copy/x"),
            Some(("/vsis3/team", "shallow"))
        );
        assert_eq!(lookup(&rules, 1, "/vsis3/other"), None);
        assert_eq!(lookup(&rules, 3, "/vsis3/team/private/x"), None);
    }
}
