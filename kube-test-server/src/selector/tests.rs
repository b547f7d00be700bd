use serde_json::json;

use super::*;

fn labelled(labels: serde_json::Value) -> serde_json::Value {
    json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
}

#[test]
fn equality_inequality_and_existence() {
    let object = labelled(json!({"app": "web", "tier": "front"}));
    let holds = |selector: &str| LabelSelector::parse(selector).unwrap().matches(&object);
    assert!(holds(""));
    assert!(holds("app=web"));
    assert!(holds("app==web"));
    assert!(!holds("app=db"));
    assert!(holds("app!=db"));
    assert!(holds("missing!=x"), "!= holds when the label is absent");
    assert!(holds("tier"));
    assert!(!holds("missing"));
    assert!(holds("!missing"));
    assert!(!holds("!app"));
    assert!(holds("app=web,tier=front"));
    assert!(!holds("app=web,tier=back"));
}

#[test]
fn set_based_requirements() {
    let object = labelled(json!({"env": "prod"}));
    let holds = |selector: &str| LabelSelector::parse(selector).unwrap().matches(&object);
    assert!(holds("env in (prod, staging)"));
    assert!(!holds("env in (dev)"));
    assert!(holds("env notin (dev,staging)"));
    assert!(!holds("env notin (prod)"));
    assert!(
        holds("zone notin (a)"),
        "notin holds when the label is absent"
    );
    assert!(!holds("zone in (a)"));
    assert!(holds("env in (prod,staging),!zone"));
}

#[test]
fn an_object_without_labels_matches_only_absence() {
    let object = json!({"metadata": {"name": "a"}});
    let holds = |selector: &str| LabelSelector::parse(selector).unwrap().matches(&object);
    assert!(holds("!app"));
    assert!(holds("app!=web"));
    assert!(!holds("app"));
    assert!(!holds("app=web"));
}

#[test]
fn malformed_label_selectors_are_refused() {
    for bad in ["app in prod", "a b=c", "app in (x", "=x", "!", "app on (x)"] {
        assert!(LabelSelector::parse(bad).is_err(), "{bad:?} parsed");
    }
}

#[test]
fn field_selectors_on_name_and_namespace() {
    let object = json!({"metadata": {"name": "web", "namespace": "prod"}});
    let holds = |selector: &str| FieldSelector::parse(selector).unwrap().matches(&object);
    assert!(holds("metadata.name=web"));
    assert!(holds("metadata.name==web,metadata.namespace=prod"));
    assert!(!holds("metadata.namespace=dev"));
    assert!(holds("metadata.namespace!=dev"));
    assert!(!holds("metadata.name!=web"));
    let cluster_scoped = json!({"metadata": {"name": "node-1"}});
    assert!(
        FieldSelector::parse("metadata.namespace=")
            .unwrap()
            .matches(&cluster_scoped)
    );
}

#[test]
fn unsupported_fields_are_refused() {
    assert_eq!(
        FieldSelector::parse("spec.nodeName=a"),
        Err(SelectorError::UnsupportedField("spec.nodeName".into()))
    );
}

#[test]
fn a_selection_joins_namespace_and_both_selectors() {
    let object =
        json!({"metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web"}}});
    let selection = |namespace: Option<&str>, labels: &str| {
        Selection::parse(namespace.map(str::to_owned), Some(labels), None).unwrap()
    };
    assert!(selection(None, "").matches(&object));
    assert!(selection(Some("prod"), "app=web").matches(&object));
    assert!(!selection(Some("dev"), "app=web").matches(&object));
    assert!(!selection(Some("prod"), "app=db").matches(&object));
}
