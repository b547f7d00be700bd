//! Compiles Envoy's API descriptors, for config dumps in Envoy's own JSON
//! (`config_dump::json`): the `.proto` files the `envoy-types` crate ships (the ones its
//! Rust types were generated from), so the JSON names the fields of the very messages
//! the edge encodes.

use prost::Message;
use std::path::{Path, PathBuf};

/// What a config dump can hold: the admin dumps, the four resource types, and every
/// extension a `typed_config` may carry.
const ROOTS: [&str; 6] = [
    "envoy/admin/v3",
    "envoy/config/cluster/v3",
    "envoy/config/listener/v3",
    "envoy/config/route/v3",
    "envoy/config/endpoint/v3",
    "envoy/extensions",
];

/// The dependencies `data-plane-api` imports, as `envoy-types` ships them.
const INCLUDES: [&str; 8] = [
    "data-plane-api",
    "xds",
    "protoc-gen-validate",
    "googleapis",
    "cel-spec/proto",
    "client_model",
    "opentelemetry-proto",
    "ratelimit",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SHOAL_ENVOY_PROTO_DIR");
    let protos = proto_dir();
    let includes: Vec<PathBuf> = INCLUDES.iter().map(|d| protos.join(d)).collect();
    let api = protos.join("data-plane-api");
    let mut files = Vec::new();
    for root in ROOTS {
        walk(&api.join(root), &mut files);
    }
    let files: Vec<PathBuf> = files
        .into_iter()
        .filter_map(|f| f.strip_prefix(&api).ok().map(Path::to_path_buf))
        .collect();
    // `envoy.extensions.config.*` would capture the relative `config.core.v3.…` names of
    // every other extension compiled with it (protox resolves a name against the whole
    // pool, protoc against the file's imports): such files, and any other that fails in
    // company, are compiled alone.
    let (together, alone): (Vec<_>, Vec<_>) = files
        .iter()
        .partition(|f| !f.starts_with("envoy/extensions/config"));

    let mut set = compiler(&includes).unwrap_or_else(|e| panic!("{e}"));
    let mut retry = alone;
    for file in together {
        if set.open_file(file).is_err() {
            retry.push(file);
        }
    }
    // Encoded by protox itself: prost's `FileDescriptorSet` would drop the options it
    // does not know, `udpa.annotations.sensitive` among them (what redaction reads).
    let mut files = Files::default();
    files.add(&set.encode_file_descriptor_set());
    for file in retry {
        let mut own = compiler(&includes).unwrap_or_else(|e| panic!("{e}"));
        // Extensions Shoal never configures (today one: the dynamic forward proxy
        // cluster, whose relative names protox resolves differently from protoc). A
        // config dump shows such a message as its type and the reason.
        if own.open_file(file).is_ok() {
            files.add(&own.encode_file_descriptor_set());
        }
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("envoy_descriptors.bin"), files.encoded)
        .expect("writing the Envoy descriptors");
}

/// An encoded `FileDescriptorSet` built from others, each file once.
#[derive(Default)]
struct Files {
    names: std::collections::HashSet<String>,
    encoded: Vec<u8>,
}

impl Files {
    /// Adds the files of the encoded set `set` not held yet, their bytes as they are.
    fn add(&mut self, set: &[u8]) {
        let mut rest = set;
        while !rest.is_empty() {
            // Field 1 (`file`), length-delimited: tag 0x0a, a varint length, the bytes.
            let (tag, after_tag) = varint(rest);
            let (len, body) = varint(after_tag);
            assert_eq!(tag, 0x0a, "a FileDescriptorSet holds only files");
            let (file, next) = body.split_at(len as usize);
            let name = prost_types::FileDescriptorProto::decode(file)
                .expect("protox encodes valid descriptors")
                .name
                .unwrap_or_default();
            if self.names.insert(name) {
                self.encoded
                    .extend_from_slice(&rest[..rest.len() - next.len()]);
            }
            rest = next;
        }
    }
}

fn varint(bytes: &[u8]) -> (u64, &[u8]) {
    let mut value = 0u64;
    for (i, b) in bytes.iter().enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (value, &bytes[i + 1..]);
        }
    }
    panic!("a truncated varint in protox's output")
}

fn compiler(includes: &[PathBuf]) -> Result<protox::Compiler, protox::Error> {
    let mut c = protox::Compiler::new(includes)?;
    c.include_imports(true).include_source_info(false);
    Ok(c)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
}

/// `envoy-types`' `proto/` folder: `SHOAL_ENVOY_PROTO_DIR`, else the locked version in
/// cargo's registry (or a `vendor/` folder beside the workspace).
fn proto_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SHOAL_ENVOY_PROTO_DIR") {
        return PathBuf::from(dir);
    }
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let workspace = manifest.parent().unwrap_or(&manifest).to_path_buf();
    let lock = workspace.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let version = std::fs::read_to_string(&lock)
        .ok()
        .and_then(|l| locked_version(&l, "envoy-types"));
    let mut candidates = vec![workspace.join("vendor/envoy-types/proto")];
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(home) = cargo_home
        && let Ok(registries) = std::fs::read_dir(home.join("registry/src"))
    {
        let mut found: Vec<PathBuf> = registries
            .filter_map(|r| r.ok())
            .flat_map(|r| std::fs::read_dir(r.path()).into_iter().flatten())
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                match &version {
                    Some(v) => name == format!("envoy-types-{v}"),
                    None => name.starts_with("envoy-types-"),
                }
            })
            .map(|p| p.join("proto"))
            .collect();
        found.sort();
        candidates.extend(found.into_iter().rev());
    }
    candidates
        .into_iter()
        .find(|c| c.join("data-plane-api/envoy").is_dir())
        .unwrap_or_else(|| {
            panic!(
                "cannot find the .proto files of envoy-types {} in cargo's registry; set \
                 SHOAL_ENVOY_PROTO_DIR to that crate's proto/ folder",
                version.as_deref().unwrap_or("(any version)")
            )
        })
}

/// The version `Cargo.lock` pins for `package`.
fn locked_version(lock: &str, package: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{package}\"") {
            let next = lines.next()?;
            return next
                .trim()
                .strip_prefix("version = \"")?
                .strip_suffix('"')
                .map(str::to_string);
        }
    }
    None
}
