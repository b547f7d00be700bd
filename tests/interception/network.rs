//! Two pods' network namespaces, wired as a node wires them, and captured as Istio's
//! init container captures a pod.
//!
//! ```text
//!  root namespace                      10.250.<a>.1 ── veth ── 10.250.<a>.2  client ns
//!   shoal (xDS on 10.250.<a>.1)        10.250.<b>.1 ── veth ── 10.250.<b>.2  server ns
//!                                      client ns 10.250.<c>.1 ── veth ── 10.250.<c>.2 server ns
//! ```
//! The pods reach each other over their own link (their pod IPs are on it), so the root
//! namespace forwards nothing; each pod's default route leads to the root namespace,
//! where Shoal listens. Dropping a [`Network`] deletes the namespaces (their links and
//! iptables rules go with them), also when a test panics.

use std::process::Command;

/// Envoy's uid and gid, which iptables lets out uncaptured (Istio's `1337`).
pub const PROXY_UID: u32 = 1337;

/// One pod's namespace.
pub struct Pod {
    pub netns: String,
    /// The pod IP (on the pod-to-pod link).
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
    pub client: Pod,
    pub server: Pod,
    /// Where the pods reach the root namespace (Shoal binds this).
    pub root_ip: String,
    links: Vec<String>,
}

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
    /// Creates both namespaces and their links, with names and subnets unique to this
    /// process.
    pub fn create() -> Result<Network, String> {
        let id = std::process::id();
        // Three /24s per run: 10.250.<n>, <n+1>, <n+2>.
        let n = (id % 80) * 3;
        let (a, b, c) = (n, n + 1, n + 2);
        let tag = id % 100_000;
        let net = Network {
            client: Pod {
                netns: format!("shoal-{id}-client"),
                ip: format!("10.250.{c}.1"),
            },
            server: Pod {
                netns: format!("shoal-{id}-server"),
                ip: format!("10.250.{c}.2"),
            },
            root_ip: format!("10.250.{a}.1"),
            // Interface names: at most 15 characters.
            links: vec![
                format!("shc{tag}r"),
                format!("shs{tag}r"),
                format!("shp{tag}c"),
            ],
        };
        let (client, server) = (&net.client.netns, &net.server.netns);
        let (to_client, to_server, pods) = (&net.links[0], &net.links[1], &net.links[2]);
        sh(&["ip", "netns", "add", client])?;
        sh(&["ip", "netns", "add", server])?;
        for (netns, link, subnet) in [(client, to_client, a), (server, to_server, b)] {
            let peer = format!("{link}p");
            sh(&[
                "ip", "link", "add", link, "type", "veth", "peer", "name", &peer,
            ])?;
            sh(&["ip", "link", "set", &peer, "netns", netns])?;
            sh(&[
                "ip",
                "addr",
                "add",
                &format!("10.250.{subnet}.1/24"),
                "dev",
                link,
            ])?;
            sh(&["ip", "link", "set", link, "up"])?;
            let inside = |args: &[&str]| {
                let mut all = vec!["ip", "netns", "exec", netns.as_str()];
                all.extend_from_slice(args);
                sh(&all)
            };
            inside(&["ip", "link", "set", "lo", "up"])?;
            inside(&[
                "ip",
                "addr",
                "add",
                &format!("10.250.{subnet}.2/24"),
                "dev",
                &peer,
            ])?;
            inside(&["ip", "link", "set", &peer, "up"])?;
            inside(&[
                "ip",
                "route",
                "add",
                "default",
                "via",
                &format!("10.250.{subnet}.1"),
            ])?;
        }
        // The pod-to-pod link, made in the client namespace.
        let peer = format!("{pods}p");
        let in_client = |args: &[&str]| {
            let mut all = vec!["ip", "netns", "exec", client.as_str()];
            all.extend_from_slice(args);
            sh(&all)
        };
        in_client(&[
            "ip", "link", "add", pods, "type", "veth", "peer", "name", &peer,
        ])?;
        in_client(&["ip", "link", "set", &peer, "netns", server])?;
        in_client(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", net.client.ip),
            "dev",
            pods,
        ])?;
        in_client(&["ip", "link", "set", pods, "up"])?;
        sh(&[
            "ip",
            "netns",
            "exec",
            server,
            "ip",
            "addr",
            "add",
            &format!("{}/24", net.server.ip),
            "dev",
            &peer,
        ])?;
        sh(&[
            "ip", "netns", "exec", server, "ip", "link", "set", &peer, "up",
        ])?;
        Ok(net)
    }

    /// Installs Istio's init container rules in both pods.
    pub fn capture(&self) -> Result<(), String> {
        for pod in [&self.client, &self.server] {
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
        for netns in [&self.client.netns, &self.server.netns] {
            let _ = Command::new("ip").args(["netns", "del", netns]).output();
        }
        for link in &self.links {
            let _ = Command::new("ip").args(["link", "del", link]).output();
        }
    }
}
