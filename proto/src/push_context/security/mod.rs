//! The security policy index: which `security.istio.io` policies apply to a workload,
//! beside the traffic indexes and rebuilt with them (Istio's `AuthenticationPolicies` and
//! `AuthorizationPolicies`).
//!
//! A workload (namespace, labels) is subject to the policies of its own namespace and of
//! the root namespace that either select no workload or select it by `matchLabels`
//! (`targetRef(s)` attach a policy to a gateway or Service resource instead: never to a
//! sidecar by selection). From those:
//!
//! - [`SecurityPolicies::peer_authentication`] composes the mTLS mode as Istio does:
//!   PERMISSIVE, overridden by the mesh policy (root namespace, no selector), then the
//!   namespace policy, then the workload policy (each the oldest of its level, a mode of
//!   UNSET inheriting), and per port by the workload policy's `portLevelMtls`.
//! - [`SecurityPolicies::authorization`] groups the AuthorizationPolicies by action
//!   (CUSTOM, DENY, ALLOW, AUDIT: the order Envoy evaluates them in).
//! - [`SecurityPolicies::request_authentication`] lists the RequestAuthentications.

pub mod ext_authz;

use crate::config::security::{
    AuthorizationPolicy, PeerAuthentication, PolicySelector, RequestAuthentication,
};
use crate::model::{NamedConfig, NamespaceConfig};
use ext_authz::{ExtAuthzProvider, ExtAuthzProviders};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A workload's mTLS mode for inbound traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MtlsMode {
    /// Plaintext only.
    Disable,
    /// mTLS and plaintext both accepted (Istio's default).
    #[default]
    Permissive,
    /// mTLS only.
    Strict,
}

impl MtlsMode {
    /// A PeerAuthentication mode; `None` for `UNSET` (or absent), which inherits.
    pub fn parse(mode: Option<&str>) -> Option<MtlsMode> {
        match mode? {
            "DISABLE" => Some(MtlsMode::Disable),
            "PERMISSIVE" => Some(MtlsMode::Permissive),
            "STRICT" => Some(MtlsMode::Strict),
            _ => None,
        }
    }
}

/// The composed PeerAuthentication of one workload.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PeerAuthn {
    /// For every port without a port-level mode.
    pub mode: MtlsMode,
    /// Port-level modes, by workload (target) port.
    pub ports: BTreeMap<u32, MtlsMode>,
}

impl PeerAuthn {
    pub fn mode_for(&self, port: u32) -> MtlsMode {
        self.ports.get(&port).copied().unwrap_or(self.mode)
    }
}

/// The AuthorizationPolicies of one workload, by action, each list in (namespace, name)
/// order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Authorization {
    pub custom: Vec<Arc<NamedConfig<AuthorizationPolicy>>>,
    pub deny: Vec<Arc<NamedConfig<AuthorizationPolicy>>>,
    pub allow: Vec<Arc<NamedConfig<AuthorizationPolicy>>>,
    pub audit: Vec<Arc<NamedConfig<AuthorizationPolicy>>>,
    /// The provider the CUSTOM policies name, or why they cannot use one (then they
    /// fail closed); `None` without CUSTOM policies.
    pub ext_authz: Option<Result<Arc<ExtAuthzProvider>, String>>,
}

impl Authorization {
    pub fn is_empty(&self) -> bool {
        self.custom.is_empty()
            && self.deny.is_empty()
            && self.allow.is_empty()
            && self.audit.is_empty()
    }
}

/// A policy kind's selector and targetRefs, so one lookup serves all three kinds.
trait Selecting {
    fn selector(&self) -> Option<&PolicySelector>;
    fn has_target_refs(&self) -> bool;
}

impl Selecting for PeerAuthentication {
    fn selector(&self) -> Option<&PolicySelector> {
        self.selector.as_ref()
    }
    fn has_target_refs(&self) -> bool {
        false
    }
}

impl Selecting for AuthorizationPolicy {
    fn selector(&self) -> Option<&PolicySelector> {
        self.selector.as_ref()
    }
    fn has_target_refs(&self) -> bool {
        self.target_ref.is_some() || !self.target_refs.is_empty()
    }
}

impl Selecting for RequestAuthentication {
    fn selector(&self) -> Option<&PolicySelector> {
        self.selector.as_ref()
    }
    fn has_target_refs(&self) -> bool {
        self.target_ref.is_some() || !self.target_refs.is_empty()
    }
}

type ByNamespace<T> = HashMap<String, Vec<Arc<NamedConfig<T>>>>;

/// Every namespace's security policies, each namespace's in (namespace, name) order.
#[derive(Debug, Default)]
pub struct SecurityPolicies {
    root_namespace: String,
    peer_authentications: ByNamespace<PeerAuthentication>,
    authorization_policies: ByNamespace<AuthorizationPolicy>,
    request_authentications: ByNamespace<RequestAuthentication>,
    ext_authz: ExtAuthzProviders,
}

fn index<T: Clone>(
    namespaces: &BTreeMap<String, Arc<NamespaceConfig>>,
    of: impl Fn(&NamespaceConfig) -> &Vec<NamedConfig<T>>,
) -> ByNamespace<T> {
    let mut out = ByNamespace::new();
    for ns in namespaces.values() {
        let mut policies: Vec<Arc<NamedConfig<T>>> = of(ns).iter().cloned().map(Arc::new).collect();
        if policies.is_empty() {
            continue;
        }
        policies.sort_by(|a, b| a.name.cmp(&b.name));
        out.insert(ns.namespace.clone(), policies);
    }
    out
}

