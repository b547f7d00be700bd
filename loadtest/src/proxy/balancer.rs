//! Which edge a stream goes to: `spread` pins each proxy to one of C connections laid
//! over the edges in turn (the run's original mode); `random` picks, for every stream and
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
    /// Each proxy keeps one of C connections, laid over the edges in turn.
    #[default]
    Spread,
    /// Every stream and reconnect goes to a random edge.
    Random,
}

#[derive(Debug)]
pub struct Balancer {
    lb: Lb,
    /// `Spread`: the C connections. `Random`: per edge, its connections.
    pools: Vec<Vec<Channel>>,
    seed: AtomicU64,
    /// `Random`: per edge, until when (ms since `epoch`) it is left out of picks.
    unready_until_ms: Vec<AtomicU64>,
    epoch: Instant,
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
                let mut channels = Vec::with_capacity(conns);
                for j in 0..conns {
                    let addr = &addrs[j % addrs.len()];
                    channels.push(transport::connect(addr, timeout, dial).await?);
                }
                vec![channels]
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
        Ok(Balancer {
            lb,
            unready_until_ms: pools.iter().map(|_| AtomicU64::new(0)).collect(),
            pools,
            seed: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
            epoch: Instant::now(),
        })
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

    /// The first ready edge from `start` on, in turn; `start` when none is.
    fn ready_from(&self, start: usize) -> usize {
        let (n, now) = (self.pools.len(), self.now_ms());
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&e| self.unready_until_ms[e].load(Relaxed) <= now)
            .unwrap_or(start)
    }

    /// The channel for proxy `index`'s `attempt`-th stream.
    pub fn pick(&self, index: usize, attempt: usize) -> Pick {
        match self.lb {
            Lb::Spread => {
                let pool = &self.pools[0];
                Pick {
                    channel: pool[index % pool.len()].clone(),
                    edge: 0,
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
        let balancer =
            Balancer::connect(Lb::Random, &addrs, 2, Duration::from_secs(1), &Dial::Plain)
                .await
                .expect("lazy channels");
        let picks = |b: &Balancer| (0..200).map(|i| b.pick(i, 0).edge).collect::<Vec<_>>();
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
}
