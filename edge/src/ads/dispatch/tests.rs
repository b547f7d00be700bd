//! The decision judged once per group: connections alike share a scope and a decision,
//! connections set apart by a selector do not, and the decisions are those of judging
//! every connection alone.

use super::*;
use crate::proxy::InterceptionMode;
use shoal_proto::change::{ChangeKey, TriggerReason};
use shoal_proto::config::{ConfigKey, Kind, istio};
use shoal_proto::model::{
    Endpoint, NamedConfig, NamespaceConfig, Protocol, Service, ServiceEndpoints,
};
use shoal_proto::push_context::InboundPort;
use shoal_proto::snapshot::Chunk;
use std::collections::{BTreeMap, BTreeSet};

fn svc(ns: &str, name: &str) -> Service {
    let http = crate::xds::testing::port("http", 80, Protocol::Http);
    crate::xds::testing::service(ns, name, vec![http], None)
}

fn host(ns: &str, name: &str) -> String {
    format!("{name}.{ns}.svc.cluster.local")
}

fn selector(app: &str) -> Option<istio::WorkloadSelector> {
    Some(istio::WorkloadSelector {
        labels: BTreeMap::from([("app".to_string(), app.to_string())]),
    })
}

fn sidecar(ns: &str, name: &str, app: Option<&str>, hosts: &[&str]) -> NamedConfig<istio::Sidecar> {
    NamedConfig {
        name: name.into(),
        namespace: ns.into(),
        created: 0,
        spec: istio::Sidecar {
            workload_selector: app.and_then(selector),
            egress: vec![istio::EgressListener {
                hosts: hosts.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            }],
            ..Default::default()
        },
    }
}

fn virtual_service(ns: &str, name: &str, host: &str) -> NamedConfig<istio::VirtualService> {
    NamedConfig {
        name: name.into(),
        namespace: ns.into(),
        created: 0,
        spec: istio::VirtualService {
            hosts: vec![host.into()],
            ..Default::default()
        },
    }
}

/// Namespace `a`: service x, a Sidecar for `app: one` narrowing egress to `a`, a
/// namespace-wide one seeing everything. `b`: service y and a DestinationRule selecting
/// `app: one`. `c`: service z, nothing else.
fn mesh() -> Vec<Chunk> {
    let a = NamespaceConfig {
        namespace: "a".into(),
        services: vec![svc("a", "x")],
        sidecars: vec![
            sidecar("a", "narrow", Some("one"), &["./*"]),
            sidecar("a", "default", None, &["*/*"]),
        ],
        ..Default::default()
    };
    let mut b = NamespaceConfig {
        namespace: "b".into(),
        services: vec![svc("b", "y")],
        ..Default::default()
    };
    b.destination_rules.push(NamedConfig {
        name: "y-one".into(),
        namespace: "b".into(),
        created: 0,
        spec: istio::DestinationRule {
            host: host("b", "y"),
            workload_selector: selector("one"),
            ..Default::default()
        },
    });
    let c = NamespaceConfig {
        namespace: "c".into(),
        services: vec![svc("c", "z")],
        ..Default::default()
    };
    vec![
        Chunk::Namespace(a),
        Chunk::Namespace(b),
        Chunk::Namespace(c),
    ]
}

fn proxy(i: usize, ns: &str, app: &str, kind: ProxyKind, interception: InterceptionMode) -> Proxy {
    let ip = format!("10.1.0.{i}");
    Proxy {
        id: format!("sidecar~{ip}~p-{i}.{ns}~{ns}.svc.cluster.local"),
        kind,
        workload: format!("p-{i}.{ns}"),
        ip,
        namespace: ns.into(),
        labels: BTreeMap::from([("app".to_string(), app.to_string())]),
        interception,
        cluster_id: "c1".into(),
        network: String::new(),
        locality: String::new(),
        identity: shoal_proto::security::Identity::Anonymous,
    }
}

fn connect(registry: &Registry, proxy: Proxy, push: &PushContext) -> Arc<Connection> {
    let scope = push.sidecar_scope(&proxy.namespace, &proxy.labels);
    let (tx, _) = queue::channel(1);
    let conn = registry.insert(proxy, "sotw", scope, tx, false);
    record_inbound(&conn, push);
    conn
}

fn event(
    push: &Arc<PushContext>,
    full: bool,
    keys: impl IntoIterator<Item = ChangeKey>,
) -> PushEvent {
    PushEvent::new(
        push.clone(),
        Arc::new(ChangeSet::of(
            full,
            keys.into_iter().collect::<BTreeSet<_>>(),
            TriggerReason::Unknown,
            SystemTime::now(),
        )),
    )
}

