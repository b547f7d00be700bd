//! Multi-document YAML → typed [`Config`]s, one result per document.
//!
//! Each document is parsed on its own so a malformed one is reported with its file and
//! line and the others still load. Errors name the object when its header could be read.

use super::{Config, ConfigMeta, Kind, Spec, istio, k8s, mesh, security, validate};
use doc::{DecodeError, Doc};
pub use ignored::{Ignored, parse_ignored};
pub use nodes::{NodeLabels, parse_nodes};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt;

/// Where an object came from: a file and the line its document starts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub source: String,
    pub line: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.source, self.line)
    }
}

/// Why one document was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {object}: {reason}")]
pub struct ParseError {
    pub location: Location,
    /// `Kind namespace/name` when the header was readable, else `document N`.
    pub object: String,
    pub reason: String,
    /// The object as read, when only validation rejected it: `shoal analyze` still
    /// checks its references, as istioctl does.
    pub rejected: Option<validate::Rejected>,
}

/// A parsed object and where it was written.
#[derive(Clone, Debug)]
pub struct Parsed {
    pub config: Config,
    pub location: Location,
    /// Accepted, but worth an operator's look (Istio would log these too).
    pub warnings: Vec<String>,
}

/// Parses every document of `text`. Documents that are empty or only comments are
/// skipped; kinds Shoal has no business with (ConfigMaps other than the mesh config, Deployments...) are skipped
/// silently, while Istio and Gateway API kinds it does not implement are reported as
/// errors saying so (nothing is served for them either way).
///
/// A `kind: List` document (what `kubectl get -o yaml` writes), or a `<Kind>List`, is
/// read as its items, each an object of its own with its own line.
pub fn parse_documents(source: &str, text: &str) -> Vec<Result<Parsed, ParseError>> {
    let mut parsed = Vec::new();
    for (index, (line, doc)) in split_documents(text).into_iter().enumerate() {
        let location = |line| Location {
            source: source.to_string(),
            line,
        };
        match list::items(doc) {
            Some(items) => parsed.extend(items.iter().filter_map(|item| {
                parse_document(location(line + item.line_offset), index, &item.text).transpose()
            })),
            None => parsed.extend(parse_document(location(line), index, doc).transpose()),
        }
    }
    parsed
}

