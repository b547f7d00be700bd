//! WorkloadEntries as endpoints see them: an entry that names its WorkloadGroup
//! (annotation `istio.io/autoRegistrationGroup`, which the parser also sets from an
//! ownerReference) inherits the group's template as Istio's auto-registration writes
//! it. Shoal does not auto-register VMs nor run the group's readiness probe.

use super::NamespaceObjects;
use shoal_proto::config::parse::AUTO_REGISTRATION_GROUP;
use shoal_proto::config::{Config, Kind, Spec, istio};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

/// One WorkloadEntry of a namespace, its group applied.
pub struct Workload<'a> {
    pub config: &'a Config,
    pub entry: Cow<'a, istio::WorkloadEntry>,
    /// What selectors match: the object's labels, then the entry's own (which win).
    pub labels: BTreeMap<String, String>,
}

/// A namespace's WorkloadEntries, in object order.
pub fn resolve<'a>(objects: &NamespaceObjects<'a>) -> Vec<Workload<'a>> {
    let mut groups: HashMap<&str, &istio::WorkloadGroup> = HashMap::new();
    for c in objects.of(Kind::WorkloadGroup) {
        if let Spec::WorkloadGroup(g) = &c.spec {
            groups.entry(c.meta.name.as_str()).or_insert(g);
        }
    }
    objects
        .of(Kind::WorkloadEntry)
        .iter()
        .filter_map(|c| {
            let Spec::WorkloadEntry(we) = &c.spec else {
                return None;
            };
            let group = c
                .meta
                .annotations
                .get(AUTO_REGISTRATION_GROUP)
                .and_then(|name| groups.get(name.as_str()));
            let entry = match group {
                Some(g) => Cow::Owned(inherit(we, g)),
                None => Cow::Borrowed(we),
            };
            let mut labels = c.meta.labels.clone();
            labels.extend(entry.labels.clone());
            Some(Workload {
                config: c,
                entry,
                labels,
            })
        })
        .collect()
}

/// `entry` over its group: the template's fields where the entry leaves them unset,
/// labels merged as template < group metadata < entry, ports by name likewise.
pub fn inherit(entry: &istio::WorkloadEntry, group: &istio::WorkloadGroup) -> istio::WorkloadEntry {
    let template = group.template.clone().unwrap_or_default();
    let or_template = |own: &String, template: String| {
        if own.is_empty() {
            template
        } else {
            own.clone()
        }
    };
    let mut labels = template.labels;
    if let Some(metadata) = &group.metadata {
        labels.extend(metadata.labels.clone());
    }
    labels.extend(entry.labels.clone());
    let mut ports = template.ports;
    ports.extend(entry.ports.clone());
    istio::WorkloadEntry {
        address: or_template(&entry.address, template.address),
        ports,
        labels,
        network: or_template(&entry.network, template.network),
        locality: or_template(&entry.locality, template.locality),
        weight: if entry.weight == 0 {
            template.weight
        } else {
            entry.weight
        },
        service_account: or_template(&entry.service_account, template.service_account),
    }
}

#[cfg(test)]
mod tests;
