use super::ledger::MAX_NACK_SAMPLES;
use super::*;
use crate::ads::status::{Nack, TypeStatus};
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

fn change() -> ChangeSet {
    ChangeSet::of(
        true,
        BTreeSet::from([ChangeKey::Host("a.ns.svc.cluster.local".into())]),
        TriggerReason::ConfigUpdate,
        SystemTime::now(),
    )
}

/// A ledger that dispatched `versions`, each to `concerned` proxies.
fn ledger(capacity: usize, versions: &[u64], concerned: u64) -> Arc<Ledger> {
    let l = Arc::new(Ledger::new(capacity));
    for &v in versions {
        l.dispatched(v, &change(), SystemTime::now());
        l.concerned(v, concerned);
    }
    l
}

fn counts(l: &Ledger, v: u64) -> RevisionCounts {
    match l.status(Some(v), v).state {
        RevisionState::Pushed(c) if c.version == v => c,
        other => panic!("{v}: {other:?}"),
    }
}

/// A type's status: `sent` nonce, `acked` nonce, and a NACK of `nacked` when given.
fn status(
    type_url: &str,
    sent: &str,
    acked: &str,
    nacked: Option<(&str, &str)>,
) -> Arc<TypeStatus> {
    let mut s = TypeStatus::new(type_url);
    s.sent(sent.split('-').next().unwrap_or(""), sent);
    s.nonce_acked = acked.into();
    s.nack = nacked.map(|(nonce, message)| Nack {
        nonce: nonce.into(),
        version: "".into(),
        message: message.into(),
    });
    Arc::new(s)
}

#[test]
fn a_revision_is_answered_by_the_first_version_pushed_at_or_after_it() {
    let l = ledger(8, &[5, 9], 2);
    let at = |asked, held| l.status(asked, held).state;
    assert!(matches!(at(Some(3), 9), RevisionState::Pushed(c) if c.version == 5));
    assert!(matches!(at(Some(6), 9), RevisionState::Pushed(c) if c.version == 9));
    assert!(matches!(at(None, 9), RevisionState::Pushed(c) if c.version == 9));
    // Held, but nothing pushed at or after it: every proxy here has it.
    assert_eq!(at(Some(10), 12), RevisionState::Current);
    // Not held yet.
    assert_eq!(at(Some(13), 12), RevisionState::NotYet);
    let s = l.status(Some(6), 9);
    assert_eq!((s.asked, s.held, s.latest_pushed), (Some(6), 9, Some(9)));
    assert_eq!(Ledger::new(4).status(None, 3).state, RevisionState::Current);
}

#[test]
fn only_the_latest_revisions_are_kept_and_older_ones_are_reported_forgotten() {
    let l = ledger(2, &[1, 2, 3], 1);
    assert_eq!(l.status(Some(1), 3).state, RevisionState::Forgotten);
    assert!(matches!(l.status(Some(2), 3).state, RevisionState::Pushed(c) if c.version == 2));
    // What is forgotten is not counted again.
    l.dispatched(1, &change(), SystemTime::now());
    assert_eq!(l.status(Some(1), 3).state, RevisionState::Forgotten);
}

#[test]
fn a_proxy_is_counted_once_however_its_revisions_settle() {
    let l = ledger(8, &[1, 2, 3], 1);
    let mut r = Revisions::concerned(&l, 1).merge(Revisions::concerned(&l, 2));
    r.sent();
    // Merged again with a version sent and one not: each counted sent once.
    let mut r = r
        .merge(Revisions::concerned(&l, 3))
        .merge(Revisions::concerned(&l, 2));
    r.sent();
    r.acked("p");
    for v in [1, 2, 3] {
        let c = counts(&l, v);
        assert_eq!((c.sent, c.acked, c.pending), (1, 1, 0), "{v}: {c:?}");
    }
}

#[test]
fn a_token_dropped_unsettled_counts_its_proxy_gone() {
    let l = ledger(8, &[7], 3);
    drop(Revisions::concerned(&l, 7));
    let mut sent = Revisions::concerned(&l, 7);
    sent.sent();
    drop(sent);
    Revisions::concerned(&l, 7).acked("p");
    let c = counts(&l, 7);
    assert_eq!((c.sent, c.acked, c.gone, c.pending), (2, 1, 2, 0));
    // A token that tracks nothing counts nothing.
    drop(Revisions::none());
    assert_eq!(counts(&l, 7).gone, 2);
}

#[test]
fn a_token_keeps_no_more_versions_than_the_ledger() {
    let l = ledger(2, &[1, 2, 3, 4], 1);
    let r = (1..=4).fold(Revisions::none(), |r, v| {
        r.merge(Revisions::concerned(&l, v))
    });
    assert_eq!(r.versions().collect::<Vec<_>>(), vec![3, 4]);
}

#[test]
fn a_push_that_sends_nothing_settles_at_once() {
    let l = ledger(8, &[4], 1);
    let before = [status(CDS, "3-1", "3-1", None)];
    let mut f = InFlight::default();
    f.pushed(Revisions::concerned(&l, 4), &before, &before, "p");
    assert!(!f.is_waiting());
    let c = counts(&l, 4);
    assert_eq!((c.sent, c.acked), (1, 1));
}