fn scope_of(conn: &Connection) -> Arc<SidecarScope> {
    conn.with_scope(|s| s.clone())
}

/// Decides `event` over `conns`: what each connection is sent, by connection id.
fn decided(conns: &[Arc<Connection>], event: &PushEvent) -> BTreeMap<u64, Push> {
    let mut out = BTreeMap::new();
    decide(conns, event, |conn, push| {
        out.insert(conn.id, push);
    });
    out
}

/// A VirtualService in `ns` for `host`: an event with the next snapshot (a new index).
fn vs_change(push: &PushContext, ns: &str, host: &str) -> PushEvent {
    let mut config = (**push.namespace(ns).unwrap()).clone();
    config
        .virtual_services
        .push(virtual_service(ns, "vs", host));
    let next = Arc::new(push.with_changes(push.version() + 1, [Chunk::Namespace(config)], []));
    // Narrowed to its host, as the snapshot puller names it.
    event(&next, true, [ChangeKey::Host(host.into())])
}

#[test]
fn connections_alike_share_a_scope_and_a_decision() {
    let push = PushContext::from_chunks(1, mesh());
    let registry = Registry::default();
    let sidecar = ProxyKind::Sidecar;
    let one = connect(
        &registry,
        proxy(1, "c", "w", sidecar, InterceptionMode::Redirect),
        &push,
    );
    let two = connect(
        &registry,
        proxy(2, "c", "w", sidecar, InterceptionMode::Redirect),
        &push,
    );
    let other = connect(
        &registry,
        proxy(3, "a", "two", sidecar, InterceptionMode::Redirect),
        &push,
    );

    let event = vs_change(&push, "c", &host("c", "z"));
    let decided = decided(&registry.all(), &event);
    let (s1, s2) = (scope_of(&one), scope_of(&two));
    assert!(Arc::ptr_eq(&s1, &s2), "one scope for both");
    assert_eq!(s1.index_id, event.push.index().id, "cut from the new index");
    assert_eq!(decided.get(&one.id), Some(&Push::AsIs));
    assert_eq!(decided.get(&one.id), decided.get(&two.id));
    // `a`'s namespace-wide Sidecar sees every namespace: z's route is its concern too.
    assert_eq!(decided.get(&other.id), Some(&Push::AsIs));
}

#[test]
fn a_sidecar_selecting_one_of_them_sets_them_apart() {
    let push = PushContext::from_chunks(1, mesh());
    let registry = Registry::default();
    let sidecar = ProxyKind::Sidecar;
    let narrow = connect(
        &registry,
        proxy(1, "a", "one", sidecar, InterceptionMode::Redirect),
        &push,
    );
    let wide = connect(
        &registry,
        proxy(2, "a", "two", sidecar, InterceptionMode::Redirect),
        &push,
    );

    let event = vs_change(&push, "c", &host("c", "z"));
    let decided = decided(&registry.all(), &event);
    let (n, w) = (scope_of(&narrow), scope_of(&wide));
    assert!(!Arc::ptr_eq(&n, &w));
    assert!(Arc::ptr_eq(
        &n,
        &event.push.sidecar_scope("a", &narrow.proxy.labels)
    ));
    assert!(Arc::ptr_eq(
        &w,
        &event.push.sidecar_scope("a", &wide.proxy.labels)
    ));
    assert_eq!(
        decided.get(&narrow.id),
        None,
        "egress narrowed to a: z is not its concern"
    );
    assert_eq!(decided.get(&wide.id), Some(&Push::AsIs));
}

#[test]
fn a_destination_rule_selecting_one_of_them_sets_them_apart() {
    let push = PushContext::from_chunks(1, mesh());
    let registry = Registry::default();
    let sidecar = ProxyKind::Sidecar;
    let one = connect(
        &registry,
        proxy(1, "b", "one", sidecar, InterceptionMode::Redirect),
        &push,
    );
    let two = connect(
        &registry,
        proxy(2, "b", "two", sidecar, InterceptionMode::Redirect),
        &push,
    );

    let event = vs_change(&push, "c", &host("c", "z"));
    decided(&registry.all(), &event);
    assert!(!Arc::ptr_eq(&scope_of(&one), &scope_of(&two)));
    assert!(scope_of(&one).id.contains("+dr:"), "{}", scope_of(&one).id);
}

fn serves_inbound(proxy: &Proxy) -> bool {
    (proxy.kind == ProxyKind::Sidecar && proxy.interception != InterceptionMode::None)
        || proxy.kind == ProxyKind::Router
}

/// The decision as `Shared::dispatch` made it before it was judged per group: each
/// connection alone, its scope looked up and its address asked about.
struct Alone {
    conn: Arc<Connection>,
    scope: Arc<SidecarScope>,
    ports: Option<Arc<[InboundPort]>>,
}

