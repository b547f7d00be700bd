//! Which edge a stream goes to: `spread` pins each proxy to one of C connections laid
//! over the edges in turn (the run's original mode); a proxy whose streams failed before
//! any response goes to the next edges in turn, skipping those unready (as a client fails
//! over when its edge is gone: a proxy alone in retrying would otherwise find its dead
//! edge ready again after each backoff);
//! `random` picks, for every stream and
//! every reconnect, a random edge and one of its connections, as a Kubernetes Service
//! spreads new connections over its ready endpoints. Random channels connect lazily and
//! reconnect by themselves. An edge where a stream failed before any response (refused,
//! draining, or down) is left out of the random picks for [`UNREADY_FOR`], as a Service
//! drops an unready endpoint, so proxies do not keep landing on a dead edge.

use super::transport::{self, TransportError};
use crate::secure::Dial;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// How long an edge that failed a stream before answering is left out of random picks.
pub const UNREADY_FOR: Duration = Duration::from_secs(1);

/// How streams are spread over `--xds-addr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Lb {
    /// Each proxy keeps one of C connections, laid over the edges in turn (failing over to
    /// the next ready edge while its own is unready).
    #[default]
    Spread,
    /// Every stream and reconnect goes to a random edge.
    Random,
}

#[derive(Debug)]
pub struct Balancer {
    lb: Lb,
    /// Per edge, its connections (`Spread`: connection j is edge j mod E's j/E-th).
    pools: Vec<Vec<Channel>>,
    /// `Spread`: the connections in all.
    conns: usize,
    seed: AtomicU64,
    /// `Random`: per edge, until when (ms since `epoch`) it is left out of picks.
    unready_until_ms: Vec<AtomicU64>,
    epoch: Instant,
    /// `Spread` with a connection per proxy: a failed-over stream dials its own.
    own_failover: Option<OwnFailover>,
}

/// How a proxy that has a connection of its own dials another edge to fail over.
#[derive(Debug)]
struct OwnFailover {
    addrs: Vec<String>,
    timeout: Duration,
    dial: Dial,
}

/// A stream's channel and the edge it goes to.
pub struct Pick {
    pub channel: Channel,
    pub edge: usize,
}

