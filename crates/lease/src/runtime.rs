//! The lease's own thread: a single-threaded runtime that runs the lease maintainer and the
//! task installing each lease change in the generator.
//!
//! Clients run on the main runtime. However hard they hammer it, renewals and window changes
//! are never queued behind their requests: the lease never shares fate with client load.

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// A running lease thread; it stops when this is dropped.
#[derive(Debug)]
pub struct LeaseRuntime {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
}

impl LeaseRuntime {
    pub fn start() -> std::io::Result<LeaseRuntime> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("idcar-lease-io")
            .build()?;
        let handle = rt.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("idcar-lease".into())
            .spawn(move || {
                rt.block_on(async {
                    let _ = stopped.await;
                });
                rt.shutdown_timeout(std::time::Duration::from_secs(1));
            })?;
        Ok(LeaseRuntime {
            handle,
            stop: Some(stop),
        })
    }

    /// The runtime's handle: `handle().enter()` makes `tokio::spawn` put tasks on this thread.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for LeaseRuntime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