impl Alone {
    /// As `connect` left it: its ports in `push` recorded if it serves inbound.
    fn new(conn: &Arc<Connection>, push: &PushContext) -> Self {
        let proxy = &conn.proxy;
        Alone {
            conn: conn.clone(),
            scope: scope_of(conn),
            ports: serves_inbound(proxy).then(|| push.service_instances().inbound_ports(&proxy.ip)),
        }
    }

    fn decide(&mut self, event: &PushEvent) -> Option<Push> {
        let (proxy, push) = (&self.conn.proxy, &event.push);
        let prev = self.scope.clone();
        if prev.index_id != push.index().id {
            self.scope = push.sidecar_scope(&proxy.namespace, &proxy.labels);
        }
        let needed = proxy_needs_push(proxy.kind, &prev, &self.scope, &event.changes);
        let mut inbound = false;
        if serves_inbound(proxy) && (self.ports.is_none() || push.targets_may_have_moved(&proxy.ip))
        {
            let now = push.service_instances().inbound_ports(&proxy.ip);
            inbound = match self.ports.replace(now.clone()) {
                Some(before) => before != now,
                None => !now.is_empty(),
            };
        }
        match (inbound, needed) {
            (true, _) => Some(Push::Full),
            (false, true) => Some(Push::AsIs),
            (false, false) => None,
        }
    }
}

#[test]
fn decisions_are_those_of_judging_each_connection_alone() {
    let mut push = Arc::new(PushContext::from_chunks(1, mesh()));
    let registry = Registry::default();
    let mut n = 0;
    for ns in ["a", "b", "c"] {
        for app in ["one", "two"] {
            for (kind, interception) in [
                (ProxyKind::Sidecar, InterceptionMode::Redirect),
                (ProxyKind::Sidecar, InterceptionMode::Redirect),
                (ProxyKind::Sidecar, InterceptionMode::None),
                (ProxyKind::Router, InterceptionMode::None),
            ] {
                n += 1;
                connect(&registry, proxy(n, ns, app, kind, interception), &push);
            }
        }
    }
    let conns = registry.all();
    let mut alone: Vec<Alone> = conns.iter().map(|c| Alone::new(c, &push)).collect();

    // x's endpoints land on the first two proxies' addresses, then one moves away.
    let endpoints = |addresses: &[&str]| ServiceEndpoints {
        service: svc("a", "x").key(),
        endpoints: addresses
            .iter()
            .map(|a| Endpoint::at(*a, 8080, 80))
            .collect(),
    };
    let x = ChangeKey::service("a", host("a", "x"));
    let y = ChangeKey::service("b", host("b", "y"));
    let mut events = Vec::new();
    let next = |push: &mut Arc<PushContext>, chunk: Chunk| {
        *push = Arc::new(push.with_changes(push.version() + 1, [chunk], []));
        push.clone()
    };
    let p = next(
        &mut push,
        Chunk::Endpoints(endpoints(&["10.1.0.1", "10.1.0.2"])),
    );
    events.push(event(&p, false, [x.clone()]));
    let vs = vs_change(&push, "c", &host("c", "z"));
    push = vs.push.clone();
    events.push(vs);
    let p = next(
        &mut push,
        Chunk::Endpoints(endpoints(&["10.1.0.2", "10.1.0.9"])),
    );
    events.push(event(&p, false, [x.clone()]));
    // The selecting Sidecar now sees b too: a Sidecar change in a.
    let mut a = (**push.namespace("a").unwrap()).clone();
    a.sidecars[0] = sidecar("a", "narrow", Some("one"), &["./*", "b/*"]);
    let p = next(&mut push, Chunk::Namespace(a));
    let key = ConfigKey::new(Kind::Sidecar, "a", "narrow");
    events.push(event(&p, true, [key.into()]));
    events.push(event(&p, false, [y.clone()]));
    events.push(event(&p, true, [y]));
    events.push(event(&p, true, []));

    for (i, event) in events.iter().enumerate() {
        let expected: BTreeMap<u64, Push> = alone
            .iter_mut()
            .filter_map(|a| a.decide(event).map(|push| (a.conn.id, push)))
            .collect();
        if i == 0 {
            assert_eq!(
                expected.values().filter(|p| **p == Push::Full).count(),
                2,
                "x's endpoints on the first two proxies"
            );
        }
        assert_eq!(decided(&conns, event), expected, "event {i}");
        for a in &alone {
            assert!(
                Arc::ptr_eq(&a.scope, &scope_of(&a.conn)),
                "event {i}: scope"
            );
        }
    }
}
