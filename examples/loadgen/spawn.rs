//! Starting idcar and the echo floor for a run.

use super::*;

/// The idcar binary to spawn: --idcar, else beside this example's directory.
pub(crate) fn idcar_binary(args: &Args) -> anyhow::Result<PathBuf> {
    match &args.idcar {
        Some(b) => Ok(b.clone()),
        None => std::env::current_exe()?
            .parent()
            .and_then(Path::parent)
            .map(|d| d.join("idcar"))
            .ok_or_else(|| anyhow::anyhow!("cannot locate idcar; pass --idcar")),
    }
}

/// Phase 1 (spawn mode): start idcar; report the time to its first IDs and its idle RSS.
pub(crate) async fn spawn_idcar(
    args: &Args,
    serve_args: &str,
    dir: &Path,
    socket: &Path,
) -> anyhow::Result<std::process::Child> {
    let bin = idcar_binary(args)?;
    let t0 = Instant::now();
    let c = std::process::Command::new(&bin)
        .arg("serve")
        .arg("--socket")
        .arg(socket)
        .arg("--state-file")
        .arg(dir.join("state"))
        .args(["--admin-addr", "none", "--log", "warn"])
        .args(serve_args.split_whitespace())
        .spawn()
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot spawn {}: {e} (build it with cargo build --release)",
                bin.display()
            )
        })?;
    let pid = c.id();
    let ready = loop {
        if let Ok(mut b) = BinaryClient::connect(socket).await {
            if b.ids(1).await.is_ok() {
                break t0.elapsed();
            }
        }
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(10),
            "idcar not ready in 10 s"
        );
        tokio::time::sleep(Duration::from_micros(500)).await;
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "start-up: first IDs {ready:.1?} after spawn; idle RSS {} KiB",
        rss_kib(pid).unwrap_or(0)
    );
    Ok(c)
}

/// The floor: an echo server in a separate process, started and awaited.
pub(crate) async fn start_echo(echo_path: &Path) -> anyhow::Result<std::process::Child> {
    let echo = std::process::Command::new(std::env::current_exe()?)
        .arg("--echo-server")
        .arg(echo_path)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(echo_path).await.is_err() {
        anyhow::ensure!(Instant::now() < deadline, "echo server did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(echo)
}
