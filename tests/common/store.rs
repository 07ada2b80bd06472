//! What the fault tests need of a coordinating store, whatever it is: started and stopped
//! members, idcar pointed at it, its pool report and stored marks. ZooKeeper and etcd each
//! implement it over their own harness (`zk.rs`, `etcd.rs`), so a scenario both must survive
//! is written once (`tests/store_faults/`).

use super::etcd::Etcd;
use super::kube::KubeStore;
use super::release::Release;
use super::zk::Zk;
use super::{run, Idcar};

pub trait Store: Sized + Send + Sync + 'static {
    /// One member or server.
    fn single() -> Self;
    /// One member or server of its own, which the test may stop and freeze ([`Store::single`]
    /// may share one among tests, where the store keeps them apart).
    fn own() -> Self {
        Self::single()
    }
    /// Three members or servers.
    fn three() -> Self;
    /// The flag and value that point idcar (and `idcar pool`) at this store.
    fn target(&self) -> [String; 2];
    /// The flags that point `idcar pool` at this store ([`Store::target`] unless the store
    /// needs more).
    fn pool_target(&self) -> Vec<String> {
        self.target().to_vec()
    }
    /// The flag that sets how long a holder's session (ZooKeeper) or lease (etcd) outlives
    /// the holder: `--zk-session-timeout`, `--etcd-ttl`, `--kube-ttl`.
    fn expiry_flag(&self) -> &'static str;
    /// Whether an outage of the store past the session ends it (ZooKeeper, etcd: the server
    /// expires it once it answers); Kubernetes judges sessions by renewals seen without a gap
    /// in one's own reads, so an outage everyone shared ends none.
    fn outage_ends_sessions(&self) -> bool {
        true
    }
    /// The store writes an idle holder may cost in `secs` seconds: none in ZooKeeper and etcd
    /// (their sessions' pings are not writes); Kubernetes renews a session object (a write)
    /// every 20 s while the pool has room.
    fn idle_writes_in(&self, _secs: u64) -> u64 {
        0
    }
    /// The store writes a claim may cost beyond the take and the first mark (ZooKeeper: the
    /// session; Kubernetes: the session object, the queue's ticket and place, leaving it, the
    /// session renewed with the full pool's duration).
    fn claim_extra(&self) -> u64 {
        u64::from(self.target()[0] == "--zk")
    }
    /// The lable64 mark of `slot` in `cluster`, as stored.
    fn mark(&self, cluster: u8, slot: u32) -> u64;
    /// kill -9 of member `i`.
    fn kill(&mut self, i: usize);
    /// SIGSTOP of member `i` (frozen: connections stay open, nothing is answered).
    fn pause(&self, i: usize);
    /// SIGCONT of member `i`.
    fn resume(&self, i: usize);
    /// The member that leads now.
    fn leader(&self) -> Option<usize>;
    /// Makes the member that the idcar of `pid` talks to the leader, where the store can
    /// (etcd); nothing elsewhere.
    fn lead_from(&self, _pid: u32) {}
    /// What the store keeps of a released holder's session beyond its slot, checked gone
    /// (etcd: its lease revoked).
    fn check_released(&self) {}
    /// How a holder frozen past its expiry resumes inside its own mark after its successor
    /// claimed: the holder's timing flags, and how long after the freeze it resumes at the
    /// earliest (ZooKeeper's client declares its session expired by itself some time after
    /// the server did; etcd's lease ends only on etcd's word).
    fn frozen_holder(&self) -> (Vec<&'static str>, std::time::Duration);

    /// The store's own count of its writes so far (ZooKeeper's zxid within its epoch, etcd's
    /// revision): what idcar costs it, counted independently of idcar.
    fn writes(&self) -> u64;

    /// The address of member 0, for a proxy in front of it.
    fn endpoint(&self) -> String;
    /// `idcar serve` against the store at `at` (this store's address, or a proxy's).
    async fn start_at(&self, at: &str, extra: &[&str]) -> Idcar;
    /// `idcar serve` against this store, with `extra` flags.
    async fn start(&self, extra: &[&str]) -> Idcar {
        self.start_at(&self.target()[1], extra).await
    }
    /// `idcar serve` against this store, expected to refuse to run.
    async fn start_refused(&self, extra: &[&str]) -> Idcar;

    /// `idcar pool ... --json` for lable64 cluster `c` of a pool of `size` slots.
    fn pool(&self, c: u8, size: u32) -> serde_json::Value {
        let target = self.pool_target();
        let (c, size) = (c.to_string(), size.to_string());
        let mut args: Vec<&str> = vec!["pool"];
        args.extend(target.iter().map(String::as_str));
        args.extend(["--cluster-id", &c, "--pool-size", &size, "--json"]);
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v[0].clone()
    }
}