impl Balancer {
    /// Connects `conns` connections over `addrs` (eagerly for `Spread`, which then fails
    /// if an edge is down; lazily for `Random`).
    pub async fn connect(
        lb: Lb,
        addrs: &[String],
        conns: usize,
        timeout: Duration,
        dial: &Dial,
    ) -> Result<Balancer, TransportError> {
        let pools = match lb {
            Lb::Spread => {
                let mut pools = vec![Vec::new(); addrs.len()];
                for j in 0..conns {
                    let addr = &addrs[j % addrs.len()];
                    pools[j % addrs.len()].push(transport::connect(addr, timeout, dial).await?);
                }
                pools
            }
            Lb::Random => {
                let per_edge = conns.div_ceil(addrs.len()).max(1);
                addrs
                    .iter()
                    .map(|addr| {
                        (0..per_edge)
                            .map(|_| transport::connect_lazy(addr, timeout, dial))
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        Ok(Balancer::with_pools(lb, pools, conns))
    }

    /// A proxy fails over on a connection of its own, dialled then, as a real one does
    /// (for runs with a connection per proxy): a pooled connection to the other edge is
    /// another proxy's, and an edge that tunnels connections sends all its streams to
    /// that proxy's owner, which may be the edge being failed away from.
    pub fn fail_over_on_own_connections(
        mut self,
        addrs: &[String],
        timeout: Duration,
        dial: &Dial,
    ) -> Balancer {
        self.own_failover = Some(OwnFailover {
            addrs: addrs.to_vec(),
            timeout,
            dial: dial.clone(),
        });
        self
    }

    fn with_pools(lb: Lb, pools: Vec<Vec<Channel>>, conns: usize) -> Balancer {
        Balancer {
            lb,
            own_failover: None,
            conns,
            unready_until_ms: pools.iter().map(|_| AtomicU64::new(0)).collect(),
            pools,
            seed: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
            epoch: Instant::now(),
        }
    }

    /// A stream to `edge` failed before any response: leave it out of random picks for
    /// [`UNREADY_FOR`].
    pub fn unready(&self, edge: usize) {
        if let Some(until) = self.unready_until_ms.get(edge) {
            until.store(self.now_ms() + UNREADY_FOR.as_millis() as u64, Relaxed);
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The first ready edge (with connections) from `start` on, in turn; `start` when
    /// none is.
    fn ready_from(&self, start: usize) -> usize {
        let (n, now) = (self.pools.len(), self.now_ms());
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&e| !self.pools[e].is_empty() && self.unready_until_ms[e].load(Relaxed) <= now)
            .unwrap_or(start)
    }

    /// The channel for proxy `index`'s `attempt`-th stream, after `failed` streams in a
    /// row that failed before any response.
    pub fn pick(&self, index: usize, attempt: usize, failed: usize) -> Pick {
        match self.lb {
            Lb::Spread => {
                let j = index % self.conns.max(1);
                let own = j % self.pools.len();
                // The first stream always goes to its own edge (the run's layout).
                let edge = if attempt == 0 {
                    own
                } else {
                    self.ready_from((own + failed) % self.pools.len())
                };
                let pool = &self.pools[edge];
                let own = (edge != own)
                    .then_some(self.own_failover.as_ref())
                    .flatten()
                    .and_then(|f| transport::connect_lazy(&f.addrs[edge], f.timeout, &f.dial).ok());
                Pick {
                    channel: own
                        .unwrap_or_else(|| pool[(j / self.pools.len()) % pool.len()].clone()),
                    edge,
                }
            }
            Lb::Random => {
                let r = self.next(index as u64 ^ ((attempt as u64) << 32));
                let edge = self.ready_from((r % self.pools.len() as u64) as usize);
                let pool = &self.pools[edge];
                Pick {
                    channel: pool[((r >> 32) % pool.len() as u64) as usize].clone(),
                    edge,
                }
            }
        }
    }

    /// A SplitMix64 step: cheap, and well spread across proxies and attempts.
    fn next(&self, salt: u64) -> u64 {
        let mut z = self
            .seed
            .fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed)
            .wrapping_add(salt.wrapping_mul(0xbf58_476d_1ce4_e5b9));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn random_picks_leave_out_an_unready_edge_then_try_it_again() {
        let addrs = ["127.0.0.1:1".to_string(), "127.0.0.1:2".to_string()];
        let balancer = Balancer::connect(
            Lb::Random,
            &addrs,
            2,
            Duration::from_secs(1),
            &Dial::plain(),
        )
        .await
        .expect("lazy channels");
        let picks = |b: &Balancer| (0..200).map(|i| b.pick(i, 0, 0).edge).collect::<Vec<_>>();
        assert!(picks(&balancer).contains(&0) && picks(&balancer).contains(&1));
        balancer.unready(0);
        assert!(picks(&balancer).iter().all(|&e| e == 1));
        balancer.unready(1);
        // Every edge unready: picks go anywhere rather than nowhere.
        assert!(picks(&balancer).contains(&0));
        tokio::time::sleep(UNREADY_FOR + Duration::from_millis(50)).await;
        let after = picks(&balancer);
        assert!(after.contains(&0) && after.contains(&1));
    }

    #[tokio::test]
    async fn spread_keeps_its_layout_and_fails_over_while_an_edge_is_unready() {
        let lazy =
            |addr: &str| transport::connect_lazy(addr, Duration::from_secs(1), &Dial::plain());
        // Six connections over three edges: connection j is edge j mod 3's.
        let pools = (1..=3)
            .map(|e| {
                (0..2)
                    .map(|_| lazy(&format!("127.0.0.1:{e}")).unwrap())
                    .collect()
            })
            .collect();
        let balancer = Balancer::with_pools(Lb::Spread, pools, 6);
        let edges = |attempt, failed| {
            (0..12)
                .map(|i| balancer.pick(i, attempt, failed).edge)
                .collect::<Vec<_>>()
        };
        assert_eq!(edges(0, 0), [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
        balancer.unready(1);
        // The first stream keeps to its edge; a reconnect goes to the next ready one.
        assert_eq!(edges(0, 0)[1], 1);
        assert_eq!(edges(1, 0), [0, 2, 2, 0, 2, 2, 0, 2, 2, 0, 2, 2]);
        tokio::time::sleep(UNREADY_FOR + Duration::from_millis(50)).await;
        assert_eq!(edges(1, 0), edges(0, 0));
        // After failures in a row, the next edges in turn, even where none is unready
        // (a proxy alone in retrying its dead edge).
        assert_eq!(edges(2, 1), [1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(edges(3, 2), [2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1]);
    }
}
