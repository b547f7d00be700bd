use super::super::*;
use shoal_proto::config::security::{AuthorizationPolicy, PolicySelector};
use shoal_proto::model::NamespaceConfig;

#[test]
fn proxies_under_the_same_policies_share_a_key_and_a_mesh_without_any_has_none() {
    let policy = |name: &str, app: Option<&str>| NamedConfig {
        name: name.into(),
        namespace: "shop".into(),
        created: 0,
        spec: AuthorizationPolicy {
            selector: app.map(|a| PolicySelector {
                match_labels: [("app".to_string(), a.to_string())].into(),
            }),
            ..Default::default()
        },
    };
    let namespaces = [(
        "shop".to_string(),
        Arc::new(NamespaceConfig {
            namespace: "shop".into(),
            authorization_policies: vec![policy("all", None), policy("web", Some("web"))],
            ..Default::default()
        }),
    )]
    .into();
    let index = SecurityPolicies::build("istio-system", &namespaces);
    let labels = |app: &str, pod: &str| -> BTreeMap<String, String> {
        [("app", app), ("pod", pod)]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let key = |app: &str, pod: &str| {
        ProxyPolicies::of(&index, "shop", &labels(app, pod), false).key(&Default::default())
    };
    assert_eq!(
        key("web", "web-0"),
        key("web", "web-1"),
        "pods of one deployment"
    );
    assert_ne!(key("web", "web-0"), key("db", "db-0"));
    let empty = SecurityPolicies::build("istio-system", &BTreeMap::new());
    assert_eq!(
        ProxyPolicies::of(&empty, "shop", &labels("web", "web-0"), false),
        ProxyPolicies::default()
    );
}
