//! Which edge a stream goes to: `spread` pins each proxy to one of C connections laid
//! over the edges in turn (the run's original mode); `random` picks, for every stream and
//! every reconnect, a random edge and one of its connections, as a Kubernetes Service
//! spreads new connections over its ready endpoints. Random channels connect lazily and
//! reconnect by themselves, so an edge that is down (or not yet up) costs a failed
//! attempt, after which the proxy tries another.

use super::transport::{self, TransportError};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tonic::transport::Channel;

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
}

impl Balancer {
    /// Connects `conns` connections over `addrs` (eagerly for `Spread`, which then fails
    /// if an edge is down; lazily for `Random`).
    pub async fn connect(
        lb: Lb,
        addrs: &[String],
        conns: usize,
        timeout: Duration,
    ) -> Result<Balancer, TransportError> {
        let pools = match lb {
            Lb::Spread => {
                let mut channels = Vec::with_capacity(conns);
                for j in 0..conns {
                    let addr = &addrs[j % addrs.len()];
                    channels.push(transport::connect(addr, timeout).await?);
                }
                vec![channels]
            }
            Lb::Random => {
                let per_edge = conns.div_ceil(addrs.len()).max(1);
                addrs
                    .iter()
                    .map(|addr| {
                        (0..per_edge)
                            .map(|_| transport::connect_lazy(addr, timeout))
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        Ok(Balancer {
            lb,
            pools,
            seed: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        })
    }

    /// The channel for proxy `index`'s `attempt`-th stream.
    pub fn pick(&self, index: usize, attempt: usize) -> Channel {
        match self.lb {
            Lb::Spread => {
                let pool = &self.pools[0];
                pool[index % pool.len()].clone()
            }
            Lb::Random => {
                let r = self.next(index as u64 ^ ((attempt as u64) << 32));
                let pool = &self.pools[(r % self.pools.len() as u64) as usize];
                pool[((r >> 32) % pool.len() as u64) as usize].clone()
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
