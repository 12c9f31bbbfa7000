//! `AZURE_STORAGE_CONNECTION_STRING` (spec §3.6): `Key=Value` pairs separated by `;`, keys
//! case-insensitive. Only the keys karu honors are kept; others (`QueueEndpoint`, ...) are
//! ignored as Azure's own tools do.

/// The honored parts of a connection string; absent keys are empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ConnectionString {
    /// `AccountName`.
    pub(crate) account: String,
    /// `AccountKey` (base64).
    pub(crate) key: String,
    /// `SharedAccessSignature`.
    pub(crate) sas: String,
    /// `BlobEndpoint`.
    pub(crate) blob_endpoint: String,
    /// `DfsEndpoint`.
    pub(crate) dfs_endpoint: String,
    /// `EndpointSuffix`.
    pub(crate) suffix: String,
    /// `DefaultEndpointsProtocol`.
    pub(crate) protocol: String,
}

impl ConnectionString {
    /// Parses `text`. Errors say what is wrong without echoing values (they hold secrets).
    /// Empty segments (a trailing `;`) are allowed; a segment without `=`, with an empty key,
    /// or a key given twice is malformed.
    pub(crate) fn parse(text: &str) -> Result<ConnectionString, String> {
        let mut out = ConnectionString::default();
        let mut seen: Vec<String> = Vec::new();
        for (i, segment) in text.split(';').enumerate() {
            if segment.trim().is_empty() {
                continue;
            }
            // Values (keys, SAS tokens) contain '=' themselves: split at the first one.
            let Some((key, value)) = segment.split_once('=') else {
                return Err(format!("segment {} has no '='", i + 1));
            };
            let key = key.trim();
            if key.is_empty() {
                return Err(format!("segment {} has an empty key", i + 1));
            }
            let lower = key.to_ascii_lowercase();
            if seen.contains(&lower) {
                return Err(format!("key '{key}' appears more than once"));
            }
            seen.push(lower.clone());
            let value = value.trim().to_owned();
            let slot = match lower.as_str() {
                "accountname" => &mut out.account,
                "accountkey" => &mut out.key,
                "sharedaccesssignature" => &mut out.sas,
                "blobendpoint" => &mut out.blob_endpoint,
                "dfsendpoint" => &mut out.dfs_endpoint,
                "endpointsuffix" => &mut out.suffix,
                "defaultendpointsprotocol" => &mut out.protocol,
                _ => continue,
            };
            *slot = value;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_case_insensitive_and_values_keep_their_equals_signs() {
        let c = ConnectionString::parse(
            "defaultendpointsprotocol=http; ACCOUNTNAME=dev ;AccountKey=a2V5==;\
             SharedAccessSignature=sv=2021&sig=x%3D;BlobEndpoint=http://127.0.0.1:1/dev;\
             DfsEndpoint=http://d;EndpointSuffix=example.test;QueueEndpoint=q;",
        )
        .unwrap();
        assert_eq!(
            c,
            ConnectionString {
                account: "dev".into(),
                key: "a2V5==".into(),
                sas: "sv=2021&sig=x%3D".into(),
                blob_endpoint: "http://127.0.0.1:1/dev".into(),
                dfs_endpoint: "http://d".into(),
                suffix: "example.test".into(),
                protocol: "http".into(),
            }
        );
        assert_eq!(
            ConnectionString::parse("").unwrap(),
            ConnectionString::default()
        );
    }

    #[test]
    fn malformed_strings_name_the_problem_not_the_secret() {
        let cases = [
            ("AccountName=a;justasecret", "segment 2 has no '='"),
            ("=x;AccountName=a", "segment 1 has an empty key"),
            (
                "AccountKey=a2V5;accountkey=b",
                "key 'accountkey' appears more than once",
            ),
        ];
        for (text, want) in cases {
            let err = ConnectionString::parse(text).unwrap_err();
            assert_eq!(err, want);
            assert!(!err.contains("justasecret") && !err.contains("a2V5"));
        }
    }
}
