use super::*;
use crate::ads::testing::{FakeSource, proxy};
use crate::xds::XdsResource;
use crate::xds::types::{LISTENER, ROUTE};
use envoy_types::pb::google::rpc::Status as RpcStatus;

const A: &str = "outbound|80||a.shop.svc.cluster.local";
const B: &str = "outbound|80||b.shop.svc.cluster.local";
const C: &str = "outbound|80||c.shop.svc.cluster.local";

fn mesh(version: u64) -> FakeSource {
    FakeSource::new(version)
        .with(CLUSTER, A, "cluster a")
        .with(CLUSTER, B, "cluster b")
        .with(ENDPOINT, A, "endpoints a")
        .with(ENDPOINT, B, "endpoints b")
}

fn req(type_url: &str, sub: &[&str], unsub: &[&str], nonce: &str) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: type_url.into(),
        resource_names_subscribe: sub.iter().map(|n| n.to_string()).collect(),
        resource_names_unsubscribe: unsub.iter().map(|n| n.to_string()).collect(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}

fn ack(r: &DeltaDiscoveryResponse) -> DeltaDiscoveryRequest {
    req(&r.type_url, &[], &[], &r.nonce)
}

fn names(r: &DeltaDiscoveryResponse) -> Vec<&str> {
    r.resources
        .iter()
        .map(|r| r.resource.name.as_str())
        .collect()
}

fn one(reply: Reply<DeltaDiscoveryResponse>) -> DeltaDiscoveryResponse {
    assert!(reply.errors.is_empty(), "{:?}", reply.errors);
    assert_eq!(reply.responses.len(), 1);
    reply.responses.into_iter().next().unwrap()
}

fn status(s: &DeltaStream, type_url: &str) -> TypeStatus {
    s.status()
        .into_iter()
        .find(|t| t.type_url == type_url)
        .map(Arc::unwrap_or_clone)
        .unwrap()
}

#[test]
fn wildcard_first_request_then_ack() {
    let src = mesh(3);
    let mut s = DeltaStream::new(proxy());
    let r = one(s.on_request(&src, &req(CLUSTER, &[], &[], "")).unwrap());
    assert_eq!(names(&r), [A, B]);
    // `<content hash>@<snapshot>`.
    assert!(
        r.resources
            .iter()
            .all(|x| x.version.len() == 18 && x.version.ends_with("@3"))
    );
    assert_eq!(r.system_version_info, "3");
    let a = s.on_request(&src, &ack(&r)).unwrap();
    assert_eq!(a.kind, RequestKind::Ack);
    assert!(a.responses.is_empty());
    assert_eq!(status(&s, CLUSTER).state(), "SYNCED");
    assert_eq!(status(&s, CLUSTER).resources, 2);
}

#[test]
fn reconnect_with_initial_versions_sends_only_differences() {
    let src = mesh(1);
    let mut first = DeltaStream::new(proxy());
    let r = one(first.on_request(&src, &req(CLUSTER, &[], &[], "")).unwrap());
    let version_a = r.resources[0].version.clone();

    let mut s = DeltaStream::new(proxy());
    let mut request = req(CLUSTER, &[], &[], "");
    request.initial_resource_versions = [
        (A.to_string(), version_a),
        (B.to_string(), "old".to_string()),
        (C.to_string(), "gone".to_string()),
    ]
    .into();
    let r = one(s.on_request(&src, &request).unwrap());
    assert_eq!(names(&r), [B]);
    assert_eq!(r.removed_resources, [C]);
}

#[test]
fn named_subscriptions_missing_names_and_their_later_arrival() {
    let mut src = mesh(1);
    let mut s = DeltaStream::new(proxy());
    let r = one(s.on_request(&src, &req(ENDPOINT, &[A], &[], "")).unwrap());
    assert_eq!(names(&r), [A]);

    // Subscribing B (and C, which does not exist) answers just those, without an ACK.
    let r = s
        .on_request(&src, &req(ENDPOINT, &[B, C], &[], ""))
        .unwrap();
    assert_eq!(r.kind, RequestKind::Subscribe);
    let r = one(r);
    assert_eq!(names(&r), [B]);
    assert_eq!(r.removed_resources, [C]);

    // C appears later: pushed.
    src.version = 2;
    src.set(ENDPOINT, C, "endpoints c");
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), [C]);
    assert!(pushed[0].removed_resources.is_empty());
    // Nothing more changes: nothing is sent.
    assert!(s.on_push(&src, &PushScope::Full).unwrap().is_empty());
}

