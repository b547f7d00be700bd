use super::fleet::{EdgeAnswer, FleetStatus, Outcome, Verdict};
use shoal_edge::convergence::{NackSample, PushStatus, RevisionCounts, RevisionState};

fn edge(name: &str, state: RevisionState) -> EdgeAnswer {
    EdgeAnswer {
        addr: format!("{name}:15014"),
        edge: Some(name.into()),
        outcome: Outcome::Answered(PushStatus {
            asked: Some(7),
            held: 7,
            latest_pushed: Some(7),
            state,
        }),
    }
}

fn pushed(concerned: u64, acked: u64, nacked: u64, gone: u64) -> RevisionState {
    RevisionState::Pushed(RevisionCounts {
        version: 7,
        concerned,
        sent: concerned,
        acked,
        nacked,
        gone,
        pending: concerned - acked - nacked - gone,
        changes: vec!["VirtualService ns-0/svc-0".into()],
        changed: 1,
        full: true,
        nacks: (0..nacked)
            .map(|i| NackSample {
                proxy: format!("proxy-{i}"),
                type_url: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration".into(),
                message: "regex too large".into(),
            })
            .collect(),
        ..Default::default()
    })
}

#[test]
fn converged_when_every_edge_has_no_proxy_left_to_answer() {
    let s = FleetStatus::new(
        Some(7),
        vec![
            edge("edge-0", pushed(10, 9, 0, 1)),
            edge("edge-1", RevisionState::Current),
        ],
    );
    assert_eq!(s.verdict, Verdict::Converged);
    assert_eq!(
        (s.totals.concerned, s.totals.acked, s.totals.gone),
        (10, 9, 1)
    );
    let text = s.text();
    assert!(
        text.starts_with("revision 7: VirtualService ns-0/svc-0\n"),
        "{text}"
    );
    assert!(text.contains("converged: 9 of 10"), "{text}");
}

#[test]
fn a_nack_anywhere_is_the_verdict_and_names_the_proxy() {
    let s = FleetStatus::new(
        Some(7),
        vec![
            edge("edge-0", pushed(10, 5, 0, 0)),
            edge("edge-1", pushed(4, 3, 1, 0)),
        ],
    );
    assert_eq!(s.verdict, Verdict::Nacked);
    assert_eq!(s.verdict.exit_code(), 1);
    let text = s.text();
    assert!(
        text.contains("proxy-0 (RouteConfiguration): regex too large"),
        "{text}"
    );
}

#[test]
fn pending_while_proxies_or_edges_are_behind() {
    let s = FleetStatus::new(Some(7), vec![edge("edge-0", pushed(10, 5, 0, 0))]);
    assert_eq!((s.verdict, s.totals.pending), (Verdict::Pending, 5));
    let s = FleetStatus::new(
        Some(7),
        vec![
            edge("edge-0", pushed(10, 10, 0, 0)),
            edge("edge-1", RevisionState::NotYet),
        ],
    );
    assert_eq!(s.verdict, Verdict::Pending);
    assert_eq!(s.verdict.exit_code(), 2);
}

#[test]
fn unknown_when_an_edge_cannot_say() {
    let failed = EdgeAnswer {
        addr: "10.0.0.9:15014".into(),
        edge: None,
        outcome: Outcome::Failed("connection refused".into()),
    };
    let s = FleetStatus::new(Some(7), vec![edge("edge-0", pushed(1, 1, 0, 0)), failed]);
    assert_eq!((s.verdict, s.verdict.exit_code()), (Verdict::Unknown, 3));
    assert!(s.text().contains("10.0.0.9:15014"));
    let s = FleetStatus::new(Some(7), vec![edge("edge-0", RevisionState::Forgotten)]);
    assert_eq!(s.verdict, Verdict::Unknown);
    assert_eq!(FleetStatus::new(None, vec![]).verdict, Verdict::Unknown);
}

#[test]
fn the_json_names_each_edge_and_its_state() {
    let s = FleetStatus::new(Some(7), vec![edge("edge-0", pushed(2, 2, 0, 0))]);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["verdict"], "converged");
    assert_eq!(json["edges"][0]["edge"], "edge-0");
    assert_eq!(json["edges"][0]["answered"]["state"], "pushed");
    assert_eq!(json["edges"][0]["answered"]["acked"], 2);
}
