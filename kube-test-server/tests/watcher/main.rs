//! kube-runtime's `watcher` against the test API server: the client Shoal's Kubernetes
//! registry will use, speaking to the server over real HTTP.

mod support;

mod bookmarks;
mod dynamic;
mod faults;
mod lists;
mod selectors;
mod wire;
