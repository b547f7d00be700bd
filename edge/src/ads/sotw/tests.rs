use super::*;
use crate::ads::testing::{FakeSource, proxy};
use crate::ads::transport::SotwRequest;
use crate::xds::types::{LISTENER, ROUTE};
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
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
        .with(LISTENER, "0.0.0.0_80", "listener 80")
        .with(ROUTE, "80", "route 80")
}

fn req(type_url: &str, names: &[&str], nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.into(),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}

fn ack(r: &DiscoveryResponse, names: &[&str]) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: r.version_info.clone(),
        ..req(&r.type_url, names, &r.nonce)
    }
}

fn nack(r: &DiscoveryResponse, names: &[&str], msg: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        error_detail: Some(RpcStatus {
            code: 3,
            message: msg.into(),
            details: vec![],
        }),
        ..req(&r.type_url, names, &r.nonce)
    }
}

fn names(r: &DiscoveryResponse) -> Vec<String> {
    r.resources
        .iter()
        .map(|a| String::from_utf8(a.resource.value.clone()).unwrap())
        .collect()
}

fn status(s: &SotwStream, type_url: &str) -> TypeStatus {
    s.status()
        .into_iter()
        .find(|t| t.type_url == type_url)
        .map(Arc::unwrap_or_clone)
        .unwrap()
}

/// Subscribes CDS, EDS (A, B), LDS, RDS (80) and ACKs everything.
fn synced(src: &FakeSource) -> SotwStream {
    let mut s = SotwStream::new(proxy());
    for (t, n) in [
        (CLUSTER, vec![]),
        (ENDPOINT, vec![A, B]),
        (LISTENER, vec![]),
        (ROUTE, vec!["80"]),
    ] {
        let r = s.on_request(src, &req(t, &n, "")).unwrap();
        assert_eq!(r.responses.len(), 1, "{t}");
        let a = s.on_request(src, &ack(&r.responses[0], &n)).unwrap();
        assert_eq!(a.kind, RequestKind::Ack);
        assert!(a.responses.is_empty());
    }
    s
}

#[test]
fn first_request_gets_the_full_set() {
    let src = mesh(7);
    let mut s = SotwStream::new(proxy());
    let r = s.on_request(&src, &req(CLUSTER, &[], "")).unwrap();
    assert_eq!(r.kind, RequestKind::Initial);
    assert_eq!(r.responses.len(), 1);
    let resp = &r.responses[0];
    assert_eq!(names(resp), ["cluster a", "cluster b"]);
    assert_eq!(resp.version_info, "7");
    assert!(!resp.nonce.is_empty());
    assert_eq!(resp.type_url, CLUSTER);
    assert_eq!(status(&s, CLUSTER).state(), "STALE");

    // `*` is wildcard too; an empty mesh still gets a (empty) response.
    let empty = FakeSource::new(0).with(LISTENER, "x", "x");
    let mut s = SotwStream::new(proxy());
    let mut src2 = empty;
    src2.remove(LISTENER, "x");
    let r = s.on_request(&src2, &req(LISTENER, &["*"], "")).unwrap();
    assert_eq!(r.responses.len(), 1);
    assert!(r.responses[0].resources.is_empty());
}

#[test]
fn ack_gets_no_response() {
    let src = mesh(1);
    let mut s = SotwStream::new(proxy());
    let r = s.on_request(&src, &req(CLUSTER, &[], "")).unwrap();
    let a = s.on_request(&src, &ack(&r.responses[0], &[])).unwrap();
    assert_eq!(a.kind, RequestKind::Ack);
    assert!(a.responses.is_empty());
    let st = status(&s, CLUSTER);
    assert_eq!(st.nonce_acked, r.responses[0].nonce);
    assert_eq!(st.version_acked, "1");
    assert_eq!(st.state(), "SYNCED");
    assert_eq!(st.resources, 2);
    assert!(st.wildcard);
}

