//! Pods' network namespaces, wired as a node wires them, and captured as Istio's init
//! container captures a pod.
//!
//! ```text
//!  root namespace        10.250.<n+i>.1 ── veth ── 10.250.<n+i>.2   pod i's ns
//!   shoal (xDS on the                                 │ pod IP 10.250.<n+4>.<i+2>
//!   first pod's link)    node ns: bridge ─── veth ────┘
//! ```
//! The pods reach each other over a bridge in a namespace of its own (the node's, whose
//! iptables are empty), so the root namespace forwards nothing; each pod's default route
//! leads to the root namespace, where Shoal listens. Dropping a [`Network`] deletes the
//! namespaces (their links and iptables rules go with them), also when a test panics.

use std::process::Command;

/// Envoy's uid and gid, which iptables lets out uncaptured (Istio's `1337`).
pub const PROXY_UID: u32 = 1337;

/// One pod's namespace.
pub struct Pod {
    pub netns: String,
    /// The pod IP (on the pods' bridge).
    pub ip: String,
}

impl Pod {
    /// `cmd` run inside the pod's namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.netns, program]);
        cmd
    }

    /// Runs `program args` in the namespace; its stdout, or why it failed.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let out = self
            .command(program)
            .args(args)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{program} {args:?} in {}: {}: {}{}",
                self.netns,
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

pub struct Network {
    pods: Vec<Pod>,
    /// Where the pods reach the root namespace (Shoal binds this).
    pub root_ip: String,
    /// The namespace holding the pods' bridge.
    node: String,
    /// Root-side link names, deleted in case a namespace was never made.
    links: Vec<String>,
}

/// At most this many pods per network (their subnets are numbered per process).
const MAX_PODS: u32 = 4;

