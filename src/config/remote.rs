//! Remotes: `vitgraph.ron`'s `remotes: {"lab": Remote(path: "…")}` or
//! `{"bucket": Remote(url: "s3://bucket/prefix", endpoint: "…")}`, the
//! places `vitgraph push` and `pull` carry runs to and from.

use serde::Deserialize;

/// One remote: a folder (`path`) or an S3-compatible bucket (`url`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSpec {
    /// A folder (a shared or network file system); relative to the
    /// workspace root when relative.
    #[serde(default)]
    pub path: String,
    /// `s3://BUCKET` or `s3://BUCKET/PREFIX`: S3-compatible object storage
    /// (needs a vitgraph built with the `s3` feature). Credentials come from
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`.
    #[serde(default)]
    pub url: String,
    /// The service's address when it is not AWS (`http://127.0.0.1:9000`);
    /// `AWS_ENDPOINT_URL` otherwise, or AWS itself.
    #[serde(default)]
    pub endpoint: String,
    /// The bucket's region; `AWS_REGION` otherwise, or `us-east-1`.
    #[serde(default)]
    pub region: String,
    /// `ReadWrite` (the default) or `Read`: this workspace pulls from it
    /// and never pushes.
    #[serde(default)]
    pub mode: RemoteMode,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum RemoteMode {
    #[default]
    ReadWrite,
    Read,
}

/// What a remote is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteKind<'a> {
    Dir(&'a str),
    S3 {
        url: &'a str,
        endpoint: &'a str,
        region: &'a str,
    },
}

impl RemoteSpec {
    /// What the remote is; `check` has said it is one thing.
    pub fn kind(&self) -> RemoteKind<'_> {
        if self.url.is_empty() {
            RemoteKind::Dir(&self.path)
        } else {
            RemoteKind::S3 {
                url: &self.url,
                endpoint: &self.endpoint,
                region: &self.region,
            }
        }
    }

    /// Why the spec does not name one remote: (what is wrong, the fix).
    pub fn check(&self) -> Result<(), (String, String)> {
        match (self.path.is_empty(), self.url.is_empty()) {
            (true, true) => Err((
                "names neither `path` nor `url`".into(),
                "give a folder, `Remote(path: \"/shared/vitgraph-runs\")`, or a bucket, `Remote(url: \"s3://bucket/prefix\")`".into(),
            )),
            (false, false) => Err((
                "names both `path` and `url`".into(),
                "a remote is a folder or a bucket: keep one".into(),
            )),
            (false, true) if !self.endpoint.is_empty() || !self.region.is_empty() => Err((
                "gives `endpoint` or `region` to a folder".into(),
                "those belong to an S3 remote (`url: \"s3://…\"`); leave them out".into(),
            )),
            (true, false) if !self.url.starts_with("s3://") || self.url.len() <= "s3://".len() => {
                Err((
                    format!("`url: \"{}\"` is not an S3 address", self.url),
                    "write `s3://BUCKET` or `s3://BUCKET/PREFIX`".into(),
                ))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As `vitgraph.ron` writes it (the loader accepts `Remote(…)`).
    fn spec(text: &str) -> RemoteSpec {
        ron::from_str(&text.replace("Remote(", "RemoteSpec(")).unwrap()
    }

    #[test]
    fn a_remote_is_a_folder_or_a_bucket() {
        assert_eq!(spec(r#"Remote(path: "/x")"#).kind(), RemoteKind::Dir("/x"));
        let s3 = spec(r#"Remote(url: "s3://b/p", endpoint: "http://127.0.0.1:9000")"#);
        assert!(s3.check().is_ok());
        assert_eq!(
            s3.kind(),
            RemoteKind::S3 {
                url: "s3://b/p",
                endpoint: "http://127.0.0.1:9000",
                region: ""
            }
        );
        for (bad, says) in [
            (r#"Remote()"#, "neither"),
            (r#"Remote(path: "/x", url: "s3://b")"#, "both"),
            (r#"Remote(path: "/x", endpoint: "http://h")"#, "to a folder"),
            (r#"Remote(url: "https://b")"#, "not an S3 address"),
            (r#"Remote(url: "s3://")"#, "not an S3 address"),
        ] {
            let (what, _) = spec(bad).check().unwrap_err();
            assert!(what.contains(says), "{bad}: {what}");
        }
    }
}
