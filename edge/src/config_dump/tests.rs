use super::*;
use crate::xds::XdsResource;
use crate::xds::types::{CLUSTER, LISTENER, SECRET};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
use envoy_types::pb::envoy::config::core::v3::{DataSource, TransportSocket, data_source};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, Secret, TlsCertificate, UpstreamTlsContext, secret,
};
use envoy_types::pb::google::protobuf::{Any, Duration};
use prost::{Message, Name};
use serde_json::json;
use std::sync::Arc;

fn resource<M: Message + Name>(name: &str, type_url: &str, m: &M) -> Arc<XdsResource> {
    Arc::new(XdsResource::new(name.into(), type_url, m.encode_to_vec()))
}

fn cluster(name: &str, timeout_s: i64) -> Arc<XdsResource> {
    let c = Cluster {
        name: name.into(),
        connect_timeout: Some(Duration {
            seconds: timeout_s,
            nanos: 0,
        }),
        ..Default::default()
    };
    resource(name, CLUSTER, &c)
}

fn inline_key(key: &str) -> Option<DataSource> {
    Some(DataSource {
        specifier: Some(data_source::Specifier::InlineString(key.into())),
        ..Default::default()
    })
}

#[test]
fn a_resource_is_written_as_envoy_writes_it() {
    let json = resource_json(&cluster("outbound|80||a.b.svc.cluster.local", 5).resource).unwrap();
    assert_eq!(
        json,
        json!({
            "@type": CLUSTER,
            "name": "outbound|80||a.b.svc.cluster.local",
            // proto3 JSON: a Duration as seconds, names as in the .proto.
            "connect_timeout": "5s",
        })
    );
}

/// Envoy redacts what its API marks `sensitive`; so does the dump, inside `Any`s too (a
/// TLS context is a transport socket's `typed_config`).
#[test]
fn private_keys_are_redacted_even_inside_an_any() {
    let tls = TlsCertificate {
        certificate_chain: inline_key("-----BEGIN CERTIFICATE-----"),
        private_key: inline_key("-----BEGIN PRIVATE KEY----- secret"),
        ..Default::default()
    };
    let secret = Secret {
        name: "kubernetes://gw-cert".into(),
        r#type: Some(secret::Type::TlsCertificate(tls.clone())),
    };
    let json = resource_json(&resource("kubernetes://gw-cert", SECRET, &secret).resource).unwrap();
    assert_eq!(
        json["tls_certificate"]["private_key"]["inline_string"],
        REDACTED
    );
    assert_eq!(
        json["tls_certificate"]["certificate_chain"]["inline_string"],
        "-----BEGIN CERTIFICATE-----"
    );

    let upstream = UpstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificates: vec![tls],
            ..Default::default()
        }),
        ..Default::default()
    };
    let c = Cluster {
        name: "c".into(),
        transport_socket: Some(TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: Some(ConfigType::TypedConfig(Any {
                type_url: format!("type.googleapis.com/{}", UpstreamTlsContext::full_name()),
                value: upstream.encode_to_vec(),
            })),
        }),
        ..Default::default()
    };
    let json = resource_json(&resource("c", CLUSTER, &c).resource).unwrap();
    let context = &json["transport_socket"]["typed_config"];
    assert_eq!(
        context["@type"],
        "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
    );
    let key = &context["common_tls_context"]["tls_certificates"][0]["private_key"];
    assert_eq!(key["inline_string"], REDACTED, "{json}");
    assert!(!json.to_string().contains("secret"), "{json}");
}

#[test]
fn a_type_it_cannot_write_is_named_with_the_reason() {
    let unknown = Arc::new(XdsResource::new(
        "x".into(),
        "type.googleapis.com/example.Invented",
        vec![],
    ));
    let dump = config_dump(&[Held {
        type_url: CLUSTER,
        version: "3",
        resources: &[unknown],
    }]);
    let entry = &dump["configs"][0]["dynamic_active_clusters"][0]["cluster"];
    assert_eq!(entry["name"], "x");
    assert!(
        entry["error"]
            .as_str()
            .unwrap()
            .contains("example.Invented"),
        "{entry}"
    );
}

#[test]
fn the_dump_has_envoys_layout_and_order() {
    let clusters = [cluster("a", 1), cluster("b", 1)];
    let listener = Listener {
        name: "virtualOutbound".into(),
        ..Default::default()
    };
    let listeners = [resource("virtualOutbound", LISTENER, &listener)];
    // Handed in listeners first: written clusters first, as Envoy does.
    let dump = config_dump(&[
        Held {
            type_url: LISTENER,
            version: "7",
            resources: &listeners,
        },
        Held {
            type_url: CLUSTER,
            version: "7",
            resources: &clusters,
        },
    ]);
    let configs = dump["configs"].as_array().unwrap();
    assert_eq!(
        configs[0]["@type"],
        "type.googleapis.com/envoy.admin.v3.ClustersConfigDump"
    );
    assert_eq!(configs[0]["version_info"], "7");
    assert_eq!(
        configs[0]["dynamic_active_clusters"][1]["cluster"]["name"],
        "b"
    );
    assert_eq!(
        configs[1]["@type"],
        "type.googleapis.com/envoy.admin.v3.ListenersConfigDump"
    );
    let listener = &configs[1]["dynamic_listeners"][0];
    assert_eq!(listener["name"], "virtualOutbound");
    assert_eq!(
        listener["active_state"]["listener"]["name"],
        "virtualOutbound"
    );
}

#[test]
fn the_diff_names_only_what_differs() {
    let held = [cluster("a", 1), cluster("b", 1), cluster("same", 1)];
    let now = [cluster("a", 2), cluster("c", 1), cluster("same", 1)];
    let diff = config_diff(
        &Held {
            type_url: CLUSTER,
            version: "4",
            resources: &held,
        },
        &now,
        5,
    );
    assert!(!diff.matches);
    assert_eq!((diff.acked_version.as_str(), diff.edge_version), ("4", 5));
    let names: Vec<&str> = diff.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let a = &diff.resources[0];
    assert_eq!(a.acked.as_ref().unwrap()["connect_timeout"], "1s");
    assert_eq!(a.edge.as_ref().unwrap()["connect_timeout"], "2s");
    assert!(
        diff.resources[1].edge.is_none(),
        "b: only the proxy holds it"
    );
    assert!(
        diff.resources[2].acked.is_none(),
        "c: only the edge would send it"
    );

    let same = config_diff(
        &Held {
            type_url: CLUSTER,
            version: "5",
            resources: &now,
        },
        &now,
        5,
    );
    assert!(same.matches && same.resources.is_empty());
}
