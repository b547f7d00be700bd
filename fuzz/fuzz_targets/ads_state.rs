//! A proxy's requests, structure-aware, through the SotW and Delta per-stream state
//! machines (`edge/src/ads/{sotw,delta,sent,limits}.rs`, `delta/known.rs`), interleaved
//! with snapshot changes, generation failures and pushes, as a stream task drives them.
//!
//! Type URLs come from the served set plus junk; names from a small pool (so requests
//! meet the resources that exist) plus anything; nonces echo what the stream sent, an
//! older one, or junk; a reconnecting Delta proxy claims versions in the edge's format or
//! junk. Besides not panicking, after every step:
//!
//! - a response is of the type asked or pushed, carries a nonce never used before on the
//!   stream, and names each resource once (Delta: never both sent and removed);
//! - the stream keeps state only for served types, for no more names than its limit, and
//!   holds no more resources per type than exist plus what the proxy itself claimed.

#![no_main]

use arbitrary::Arbitrary;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use libfuzzer_sys::fuzz_target;
use shoal_edge::ads::status::MAX_PROXY_TEXT;
use shoal_edge::ads::{
    DeltaStream, PushScope, ResourceSource, SotwRequest, SotwStream, TypeStatus,
};
use shoal_edge::proxy::{Proxy, from_node};
use shoal_edge::xds::{GenerateError, XdsResource};
use shoal_proto::xds::types::PUSH_ORDER;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

const NAMES: [&str; 8] = [
    "outbound|80||a.shop.svc.cluster.local",
    "outbound|80||b.shop.svc.cluster.local",
    "outbound|443||a.shop.svc.cluster.local",
    "0.0.0.0_80",
    "80",
    "kubernetes://cert",
    "default",
    "",
];
const HOSTS: [&str; 3] = ["a.shop.svc.cluster.local", "b.shop.svc.cluster.local", "c"];

#[derive(Arbitrary, Debug)]
enum TypeSel {
    Served(u8),
    Junk(String),
    Empty,
}