#[test]
fn nack_is_recorded_not_resent_and_last_good_kept() {
    let mut src = mesh(1);
    let mut s = synced(&src);
    src.version = 2;
    src.set(CLUSTER, A, "cluster a v2");
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    let cds = pushed.iter().find(|r| r.type_url == CLUSTER).unwrap();

    let n = s
        .on_request(&src, &nack(cds, &[], "bad cluster a"))
        .unwrap();
    assert_eq!(n.kind, RequestKind::Nack("bad cluster a".into()));
    assert!(n.responses.is_empty());
    let st = status(&s, CLUSTER);
    assert_eq!(st.state(), "NACKED");
    assert_eq!(st.nack.as_ref().unwrap().message, "bad cluster a");
    assert_eq!(st.nack.as_ref().unwrap().version, "2");
    assert_eq!(st.version_acked, "1", "last good config stays acknowledged");

    // A push that changes nothing does not resend the rejected config.
    src.version = 3;
    assert!(s.on_push(&src, &PushScope::Full).unwrap().is_empty());
    // A fix goes out, and its ACK clears the NACK.
    src.set(CLUSTER, A, "cluster a v3");
    let fixed = s.on_push(&src, &PushScope::Full).unwrap();
    let cds = fixed.iter().find(|r| r.type_url == CLUSTER).unwrap();
    s.on_request(&src, &ack(cds, &[])).unwrap();
    assert_eq!(status(&s, CLUSTER).state(), "SYNCED");
    assert!(status(&s, CLUSTER).nack.is_none());
}

#[test]
fn stale_nonce_is_ignored() {
    let mut src = mesh(1);
    let mut s = SotwStream::new(proxy());
    let first = s
        .on_request(&src, &req(ENDPOINT, &[A], ""))
        .unwrap()
        .responses;
    src.set(ENDPOINT, A, "endpoints a v2");
    let second = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(second.len(), 1);

    // Answers to the older nonce, even asking for more, are ignored...
    let stale = s
        .on_request(&src, &req(ENDPOINT, &[A, B], &first[0].nonce))
        .unwrap();
    assert_eq!(stale.kind, RequestKind::Stale);
    assert!(stale.responses.is_empty());
    let nack_stale = s.on_request(&src, &nack(&first[0], &[A], "old")).unwrap();
    assert_eq!(nack_stale.kind, RequestKind::Stale);
    assert!(status(&s, ENDPOINT).nack.is_none());
    assert_eq!(status(&s, ENDPOINT).subscribed(), 1);
    // ...and the same request on the latest nonce is honoured.
    let fresh = s
        .on_request(&src, &req(ENDPOINT, &[A, B], &second[0].nonce))
        .unwrap();
    assert_eq!(fresh.kind, RequestKind::Ack);
    assert_eq!(names(&fresh.responses[0]), ["endpoints b"]);
}

#[test]
fn update_during_ack() {
    let mut src = mesh(1);
    let mut s = SotwStream::new(proxy());
    let cds1 = s
        .on_request(&src, &req(CLUSTER, &[], ""))
        .unwrap()
        .responses;
    // Envoy asks for the endpoints of the clusters it just got, and has not ACKed CDS yet.
    let eds1 = s
        .on_request(&src, &req(ENDPOINT, &[A, B], ""))
        .unwrap()
        .responses;
    assert_eq!(names(&eds1[0]), ["endpoints a", "endpoints b"]);

    // A push arrives before either ACK: it is sent anyway.
    src.version = 2;
    src.set(CLUSTER, C, "cluster c");
    src.set(ENDPOINT, C, "endpoints c");
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(pushed.len(), 1, "only CDS changed");
    let cds2 = &pushed[0];
    assert_eq!(names(cds2), ["cluster a", "cluster b", "cluster c"]);

    // The ACK of the first CDS response is now stale.
    let a = s.on_request(&src, &ack(&cds1[0], &[])).unwrap();
    assert_eq!(a.kind, RequestKind::Stale);
    assert_eq!(status(&s, CLUSTER).nonce_acked, "");
    // EDS ACK, then the ACK of the latest CDS; Envoy then asks for C's endpoints.
    let e = s.on_request(&src, &ack(&eds1[0], &[A, B])).unwrap();
    assert_eq!(e.kind, RequestKind::Ack);
    let a = s.on_request(&src, &ack(cds2, &[])).unwrap();
    assert_eq!(a.kind, RequestKind::Ack);
    assert!(a.responses.is_empty());
    let e = s.on_request(&src, &ack(&eds1[0], &[A, B, C])).unwrap();
    assert_eq!(names(&e.responses[0]), ["endpoints c"]);
}

