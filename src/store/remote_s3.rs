//! S3-compatible remotes (`Remote(url: "s3://bucket/prefix")`): the same
//! layout as a folder's (`runs/<key>.json`, `objects/<2 hex>/<62 hex>`)
//! under the prefix, written through the `object_store` crate.
//!
//! Every write is put-if-absent (`If-None-Match: *`; a second writer of
//! the same object gets `412 Precondition Failed`, which counts as
//! written); a PUT that returned has its bytes stored durably, so the
//! records go up only after every object's PUT has returned. There is no
//! `tmp/`: an object is either wholly there or not at all. Objects are
//! sent 16 at a time; each is read into memory and checked against its
//! name before it is sent.
//!
//! Built only with the `s3` cargo feature; without it a bucket remote is
//! an error that says how to get one.

use crate::store::error::StoreError;
#[cfg(not(feature = "s3"))]
use crate::store::remote_dir::Backend;

#[cfg(not(feature = "s3"))]
pub(super) fn open(
    name: &str,
    url: &str,
    _: &str,
    _: &str,
) -> Result<Box<dyn Backend>, StoreError> {
    Err(StoreError::Remote {
        name: name.to_owned(),
        path: url.into(),
        detail: "this vitgraph was built without S3 support".into(),
        help: "build it with `cargo build --release --features s3` (or `scripts/env.sh`'s `VITGRAPH_FEATURES` plus `s3`), or use a folder remote (`Remote(path: …)`)".into(),
    })
}

#[cfg(feature = "s3")]
pub(super) use imp::open;

#[cfg(feature = "s3")]
mod imp {
    use std::collections::HashMap;
    use std::io::{self, Read};
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::SystemTime;

    use futures::{StreamExt, TryStreamExt};
    use object_store::aws::AmazonS3Builder;
    use object_store::path::Path as Key;
    use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

    use super::StoreError;
    use crate::hash::ContentHash;
    use crate::store::arrival::Checked;
    use crate::store::remote_dir::{
        hash_of_name, mismatch, object_name, record_name, Area, Backend, Listed,
    };

    /// Objects sent (or asked about) at once.
    const IN_FLIGHT: usize = 16;

    struct S3Remote {
        url: String,
        store: Arc<dyn ObjectStore>,
        /// The prefix under the bucket ("" for none), without slashes at
        /// either end.
        prefix: String,
        runtime: tokio::runtime::Runtime,
    }

