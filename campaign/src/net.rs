//! The campaign's network: one namespace per host (ZooKeeper node or sidecar), each joined by
//! a veth pair to a bridge in a hub namespace, and partitions as nftables rules in the hub
//! that silently drop packets between chosen hosts (no reset, no error: a real cut).
//!
//! Nothing here touches the root namespace's network: every address lives inside namespaces
//! this module created, and [`Net`]'s `Drop` deletes them all (with any process left inside).

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The subnet inside the campaign's namespaces (never routed outside them).
const SUBNET: &str = "10.77.0";

/// Every namespace name starts with this, then the campaign's pid.
pub const PREFIX: &str = "idcamp";

/// A host on the campaign's bridge.
#[derive(Clone, Debug)]
pub struct Host {
    /// Namespace name.
    pub ns: String,
    /// Its address on the bridge.
    pub addr: String,
    /// The hub-side end of its veth pair (where its traffic is filtered).
    port: String,
}

/// The namespaces, the bridge and the active cuts.
pub struct Net {
    hub: String,
    pub hosts: Vec<Host>,
    /// Blocked (from, to) host pairs with how many faults want each one blocked.
    blocked: BTreeMap<(usize, usize), u32>,
}

/// Runs `ip` (or any command) and fails with its stderr.
pub fn run(args: &[&str]) -> Result<()> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", args[0]))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Net {
    /// Creates the hub and one namespace per name in `names` (addresses .10, .11, ...).
    pub fn create(names: &[String]) -> Result<Net> {
        let tag = format!("{PREFIX}{}", std::process::id());
        let hub = format!("{tag}-hub");
        let mut net = Net {
            hub: hub.clone(),
            hosts: Vec::new(),
            blocked: BTreeMap::new(),
        };
        run(&["ip", "netns", "add", &hub])
            .context("creating a network namespace (the campaign needs root and iproute2)")?;
        run(&["ip", "-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        run(&["ip", "-n", &hub, "link", "set", "br0", "up"])?;
        for (i, name) in names.iter().enumerate() {
            let ns = format!("{tag}-{name}");
            // veth names must be unique in the root namespace while they pass through it.
            let a = veth_name(std::process::id(), i);
            let b = a.replacen(&format!("a{i}"), &format!("b{i}"), 1);
            let addr = format!("{SUBNET}.{}", 10 + i);
            run(&["ip", "netns", "add", &ns])?;
            net.hosts.push(Host {
                ns: ns.clone(),
                addr: addr.clone(),
                port: "p".to_string() + &i.to_string(),
            });
            let port = net.hosts[i].port.clone();
            run(&["ip", "link", "add", &a, "type", "veth", "peer", "name", &b])?;
            run(&["ip", "link", "set", &a, "netns", &ns])?;
            run(&["ip", "link", "set", &b, "netns", &hub])?;
            run(&["ip", "-n", &ns, "link", "set", &a, "name", "eth0"])?;
            run(&["ip", "-n", &hub, "link", "set", &b, "name", &port])?;
            run(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ])?;
            run(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
            run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            run(&["ip", "-n", &hub, "link", "set", &port, "master", "br0"])?;
            run(&["ip", "-n", &hub, "link", "set", &port, "up"])?;
        }
        net.apply()?;
        Ok(net)
    }

    /// Blocks traffic both ways between every host in `a` and every host in `b` (counted:
    /// overlapping faults each unblock only their own share).
    pub fn cut(&mut self, a: &[usize], b: &[usize]) -> Result<()> {
        for &x in a {
            for &y in b {
                *self.blocked.entry((x, y)).or_default() += 1;
                *self.blocked.entry((y, x)).or_default() += 1;
            }
        }
        self.apply()
    }

    /// Undoes one [`Net::cut`] with the same arguments.
    pub fn heal(&mut self, a: &[usize], b: &[usize]) -> Result<()> {
        for &x in a {
            for &y in b {
                for k in [(x, y), (y, x)] {
                    if let Some(n) = self.blocked.get_mut(&k) {
                        *n -= 1;
                        if *n == 0 {
                            self.blocked.remove(&k);
                        }
                    }
                }
            }
        }
        self.apply()
    }

    /// Removes every cut.
    pub fn heal_all(&mut self) -> Result<()> {
        self.blocked.clear();
        self.apply()
    }

    /// Writes the whole rule set: per hub port, drop what its host sends to blocked hosts.
    fn apply(&self) -> Result<()> {
        let mut rules = String::from("table netdev campaign\nflush table netdev campaign\n");
        rules += "table netdev campaign {\n";
        for (i, h) in self.hosts.iter().enumerate() {
            rules += &format!(
                "  chain from{i} {{ type filter hook ingress device \"{}\" priority 0; policy accept;\n",
                h.port
            );
            for (&(from, to), _) in self.blocked.range((i, 0)..(i + 1, 0)) {
                debug_assert_eq!(from, i);
                rules += &format!("    ip daddr {} drop\n", self.hosts[to].addr);
            }
            rules += "  }\n";
        }
        rules += "}\n";
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.hub, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot run nft (Debian package nftables)")?;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(rules.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "nft failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

/// Ends every process inside `ns` (SIGKILL) and deletes it.
fn remove_namespace(ns: &str) {
    if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            if let Ok(pid) = pid.parse::<i32>() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
    let _ = Command::new("ip")
        .args(["netns", "del", ns])
        .stderr(Stdio::null())
        .status();
}

/// Deletes namespaces left by a campaign that was killed before it could clean up (its pid no
/// longer runs). Returns how many were removed.
pub fn remove_stale() -> usize {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return 0;
    };
    let mut n = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid: i32 = rest.split('-').next().unwrap_or("").parse().unwrap_or(0);
        if pid > 0 && !Path::new(&format!("/proc/{pid}")).exists() {
            remove_namespace(name);
            n += 1;
        }
    }
    // veth ends a killed set-up left in the root namespace (`icPIDaN`, PID gone).
    if let Ok(links) = std::fs::read_dir("/sys/class/net") {
        for l in links.flatten() {
            let name = l.file_name().to_string_lossy().into_owned();
            let digits: String = name
                .strip_prefix("ic")
                .unwrap_or("")
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let tail = name.get(2 + digits.len()..).unwrap_or("");
            let Ok(pid) = digits.parse::<u32>() else {
                continue;
            };
            if !(tail.starts_with('a') || tail.starts_with('b')) {
                continue;
            }
            if !Path::new(&format!("/proc/{pid}")).exists() {
                remove_link(&name);
                n += 1;
            }
        }
    }
    n
}

/// Deletes a link of the root namespace (a veth end not yet moved into its namespace).
fn remove_link(name: &str) {
    let _ = Command::new("ip")
        .args(["link", "del", name])
        .stderr(Stdio::null())
        .status();
}

/// The root-namespace name of host `i`'s veth end while it is being set up.
fn veth_name(pid: u32, i: usize) -> String {
    format!("ic{pid}a{i}")
}

impl Drop for Net {
    fn drop(&mut self) {
        for h in &self.hosts {
            remove_namespace(&h.ns);
        }
        remove_namespace(&self.hub);
        // A set-up that failed half-way may have left a pair in the root namespace.
        for i in 0..=self.hosts.len() {
            let a = veth_name(std::process::id(), i);
            for name in [a.clone(), a.replacen(&format!("a{i}"), &format!("b{i}"), 1)] {
                if Path::new(&format!("/sys/class/net/{name}")).exists() {
                    remove_link(&name);
                }
            }
        }
    }
}