impl SecurityPolicies {
    pub fn build(
        root_namespace: &str,
        namespaces: &BTreeMap<String, Arc<NamespaceConfig>>,
    ) -> Self {
        SecurityPolicies {
            ext_authz: ExtAuthzProviders::new(),
            root_namespace: root_namespace.to_string(),
            peer_authentications: index(namespaces, |ns| &ns.peer_authentications),
            authorization_policies: index(namespaces, |ns| &ns.authorization_policies),
            request_authentications: index(namespaces, |ns| &ns.request_authentications),
        }
    }

    /// With the mesh config's ext_authz providers, which CUSTOM policies name.
    pub fn with_ext_authz(mut self, providers: ExtAuthzProviders) -> Self {
        self.ext_authz = providers;
        self
    }

    /// Whether any policy of any kind exists (a mesh without one generates as before).
    pub fn is_empty(&self) -> bool {
        self.peer_authentications.is_empty()
            && self.authorization_policies.is_empty()
            && self.request_authentications.is_empty()
    }

    /// The policies of `by_namespace` that apply to a workload: those of its namespace,
    /// then the root namespace's, that select it (no selector selects every workload).
    fn applying<'a, T: Selecting>(
        &'a self,
        by_namespace: &'a ByNamespace<T>,
        namespace: &'a str,
        labels: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a Arc<NamedConfig<T>>> + 'a {
        let root = (namespace != self.root_namespace).then_some(self.root_namespace.as_str());
        std::iter::once(namespace)
            .chain(root)
            .filter_map(|ns| by_namespace.get(ns))
            .flatten()
            .filter(move |p| {
                !p.spec.has_target_refs()
                    && p.spec.selector().is_none_or(|s| {
                        s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
                    })
            })
    }

    /// The mTLS mode of a workload's inbound traffic, composed as Istio composes it.
    pub fn peer_authentication(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> PeerAuthn {
        let applying: Vec<_> = self
            .applying(&self.peer_authentications, namespace, labels)
            .collect();
        let level = |workload: bool, in_root: bool| {
            applying
                .iter()
                .filter(|p| p.spec.selector.is_some() == workload)
                .filter(|p| workload || (p.namespace == self.root_namespace) == in_root)
                // Of each level the oldest policy wins (then the lowest namespace/name).
                .min_by_key(|p| (p.created, &p.namespace, &p.name))
        };
        let mesh = level(false, true);
        let namespace_level = level(false, false);
        let workload = level(true, false);
        let mut composed = PeerAuthn::default();
        for policy in [mesh, namespace_level, workload].into_iter().flatten() {
            if let Some(mode) =
                MtlsMode::parse(policy.spec.mtls.as_ref().and_then(|m| m.mode.as_deref()))
            {
                composed.mode = mode;
            }
        }
        if let Some(policy) = workload {
            for (port, mtls) in &policy.spec.port_level_mtls {
                let Ok(port) = port.parse::<u32>() else {
                    continue;
                };
                let mode = MtlsMode::parse(mtls.mode.as_deref()).unwrap_or(composed.mode);
                composed.ports.insert(port, mode);
            }
        }
        composed
    }

    /// The AuthorizationPolicies that apply to a workload, by action.
    pub fn authorization(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Authorization {
        let mut out = Authorization::default();
        for policy in self.applying(&self.authorization_policies, namespace, labels) {
            let list = match policy.spec.action.as_deref().unwrap_or("ALLOW") {
                "CUSTOM" => &mut out.custom,
                "DENY" => &mut out.deny,
                "AUDIT" => &mut out.audit,
                _ => &mut out.allow,
            };
            list.push(policy.clone());
        }
        for list in [
            &mut out.custom,
            &mut out.deny,
            &mut out.allow,
            &mut out.audit,
        ] {
            list.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        }
        if !out.custom.is_empty() {
            out.ext_authz = Some(self.provider_of(&out.custom));
        }
        out
    }

    /// The one provider that a workload's CUSTOM policies name (Istio allows one per
    /// workload), resolved.
    fn provider_of(
        &self,
        custom: &[Arc<NamedConfig<AuthorizationPolicy>>],
    ) -> Result<Arc<ExtAuthzProvider>, String> {
        let mut names: Vec<&str> = custom
            .iter()
            .map(|p| p.spec.provider.as_ref().map_or("", |p| p.name.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        let [name] = names[..] else {
            return Err(format!(
                "CUSTOM policies name {} providers ({}): one per workload",
                names.len(),
                names.join(", ")
            ));
        };
        match self.ext_authz.get(name) {
            Some(Ok(p)) => Ok(p.clone()),
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!(
                "provider {name:?} is not in the mesh config's extensionProviders (defined: {})",
                self.ext_authz
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// The RequestAuthentications that apply to a workload, in (namespace, name) order.
    pub fn request_authentication(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Vec<Arc<NamedConfig<RequestAuthentication>>> {
        let mut out: Vec<_> = self
            .applying(&self.request_authentications, namespace, labels)
            .cloned()
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out
    }

    /// Every RequestAuthentication of the mesh (what the edge fetches JWKS for).
    pub fn all_request_authentications(
        &self,
    ) -> impl Iterator<Item = &Arc<NamedConfig<RequestAuthentication>>> {
        self.request_authentications.values().flatten()
    }
}

#[cfg(test)]
mod tests;
