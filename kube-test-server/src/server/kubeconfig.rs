//! A kubeconfig pointing at the server: plain HTTP, no credentials.

/// The names of the cluster, user and context in the kubeconfig.
const NAME: &str = "kube-test-server";

pub fn yaml(server_url: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {NAME}
  cluster:
    server: {server_url}
users:
- name: {NAME}
  user: {{}}
contexts:
- name: {NAME}
  context:
    cluster: {NAME}
    user: {NAME}
    namespace: default
current-context: {NAME}
"
    )
}
