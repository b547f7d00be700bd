use super::*;
use shoal_proto::transport::Member;

fn ring(n: usize) -> Ring {
    Ring::new(
        (0..n)
            .map(|i| Member {
                id: format!("edge-{i}"),
                xds_addr: format!("127.0.0.{i}:15010"),
            })
            .collect(),
    )
}

fn proxies(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            format!(
                "sidecar~10.1.{}.{}~p-{i}.ns~ns.svc.cluster.local",
                i / 250,
                i % 250
            )
        })
        .collect()
}

#[test]
fn an_empty_ring_leaves_every_proxy_here() {
    let ps = proxies(10);
    let s = split(&Ring::default(), "edge-0", ps.iter().map(String::as_str));
    assert_eq!((s.owned.len(), s.foreign.len()), (10, 0));
}

#[test]
fn a_fourth_edge_takes_a_quarter_and_none_move_between_the_old_three() {
    let ps = proxies(10_000);
    let (three, four) = (ring(3), ring(4));
    let mut to_new = 0;
    let mut between_old = 0;
    for p in &ps {
        let (before, after) = (three.owner(p).unwrap(), four.owner(p).unwrap());
        if before.id != after.id {
            if after.id == "edge-3" {
                to_new += 1;
            } else {
                between_old += 1;
            }
        }
    }
    let share = to_new as f64 / ps.len() as f64;
    assert!((0.20..=0.30).contains(&share), "{share}");
    assert_eq!(between_old, 0);
}

#[test]
fn the_plan_follows_the_ring_and_connections() {
    let ps = proxies(400);
    let connected = || ps.iter().map(String::as_str);
    let mut h = Handoff::new("edge-0", Pacer::new(1000.0, 1000));
    h.on_ring(ring(1), connected(), []);
    assert_eq!(h.pending(), 0, "alone, edge-0 owns everything");
    h.on_ring(ring(2), connected(), []);
    let foreign = split(&ring(2), "edge-0", connected()).foreign;
    assert_eq!(
        super::foreign(&ring(2), "edge-0", connected()),
        foreign,
        "the foreign half of split"
    );
    assert_eq!(h.pending(), foreign.len());
    assert!(foreign.len() > 100 && foreign.len() < 300);
    // Re-planning the same ring queues nothing twice.
    h.on_ring(ring(2), connected(), []);
    assert_eq!(h.pending(), foreign.len());
    // A foreign proxy that left needs no move; one that arrives does.
    let gone = foreign.iter().next().unwrap().clone();
    h.on_disconnect(&gone);
    assert_eq!(h.pending(), foreign.len() - 1);
    h.on_connect(&gone);
    assert_eq!(h.pending(), foreign.len());
    // The second edge leaves: everything is owned here again.
    h.on_ring(ring(1), connected(), []);
    assert_eq!(h.pending(), 0);
}

#[test]
fn moves_are_paced() {
    let ps = proxies(400);
    let mut h = Handoff::new("edge-0", Pacer::new(10.0, 5));
    h.on_ring(ring(2), ps.iter().map(String::as_str), []);
    let total = h.pending();
    let t0 = Instant::now();
    assert_eq!(h.next_batch(t0).len(), 5, "a burst first");
    assert!(h.next_batch(t0).is_empty());
    assert_eq!(h.next_in(t0), Some(Duration::from_millis(100)));
    assert_eq!(h.next_batch(t0 + Duration::from_millis(100)).len(), 1);
    assert_eq!(
        h.next_batch(t0 + Duration::from_secs(2)).len(),
        5,
        "bursts are capped"
    );
    let mut moved = 11;
    let mut now = t0 + Duration::from_secs(2);
    while h.pending() > 0 {
        now += h.next_in(now).unwrap();
        moved += h.next_batch(now).len();
    }
    assert_eq!(moved, total);
    let took = now - t0;
    let expected = Duration::from_secs_f64((total - 11) as f64 / 10.0);
    assert!(
        took >= expected && took < expected + Duration::from_secs(3),
        "{took:?}"
    );
}

#[test]
fn relays_to_an_edge_that_no_longer_owns_their_proxy_are_planned() {
    let ps = proxies(400);
    let (two, three) = (ring(2), ring(3));
    // edge-0 relays every proxy it does not own to its owner under two edges.
    let relayed: Vec<(&str, &str)> = ps
        .iter()
        .filter_map(|p| {
            let owner = two.owner(p).unwrap();
            (owner.id != "edge-0").then_some((p.as_str(), owner.id.as_str()))
        })
        .collect();
    let mut h = Handoff::new("edge-0", Pacer::new(1000.0, 1000));
    h.on_ring(two.clone(), [], relayed.iter().copied());
    assert_eq!(h.pending(), 0, "every relay leads to its owner");
    // A third edge takes some of edge-1's proxies: their relays must move.
    h.on_ring(three.clone(), [], relayed.iter().copied());
    let moved = moved_relays(&three, relayed.iter().copied());
    assert!(!moved.is_empty() && moved.len() < relayed.len());
    assert!(moved.iter().all(|p| three.owner(p).unwrap().id == "edge-2"));
    assert_eq!(h.pending(), moved.len());
    // Back to two edges: they lead to their owner again.
    h.on_ring(two.clone(), [], relayed.iter().copied());
    assert_eq!(h.pending(), 0);
    // edge-1 leaves: its relays move (to edge-0 itself, or be relayed elsewhere).
    h.on_ring(ring(1), [], relayed.iter().copied());
    assert_eq!(h.pending(), relayed.len());
}

#[test]
fn a_proxy_both_served_and_relayed_here_is_planned_once() {
    let ps = proxies(50);
    let foreign: Vec<&str> = ps
        .iter()
        .map(String::as_str)
        .filter(|p| !ring(2).owns("edge-0", p))
        .collect();
    let mut h = Handoff::new("edge-0", Pacer::new(1000.0, 1000));
    h.on_ring(
        ring(2),
        foreign.iter().copied(),
        foreign.iter().map(|p| (*p, "edge-9")),
    );
    assert_eq!(h.pending(), foreign.len());
}

#[test]
fn a_drain_moves_everything_held_at_the_pace() {
    let ps = proxies(100);
    let mut h = Handoff::new("edge-0", Pacer::new(10.0, 10));
    h.on_ring(ring(1), ps.iter().map(String::as_str), []);
    assert_eq!(h.pending(), 0);
    h.drain(ps.iter().map(String::as_str));
    h.drain(ps.iter().map(String::as_str));
    assert_eq!(h.pending(), 100, "each proxy once");
    let t0 = Instant::now();
    assert_eq!(h.next_batch(t0).len(), 10);
    assert_eq!(h.next_in(t0), Some(Duration::from_millis(100)));
}
