use super::*;

fn change(full: bool, names: &[&str], start: u64) -> ChangeSet {
    ChangeSet {
        full,
        keys: names
            .iter()
            .map(|n| ChangeKey::Config(ConfigKey::new(Kind::VirtualService, "default", *n)))
            .collect(),
        reasons: BTreeMap::from([(
            if full {
                TriggerReason::ConfigUpdate
            } else {
                TriggerReason::EndpointUpdate
            },
            1,
        )]),
        start_unix_nanos: start,
        ..Default::default()
    }
}

fn traced(mut c: ChangeSet, id: &str) -> ChangeSet {
    c.trace.insert("traceparent".into(), id.into());
    c
}

#[test]
fn merge_keeps_earliest_start() {
    let m = change(false, &["a"], 20).merge(change(false, &["b"], 10));
    assert_eq!(m.start_unix_nanos, 10);
}

#[test]
fn merge_full_is_or() {
    assert!(change(true, &["a"], 1).merge(change(false, &["b"], 1)).full);
    assert!(change(false, &["a"], 1).merge(change(true, &["b"], 1)).full);
    assert!(
        !change(false, &["a"], 1)
            .merge(change(false, &["b"], 1))
            .full
    );
}

#[test]
fn merge_counts_reasons() {
    let m = change(true, &["a"], 1)
        .merge(change(true, &["b"], 1))
        .merge(change(false, &["c"], 1));
    assert_eq!(
        m.reasons,
        BTreeMap::from([
            (TriggerReason::EndpointUpdate, 1),
            (TriggerReason::ConfigUpdate, 2)
        ])
    );
    assert_eq!(m.events(), 3);
}

#[test]
fn merge_unions_keys_when_both_non_empty() {
    let m = change(true, &["a"], 1).merge(change(true, &["b", "a"], 1));
    let names: Vec<String> = m.keys.iter().map(|k| k.to_string()).collect();
    assert_eq!(names.len(), 2);
}

#[test]
fn merge_with_empty_keys_means_everything() {
    assert!(
        change(true, &["a"], 1)
            .merge(change(true, &[], 1))
            .is_everything()
    );
    assert!(
        change(true, &[], 1)
            .merge(change(true, &["a"], 1))
            .is_everything()
    );
}

#[test]
fn merge_carries_the_earliest_trace() {
    let early = traced(change(true, &["a"], 1), "early");
    let late = traced(change(true, &["b"], 5), "late");
    assert_eq!(
        late.clone().merge(early.clone()).trace["traceparent"],
        "early"
    );
    assert_eq!(early.merge(late.clone()).trace["traceparent"], "early");
    // An untraced change adopts the trace of whatever merges into it.
    assert_eq!(
        change(true, &["c"], 0).merge(late).trace["traceparent"],
        "late"
    );
}

/// Every traced event a push carries leads to it: the traces not kept are linked, up to
/// a bound, the rest counted.
#[test]
fn merge_links_the_traces_it_does_not_keep() {
    let merged = traced(change(true, &["b"], 5), "late")
        .merge(traced(change(true, &["a"], 1), "early"))
        .merge(change(true, &["c"], 3))
        .merge(traced(change(true, &["d"], 7), "later"));
    assert_eq!(merged.trace["traceparent"], "early");
    let linked: Vec<&str> = merged
        .linked
        .iter()
        .map(|t| t["traceparent"].as_str())
        .collect();
    assert_eq!(linked, ["late", "later"]);

    let storm = (0..MAX_LINKED_TRACES as u64 + 5)
        .map(|i| traced(change(true, &["x"], 10 + i), &i.to_string()))
        .fold(change(true, &["x"], 0), ChangeSet::merge);
    assert_eq!(storm.trace["traceparent"], "0");
    assert_eq!(storm.linked.len(), MAX_LINKED_TRACES);
    assert_eq!(storm.linked_dropped, 4);
}

#[test]
fn merge_is_associative_on_what_it_keeps() {
    let (a, b, c) = (
        change(false, &["a"], 3),
        change(true, &["b"], 1),
        change(false, &["c"], 2),
    );
    let left = a.clone().merge(b.clone()).merge(c.clone());
    let right = a.merge(b.merge(c));
    assert_eq!(left, right);
}

#[test]
fn endpoint_kinds_are_not_full() {
    let now = SystemTime::now();
    let eds = ChangeSet::for_config(ConfigKey::new(Kind::EndpointSlice, "ns", "s"), now);
    assert!(!eds.full);
    let vs = ChangeSet::for_config(ConfigKey::new(Kind::VirtualService, "ns", "v"), now);
    assert!(vs.full);
}

#[test]
fn the_trace_is_not_in_the_payload() {
    let c = traced(change(true, &["a"], 1), "x");
    let json = serde_json::to_string(&c).unwrap();
    assert!(!json.contains("traceparent"));
    let back: ChangeSet = serde_json::from_str(&json).unwrap();
    assert!(back.trace.is_empty());
}