#[test]
fn unsubscribe_forgets_and_resubscribe_resends() {
    let src = mesh(1);
    let mut s = DeltaStream::new(proxy());
    one(s
        .on_request(&src, &req(ENDPOINT, &[A, B], &[], ""))
        .unwrap());
    let r = s.on_request(&src, &req(ENDPOINT, &[], &[B], "")).unwrap();
    assert!(r.responses.is_empty());
    assert_eq!(status(&s, ENDPOINT).resources, 1);
    let r = one(s.on_request(&src, &req(ENDPOINT, &[B], &[], "")).unwrap());
    assert_eq!(names(&r), [B]);
}

#[test]
fn removed_resources_on_push_and_eds_only_scope() {
    let mut src = mesh(1);
    let mut s = DeltaStream::new(proxy());
    let cds = one(s.on_request(&src, &req(CLUSTER, &[], &[], "")).unwrap());
    s.on_request(&src, &ack(&cds)).unwrap();
    let eds = one(s
        .on_request(&src, &req(ENDPOINT, &[A, B], &[], ""))
        .unwrap());
    s.on_request(&src, &ack(&eds)).unwrap();

    src.version = 2;
    src.remove(CLUSTER, B);
    src.set(CLUSTER, A, "cluster a v2");
    src.set(ENDPOINT, B, "endpoints b v2");
    let hosts = BTreeSet::from(["b.shop.svc.cluster.local".to_string()]);
    let pushed = s.on_push(&src, &PushScope::Endpoints(Some(hosts))).unwrap();
    assert_eq!(pushed.len(), 1);
    assert_eq!(pushed[0].type_url, ENDPOINT);
    assert_eq!(names(&pushed[0]), [B]);

    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(pushed.len(), 2);
    assert_eq!(names(&pushed[0]), [A]);
    assert_eq!(pushed[0].removed_resources, [B]);
    // Cluster A changed: its (unchanged) endpoints go out again for the re-warming cluster.
    assert_eq!(names(&pushed[1]), [A]);
}

#[test]
fn nack_and_stale_nonce() {
    let mut src = mesh(1);
    let mut s = DeltaStream::new(proxy());
    let r1 = one(s.on_request(&src, &req(CLUSTER, &[], &[], "")).unwrap());
    src.set(CLUSTER, A, "cluster a v2");
    let r2 = s.on_push(&src, &PushScope::Full).unwrap().remove(0);

    // The ACK of r1 is stale, but a subscription it carries still counts.
    let mut stale = ack(&r1);
    stale.resource_names_subscribe = vec!["*".into()];
    let r = s.on_request(&src, &stale).unwrap();
    assert_eq!(r.kind, RequestKind::Stale);
    assert_eq!(status(&s, CLUSTER).nonce_acked, "");

    let mut nack = ack(&r2);
    nack.error_detail = Some(RpcStatus {
        code: 3,
        message: "bad a".into(),
        details: vec![],
    });
    let r = s.on_request(&src, &nack).unwrap();
    assert_eq!(r.kind, RequestKind::Nack("bad a".into()));
    assert!(r.responses.is_empty());
    assert_eq!(status(&s, CLUSTER).state(), "NACKED");
    assert!(s.on_push(&src, &PushScope::Full).unwrap().is_empty());
}

#[test]
fn explicit_wildcard_subscription_and_unsubscription() {
    let src = mesh(1);
    let mut s = DeltaStream::new(proxy());
    // CDS with a name is not wildcard...
    let r = one(s.on_request(&src, &req(CLUSTER, &[A], &[], "")).unwrap());
    assert_eq!(names(&r), [A]);
    // ...until `*` is subscribed; then the rest arrives.
    let r = one(s.on_request(&src, &req(CLUSTER, &["*"], &[], "")).unwrap());
    assert_eq!(names(&r), [B]);
    assert!(status(&s, CLUSTER).wildcard);
    // Dropping `*` forgets what came only through it.
    s.on_request(&src, &req(CLUSTER, &[], &["*"], "")).unwrap();
    assert_eq!(status(&s, CLUSTER).resources, 1);
}

/// Every type's versions as a first stream sent them, keyed by name.
fn versions(r: &DeltaDiscoveryResponse) -> std::collections::HashMap<String, String> {
    r.resources
        .iter()
        .map(|x| (x.resource.name.clone(), x.version.clone()))
        .collect()
}