impl<R: Release> Store for Zk<R> {
    fn single() -> Self {
        Self::new(1)
    }
    fn three() -> Self {
        Self::new(3)
    }
    fn target(&self) -> [String; 2] {
        ["--zk".into(), self.connect()]
    }
    fn expiry_flag(&self) -> &'static str {
        "--zk-session-timeout"
    }
    fn mark(&self, cluster: u8, slot: u32) -> u64 {
        super::zk::lable64_mark(self, cluster, slot)
    }
    fn kill(&mut self, i: usize) {
        Zk::kill(self, i)
    }
    fn pause(&self, i: usize) {
        Zk::pause(self, i)
    }
    fn resume(&self, i: usize) {
        Zk::resume(self, i)
    }
    fn leader(&self) -> Option<usize> {
        Zk::leader(self)
    }
    /// Session 6 s: the server expires the frozen holder after ~6 s; its own client would only
    /// declare expiry ~8.4 s after it last heard. Horizon 9 s, idle or not: it resumes at
    /// 6.8 s, inside its mark.
    fn frozen_holder(&self) -> (Vec<&'static str>, std::time::Duration) {
        let flags = vec![
            "--zk-session-timeout",
            "6s",
            "--lease-horizon",
            "9s",
            "--idle-horizon",
            "9s",
            "--renew-interval",
            "300ms",
            "--max-clock-wait",
            "20s",
        ];
        (flags, std::time::Duration::from_millis(6_800))
    }
    fn writes(&self) -> u64 {
        use std::io::{Read, Write};
        let addr = self.connect();
        let addr = addr.split(',').next().unwrap();
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"srvr").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        let hex = out
            .lines()
            .find_map(|l| l.strip_prefix("Zxid: 0x"))
            .unwrap_or_else(|| panic!("no zxid in {out:?}"));
        u64::from_str_radix(hex.trim(), 16).unwrap() & 0xffff_ffff
    }
    fn endpoint(&self) -> String {
        self.connect()
    }
    async fn start_at(&self, at: &str, extra: &[&str]) -> Idcar {
        super::zk::start(at, extra).await
    }
    async fn start_refused(&self, extra: &[&str]) -> Idcar {
        super::zk::start_refused(&self.connect(), extra).await
    }
}

impl<R: Release> Store for Etcd<R> {
    fn single() -> Self {
        Self::new(1)
    }
    fn three() -> Self {
        Self::new(3)
    }
    fn target(&self) -> [String; 2] {
        ["--etcd".into(), self.endpoints()]
    }
    fn expiry_flag(&self) -> &'static str {
        "--etcd-ttl"
    }
    fn mark(&self, cluster: u8, slot: u32) -> u64 {
        let key = format!("/idcar/lable64/{cluster}/marks/{slot}");
        let out = self
            .etcdctl(0, &["get", &key, "--print-value-only"])
            .unwrap();
        let v = out.split(' ').next().unwrap_or_default().trim();
        v.parse()
            .unwrap_or_else(|_| panic!("{key} holds no mark: {out:?}"))
    }
    fn kill(&mut self, i: usize) {
        Etcd::kill(self, i)
    }
    fn pause(&self, i: usize) {
        Etcd::pause(self, i)
    }
    fn resume(&self, i: usize) {
        Etcd::resume(self, i)
    }
    fn leader(&self) -> Option<usize> {
        Etcd::leader(self)
    }
    /// The TTL is 2 s and the mark 5 s ahead (idle or not): resumed as soon as the successor claimed, the
    /// holder is inside its mark (its keep-alives black-holed, it does not know the lease
    /// expired).
    fn frozen_holder(&self) -> (Vec<&'static str>, std::time::Duration) {
        let flags = vec![
            "--lease-horizon",
            "5s",
            "--idle-horizon",
            "5s",
            "--max-clock-wait",
            "10s",
        ];
        (flags, std::time::Duration::ZERO)
    }
    /// The member idcar talks to, made the leader: killing the leader then costs idcar an
    /// endpoint and etcd an election at once.
    fn lead_from(&self, pid: u32) {
        let member = self
            .connected_member(pid)
            .expect("idcar is connected to a member");
        self.make_leader(member);
        assert_eq!(self.leader(), Some(member));
    }
    fn check_released(&self) {
        let leases = self.etcdctl(0, &["lease", "list"]).unwrap();
        assert!(leases.contains("found 0 leases"), "lease revoked: {leases}");
    }
    fn writes(&self) -> u64 {
        let out = self
            .etcdctl(0, &["endpoint", "status", "--write-out", "json"])
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v[0]["Status"]["header"]["revision"]
            .as_u64()
            .unwrap_or_else(|| panic!("no revision in {out}"))
    }
    fn endpoint(&self) -> String {
        self.endpoints()
    }
    async fn start_at(&self, at: &str, extra: &[&str]) -> Idcar {
        super::etcd::start(at, extra).await
    }
    async fn start_refused(&self, extra: &[&str]) -> Idcar {
        super::etcd::start_refused(&self.endpoints(), extra).await
    }
}