/// Splits on `---` separator lines, keeping each document's first line number (1-based).
fn split_documents(text: &str) -> Vec<(usize, &str)> {
    let mut docs = Vec::new();
    let mut start_byte = 0;
    let mut start_line = 1;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed.starts_with("--- ") || trimmed == "..." {
            docs.push((start_line, &text[start_byte..offset]));
            start_byte = offset + line.len();
            start_line = i + 2;
        }
        offset += line.len();
    }
    docs.push((start_line, &text[start_byte..]));
    docs.into_iter()
        .filter(|(_, d)| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Header {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: Metadata,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Metadata {
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    owner_references: Vec<OwnerReference>,
    creation_timestamp: String,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct OwnerReference {
    kind: String,
    name: String,
}

/// The annotation naming a WorkloadEntry's WorkloadGroup, as Istio's auto-registration
/// writes it.
pub const AUTO_REGISTRATION_GROUP: &str = "istio.io/autoRegistrationGroup";

#[derive(Deserialize)]
struct WithSpec<S> {
    #[serde(default = "Option::default")]
    spec: Option<S>,
}

fn parse_document(
    location: Location,
    index: usize,
    doc: &str,
) -> Result<Option<Parsed>, ParseError> {
    // Go's YAML reads `[1.2.3.4, 2001:db8::1]`; libyaml needs the `:` scalar quoted.
    let quoted = flow::quote_colon_scalars(doc);
    parse_object(location, index, Doc::Yaml(&quoted), None)
}

/// Parses one object as the Kubernetes API serves it: JSON, typed by `types`
/// (`apiVersion`, `kind`: the resource it was listed or watched from, since the items of
/// a built-in kind's list do not say what they are). Errors name `source`, line 1.
///
/// It is decoded with serde_json into the same types, and validated the same way, as a
/// document of the directory. An object that does not pass is read again as the
/// directory reads it (JSON is YAML), whose verdict stands: both registries accept and
/// reject the same objects, with the same reasons (YAML also reads what JSON does not,
/// such as a number where a string is due).
pub fn parse_api_object(
    source: &str,
    types: (&str, &str),
    json: &str,
) -> Result<Option<Parsed>, ParseError> {
    let location = Location {
        source: source.to_string(),
        line: 1,
    };
    parse_object(location.clone(), 0, Doc::Json(json), Some(types)).or_else(|_| {
        let quoted = flow::quote_colon_scalars(json);
        parse_object(location, 0, Doc::Yaml(&quoted), Some(types))
    })
}

/// Parses one object; `types` (`apiVersion`, `kind`), when given, say what it is
/// whatever it says itself.
fn parse_object(
    location: Location,
    index: usize,
    doc: Doc<'_>,
    types: Option<(&str, &str)>,
) -> Result<Option<Parsed>, ParseError> {
    let fail = |object: String, reason: String, line_in_doc: Option<usize>| ParseError {
        location: Location {
            source: location.source.clone(),
            line: location.line + line_in_doc.map_or(0, |l| l.saturating_sub(1)),
        },
        object,
        reason,
        rejected: None,
    };
    let mut header: Header = doc
        .decode()
        .map_err(|e| fail(format!("document {}", index + 1), e.reason, e.line))?;
    if let Some((api_version, kind)) = types {
        header.api_version = api_version.to_string();
        header.kind = kind.to_string();
    }
    if header.api_version.is_empty() || header.kind.is_empty() {
        return Err(fail(
            format!("document {}", index + 1),
            "missing apiVersion or kind".into(),
            None,
        ));
    }
    let Some(kind) = Kind::from_api(&header.api_version, &header.kind) else {
        let Some(reason) = unsupported::unsupported_kind(&header.api_version, &header.kind, doc)
        else {
            return Ok(None);
        };
        // Named as every other object is (`Kind namespace/name`), so the registry can
        // tell which object the report is about.
        let namespace = match header.metadata.namespace.as_str() {
            "" => "default",
            ns => ns,
        };
        return Err(fail(
            format!("{} {namespace}/{}", header.kind, header.metadata.name),
            reason,
            None,
        ));
    };
    let mut annotations = header.metadata.annotations;
    // A WorkloadEntry owned by a WorkloadGroup names it as an auto-registered one does,
    // so that the builder finds its group one way.
    if kind == Kind::WorkloadEntry
        && let Some(owner) = header
            .metadata
            .owner_references
            .iter()
            .find(|o| o.kind == "WorkloadGroup" && !o.name.is_empty())
    {
        annotations
            .entry(AUTO_REGISTRATION_GROUP.to_string())
            .or_insert_with(|| owner.name.clone());
    }
    let mut meta = ConfigMeta {
        name: header.metadata.name,
        namespace: header.metadata.namespace,
        labels: header.metadata.labels,
        annotations,
        creation_timestamp: header.metadata.creation_timestamp,
        ..ConfigMeta::default()
    };
    if kind.is_cluster_scoped() {
        // Kubernetes ignores a namespace on cluster-scoped objects; so does the key.
        meta.namespace.clear();
    } else if meta.namespace.is_empty() {
        meta.namespace = "default".into();
    }
    let object = if kind.is_cluster_scoped() {
        format!("{kind} {}", meta.name)
    } else {
        format!("{kind} {}/{}", meta.namespace, meta.name)
    };
    if meta.name.is_empty() {
        return Err(fail(object, "metadata.name is required".into(), None));
    }
    let decode_fail = |e: DecodeError| fail(object.clone(), e.reason, e.line);
    let spec = if kind == Kind::MeshConfig {
        // Only the mesh config's ConfigMap concerns a mesh; every other is not read.
        if !mesh::is_mesh_configmap(&meta.name) {
            return Ok(None);
        }
        match mesh_config::mesh_config(doc).map_err(decode_fail)? {
            Some(mesh) => Spec::MeshConfig(mesh),
            None => return Ok(None),
        }
    } else {
        decode_spec(kind, &meta, doc).map_err(decode_fail)?
    };
    if let Spec::Secret(secret) = &spec
        && !secret.has_tls_material()
    {
        // Only TLS Secrets concern a mesh (gateways' credentials); the rest are not read.
        return Ok(None);
    }
    let unknown = unsupported::unknown_fields(&spec, doc);
    let config = Config { meta, spec };
    let mut warnings = validate::validate(&config).map_err(|e| ParseError {
        rejected: Some(validate::Rejected(Box::new(config.clone()))),
        ..fail(object.clone(), e.0, None)
    })?;
    if !unknown.is_empty() {
        warnings.push(format!(
            "fields not supported by Shoal, ignored: {}",
            unknown.join(", ")
        ));
    }
    Ok(Some(Parsed {
        config,
        location,
        warnings,
    }))
}

fn spec_of<S: DeserializeOwned + Default>(doc: Doc<'_>) -> Result<S, DecodeError> {
    Ok(doc.decode::<WithSpec<S>>()?.spec.unwrap_or_default())
}

fn decode_spec(kind: Kind, meta: &ConfigMeta, doc: Doc<'_>) -> Result<Spec, DecodeError> {
    Ok(match kind {
        Kind::Namespace => Spec::Namespace(k8s::NamespaceSpec {}),
        Kind::Service => Spec::Service(service_spec(doc)?),
        Kind::Pod => Spec::Pod(pod_spec(doc)?),
        Kind::EndpointSlice => {
            let mut slice: k8s::EndpointSliceSpec = doc.decode()?;
            slice.service_name = meta
                .labels
                .get("kubernetes.io/service-name")
                .cloned()
                .unwrap_or_default();
            Spec::EndpointSlice(slice)
        }
        Kind::Endpoints => Spec::Endpoints(doc.decode()?),
        Kind::ServiceEntry => Spec::ServiceEntry(spec_of::<istio::ServiceEntry>(doc)?),
        Kind::WorkloadEntry => Spec::WorkloadEntry(spec_of::<istio::WorkloadEntry>(doc)?),
        Kind::WorkloadGroup => Spec::WorkloadGroup(spec_of::<istio::WorkloadGroup>(doc)?),
        Kind::VirtualService => Spec::VirtualService(spec_of::<istio::VirtualService>(doc)?),
        Kind::DestinationRule => Spec::DestinationRule(spec_of::<istio::DestinationRule>(doc)?),
        Kind::Sidecar => Spec::Sidecar(spec_of::<istio::Sidecar>(doc)?),
        Kind::Gateway => Spec::Gateway(spec_of::<istio::Gateway>(doc)?),
        Kind::Secret => Spec::Secret(secret::tls_material(doc)?),
        Kind::MeshConfig => Spec::MeshConfig(mesh_config::mesh_config(doc)?.unwrap_or_default()),
        Kind::PeerAuthentication => {
            Spec::PeerAuthentication(spec_of::<security::PeerAuthentication>(doc)?)
        }
        Kind::AuthorizationPolicy => {
            Spec::AuthorizationPolicy(spec_of::<security::AuthorizationPolicy>(doc)?)
        }
        Kind::RequestAuthentication => {
            Spec::RequestAuthentication(spec_of::<security::RequestAuthentication>(doc)?)
        }
    })
}

/// Reads a Service's spec, and from its status the load balancer's addresses.
fn service_spec(doc: Doc<'_>) -> Result<k8s::ServiceSpec, DecodeError> {
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    struct RawStatus {
        load_balancer: RawLoadBalancer,
    }
    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct RawLoadBalancer {
        ingress: Vec<RawIngress>,
    }
    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct RawIngress {
        ip: String,
        hostname: String,
    }
    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct RawService {
        // Options: `spec: ~` is an empty spec, as for every kind.
        spec: Option<k8s::ServiceSpec>,
        status: Option<RawStatus>,
    }
    let raw: RawService = doc.decode()?;
    let mut spec = raw.spec.unwrap_or_default();
    spec.load_balancer_ingress = raw
        .status
        .unwrap_or_default()
        .load_balancer
        .ingress
        .into_iter()
        .map(|i| if i.ip.is_empty() { i.hostname } else { i.ip })
        .filter(|a| !a.is_empty())
        .collect();
    Ok(spec)
}

/// Reads a full Pod (spec and status) into the digest the registry uses.
fn pod_spec(doc: Doc<'_>) -> Result<k8s::PodSpec, DecodeError> {
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    struct RawPod {
        spec: RawPodSpec,
        status: RawPodStatus,
    }
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    struct RawPodSpec {
        node_name: String,
        service_account_name: String,
        containers: Vec<RawContainer>,
    }
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    struct RawContainer {
        ports: Vec<RawContainerPort>,
    }
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    struct RawContainerPort {
        name: String,
        container_port: u32,
    }
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    struct RawPodStatus {
        #[serde(rename = "podIP")]
        pod_ip: String,
        phase: String,
        conditions: Vec<RawCondition>,
    }
    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct RawCondition {
        #[serde(rename = "type")]
        condition_type: String,
        status: String,
    }
    let raw: RawPod = doc.decode()?;
    let ready_condition = raw
        .status
        .conditions
        .iter()
        .find(|c| c.condition_type == "Ready");
    // A hand-written Pod with an IP and no conditions is taken as ready; one that states
    // its Ready condition is taken at its word.
    let ready = match ready_condition {
        Some(c) => c.status == "True",
        None => !raw.status.pod_ip.is_empty() && raw.status.phase != "Failed",
    };
    Ok(k8s::PodSpec {
        ip: raw.status.pod_ip,
        ready,
        phase: raw.status.phase,
        node_name: raw.spec.node_name,
        service_account: raw.spec.service_account_name,
        named_ports: raw
            .spec
            .containers
            .into_iter()
            .flat_map(|c| c.ports)
            .filter(|p| !p.name.is_empty())
            .map(|p| (p.name, p.container_port))
            .collect(),
        node_locality: String::new(),
    })
}

mod doc;
mod flow;
mod ignored;
mod list;
mod mesh_config;
mod nodes;
mod secret;
mod unsupported;

#[cfg(test)]
mod api_tests;
#[cfg(test)]
mod security_tests;
#[cfg(test)]
mod tests;