impl TypeSel {
    fn url(&self) -> String {
        match self {
            TypeSel::Served(i) => PUSH_ORDER[usize::from(*i) % PUSH_ORDER.len()].to_string(),
            TypeSel::Junk(s) => s.clone(),
            TypeSel::Empty => String::new(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum NameSel {
    Pool(u8),
    Star,
    Any(String),
}

impl NameSel {
    fn name(&self) -> String {
        match self {
            NameSel::Pool(i) => NAMES[usize::from(*i) % NAMES.len()].to_string(),
            NameSel::Star => "*".to_string(),
            NameSel::Any(s) => s.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum NonceSel {
    Empty,
    /// The last nonce the stream sent for the type.
    Latest,
    /// One sent earlier on the stream.
    Older(u8),
    Junk(String),
}

#[derive(Arbitrary, Debug)]
enum ClaimSel {
    /// The version this edge would give the resource now, from snapshot `u8`.
    Current(u8),
    /// A bare hash, as older edges sent.
    Bare,
    Junk(String),
}

/// A proxy's own text (NACK message, version): short, or long enough to pass the bound
/// a stream keeps of it.
#[derive(Arbitrary, Debug)]
enum Text {
    Plain(String),
    Long(char, u8),
}

impl Text {
    fn text(&self) -> String {
        match self {
            Text::Plain(s) => s.clone(),
            Text::Long(c, n) => c.to_string().repeat(usize::from(*n) * 64),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    Sotw {
        ty: TypeSel,
        names: Vec<NameSel>,
        nonce: NonceSel,
        version: Option<Text>,
        error: Option<Text>,
    },
    Delta {
        ty: TypeSel,
        subscribe: Vec<NameSel>,
        unsubscribe: Vec<NameSel>,
        nonce: NonceSel,
        error: Option<Text>,
    },
    /// The Delta proxy reconnects claiming versions; then asks for `ty`.
    DeltaReconnect {
        ty: TypeSel,
        subscribe: Vec<NameSel>,
        claims: Vec<(NameSel, ClaimSel)>,
    },
    SotwReconnect,
    Set {
        ty: u8,
        name: u8,
        content: u8,
    },
    Remove {
        ty: u8,
        name: u8,
    },
    /// Generation of the type fails (or works again).
    Fail {
        ty: u8,
        on: bool,
    },
    PushFull,
    PushEndpoints(Option<Vec<u8>>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    node_id: Option<String>,
    max_names: u8,
    ops: Vec<Op>,
}

/// Resources by type, as a snapshot holds them; every call answered from it.
#[derive(Default)]
struct Source {
    version: u64,
    by_type: HashMap<&'static str, BTreeMap<String, Arc<XdsResource>>>,
    failing: HashSet<&'static str>,
}

impl ResourceSource for Source {
    fn version(&self) -> u64 {
        self.version
    }

    fn resources(
        &self,
        type_url: &str,
        _proxy: &Proxy,
        names: &[String],
    ) -> Result<Vec<Arc<XdsResource>>, GenerateError> {
        assert!(
            PUSH_ORDER.contains(&type_url),
            "generating unserved {type_url:?}"
        );
        if self.failing.contains(type_url) {
            return Err(GenerateError::Invalid {
                resource: type_url.to_string(),
                reason: "failing on purpose".to_string(),
            });
        }
        let Some(all) = self.by_type.get(type_url) else {
            return Ok(Vec::new());
        };
        Ok(if names.is_empty() {
            all.values().cloned().collect()
        } else {
            let unique: BTreeSet<&String> = names.iter().collect();
            unique
                .into_iter()
                .filter_map(|n| all.get(n).cloned())
                .collect()
        })
    }
}

fn served(i: u8) -> &'static str {
    PUSH_ORDER[usize::from(i) % PUSH_ORDER.len()]
}

/// What one stream sent, per type, and the checks every reply passes.
#[derive(Default)]
struct Seen {
    nonces: HashSet<String>,
    sent: HashMap<String, Vec<String>>,
}

impl Seen {
    fn nonce(&self, ty: &str, sel: &NonceSel) -> String {
        let sent = self.sent.get(ty).map(Vec::as_slice).unwrap_or_default();
        match sel {
            NonceSel::Empty => String::new(),
            NonceSel::Latest => sent.last().cloned().unwrap_or_default(),
            NonceSel::Older(i) if !sent.is_empty() => sent[usize::from(*i) % sent.len()].clone(),
            NonceSel::Older(_) => String::new(),
            NonceSel::Junk(s) => s.clone(),
        }
    }

    fn response(&mut self, ty: &str, nonce: &str, names: impl Iterator<Item = String>) {
        assert!(
            self.nonces.insert(nonce.to_string()),
            "nonce {nonce:?} sent twice"
        );
        let sent = self.sent.entry(ty.to_string()).or_default();
        sent.push(nonce.to_string());
        // The last few are enough for stale-nonce cases.
        if sent.len() > 8 {
            sent.remove(0);
        }
        let mut unique = HashSet::new();
        for n in names {
            assert!(
                unique.insert(n.clone()),
                "{ty}: {n:?} twice in one response"
            );
        }
    }
}

/// The bounds a stream's state keeps, whatever it was sent.
fn check_state(status: &[Arc<TypeStatus>], max_names: usize, existing: usize, claimed: usize) {
    let subscribed: usize = status.iter().map(|s| s.subscribed()).sum();
    assert!(
        subscribed <= max_names,
        "{subscribed} names held, limit {max_names}"
    );
    for s in status {
        assert!(
            PUSH_ORDER.contains(&&*s.type_url),
            "state kept for unserved {:?}",
            s.type_url
        );
        assert!(
            s.resources <= existing + claimed,
            "{}: {} resources held, {existing} exist and {claimed} were claimed",
            s.type_url,
            s.resources
        );
        // What the proxy wrote is kept bounded.
        let nack = s.nack.as_ref().map_or(0, |n| n.message.len());
        assert!(
            nack <= MAX_PROXY_TEXT + 64,
            "a NACK message of {nack} bytes kept"
        );
        assert!(s.version_acked.len() <= MAX_PROXY_TEXT + 64);
    }
}

fn error_detail(error: &Option<Text>) -> Option<RpcStatus> {
    error.as_ref().map(|message| RpcStatus {
        code: 3,
        message: message.text(),
        details: Vec::new(),
    })
}

fuzz_target!(|input: Input| {
    let node = Node {
        id: input
            .node_id
            .unwrap_or_else(|| "sidecar~10.0.0.1~web-1.shop~shop.svc.cluster.local".into()),
        ..Default::default()
    };
    let proxy = from_node(Some(&node), Default::default()).unwrap_or_else(|_| {
        let node = Node {
            id: "sidecar~10.0.0.1~web-1.shop~shop.svc.cluster.local".into(),
            ..Default::default()
        };
        from_node(Some(&node), Default::default()).unwrap()
    });
    let max_names = 1 + usize::from(input.max_names % 16);
    let mut src = Source {
        version: 1,
        ..Default::default()
    };
    let mut sotw = SotwStream::new(proxy.clone()).with_max_names(max_names);
    let mut delta = DeltaStream::new(proxy.clone()).with_max_names(max_names);
    let (mut sotw_seen, mut delta_seen) = (Seen::default(), Seen::default());
    // Names a Delta proxy claimed since it (re)connected: state it may make the edge keep.
    let mut claimed = 0usize;

    for op in input.ops.iter().take(64) {
        match op {
            Op::Sotw {
                ty,
                names,
                nonce,
                version,
                error,
            } => {
                let type_url = ty.url();
                let req = DiscoveryRequest {
                    type_url: type_url.clone(),
                    resource_names: names.iter().take(32).map(NameSel::name).collect(),
                    response_nonce: sotw_seen.nonce(&type_url, nonce),
                    version_info: version.as_ref().map(Text::text).unwrap_or_default(),
                    error_detail: error_detail(error),
                    ..Default::default()
                };
                match sotw.on_request(&src, &SotwRequest::from(req)) {
                    Ok(reply) => {
                        for r in &reply.responses {
                            assert_eq!(r.type_url, type_url);
                            sotw_seen.response(
                                &r.type_url,
                                &r.nonce,
                                r.resources.iter().map(|r| r.name.clone()),
                            );
                        }
                    }
                    // The stream is closed with a status; the proxy reconnects.
                    Err(_) => {
                        sotw = SotwStream::new(proxy.clone()).with_max_names(max_names);
                        sotw_seen = Seen::default();
                    }
                }
            }
            Op::Delta {
                ty,
                subscribe,
                unsubscribe,
                nonce,
                error,
            } => {
                let type_url = ty.url();
                let req = DeltaDiscoveryRequest {
                    type_url: type_url.clone(),
                    resource_names_subscribe: subscribe
                        .iter()
                        .take(32)
                        .map(NameSel::name)
                        .collect(),
                    resource_names_unsubscribe: unsubscribe
                        .iter()
                        .take(32)
                        .map(NameSel::name)
                        .collect(),
                    response_nonce: delta_seen.nonce(&type_url, nonce),
                    error_detail: error_detail(error),
                    ..Default::default()
                };
                delta_request(&mut delta, &mut delta_seen, &src, &req, &type_url, || {
                    DeltaStream::new(proxy.clone()).with_max_names(max_names)
                });
            }
            Op::DeltaReconnect {
                ty,
                subscribe,
                claims,
            } => {
                delta = DeltaStream::new(proxy.clone()).with_max_names(max_names);
                delta_seen = Seen::default();
                let type_url = ty.url();
                let current = src.by_type.get(type_url.as_str());
                let initial: HashMap<String, String> = claims
                    .iter()
                    .take(32)
                    .map(|(name, claim)| {
                        let name = name.name();
                        let hash = current.and_then(|c| c.get(&name)).map_or(0, |r| r.hash);
                        let version = match claim {
                            ClaimSel::Current(snapshot) => format!("{hash:016x}@{snapshot}"),
                            ClaimSel::Bare => format!("{hash:016x}"),
                            ClaimSel::Junk(s) => s.clone(),
                        };
                        (name, version)
                    })
                    .collect();
                claimed = initial.len();
                let req = DeltaDiscoveryRequest {
                    type_url: type_url.clone(),
                    resource_names_subscribe: subscribe
                        .iter()
                        .take(32)
                        .map(NameSel::name)
                        .collect(),
                    initial_resource_versions: initial,
                    ..Default::default()
                };
                delta_request(&mut delta, &mut delta_seen, &src, &req, &type_url, || {
                    DeltaStream::new(proxy.clone()).with_max_names(max_names)
                });
            }
            Op::SotwReconnect => {
                sotw = SotwStream::new(proxy.clone()).with_max_names(max_names);
                sotw_seen = Seen::default();
            }
            Op::Set { ty, name, content } => {
                let name = NAMES[usize::from(*name) % NAMES.len()].to_string();
                let ty = served(*ty);
                let r = XdsResource::new(name.clone(), ty, vec![*content]);
                src.by_type.entry(ty).or_default().insert(name, Arc::new(r));
                src.version += 1;
            }
            Op::Remove { ty, name } => {
                if let Some(m) = src.by_type.get_mut(served(*ty)) {
                    m.remove(NAMES[usize::from(*name) % NAMES.len()]);
                }
                src.version += 1;
            }
            Op::Fail { ty, on } => {
                if *on {
                    src.failing.insert(served(*ty));
                } else {
                    src.failing.remove(served(*ty));
                }
            }
            Op::PushFull | Op::PushEndpoints(_) => {
                let scope = match op {
                    Op::PushEndpoints(Some(hosts)) => PushScope::Endpoints(Some(
                        hosts
                            .iter()
                            .take(4)
                            .map(|h| HOSTS[usize::from(*h) % HOSTS.len()].to_string())
                            .collect(),
                    )),
                    Op::PushEndpoints(None) => PushScope::Endpoints(None),
                    _ => PushScope::Full,
                };
                let types: Vec<&str> = scope.types().collect();
                for ty in &types {
                    if let Ok(Some(r)) = sotw.push_type(&src, ty, &scope) {
                        assert_eq!(&r.type_url, ty);
                        sotw_seen.response(
                            &r.type_url,
                            &r.nonce,
                            r.resources.iter().map(|r| r.name.clone()),
                        );
                    }
                    if let Ok(Some(r)) = delta.push_type(&src, ty, &scope) {
                        assert_eq!(&r.type_url, ty);
                        check_delta(
                            &r.resources
                                .iter()
                                .map(|r| r.resource.name.clone())
                                .collect::<Vec<_>>(),
                            &r.removed_resources,
                        );
                        delta_seen.response(
                            &r.type_url,
                            &r.nonce,
                            r.resources.iter().map(|r| r.resource.name.clone()),
                        );
                    }
                }
            }
        }
        check_state(&sotw.status(), max_names, NAMES.len(), 0);
        check_state(&delta.status(), max_names, NAMES.len(), claimed);
    }
});

fn check_delta(sent: &[String], removed: &[String]) {
    let sent: HashSet<&String> = sent.iter().collect();
    let mut unique = HashSet::new();
    for n in removed {
        assert!(!sent.contains(n), "{n:?} both sent and removed");
        assert!(unique.insert(n), "{n:?} removed twice");
    }
}

fn delta_request(
    delta: &mut DeltaStream,
    seen: &mut Seen,
    src: &Source,
    req: &DeltaDiscoveryRequest,
    type_url: &str,
    fresh: impl Fn() -> DeltaStream,
) {
    match delta.on_request(src, req) {
        Ok(reply) => {
            for r in &reply.responses {
                assert_eq!(r.type_url, type_url);
                let names: Vec<String> = r
                    .resources
                    .iter()
                    .map(|r| r.resource.name.clone())
                    .collect();
                check_delta(&names, &r.removed_resources);
                seen.response(&r.type_url, &r.nonce, names.into_iter());
            }
        }
        Err(_) => {
            *delta = fresh();
            *seen = Seen::default();
        }
    }
}