#[test]
fn unchanged_resources_are_not_resent() {
    let mut src = mesh(1);
    let mut s = synced(&src);
    src.version = 2;
    assert!(s.on_push(&src, &PushScope::Full).unwrap().is_empty());
    assert!(
        s.on_push(&src, &PushScope::Endpoints(None))
            .unwrap()
            .is_empty()
    );

    // One endpoint set changes: EDS carries just it; CDS/LDS/RDS stay quiet.
    src.set(ENDPOINT, B, "endpoints b v2");
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(pushed.len(), 1);
    assert_eq!(pushed[0].type_url, ENDPOINT);
    assert_eq!(names(&pushed[0]), ["endpoints b v2"]);

    // A removed cluster resends the whole CDS set (state of the world).
    src.remove(CLUSTER, B);
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), ["cluster a"]);
}

#[test]
fn named_resource_requested_before_it_exists_is_sent_when_it_appears() {
    let mut src = mesh(1);
    let mut s = synced(&src);
    let rds = status(&s, ROUTE);

    // Envoy asks for route 8080, which no snapshot has yet: nothing to send.
    let r = s
        .on_request(&src, &req(ROUTE, &["80", "8080"], &rds.nonce_sent))
        .unwrap();
    assert_eq!(r.kind, RequestKind::Ack);
    assert!(r.responses.is_empty());
    assert_eq!(status(&s, ROUTE).subscribed(), 2);

    src.version = 2;
    src.set(ROUTE, "8080", "route 8080");
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(pushed.len(), 1);
    assert_eq!(names(&pushed[0]), ["route 8080"]);

    // A first request for a missing name is still answered (empty).
    let mut s = SotwStream::new(proxy());
    let r = s.on_request(&src, &req(ROUTE, &["9090"], "")).unwrap();
    assert_eq!(r.responses.len(), 1);
    assert!(r.responses[0].resources.is_empty());
}

#[test]
fn eds_only_push_touches_only_endpoints_of_changed_services() {
    let mut src = mesh(1);
    let mut s = synced(&src);
    src.version = 2;
    src.set(CLUSTER, A, "cluster a v2");
    src.set(LISTENER, "0.0.0.0_80", "listener v2");
    src.set(ENDPOINT, A, "endpoints a v2");
    src.set(ENDPOINT, B, "endpoints b v2");
    src.calls.borrow_mut().clear();

    let hosts = BTreeSet::from(["a.shop.svc.cluster.local".to_string()]);
    let pushed = s.on_push(&src, &PushScope::Endpoints(Some(hosts))).unwrap();
    assert_eq!(pushed.len(), 1);
    assert_eq!(pushed[0].type_url, ENDPOINT);
    assert_eq!(names(&pushed[0]), ["endpoints a v2"]);
    // Only A's endpoints were generated.
    assert_eq!(
        *src.calls.borrow(),
        [(ENDPOINT.to_string(), vec![A.to_string()])]
    );
}