impl Store for KubeStore {
    fn single() -> Self {
        KubeStore::shared()
    }
    fn own() -> Self {
        KubeStore::new()
    }
    fn three() -> Self {
        unimplemented!("one API server: the leader of three is etcd's and ZooKeeper's scenario")
    }
    fn target(&self) -> [String; 2] {
        ["--kubeconfig".into(), self.config.display().to_string()]
    }
    fn pool_target(&self) -> Vec<String> {
        let [flag, value] = self.target();
        vec!["--kube".into(), flag, value]
    }
    fn expiry_flag(&self) -> &'static str {
        "--kube-ttl"
    }
    fn outage_ends_sessions(&self) -> bool {
        false
    }
    fn idle_writes_in(&self, secs: u64) -> u64 {
        secs.div_ceil(20)
    }
    fn claim_extra(&self) -> u64 {
        5
    }
    fn mark(&self, cluster: u8, slot: u32) -> u64 {
        let name = format!("idcar.lable64.{cluster}.slot-{slot}");
        let mark = self
            .annotation(&name, "idcar.dev/mark")
            .unwrap_or_else(|| panic!("{name} holds no mark"));
        mark.split(' ').next().unwrap().parse().unwrap()
    }
    fn kill(&mut self, _i: usize) {
        self.api.kill()
    }
    fn pause(&self, _i: usize) {
        self.own_server().pause()
    }
    fn resume(&self, _i: usize) {
        self.own_server().resume()
    }
    fn leader(&self) -> Option<usize> {
        Some(0)
    }
    /// The session object goes with the holder.
    fn check_released(&self) {
        let sessions = self.api.must(&[
            "get",
            "leases",
            "-n",
            &self.ns,
            "-l",
            "idcar.dev/role=session",
            "-o",
            "name",
        ]);
        assert!(sessions.trim().is_empty(), "a session left: {sessions}");
    }
    /// The TTL is 2 s and the mark 5 s ahead (idle or not): resumed as soon as the successor
    /// claimed, the holder is inside its mark (its renewals black-holed, it does not know its
    /// session was judged over).
    fn frozen_holder(&self) -> (Vec<&'static str>, std::time::Duration) {
        let flags = vec![
            "--lease-horizon",
            "5s",
            "--idle-horizon",
            "5s",
            "--max-clock-wait",
            "10s",
        ];
        (flags, std::time::Duration::ZERO)
    }
    fn writes(&self) -> u64 {
        self.lease_writes()
    }
    fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.api.port)
    }
    async fn start_at(&self, at: &str, extra: &[&str]) -> Idcar {
        match at == self.config.display().to_string() {
            true => super::kube::start(&self.config, extra).await,
            false => super::kube::start(&self.via(at), extra).await,
        }
    }
    async fn start_refused(&self, extra: &[&str]) -> Idcar {
        super::kube::start_refused(&self.config, extra).await
    }
}
