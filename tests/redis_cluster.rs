//! The Redis Cluster test harness and the backend's cluster mode: a real 3-master cluster of
//! redis-server processes on loopback, started by each test.

mod support;

use support::redis_cluster::RedisCluster;

#[test]
fn the_harness_starts_a_converged_cluster_and_kills_one_node() {
    let cluster = RedisCluster::start();
    assert_eq!(cluster.len(), 3);
    for i in 0..3 {
        let info: String =
            redis::FromRedisValue::from_redis_value(cluster.cli(i, &["CLUSTER", "INFO"]).unwrap())
                .unwrap();
        assert!(info.contains("cluster_state:ok"), "{info}");
    }
    // Keys with different hash tags land on different nodes.
    let nodes: std::collections::BTreeSet<usize> = (0..30)
        .map(|i| cluster.node_of(&format!("{{tag{i}}}")))
        .collect();
    assert_eq!(nodes.len(), 3, "{nodes:?}");

    cluster.kill9(1);
    assert!(cluster.cli(1, &["PING"]).is_err(), "node 1 still answers");
    for i in [0, 2] {
        assert!(cluster.cli(i, &["PING"]).is_ok(), "node {i} died too");
    }
    let ports = cluster.ports();
    drop(cluster);
    for port in ports {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} still open after drop"
        );
    }
}