#[test]
fn changed_cluster_gets_its_endpoints_again() {
    let mut src = mesh(1);
    let mut s = synced(&src);
    src.version = 2;
    src.set(CLUSTER, A, "cluster a v2");
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    let types: Vec<_> = pushed.iter().map(|r| r.type_url.as_str()).collect();
    assert_eq!(types, [CLUSTER, ENDPOINT]);
    assert_eq!(names(&pushed[1]), ["endpoints a"]);
}

#[test]
fn unsubscribed_names_are_resent_on_resubscription() {
    let src = mesh(1);
    let mut s = synced(&src);
    let nonce = status(&s, ENDPOINT).nonce_sent;
    assert!(
        s.on_request(&src, &req(ENDPOINT, &[A], &nonce))
            .unwrap()
            .responses
            .is_empty()
    );
    let r = s.on_request(&src, &req(ENDPOINT, &[A, B], &nonce)).unwrap();
    assert_eq!(names(&r.responses[0]), ["endpoints b"]);
}

#[test]
fn request_without_type_url_is_an_error() {
    let src = mesh(1);
    let mut s = SotwStream::new(proxy());
    assert!(matches!(
        s.on_request(&src, &req("", &[], "")),
        Err(AdsError::MissingTypeUrl)
    ));
}

#[test]
fn generation_errors_are_reported_not_fatal() {
    let mut src = mesh(1);
    src.fail(ROUTE);
    let mut s = SotwStream::new(proxy());
    let r = s.on_request(&src, &req(ROUTE, &["80"], "")).unwrap();
    assert!(r.responses.is_empty());
    assert_eq!(r.errors.len(), 1);
}

/// The xDS protocol's legacy wildcard: an empty `resource_names` means `*` for CDS/LDS only
/// until a request of the type names something; after that it unsubscribes from all.
#[test]
fn empty_names_are_wildcard_only_until_a_request_names_something() {
    let mut src = mesh(1);
    let mut s = SotwStream::new(proxy());
    let r = s.on_request(&src, &req(CLUSTER, &[], "")).unwrap();
    assert_eq!(names(&r.responses[0]), ["cluster a", "cluster b"]);
    // Still legacy wildcard on every empty request, pushes included.
    let a = s.on_request(&src, &ack(&r.responses[0], &[])).unwrap();
    assert!(a.responses.is_empty());
    src.set(CLUSTER, C, "cluster c");
    let pushed = s.on_push(&src, &PushScope::Full).unwrap();
    assert_eq!(names(&pushed[0]), ["cluster a", "cluster b", "cluster c"]);
    s.on_request(&src, &ack(&pushed[0], &[])).unwrap();

    // `*` and a name: still everything, nothing new to send.
    let nonce = status(&s, CLUSTER).nonce_sent;
    let r = s
        .on_request(&src, &req(CLUSTER, &["*", A], &nonce))
        .unwrap();
    assert!(r.responses.is_empty());
    // A alone: the wildcard is dropped, the proxy is told its set is just A.
    let r = s.on_request(&src, &req(CLUSTER, &[A], &nonce)).unwrap();
    assert_eq!(names(&r.responses[0]), ["cluster a"]);
    assert!(!status(&s, CLUSTER).wildcard);
    // Its last name dropped: subscribed to nothing, and sent nothing (not everything).
    let nonce = r.responses[0].nonce.clone();
    let r = s.on_request(&src, &req(CLUSTER, &[], &nonce)).unwrap();
    assert_eq!(r.kind, RequestKind::Ack);
    assert!(r.responses.is_empty(), "{:?}", r.responses);
    let st = status(&s, CLUSTER);
    assert_eq!((st.wildcard, st.subscribed(), st.resources), (false, 0, 0));
    src.set(CLUSTER, B, "cluster b v2");
    assert!(s.on_push(&src, &PushScope::Full).unwrap().is_empty());
    // So does an empty first request again on this stream (Envoy's re-request).
    let r = s.on_request(&src, &req(CLUSTER, &[], "")).unwrap();
    assert!(r.responses.iter().all(|r| r.resources.is_empty()));

    // An explicit `*` still subscribes to everything.
    let nonce = status(&s, CLUSTER).nonce_sent;
    let r = s.on_request(&src, &req(CLUSTER, &["*"], &nonce)).unwrap();
    assert_eq!(
        names(&r.responses[0]),
        ["cluster a", "cluster b v2", "cluster c"]
    );
    assert!(status(&s, CLUSTER).wildcard);
}