    /// The remote `name` at `url` (`s3://bucket[/prefix]`); `endpoint` and
    /// `region` when not empty, the `AWS_*` variables otherwise.
    pub(in crate::store) fn open(
        name: &str,
        url: &str,
        endpoint: &str,
        region: &str,
    ) -> Result<Box<dyn Backend>, StoreError> {
        let fail = |detail: String| StoreError::Remote {
            name: name.to_owned(),
            path: url.into(),
            detail,
            help: "check `url`, `endpoint` and `region` in `vitgraph.ron`'s `remotes`".into(),
        };
        let rest = url.strip_prefix("s3://").unwrap_or(url);
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if !endpoint.is_empty() {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        if !region.is_empty() {
            builder = builder.with_region(region);
        }
        let store = builder.build().map_err(|e| fail(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(format!("cannot start its client ({e})")))?;
        Ok(Box::new(S3Remote {
            url: url.trim_end_matches('/').to_owned(),
            store: Arc::new(store),
            prefix: prefix.trim_matches('/').to_owned(),
            runtime,
        }))
    }

    /// An `object_store` error as an `io::Error` of the kind the remote's
    /// callers tell apart.
    fn io_error(e: object_store::Error) -> io::Error {
        let kind = match &e {
            object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
            object_store::Error::AlreadyExists { .. } => io::ErrorKind::AlreadyExists,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e.to_string())
    }

    impl S3Remote {
        fn key(&self, name: &str) -> Key {
            match self.prefix.as_str() {
                "" => Key::from(name),
                p => Key::from(format!("{p}/{name}")),
            }
        }

        /// A key's name under the prefix.
        fn name_of(&self, key: &Key) -> String {
            let full = key.as_ref();
            match self.prefix.as_str() {
                "" => full.to_owned(),
                p => full
                    .strip_prefix(p)
                    .map(|r| r.trim_start_matches('/'))
                    .unwrap_or(full)
                    .to_owned(),
            }
        }

        /// Writes `bytes` at `name` unless something is there; whether it
        /// was new.
        async fn put_if_absent(&self, name: &str, bytes: Vec<u8>) -> io::Result<bool> {
            let opts = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            match self
                .store
                .put_opts(&self.key(name), PutPayload::from(bytes), opts)
                .await
            {
                Ok(_) => Ok(true),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                Err(e) => Err(io_error(e)),
            }
        }
    }

    /// A local object's bytes, checked against its name.
    fn read_checked(hash: &ContentHash, local: &PathBuf) -> io::Result<Vec<u8>> {
        let mut reader = Checked::new(std::fs::File::open(local)?);
        let mut bytes = Vec::new();
        reader.read_to_end(&mut bytes)?;
        if reader.hasher.finalize().as_bytes() != &hash.0 {
            return Err(mismatch(local));
        }
        Ok(bytes)
    }

    impl Backend for S3Remote {
        fn location(&self) -> String {
            self.url.clone()
        }

        fn location_of(&self, name: &str) -> String {
            format!("{}/{name}", self.url)
        }

        fn exists(&self) -> bool {
            // A bucket that answers a listing exists.
            self.runtime.block_on(async {
                let prefix = self.key("runs");
                let mut listing = self.store.list(Some(&prefix));
                !matches!(listing.next().await, Some(Err(_)))
            })
        }

        fn prepare_write(&self) -> io::Result<()> {
            Ok(())
        }

        fn list(&self, area: Area) -> io::Result<Vec<Listed>> {
            if area == Area::Tmp {
                return Ok(Vec::new());
            }
            let prefix = self.key(area.dir());
            let metas: Vec<object_store::ObjectMeta> = self
                .runtime
                .block_on(self.store.list(Some(&prefix)).try_collect())
                .map_err(io_error)?;
            Ok(metas
                .into_iter()
                .map(|m| {
                    let name = self.name_of(&m.location);
                    Listed {
                        hash: hash_of_name(&name),
                        name,
                        size: m.size,
                        modified: Some(SystemTime::from(m.last_modified)),
                    }
                })
                .filter(|l| area != Area::Runs || l.name.ends_with(".json"))
                .collect())
        }

        fn read(&self, name: &str) -> io::Result<Vec<u8>> {
            self.runtime.block_on(async {
                let got = self.store.get(&self.key(name)).await.map_err(io_error)?;
                Ok(got.bytes().await.map_err(io_error)?.to_vec())
            })
        }

        fn open(&self, name: &str) -> io::Result<Box<dyn Read + '_>> {
            Ok(Box::new(io::Cursor::new(self.read(name)?)))
        }

        fn object_sizes(&self, hashes: &[ContentHash]) -> io::Result<HashMap<ContentHash, u64>> {
            if hashes.is_empty() {
                return Ok(HashMap::new());
            }
            // One listing beats a question per object beyond a few pages.
            let listed: HashMap<ContentHash, u64> = self
                .list(Area::Objects)?
                .into_iter()
                .filter_map(|l| Some((l.hash?, l.size)))
                .collect();
            Ok(hashes
                .iter()
                .filter_map(|h| Some((*h, *listed.get(h)?)))
                .collect())
        }

        fn touch_objects(&self, _: &[ContentHash]) {
            // An object's time is when it was written: S3 cannot touch.
        }

        fn put_objects(&self, objects: &[(ContentHash, PathBuf)]) -> io::Result<(usize, u64)> {
            self.runtime.block_on(async {
                let sent: Vec<Option<u64>> = futures::stream::iter(objects)
                    .map(|(hash, local)| async move {
                        let bytes = read_checked(hash, local)?;
                        let size = bytes.len() as u64;
                        let new = self.put_if_absent(&object_name(hash), bytes).await?;
                        Ok::<_, io::Error>(new.then_some(size))
                    })
                    .buffer_unordered(IN_FLIGHT)
                    .try_collect()
                    .await?;
                let added = sent.iter().flatten().count();
                Ok((added, sent.iter().flatten().sum()))
            })
        }

        fn put_records(&self, records: &[(ContentHash, Vec<u8>)]) -> io::Result<usize> {
            self.runtime.block_on(async {
                let new: Vec<bool> = futures::stream::iter(records)
                    .map(|(key, json)| async move {
                        self.put_if_absent(&record_name(key), json.clone()).await
                    })
                    .buffer_unordered(IN_FLIGHT)
                    .try_collect()
                    .await?;
                Ok(new.into_iter().filter(|n| *n).count())
            })
        }

        fn remove(&self, name: &str) -> io::Result<()> {
            self.runtime.block_on(async {
                match self.store.delete(&self.key(name)).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(io_error(e)),
                }
            })
        }
    }
}