#[test]
fn a_push_is_acked_once_every_response_it_sent_is() {
    let l = ledger(8, &[4], 1);
    let before = [
        status(CDS, "3-1", "3-1", None),
        status(RDS, "3-2", "3-2", None),
    ];
    let after = [
        status(CDS, "4-3", "3-1", None),
        status(RDS, "4-4", "3-2", None),
    ];
    let mut f = InFlight::default();
    f.pushed(Revisions::concerned(&l, 4), &before, &after, "p");
    assert_eq!(counts(&l, 4).sent, 1);
    f.answered(
        &[
            status(CDS, "4-3", "4-3", None),
            status(RDS, "4-4", "3-2", None),
        ],
        "p",
    );
    assert!(f.is_waiting(), "RDS not answered yet");
    f.answered(
        &[
            status(CDS, "4-3", "4-3", None),
            status(RDS, "4-4", "4-4", None),
        ],
        "p",
    );
    assert!(!f.is_waiting());
    let c = counts(&l, 4);
    assert_eq!((c.acked, c.nacked, c.pending), (1, 0, 0));
}

#[test]
fn a_nack_settles_the_push_with_the_proxys_words() {
    let l = ledger(8, &[4], 1);
    let before = [status(RDS, "3-1", "3-1", None)];
    let after = [status(RDS, "4-2", "3-1", None)];
    let mut f = InFlight::default();
    f.pushed(Revisions::concerned(&l, 4), &before, &after, "p");
    f.answered(
        &[status(RDS, "4-2", "3-1", Some(("4-2", "regex too large")))],
        "proxy-1",
    );
    assert!(!f.is_waiting());
    let c = counts(&l, 4);
    assert_eq!((c.nacked, c.acked, c.pending), (1, 0, 0));
    assert_eq!(
        c.nacks,
        vec![NackSample {
            proxy: "proxy-1".into(),
            type_url: RDS.into(),
            message: "regex too large".into(),
        }]
    );
}

#[test]
fn nack_samples_are_bounded() {
    let n = MAX_NACK_SAMPLES as u64 + 5;
    let l = ledger(8, &[2], n);
    let sample = NackSample {
        proxy: "p".into(),
        type_url: CDS.into(),
        message: "no".into(),
    };
    for _ in 0..n {
        Revisions::concerned(&l, 2).nacked(&sample);
    }
    let c = counts(&l, 2);
    assert_eq!((c.nacked, c.nacks.len()), (n, MAX_NACK_SAMPLES));
}

#[test]
fn a_later_push_takes_over_the_revisions_of_one_not_yet_answered() {
    let l = ledger(8, &[4, 5], 1);
    let s0 = [
        status(CDS, "3-1", "3-1", None),
        status(RDS, "3-2", "3-2", None),
    ];
    let s1 = [
        status(CDS, "4-3", "3-1", None),
        status(RDS, "3-2", "3-2", None),
    ];
    let s2 = [
        status(CDS, "4-3", "3-1", None),
        status(RDS, "5-4", "3-2", None),
    ];
    let mut f = InFlight::default();
    f.pushed(Revisions::concerned(&l, 4), &s0, &s1, "p");
    f.pushed(Revisions::concerned(&l, 5), &s1, &s2, "p");
    // CDS 4-3 and RDS 5-4 both awaited.
    f.answered(
        &[
            status(CDS, "4-3", "3-1", None),
            status(RDS, "5-4", "5-4", None),
        ],
        "p",
    );
    assert!(f.is_waiting());
    f.answered(
        &[
            status(CDS, "4-3", "4-3", None),
            status(RDS, "5-4", "5-4", None),
        ],
        "p",
    );
    assert!(!f.is_waiting());
    for v in [4, 5] {
        let c = counts(&l, v);
        assert_eq!((c.sent, c.acked, c.pending), (1, 1, 0), "{v}");
    }
}

#[test]
fn a_response_superseded_by_a_request_counts_by_the_latest_answer() {
    let l = ledger(8, &[4], 1);
    let before = [status(CDS, "3-1", "3-1", None)];
    let after = [status(CDS, "4-2", "3-1", None)];
    let mut f = InFlight::default();
    f.pushed(Revisions::concerned(&l, 4), &before, &after, "p");
    // A request was answered with 4-3 before the proxy ACKed 4-2 (whose ACK is stale).
    f.answered(&[status(CDS, "4-3", "3-1", None)], "p");
    assert!(f.is_waiting());
    f.answered(&[status(CDS, "4-3", "4-3", None)], "p");
    assert!(!f.is_waiting());
    assert_eq!(counts(&l, 4).acked, 1);
}

#[test]
fn a_stream_that_ends_waiting_counts_its_proxy_gone() {
    let l = ledger(8, &[4], 1);
    let mut f = InFlight::default();
    f.pushed(
        Revisions::concerned(&l, 4),
        &[status(CDS, "3-1", "3-1", None)],
        &[status(CDS, "4-2", "3-1", None)],
        "p",
    );
    drop(f);
    let c = counts(&l, 4);
    assert_eq!((c.sent, c.gone, c.pending), (1, 1, 0));
}

#[test]
fn a_converge_span_is_held_until_the_last_concerned_proxy_answers() {
    let l = ledger(2, &[5], 2);
    l.converging(
        5,
        tracing::info_span!("converge", acked = tracing::field::Empty),
    );
    assert_eq!(l.spans_held(), 1);
    l.acked([5].into_iter(), "p");
    assert_eq!(l.spans_held(), 1, "one proxy still pending");
    l.gone([5].into_iter());
    assert_eq!(l.spans_held(), 0, "ended once none is pending");

    // Nothing pending: ended at once; a forgotten revision ends its span.
    let l = ledger(2, &[7], 0);
    l.converging(7, tracing::Span::none());
    assert_eq!(l.spans_held(), 0);
    let l = ledger(1, &[8], 1);
    l.converging(8, tracing::Span::none());
    assert_eq!(l.spans_held(), 1);
    l.dispatched(9, &change(), SystemTime::now());
    assert_eq!(l.spans_held(), 0, "bounded by the revisions kept");
}