/// Why this machine cannot run the test, if it cannot.
pub fn unsupported() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("not root: network namespaces and iptables need root".into());
    }
    for tool in ["ip", "iptables", "setpriv", "curl"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("{tool} is not installed"));
        }
    }
    None
}

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Network {
    /// Creates one namespace per pod of `names` (at most [`MAX_PODS`]), their links to
    /// the root namespace and to each other, with names and subnets unique to this
    /// process.
    pub fn create(names: &[&str]) -> Result<Network, String> {
        assert!(names.len() as u32 <= MAX_PODS, "at most {MAX_PODS} pods");
        let id = std::process::id();
        // MAX_PODS + 1 /24s per run: one root link per pod, and the pods' bridge.
        let n = (id % 50) * (MAX_PODS + 1);
        let bridge_net = n + MAX_PODS;
        let tag = id % 100_000;
        let mut net = Network {
            pods: Vec::new(),
            root_ip: format!("10.250.{n}.1"),
            node: format!("shoal-{id}-node"),
            links: Vec::new(),
        };
        // Interface names: at most 15 characters.
        let bridge = format!("sh{tag}br");
        sh(&["ip", "netns", "add", &net.node])?;
        sh(&[
            "ip", "-n", &net.node, "link", "add", &bridge, "type", "bridge",
        ])?;
        sh(&["ip", "-n", &net.node, "link", "set", &bridge, "up"])?;
        for (i, name) in names.iter().enumerate() {
            let pod = Pod {
                netns: format!("shoal-{id}-{name}"),
                ip: format!("10.250.{bridge_net}.{}", i + 2),
            };
            let (to_root, to_bridge) = (format!("sh{i}{tag}r"), format!("sh{i}{tag}b"));
            net.links.extend([to_root.clone(), to_bridge.clone()]);
            sh(&["ip", "netns", "add", &pod.netns])?;
            net.pods.push(pod);
            let pod = net.pods.last().expect("just pushed");
            let inside = |args: &[&str]| {
                let mut all = vec!["ip", "-n", pod.netns.as_str()];
                all.extend_from_slice(args);
                sh(&all)
            };
            // The link to the root namespace, and the default route over it.
            let subnet = n + i as u32;
            let peer = format!("{to_root}p");
            sh(&[
                "ip", "link", "add", &to_root, "type", "veth", "peer", "name", &peer,
            ])?;
            sh(&["ip", "link", "set", &peer, "netns", &pod.netns])?;
            sh(&[
                "ip",
                "addr",
                "add",
                &format!("10.250.{subnet}.1/24"),
                "dev",
                &to_root,
            ])?;
            sh(&["ip", "link", "set", &to_root, "up"])?;
            inside(&["link", "set", "lo", "up"])?;
            inside(&[
                "addr",
                "add",
                &format!("10.250.{subnet}.2/24"),
                "dev",
                &peer,
            ])?;
            inside(&["link", "set", &peer, "up"])?;
            inside(&[
                "route",
                "add",
                "default",
                "via",
                &format!("10.250.{subnet}.1"),
            ])?;
            // The link to the bridge, which holds the pod IP.
            let peer = format!("{to_bridge}p");
            sh(&[
                "ip", "link", "add", &to_bridge, "type", "veth", "peer", "name", &peer,
            ])?;
            sh(&["ip", "link", "set", &to_bridge, "netns", &net.node])?;
            sh(&["ip", "link", "set", &peer, "netns", &pod.netns])?;
            sh(&[
                "ip", "-n", &net.node, "link", "set", &to_bridge, "master", &bridge,
            ])?;
            sh(&["ip", "-n", &net.node, "link", "set", &to_bridge, "up"])?;
            inside(&["addr", "add", &format!("{}/24", pod.ip), "dev", &peer])?;
            inside(&["link", "set", &peer, "up"])?;
        }
        Ok(net)
    }

    /// The pod named `name` at [`Network::create`].
    pub fn pod(&self, name: &str) -> &Pod {
        self.pods
            .iter()
            .find(|p| p.netns.ends_with(&format!("-{name}")))
            .unwrap_or_else(|| panic!("no pod {name}"))
    }

    /// Installs Istio's init container rules in the pods named `names`.
    pub fn capture(&self, names: &[&str]) -> Result<(), String> {
        for pod in names.iter().map(|n| self.pod(n)) {
            for rule in istio_iptables() {
                let mut args = vec!["netns", "exec", pod.netns.as_str(), "iptables", "-t", "nat"];
                args.extend(rule.split_whitespace());
                let out = Command::new("ip")
                    .args(&args)
                    .output()
                    .map_err(|e| e.to_string())?;
                if !out.status.success() {
                    return Err(format!(
                        "iptables {rule} in {}: {}",
                        pod.netns,
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The nat rules `istio-iptables` installs for a sidecar in REDIRECT mode: inbound TCP to
/// 15006 but for the proxy's own ports; outbound TCP to 15001 but for the proxy's own
/// traffic (uid/gid 1337), loopback traffic, and the inbound passthrough source
/// 127.0.0.6; the proxy's traffic to its own pod over loopback goes inbound.
fn istio_iptables() -> Vec<String> {
    let uid = PROXY_UID;
    [
        "-N ISTIO_INBOUND",
        "-N ISTIO_REDIRECT",
        "-N ISTIO_IN_REDIRECT",
        "-N ISTIO_OUTPUT",
        "-A ISTIO_INBOUND -p tcp --dport 15008 -j RETURN",
        "-A ISTIO_INBOUND -p tcp --dport 15090 -j RETURN",
        "-A ISTIO_INBOUND -p tcp --dport 15021 -j RETURN",
        "-A ISTIO_INBOUND -p tcp --dport 15020 -j RETURN",
        "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT",
        "-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006",
        "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001",
        "-A PREROUTING -p tcp -j ISTIO_INBOUND",
        "-A OUTPUT -p tcp -j ISTIO_OUTPUT",
        "-A ISTIO_OUTPUT -s 127.0.0.6/32 -o lo -j RETURN",
        "-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -p tcp -m tcp ! --dport 15008 -m owner --uid-owner {uid} -j ISTIO_IN_REDIRECT",
        "-A ISTIO_OUTPUT -o lo -m owner ! --uid-owner {uid} -j RETURN",
        "-A ISTIO_OUTPUT -m owner --uid-owner {uid} -j RETURN",
        "-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -m owner --gid-owner {uid} -j ISTIO_IN_REDIRECT",
        "-A ISTIO_OUTPUT -o lo -m owner ! --gid-owner {uid} -j RETURN",
        "-A ISTIO_OUTPUT -m owner --gid-owner {uid} -j RETURN",
        "-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN",
        "-A ISTIO_OUTPUT -j ISTIO_REDIRECT",
    ]
    .iter()
    .map(|r| r.replace("{uid}", &uid.to_string()))
    .collect()
}

impl Drop for Network {
    fn drop(&mut self) {
        // Deleting a namespace deletes its links (and so their root-side peers) and its
        // iptables rules; the root-side links are deleted too in case a namespace was
        // never made.
        let pods = self.pods.iter().map(|p| &p.netns);
        for netns in pods.chain([&self.node]) {
            let _ = Command::new("ip").args(["netns", "del", netns]).output();
        }
        for link in &self.links {
            let _ = Command::new("ip").args(["link", "del", link]).output();
        }
    }
}