#[test]
fn reconnect_with_everything_current_receives_nothing() {
    let src = mesh(1);
    let mut first = DeltaStream::new(proxy());
    let cds = one(first.on_request(&src, &req(CLUSTER, &[], &[], "")).unwrap());
    let eds = one(first
        .on_request(&src, &req(ENDPOINT, &[A, B], &[], ""))
        .unwrap());

    // Envoy re-subscribes `*` explicitly on a reconnect, and names what it holds.
    let mut s = DeltaStream::new(proxy());
    let mut request = req(CLUSTER, &["*"], &[], "");
    request.initial_resource_versions = versions(&cds);
    let r = s.on_request(&src, &request).unwrap();
    assert_eq!(r.kind, RequestKind::Initial);
    assert!(r.responses.is_empty(), "{:?}", r.responses);
    let mut request = req(ENDPOINT, &[A, B], &[], "");
    request.initial_resource_versions = versions(&eds);
    assert!(s.on_request(&src, &request).unwrap().responses.is_empty());
    for type_url in [CLUSTER, ENDPOINT] {
        let st = status(&s, type_url);
        assert_eq!((st.resources, st.state()), (2, "SYNCED"));
    }
    // What it holds is now what this stream sent: a change goes out, nothing else.
    let mut src = src;
    src.version = 2;
    src.set(ENDPOINT, B, "endpoints b v2");
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), [B]);
}

#[test]
fn claims_outlive_a_first_response_that_could_not_be_generated() {
    let mut src = mesh(1);
    let held = XdsResource::new("0.0.0.0_80".into(), LISTENER, b"listener 80".to_vec());

    // The listeners cannot be generated when the proxy reconnects...
    let mut s = DeltaStream::new(proxy());
    let mut request = req(LISTENER, &["*"], &[], "");
    request.initial_resource_versions = [
        ("0.0.0.0_80".to_string(), version_of(&held, 1)),
        ("0.0.0.0_81".to_string(), "old".to_string()),
    ]
    .into();
    let r = s.on_request(&src, &request).unwrap();
    assert!(r.responses.is_empty() && r.errors.len() == 1);
    assert_eq!(status(&s, LISTENER).resources, 2);
    // ...then can: the claims are settled as if it had been the first response.
    src.version = 2;
    src.set(LISTENER, "0.0.0.0_80", "listener 80");
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(pushed.len(), 1);
    assert!(pushed[0].resources.is_empty(), "same content, same version");
    assert_eq!(pushed[0].removed_resources, ["0.0.0.0_81"]);
    assert_eq!(status(&s, LISTENER).resources, 1);
}

#[test]
fn first_request_without_versions_is_answered_even_empty() {
    // No listeners: Envoy's initial fetch of the wildcard still needs a response.
    let mut src = FakeSource::new(1).with(LISTENER, "0.0.0.0_80", "listener 80");
    src.remove(LISTENER, "0.0.0.0_80");
    let mut s = DeltaStream::new(proxy());
    let r = one(s.on_request(&src, &req(LISTENER, &[], &[], "")).unwrap());
    assert!(r.resources.is_empty() && r.removed_resources.is_empty());
    assert_eq!(status(&s, LISTENER).state(), "STALE");
}

/// The xDS protocol: a name unsubscribed while `*` stays is answered, resent if the
/// wildcard covers it, else in `removed_resources` (the proxy cannot tell which).
#[test]
fn unsubscribing_a_name_under_the_wildcard_says_whether_the_wildcard_keeps_it() {
    let src = mesh(1);
    let mut s = DeltaStream::new(proxy());
    // Legacy wildcard, then A and a name that does not exist, explicitly.
    let cds = one(s.on_request(&src, &req(CLUSTER, &[], &[], "")).unwrap());
    assert_eq!(names(&cds), [A, B]);
    s.on_request(&src, &ack(&cds)).unwrap();
    let r = one(s.on_request(&src, &req(CLUSTER, &[A, C], &[], "")).unwrap());
    assert_eq!(names(&r), [A], "a subscribed name is answered, held or not");
    assert_eq!(r.removed_resources, [C]);
    let st = status(&s, CLUSTER);
    assert!(st.wildcard);
    assert_eq!(st.subscribed(), 2);

    // A is covered by `*`: resent. C is not: removed.
    let r = one(s.on_request(&src, &req(CLUSTER, &[], &[A, C], "")).unwrap());
    assert_eq!(names(&r), [A]);
    assert_eq!(r.removed_resources, [C]);
    let st = status(&s, CLUSTER);
    assert!(st.wildcard);
    assert_eq!((st.subscribed(), st.resources), (0, 2));
    // A name never subscribed (a phantom unsubscription) needs no answer.
    let r = s.on_request(&src, &req(CLUSTER, &[], &[B], "")).unwrap();
    assert!(r.responses.is_empty());

    // Without `*`, unsubscribing needs no answer either; the proxy drops what it named.
    let r = s.on_request(&src, &req(CLUSTER, &[A], &["*"], "")).unwrap();
    assert_eq!(names(&one(r)), [A]);
    let r = s.on_request(&src, &req(CLUSTER, &[], &[A], "")).unwrap();
    assert!(r.responses.is_empty());
    assert_eq!(status(&s, CLUSTER).resources, 0);
    // And an empty subscription is not wildcard again (the legacy form is for the first).
    let mut src = src;
    src.set(CLUSTER, C, "cluster c");
    assert!(s.on_push(&src, &PushScope::Full).unwrap().is_empty());
}

