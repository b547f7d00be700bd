//! Loads a synthetic mesh (`shoal_test_support::meshgen`) into a builder [`Replica`]
//! through the same path production takes: YAML → `parse_documents` → `Config` → JSON KV
//! entry → `apply`. Shared by the `build` bench and the builder's tests.

#![allow(dead_code)]

use bytes::Bytes;
use shoal_builder::replica::{Dirty, Replica};
use shoal_builder::snapshot::{Built, SnapshotBuilder};
use shoal_proto::config::Origin;
use shoal_proto::config::parse::parse_documents;
use shoal_proto::transport::{KvEntry, config_kv_key, encode_config};
use shoal_test_support::meshgen::{Mesh, MeshSpec, ServiceInfo};
use std::collections::HashMap;

/// The cluster every generated object belongs to.
pub const CLUSTER: &str = "Kubernetes";

/// `services` services of 10 endpoints over `namespaces` namespaces, with meshgen's
/// default fractions (half with a VirtualService, half with a DestinationRule, a
/// narrowing Sidecar in every namespace).
pub fn spec(services: usize, namespaces: usize) -> MeshSpec {
    MeshSpec {
        services,
        endpoints_per_service: 10,
        namespaces,
        ..MeshSpec::default()
    }
}

/// A mesh held as KV entries, able to produce the entries a file edit writes.
pub struct MeshKv {
    pub mesh: Mesh,
    /// KV key → current value, as ingest would have written them.
    pub values: HashMap<String, Bytes>,
    pub revision: u64,
}

/// (KV key, JSON value) of every object in one YAML file.
fn file_entries(path: &str, text: &str) -> Vec<(String, Bytes)> {
    parse_documents(path, text)
        .into_iter()
        .map(|r| {
            let mut c = r.expect("meshgen YAML parses").config;
            c.meta.origin = Origin::new(CLUSTER, "dir", "");
            let value = encode_config(&c).expect("config encodes");
            (config_kv_key(&c.meta.origin, &c.key()), Bytes::from(value))
        })
        .collect()
}

impl MeshKv {
    pub fn generate(spec: &MeshSpec) -> MeshKv {
        let mesh = Mesh::generate(spec);
        let mut values = HashMap::new();
        for (path, text) in &mesh.files {
            values.extend(file_entries(&path.to_string_lossy(), text));
        }
        MeshKv {
            mesh,
            values,
            revision: 0,
        }
    }

    /// Every entry, in key order, with revisions 1..=n.
    pub fn initial_entries(&mut self) -> Vec<KvEntry> {
        let mut keys: Vec<&String> = self.values.keys().collect();
        keys.sort();
        let entries: Vec<KvEntry> = keys
            .into_iter()
            .enumerate()
            .map(|(i, k)| KvEntry {
                key: k.clone(),
                value: Some(self.values[k].clone()),
                revision: i as u64 + 1,
            })
            .collect();
        self.revision = entries.len() as u64;
        entries
    }

    /// A replica holding every object, its dirty set taken (as after a first build).
    pub fn replica(&mut self) -> Replica {
        let mut replica = Replica::new();
        for e in self.initial_entries() {
            replica.apply(e).expect("entry applies");
        }
        replica.take_dirty();
        replica
    }

    /// The KV writes of rewriting one file: only objects whose value changed (ingest
    /// skips unchanged objects), at fresh revisions.
    pub fn edit(&mut self, path: &std::path::Path, text: &str) -> Vec<KvEntry> {
        let mut out = Vec::new();
        for (key, value) in file_entries(&path.to_string_lossy(), text) {
            if self.values.get(&key) == Some(&value) {
                continue;
            }
            self.values.insert(key.clone(), value.clone());
            self.revision += 1;
            out.push(KvEntry {
                key,
                value: Some(value),
                revision: self.revision,
            });
        }
        out
    }

    /// The writes of a VirtualService timeout change on `svc` (alternate `timeout`s so
    /// every call is a real change).
    pub fn vs_change(&mut self, svc: &ServiceInfo, timeout: &str) -> Vec<KvEntry> {
        let (path, text) = self.mesh.vs_change(svc, timeout);
        self.edit(&path, &text)
    }

    /// The writes of moving `svc`'s first endpoint to `address`.
    pub fn endpoint_change(&mut self, svc: &ServiceInfo, address: &str) -> Vec<KvEntry> {
        let (path, text) = self.mesh.endpoint_change(svc, address);
        self.edit(&path, &text)
    }
}

/// The first build of a loaded replica: every namespace.
pub fn full_build(replica: &Replica) -> (SnapshotBuilder, Built) {
    let mut builder = SnapshotBuilder::new();
    let built = builder
        .build(
            replica,
            Dirty {
                all: true,
                ..Dirty::default()
            },
            replica.revision(),
            0,
        )
        .expect("build")
        .expect("first build has chunks");
    (builder, built)
}

/// Applies `entries`, then builds what they dirtied.
pub fn apply_and_build(
    replica: &mut Replica,
    builder: &mut SnapshotBuilder,
    entries: Vec<KvEntry>,
) -> Option<Built> {
    for e in entries {
        replica.apply(e).expect("entry applies");
    }
    let dirty = replica.take_dirty();
    let version = replica.revision();
    builder.build(replica, dirty, version, 0).expect("build")
}

/// Bytes a build writes to the store.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    pub chunks: usize,
    pub pages: usize,
    pub manifest: usize,
}

impl Written {
    pub fn total(&self) -> usize {
        self.chunks + self.pages + self.manifest
    }
}

/// Bytes a build writes to the store: its new chunks, its new pages and its manifest.
pub fn written_bytes(built: &Built) -> Written {
    Written {
        chunks: built.new_chunks.iter().map(|(_, b)| b.len()).sum(),
        pages: built.new_pages.iter().map(|(_, b)| b.len()).sum(),
        manifest: built.manifest.encode().expect("manifest encodes").len(),
    }
}