#[test]
fn unknown_types_are_ignored_and_nothing_is_kept() {
    let src = mesh(1);
    let mut s = SotwStream::new(proxy());
    for type_url in [
        "type.googleapis.com/Unknown",
        "type.googleapis.com/envoy.service.runtime.v3.Runtime",
    ] {
        let r = s.on_request(&src, &req(type_url, &["x", "y"], "")).unwrap();
        assert_eq!(r.kind, RequestKind::Unsupported);
        assert!(r.responses.is_empty() && r.errors.is_empty());
        assert!(!s.watches(type_url));
    }
    assert!(s.status().is_empty());
    assert!(src.calls.borrow().is_empty(), "nothing was generated");
}

#[test]
fn names_per_stream_are_bounded_over_all_types() {
    let src = mesh(1);
    let mut s = SotwStream::new(proxy()).with_max_names(3);
    s.on_request(&src, &req(ENDPOINT, &[A, B], "")).unwrap();
    s.on_request(&src, &req(ROUTE, &["80"], "")).unwrap();
    let err = s
        .on_request(&src, &req(ROUTE, &["80", "8080"], ""))
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
    let status = err.to_status();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(
        status.message().contains("limit of 3")
            && status.message().contains("SHOAL_XDS_MAX_NAMES_PER_STREAM"),
        "{status}"
    );
    assert_eq!(self::status(&s, ROUTE).subscribed(), 1, "nothing kept");
    // Replacing names is not adding them; duplicates count once.
    let nonce = self::status(&s, ENDPOINT).nonce_sent;
    s.on_request(&src, &req(ENDPOINT, &[A], &nonce)).unwrap();
    let nonce = self::status(&s, ROUTE).nonce_sent;
    s.on_request(&src, &req(ROUTE, &["80", "8080", "80"], &nonce))
        .unwrap();
    assert_eq!(self::status(&s, ROUTE).subscribed(), 2);
}

/// Off the wire a request's names are bytes: an ACK that repeats the list held is
/// compared as bytes, and a list with a name that is not UTF-8 ends the stream, naming
/// the type, with nothing of it kept.
#[test]
fn names_off_the_wire_are_compared_as_bytes_and_must_be_utf8() {
    let src = mesh(1);
    let mut s = SotwStream::new(proxy());
    let r = s
        .on_request(&src, &SotwRequest::from(req(ENDPOINT, &[B, A], "")))
        .unwrap();
    assert_eq!(names(&r.responses[0]).len(), 2);
    let a = s
        .on_request(&src, &SotwRequest::from(ack(&r.responses[0], &[A, B])))
        .unwrap();
    assert_eq!(a.kind, RequestKind::Ack);
    assert!(a.responses.is_empty());

    let nonce = status(&s, ENDPOINT).nonce_sent;
    let mut bad = SotwRequest::from(req(ENDPOINT, &[A], &nonce));
    bad.resource_names.push(bytes::Bytes::from_static(b"b\xff"));
    let err = s.on_request(&src, &bad).unwrap_err();
    assert!(
        matches!(&err, AdsError::NameNotUtf8 { type_url } if type_url == ENDPOINT),
        "{err}"
    );
    let st = err.to_status();
    assert_eq!(st.code(), tonic::Code::InvalidArgument);
    assert!(st.message().contains("not UTF-8"), "{st}");
    assert_eq!(status(&s, ENDPOINT).subscribed(), 2, "nothing kept");
}