/// Envoy re-subscribes a name it dropped (a cluster re-created before the request went
/// out) without unsubscribing it first, then waits for it: it is resent though current.
#[test]
fn a_name_subscribed_again_is_resent_even_if_held() {
    let src = mesh(1);
    let mut s = DeltaStream::new(proxy());
    let eds = one(s
        .on_request(&src, &req(ENDPOINT, &[A, B], &[], ""))
        .unwrap());
    s.on_request(&src, &ack(&eds)).unwrap();
    let r = s.on_request(&src, &req(ENDPOINT, &[A], &[], "")).unwrap();
    assert_eq!(r.kind, RequestKind::Subscribe);
    let r = one(r);
    assert_eq!(names(&r), [A]);
    assert!(r.removed_resources.is_empty());
    assert_eq!(status(&s, ENDPOINT).subscribed(), 2);
}

/// A Delta version names the snapshot it was sent from, so a reconnect tells the edge the
/// newest snapshot the proxy has seen (the stream waits for it, as SotW's `version_info`
/// makes it).
#[test]
fn a_reconnect_reports_the_newest_snapshot_it_holds() {
    use crate::ads::protocol::Protocol;
    let mut src = mesh(5);
    let mut first = DeltaStream::new(proxy());
    let cds = one(first.on_request(&src, &req(CLUSTER, &[], &[], "")).unwrap());
    assert!(cds.resources.iter().all(|r| r.version.ends_with("@5")));
    src.version = 9;
    src.set(CLUSTER, B, "cluster b v2");
    let pushed = first.on_push(&src, &PushScope::Full).unwrap().remove(0);
    assert_eq!(names(&pushed), [B]);

    let mut held = versions(&cds);
    held.extend(versions(&pushed));
    let mut request = req(CLUSTER, &["*"], &[], "");
    request.initial_resource_versions = held;
    assert_eq!(DeltaStream::reported_snapshot(&request), Some(9));
    // An edge at 9 finds it current.
    let mut s = DeltaStream::new(proxy());
    assert!(s.on_request(&src, &request).unwrap().responses.is_empty());
    // A first connection reports nothing, nor do versions of another server.
    assert_eq!(
        DeltaStream::reported_snapshot(&req(CLUSTER, &[], &[], "")),
        None
    );
    request.initial_resource_versions = [(A.to_string(), "v1".to_string())].into();
    assert_eq!(DeltaStream::reported_snapshot(&request), None);
}

#[test]
fn unknown_types_are_ignored_and_nothing_is_kept() {
    let src = mesh(1);
    let mut s = DeltaStream::new(proxy());
    let mut request = req("type.googleapis.com/Invented", &["x", "y"], &[], "");
    request.initial_resource_versions = [("x".to_string(), "1".to_string())].into();
    let r = s.on_request(&src, &request).unwrap();
    assert_eq!(r.kind, RequestKind::Unsupported);
    assert!(r.responses.is_empty() && r.errors.is_empty());
    assert!(s.status().is_empty());
    assert!(src.calls.borrow().is_empty(), "nothing was generated");
}

#[test]
fn names_per_stream_are_bounded_over_all_types() {
    let src = mesh(1);
    let mut s = DeltaStream::new(proxy()).with_max_names(3);
    one(s
        .on_request(&src, &req(ENDPOINT, &[A, B], &[], ""))
        .unwrap());
    one(s.on_request(&src, &req(CLUSTER, &[A], &[], "")).unwrap());
    let err = s
        .on_request(&src, &req(ENDPOINT, &[C], &[], ""))
        .unwrap_err();
    assert!(
        matches!(
            err,
            AdsError::TooManyNames {
                total: 4,
                max: 3,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.to_status().code(), tonic::Code::ResourceExhausted);
    assert_eq!(status(&s, ENDPOINT).subscribed(), 2, "nothing kept");
    // A first request over the limit keeps no watch.
    let err = s.on_request(&src, &req(ROUTE, &["80", "81"], &[], ""));
    assert!(err.is_err());
    assert!(s.status().iter().all(|t| t.type_url != ROUTE));
    // Trading a name for another fits; `*` is not a name.
    let r = s
        .on_request(&src, &req(ENDPOINT, &[C, "*"], &[B], ""))
        .unwrap();
    assert!(r.errors.is_empty());
    assert_eq!(status(&s, ENDPOINT).subscribed(), 2);
}
